"""Consumer-group load: N groups x M members committing every second, against our brokers or Apache Kafka's.

    .venv/bin/python -m tools.bench.group_load load --groups 1000 --members 3 [--bootstrap host:port | --kafka]
    .venv/bin/python -m tools.bench.group_load failover --records 1000000 [--kafka]

``load`` (on ``--bootstrap``, or on a fresh cluster of ``--brokers`` brokers, ours or ``--kafka``) creates the
topics, starts the members (:mod:`tools.bench.group_client`: one asyncio task and one coordinator connection each),
reports the time until every group is Stable (the members' view, confirmed by DescribeGroups), then records
OffsetCommit latencies for ``--duration`` seconds, and finally reads every acknowledged offset back with
OffsetFetch.

``failover`` runs a 3-broker cluster (``offsets.topic.replication.factor=3``), preloads ``__consumer_offsets``
with ``--records`` offset-commit records, runs the load, kills (SIGKILL) the broker that coordinates the most
groups and is not the controller, and reports how long until every group's OffsetFetch answers again, from
the new coordinator, with at least the offsets acknowledged before the kill (and a preloaded one); meanwhile
an ApiVersions probe every 100 ms to each survivor shows how long their loops keep requests waiting while they
load; then every acknowledged and every preloaded offset is read back. ``--members 0`` measures the load of
the preloaded log alone; ``--offsets-partition N`` puts every group on one ``__consumer_offsets`` partition
(one coordinator loads all the records; it may be the controller). Brokers run with
``zookeeper.session.timeout.ms=6000`` (Kafka's and ours alike), so detecting the death takes about 6 s of it.

Members behave as consumers do where it matters for the read-back: after an assignment they start from the
committed offsets (OffsetFetch), and a commit in flight is answered before they rejoin or stop. The read-back
expects each partition's last acknowledged offset (error 0), or the offset of a later commit whose outcome its
member could not know: one in flight when the coordinator was killed (no answer) or answered with an error a
failed append gives (``OUTCOME_UNKNOWN_ERRORS``). Such a commit may have reached the new leader's log before the
kill, and Kafka's coordinators, ours too, load a partition up to its log end: Kafka 3.9.1 serves these as well.
Those are counted apart (``unacknowledged_applied``); ``mismatched_offsets`` counts every other offset, and
``lost_offsets`` those of them lower than acknowledged (an acknowledged commit lost: never expected).

The load's shape (stated, since "1,000 groups on 1,000 partitions" has several readings): the 1,000 partitions
are ``--topics`` topics of ``--partitions`` / ``--topics`` partitions; group i subscribes to topic i % topics.
The default 100 topics x 10 partitions gives every group 10 partitions and every member 3-4, so all 3,000
members commit each second: 3,000 OffsetCommits/s carrying 10,000 offsets/s. (``--topics 1`` makes every group
commit all 1,000 partitions: 1 M offsets/s, beyond what this one-process load generator can encode.)

The preload (``preload_offsets``): ``--records`` OffsetCommit records written through the coordinators by
OffsetCommit requests of simple consumers (generation -1): the load's groups commit ``--preload-partitions``
partitions of the ``group-load-preload`` topic, in ``records / (groups x preload partitions)`` rounds. The
default 1,000 groups x 1,000 partitions x 1 round is 1 M distinct keys (the most a coordinator must hold);
``--preload-partitions 10`` gives 100 rounds over 10,000 keys (a log the cleaner has not compacted yet). Either
way every record is replayed on load, as Kafka's doLoadGroupsAndOffsets does.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from broker.util.java_hash import partition_for
from broker.network.client import NetworkClient
from broker.protocol.api import ApiKey
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from tools.bench.group_client import (ClusterClient, GroupMember, LoadStats, MemberConfig, MemberConnection,
                                      error_name)
from tools.producer_perf import percentile

__all__ = ["LoadSpec", "GroupLoad", "LoadReport", "create_topics", "preload_offsets", "fetch_offsets",
           "wait_offsets_served", "topic_names", "group_ids"]

PRELOAD_TOPIC = "group-load-preload"


def topic_names(prefix: str, topics: int) -> List[str]:
    return [f"{prefix}-{i}" for i in range(topics)]


def group_ids(prefix: str, groups: int, offsets_partition: Optional[int] = None, offsets_partitions: int = 50
              ) -> List[str]:
    """``prefix-0``, ``prefix-1``, ...; with ``offsets_partition``, only ids Kafka maps to that ``__consumer_offsets``
    partition (of ``offsets_partitions``): every group then has the same coordinator and the same log."""
    if offsets_partition is None:
        return [f"{prefix}-{i}" for i in range(groups)]
    out: List[str] = []
    i = 0
    while len(out) < groups:
        g = f"{prefix}-{i}"
        if partition_for(g, offsets_partitions) == offsets_partition:
            out.append(g)
        i += 1
    return out


@dataclass
class LoadSpec:
    groups: int = 1000
    members: int = 3
    topics: int = 100
    partitions: int = 1000           # in total, over ``topics`` topics
    group_prefix: str = "load-group"
    topic_prefix: str = "load-topic"
    member: MemberConfig = field(default_factory=MemberConfig)
    #: groups started per second (0: all at once)
    start_rate: float = 0.0
    #: put every group on this __consumer_offsets partition (None: wherever its id hashes)
    offsets_partition: Optional[int] = None
    offsets_partitions: int = 50

    @property
    def partitions_per_topic(self) -> int:
        return max(1, self.partitions // self.topics)

    def topic_of(self, group_index: int) -> str:
        return f"{self.topic_prefix}-{group_index % self.topics}"


@dataclass
class LoadReport:
    groups: int
    members: int
    join_s: float = float("nan")            # start -> every group Stable (members' view)
    describe_stable_s: float = float("nan")  # start -> DescribeGroups says Stable with every member
    commits: int = 0
    commit_rate: float = 0.0
    commit_p50_ms: float = float("nan")
    commit_p99_ms: float = float("nan")
    commit_max_ms: float = float("nan")
    heartbeat_p99_ms: float = float("nan")
    client_lag_p99_ms: float = float("nan")  # the load generator's own event-loop lag (its latencies include it)
    errors: Dict[str, int] = field(default_factory=dict)
    verified_offsets: int = 0
    #: offsets read back neither as the last acknowledged one nor as a later commit of unknown outcome
    mismatched_offsets: int = 0
    #: of those, read back lower than acknowledged: an acknowledged commit was lost
    lost_offsets: int = 0
    #: read back higher than acknowledged, at the offset of a commit whose answer the member never got (in flight
    #: at the kill) or that failed as an append may fail: applied all the same, which Kafka's semantics allow
    unacknowledged_applied: int = 0
    mismatch_examples: List[str] = field(default_factory=list)


def _latency_summary(report: LoadReport, commits: List[float]) -> None:
    commits = sorted(commits)
    report.commits = len(commits)
    if commits:
        report.commit_p50_ms = round(percentile(commits, 0.5), 2)
        report.commit_p99_ms = round(percentile(commits, 0.99), 2)
        report.commit_max_ms = round(commits[-1], 2)


class _LagMonitor:
    """How late the load generator's own loop wakes up (a latency it adds to every measurement)."""

    def __init__(self) -> None:
        self.lags: List[float] = []
        self._task: Optional["asyncio.Task[None]"] = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            self.lags.append((time.monotonic() - t - 0.05) * 1000.0)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


class GroupLoad:
    """The members of ``spec`` against one cluster; see the module docstring for the phases."""

    def __init__(self, bootstrap: str, spec: LoadSpec) -> None:
        self.spec = spec
        self.cluster = ClusterClient(bootstrap)
        self.stats = LoadStats()
        self.groups = group_ids(spec.group_prefix, spec.groups, spec.offsets_partition, spec.offsets_partitions)
        self.members: List[GroupMember] = []
        self._synced: Dict[int, Dict[str, int]] = {}
        self.started_at = 0.0
        self.lag = _LagMonitor()

    def _on_stable(self, member: GroupMember) -> None:
        """A member finished SyncGroup: the group is stable once all its members did in one generation."""
        gi = member.group_index
        synced = self._synced.setdefault(gi, {})
        synced[member.client_id] = member.generation
        if gi not in self.stats.stable_at and len(synced) == self.spec.members \
                and len(set(synced.values())) == 1:
            mine = [m for m in self.members if m.group_index == gi]
            if all(m.stable and m.generation == member.generation for m in mine):
                self.stats.stable_at[gi] = time.monotonic()

    async def start(self) -> None:
        self.lag.start()
        await self.cluster.partitions(sorted({self.spec.topic_of(i) for i in range(self.spec.groups)}))
        self.started_at = time.monotonic()
        for gi, group in enumerate(self.groups):
            topic = self.spec.topic_of(gi)
            for mi in range(self.spec.members):
                m = GroupMember(self.cluster, group, gi, [topic], f"{group}-m{mi}", self.stats, self.spec.member,
                                on_stable=self._on_stable)
                self.members.append(m)
                m.start()
            if self.spec.start_rate > 0:
                await asyncio.sleep(1.0 / self.spec.start_rate)

    async def wait_stable(self, timeout_s: float = 600.0) -> float:
        """Seconds from start until every group was Stable, as its members saw it."""
        deadline = time.monotonic() + timeout_s
        while len(self.stats.stable_at) < self.spec.groups:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.stats.stable_at)} of {self.spec.groups} groups became Stable")
            await asyncio.sleep(0.05)
        return max(self.stats.stable_at.values()) - self.started_at

    async def wait_described_stable(self, timeout_s: float = 600.0) -> float:
        """Seconds from start until DescribeGroups answers Stable with every member for every group."""
        deadline = time.monotonic() + timeout_s
        todo = list(self.groups)
        while todo:
            coordinators = await self.cluster.coordinators(todo)
            by_node: Dict[BrokerNode, List[str]] = {}
            for g in todo:
                by_node.setdefault(coordinators[g], []).append(g)
            left: List[str] = []
            for node, gs in by_node.items():
                for i in range(0, len(gs), 100):
                    chunk = gs[i:i + 100]
                    try:
                        r = await self.cluster.send_to(node, ApiKey.DESCRIBE_GROUPS, 5, {
                            "groups": chunk, "include_authorized_operations": False})
                    except (BrokerChannelError, asyncio.TimeoutError):
                        left.extend(chunk)
                        continue
                    for d in r.groups:
                        if not (d.error_code == 0 and d.group_state == "Stable"
                                and len(d.members) == self.spec.members):
                            left.append(d.group_id)
                            if d.error_code:
                                self.cluster.forget_coordinator(d.group_id)
            todo = left
            if todo:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(todo)} groups not Stable per DescribeGroups, e.g. {todo[0]}")
                await asyncio.sleep(0.2)
        return time.monotonic() - self.started_at

    async def measure(self, duration_s: float) -> Tuple[List[float], float]:
        """Commit latencies (ms) recorded over ``duration_s``; and the commits per second."""
        first = len(self.stats.commits)
        self.stats.recording = True
        t0 = time.monotonic()
        await asyncio.sleep(duration_s)
        self.stats.recording = False
        window = self.stats.commits[first:]
        return [ms for _t, ms, _g in window], len(window) / max(1e-9, time.monotonic() - t0)

    async def stop(self, leave: bool = False) -> None:
        await asyncio.gather(*(m.stop(leave) for m in self.members), return_exceptions=True)
        self.lag.stop()

    async def close(self) -> None:
        await self.cluster.close()

    def expected_offsets(self) -> Dict[str, Dict[Tuple[str, int], int]]:
        out: Dict[str, Dict[Tuple[str, int], int]] = {}
        for (group, topic, p), offset in self.stats.acked.items():
            out.setdefault(group, {})[(topic, p)] = offset
        return out

    def unknown_outcomes(self) -> Dict[str, Dict[Tuple[str, int], Set[int]]]:
        """group -> {(topic, partition): offsets of commits not acknowledged that may have been written}."""
        out: Dict[str, Dict[Tuple[str, int], Set[int]]] = {}
        for (group, topic, p), offsets in self.stats.unknown_outcome.items():
            out.setdefault(group, {})[(topic, p)] = set(offsets)
        return out


async def run_load(bootstrap: str, spec: LoadSpec, duration_s: float = 30.0, warmup_s: float = 5.0,
                   verify: bool = True) -> LoadReport:
    """Start the members, wait for Stable, measure commits, stop (without leaving) and read every acked
    offset back; the report's ``mismatched_offsets`` counts offsets not read back exactly."""
    load = GroupLoad(bootstrap, spec)
    report = LoadReport(spec.groups, spec.members)
    try:
        await load.start()
        report.join_s = round(await load.wait_stable(), 3)
        report.describe_stable_s = round(await load.wait_described_stable(), 3)
        await asyncio.sleep(warmup_s)
        commits, rate = await load.measure(duration_s)
        _latency_summary(report, commits)
        report.commit_rate = round(rate, 1)
        hb = sorted(ms for _t, ms, _g in load.stats.heartbeats)
        report.heartbeat_p99_ms = round(percentile(hb, 0.99), 2) if hb else float("nan")
        lags = sorted(load.lag.lags)
        report.client_lag_p99_ms = round(percentile(lags, 0.99), 2) if lags else float("nan")
        await load.stop(leave=False)
        report.errors = {f"{api}:{name}": n for (api, name), n in sorted(load.stats.errors.items())}
        report.errors.update({f"closed:{why}": n for why, n in MemberConnection.close_reasons.items()})
        if verify:
            expected = load.expected_offsets()
            got = await fetch_offsets(load.cluster, expected)
            report.verified_offsets = sum(len(v) for v in expected.values())
            _check(report, expected, got, load.unknown_outcomes())
    finally:
        await load.stop(leave=False)
        await load.close()
    return report


# ------------------------------------------------------------------------------------------------ admin bits
async def create_topics(cluster: ClusterClient, topics: Dict[str, int], replication_factor: int = 1,
                        timeout_s: float = 120.0) -> None:
    """CreateTopics v7 at the controller (ZooKeeper mode needs it there); then wait for every partition's
    leader in the bootstrap broker's Metadata."""
    deadline = time.monotonic() + timeout_s
    names = sorted(topics)
    while True:
        md = await cluster.send_any(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        controller = next((b for b in md.brokers if b.node_id == md.controller_id), None)
        if controller is not None:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("no controller")
        await asyncio.sleep(0.2)
    node = BrokerNode(controller.node_id, controller.host, controller.port)
    for i in range(0, len(names), 50):
        chunk = names[i:i + 50]
        r = await cluster.send_to(node, ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": t, "num_partitions": topics[t], "replication_factor": replication_factor, "assignments": [],
             "configs": []} for t in chunk], "timeout_ms": 60000, "validate_only": False}, timeout_ms=90000)
        bad = [(t.name, error_name(t.error_code)) for t in r.topics if t.error_code not in (0, 36)]  # 36: exists
        if bad:
            raise RuntimeError(f"CreateTopics failed: {bad[:5]}")
    while True:
        md = await cluster.send_any(ApiKey.METADATA, 12, {"topics": [{"name": t} for t in names],
                                                          "allow_auto_topic_creation": False})
        ready = {t.name for t in md.topics if t.error_code == 0 and len(t.partitions) == topics[t.name]
                 and all(p.leader_id >= 0 for p in t.partitions)}
        if ready >= set(names):
            cluster.partition_counts.update(topics)
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without leaders: {sorted(set(names) - ready)[:5]}")
        await asyncio.sleep(0.2)


async def preload_offsets(cluster: ClusterClient, groups: List[str], topic: str, partitions: int, rounds: int,
                          batch_partitions: int = 1000, in_flight: int = 8) -> Dict[str, Dict[Tuple[str, int], int]]:
    """Write ``len(groups) x partitions x rounds`` offset-commit records through OffsetCommit v8 requests of
    simple consumers (generation -1, no member): round r commits offset r + 1 for every (group, partition).
    Returns the offsets the last round committed (group -> {(topic, partition): offset})."""
    sem = asyncio.Semaphore(in_flight)
    errors: List[str] = []

    async def commit(group: str, first: int, last: int, offset: int) -> None:
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p in range(first, last)]}]}
        async with sem:
            for _attempt in range(100):
                node = await cluster.coordinator(group)
                try:
                    r = await cluster.send_to(node, ApiKey.OFFSET_COMMIT, 8, body, timeout_ms=60000)
                except (BrokerChannelError, asyncio.TimeoutError):
                    cluster.forget_coordinator(group, node)
                    await asyncio.sleep(0.2)
                    continue
                codes = {p.error_code for t in r.topics for p in t.partitions}
                if codes == {0}:
                    return
                if codes & {14, 15, 16}:  # load in progress / not available / not coordinator
                    cluster.forget_coordinator(group, node)
                    await asyncio.sleep(0.2)
                    continue
                errors.append(f"{group}: {sorted(error_name(c) for c in codes)}")
                return
            errors.append(f"{group}: gave up")

    await cluster.coordinators(groups)
    for r in range(rounds):
        await asyncio.gather(*(commit(g, first, min(partitions, first + batch_partitions), r + 1)
                               for g in groups for first in range(0, partitions, batch_partitions)))
        if errors:
            raise RuntimeError(f"preload failed for {len(errors)} requests: {errors[:3]}")
    return {g: {(topic, p): rounds for p in range(partitions)} for g in groups}


async def fetch_offsets(cluster: ClusterClient, wanted: Dict[str, Dict[Tuple[str, int], int]],
                        groups_per_request: int = 20) -> Dict[str, Dict[Tuple[str, int], int]]:
    """OffsetFetch v8 (several groups per request) of ``wanted``'s partitions from each group's coordinator;
    groups that fail (not coordinator, loading) are asked again until they answer."""
    out: Dict[str, Dict[Tuple[str, int], int]] = {}
    todo = sorted(wanted)
    deadline = time.monotonic() + 300
    while todo:
        left = await _fetch_round(cluster, todo, wanted, out, groups_per_request)
        if left and time.monotonic() > deadline:
            raise TimeoutError(f"{len(left)} groups never answered OffsetFetch, e.g. {left[0]}")
        if left:
            await asyncio.sleep(0.1)
        todo = left
    return out


async def _fetch_round(cluster: ClusterClient, groups: List[str], wanted: Dict[str, Dict[Tuple[str, int], int]],
                       out: Dict[str, Dict[Tuple[str, int], int]], groups_per_request: int) -> List[str]:
    """One OffsetFetch per coordinator and chunk of groups; the groups that did not answer without error."""
    by_node: Dict[BrokerNode, List[str]] = {}
    left: List[str] = []
    for g in groups:
        try:
            node = await cluster.coordinator(g, deadline_s=1.0)
        except RuntimeError:
            left.append(g)
            continue
        by_node.setdefault(node, []).append(g)

    async def ask(node: BrokerNode, chunk: List[str]) -> None:
        body = {"groups": [{"group_id": g, "topics": _fetch_topics(wanted[g])} for g in chunk],
                "require_stable": False}
        try:
            r = await cluster.send_to(node, ApiKey.OFFSET_FETCH, 8, body, timeout_ms=10000)
        except (BrokerChannelError, asyncio.TimeoutError):
            for g in chunk:
                cluster.forget_coordinator(g, node)
            left.extend(chunk)
            return
        for gr in r.groups:
            if gr.error_code or any(p.error_code for t in gr.topics for p in t.partitions):
                cluster.forget_coordinator(gr.group_id, node)
                left.append(gr.group_id)
                continue
            out[gr.group_id] = {(t.name, p.partition_index): p.committed_offset for t in gr.topics
                                for p in t.partitions}

    await asyncio.gather(*(ask(node, gs[i:i + groups_per_request]) for node, gs in by_node.items()
                           for i in range(0, len(gs), groups_per_request)))
    return left


def _check(report: LoadReport, expected: Dict[str, Dict[Tuple[str, int], int]],
           got: Dict[str, Dict[Tuple[str, int], int]],
           unknown: Optional[Dict[str, Dict[Tuple[str, int], Set[int]]]] = None) -> None:
    """Fill the report's read-back figures. Each partition must read back its last acknowledged offset, or one
    above it that a commit of unknown outcome carried (``unknown``: counted as ``unacknowledged_applied``);
    anything else is a mismatch, and lower than acknowledged a lost commit."""
    unknown = unknown or {}
    for g, offsets in sorted(expected.items()):
        for tp, offset in sorted(offsets.items()):
            v = got.get(g, {}).get(tp, -1)
            if v == offset:
                continue
            if v > offset and v in unknown.get(g, {}).get(tp, ()):
                report.unacknowledged_applied += 1
                continue
            report.mismatched_offsets += 1
            report.lost_offsets += v < offset
            if len(report.mismatch_examples) < 5:
                report.mismatch_examples.append(f"{g} {tp[0]}-{tp[1]}: acknowledged {offset}, read {v}")


def _mismatches(expected: Dict[str, Dict[Tuple[str, int], int]], got: Dict[str, Dict[Tuple[str, int], int]],
                exact: bool) -> int:
    bad = 0
    for g, offsets in expected.items():
        have = got.get(g, {})
        for tp, offset in offsets.items():
            v = have.get(tp, -1)
            if (v != offset) if exact else (v < offset):
                bad += 1
    return bad


async def wait_offsets_served(cluster: ClusterClient, expected: Dict[str, Dict[Tuple[str, int], int]],
                              timeout_s: float = 600.0, groups_per_request: int = 50) -> Dict[str, float]:
    """Poll until every group's OffsetFetch answers without error and with offsets >= ``expected`` (later
    commits may have moved them on); group -> seconds until the answer that first did arrived.

    Each round is one FindCoordinator v4 per 100 groups still waiting, then one OffsetFetch v8 per coordinator
    and ``groups_per_request`` groups, all in flight together: a group's time is its own answer's."""
    t0 = time.monotonic()
    served: Dict[str, float] = {}
    todo = set(expected)

    async def ask(node: BrokerNode, chunk: List[str]) -> None:
        body = {"groups": [{"group_id": g, "topics": _fetch_topics(expected[g])} for g in chunk],
                "require_stable": False}
        try:
            r = await cluster.send_to(node, ApiKey.OFFSET_FETCH, 8, body, timeout_ms=5000)
        except (BrokerChannelError, asyncio.TimeoutError):
            for g in chunk:
                cluster.forget_coordinator(g, node)
            return
        at = time.monotonic() - t0
        for gr in r.groups:
            got = {gr.group_id: {(t.name, p.partition_index): p.committed_offset for t in gr.topics
                                 for p in t.partitions}}
            if gr.error_code or any(p.error_code for t in gr.topics for p in t.partitions) \
                    or _mismatches({gr.group_id: expected[gr.group_id]}, got, exact=False):
                cluster.forget_coordinator(gr.group_id, node)
            elif gr.group_id in todo:
                served[gr.group_id] = at
                todo.discard(gr.group_id)

    while todo:
        nodes = await cluster.lookup_once(sorted(todo))
        by_node: Dict[BrokerNode, List[str]] = {}
        for g in sorted(todo):
            if g in nodes:
                by_node.setdefault(nodes[g], []).append(g)
        await asyncio.gather(*(ask(node, gs[i:i + groups_per_request]) for node, gs in by_node.items()
                               for i in range(0, len(gs), groups_per_request)))
        if todo:
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{len(todo)} groups not served after {timeout_s}s, e.g. {sorted(todo)[0]}")
            await asyncio.sleep(0.05)
    return served


def _fetch_topics(offsets: Dict[Tuple[str, int], int]) -> List[Dict[str, Any]]:
    topics: Dict[str, List[int]] = {}
    for (t, p) in offsets:
        topics.setdefault(t, []).append(p)
    return [{"name": t, "partition_indexes": sorted(ps)} for t, ps in sorted(topics.items())]


# ------------------------------------------------------------------------------------------------ clusters
class BenchCluster:
    """ZooKeeper plus N brokers, ours (tools/cluster.py) or Apache Kafka 3.9.1's (tests/harness/kafka.py)."""

    def __init__(self, workdir: Path, brokers: int, kafka: bool, overrides: Dict[str, str]) -> None:
        from tools.cluster import ZooKeeperProcess, free_port
        self.workdir = workdir
        self.kafka = kafka
        self.zk = ZooKeeperProcess(workdir, free_port())
        props = {"offsets.topic.replication.factor": str(min(3, brokers)), "group.initial.rebalance.delay.ms": "0",
                 "zookeeper.session.timeout.ms": "6000", "num.partitions": "1",
                 "offsets.topic.num.partitions": "50"}
        props.update(overrides)
        self.props = props
        self.brokers: List[Any] = []
        for i in range(brokers):
            if kafka:
                from tests.harness.kafka import RealKafkaBroker
                # kafka-server-start.sh's default heap: a million committed offsets do not fit the tests' 512m
                self.brokers.append(RealKafkaBroker(workdir, "", i, overrides=props, heap="1g", full_jit=True))
            else:
                from tools.cluster import BrokerProcess
                self.brokers.append(BrokerProcess(workdir, "", broker_id=i, overrides=props))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> None:
        self.zk.start()
        for b in self.brokers:
            b.zk_connect = f"{self.zk.connect_string}/bench"
        if self.kafka:
            import threading
            errors: List[BaseException] = []

            def start_one(b: Any) -> None:
                try:
                    b.start()
                except BaseException as exc:  # noqa: B036 - reported below
                    errors.append(exc)
            threads = [threading.Thread(target=start_one, args=(b,)) for b in self.brokers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
        else:
            for b in self.brokers:
                b.start(wait=False)
            for b in self.brokers:
                b.wait_started(120)

    def broker(self, broker_id: int) -> Any:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def stop(self) -> None:
        for b in self.brokers:
            b.kill()
        self.zk.stop()


# ------------------------------------------------------------------------------------------------ failover
@dataclass
class FailoverReport:
    kind: str
    preload_records: int = 0
    preload_s: float = float("nan")
    load: Optional[LoadReport] = None
    victim: int = -1
    victim_was_controller: bool = False
    victim_groups: int = 0
    served_all_s: float = float("nan")   # kill -> every group's OffsetFetch answers with its committed offsets
    served_p50_s: float = float("nan")
    #: heartbeats of the groups whose coordinator survived (they need no replication, so they show how
    #: responsive the surviving coordinators stay while they load the moved groups), kill -> served_all_s
    others_heartbeats: int = 0
    others_heartbeat_p99_ms: float = float("nan")
    others_heartbeat_max_ms: float = float("nan")
    #: ApiVersions every 100 ms to each surviving broker on a connection of its own, kill -> served_all_s: how
    #: long their event loops keep requests waiting while they load (a member's heartbeat may instead wait
    #: behind its own commit, which waits for the dead follower to leave the ISR)
    probe_p99_ms: float = float("nan")
    probe_max_ms: float = float("nan")
    #: commits of groups whose coordinator survived, sent between the kill and served_all_s
    others_commits: int = 0
    others_commit_p99_ms: float = float("nan")
    others_commit_max_ms: float = float("nan")
    preload_verified: int = 0
    preload_mismatched: int = 0
    #: per second from the kill: "s: ok commits of the other groups / of the moved groups, slowest ms, errors"
    timeline: List[str] = field(default_factory=list)
    load_log: List[str] = field(default_factory=list)


async def run_failover(cluster: Any, spec: LoadSpec, records: int, preload_partitions: int,
                       run_s: float = 20.0, kind: str = "ours") -> FailoverReport:
    """Preload, load, SIGKILL the busiest non-controller coordinator, time until every group is served.

    ``cluster``: a :class:`BenchCluster` or ``tools.cluster.LocalCluster`` (``bootstrap``, ``brokers`` with
    ``broker_id``, ``kill()`` and ``output()``), its brokers started."""
    report = FailoverReport(kind)
    load = GroupLoad(cluster.bootstrap, spec)
    try:
        preloaded = await _prepare(load, spec, records, preload_partitions, report)
        lr = report.load = LoadReport(spec.groups, spec.members) if spec.members else None
        if lr is not None:  # no members: the kill measures the load of the preloaded log alone
            await load.start()
            lr.join_s = round(await load.wait_stable(), 3)
            lr.describe_stable_s = round(await load.wait_described_stable(), 3)
            commits, rate = await load.measure(run_s)
            _latency_summary(lr, commits)
            lr.commit_rate = round(rate, 1)
        since = {b.broker_id: len(b.output()) for b in cluster.brokers}
        await _kill_and_wait_served(cluster, load, spec, report, preloaded)
        await load.stop(leave=False)
        if lr is not None:
            lr.errors = {f"{api}:{name}": n for (api, name), n in sorted(load.stats.errors.items())}
            expected = load.expected_offsets()
            got = await fetch_offsets(load.cluster, expected)
            lr.verified_offsets = sum(len(v) for v in expected.values())
            _check(lr, expected, got, load.unknown_outcomes())
        if preloaded:
            got = await fetch_offsets(load.cluster, preloaded)
            report.preload_verified = sum(len(v) for v in preloaded.values())
            report.preload_mismatched = _mismatches(preloaded, got, exact=True)
        report.load_log = _load_lines(cluster, since)
    finally:
        await load.stop(leave=False)
        await load.close()
    return report


async def _prepare(load: GroupLoad, spec: LoadSpec, records: int, preload_partitions: int,
                   report: FailoverReport) -> Dict[str, Dict[Tuple[str, int], int]]:
    """Create the topics and preload ``records`` offset commits; the preloaded offsets."""
    topics = {t: spec.partitions_per_topic for t in {spec.topic_of(i) for i in range(spec.groups)}}
    if records:
        topics[PRELOAD_TOPIC] = preload_partitions
    await create_topics(load.cluster, topics)
    if not records:
        return {}
    rounds = max(1, records // max(1, spec.groups * preload_partitions))
    t0 = time.monotonic()
    preloaded = await preload_offsets(load.cluster, load.groups, PRELOAD_TOPIC, preload_partitions, rounds)
    report.preload_s = round(time.monotonic() - t0, 1)
    report.preload_records = spec.groups * preload_partitions * rounds
    return preloaded


async def _kill_and_wait_served(cluster: Any, load: GroupLoad, spec: LoadSpec, report: FailoverReport,
                                preloaded: Dict[str, Dict[Tuple[str, int], int]]) -> None:
    """SIGKILL the broker coordinating most groups (not the controller, whose own failover would be measured
    too); time until each of its groups answers OffsetFetch with at least what was acknowledged before (and
    one preloaded partition's offset)."""
    coordinators = await load.cluster.coordinators(load.groups)
    md = await load.cluster.send_any(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    counts: Dict[int, int] = {}
    for node in coordinators.values():
        counts[node.broker_id] = counts.get(node.broker_id, 0) + 1
    candidates = [b for b in counts if b != md.controller_id] or list(counts)  # all on the controller: it goes
    victim = max(candidates, key=lambda b: counts[b])
    report.victim_was_controller = victim == md.controller_id
    victim_groups = sorted(g for g, n in coordinators.items() if n.broker_id == victim)
    report.victim, report.victim_groups = victim, len(victim_groups)
    acked = load.expected_offsets()
    expected: Dict[str, Dict[Tuple[str, int], int]] = {}
    for g in victim_groups:
        e = dict(acked.get(g, {}))
        if preloaded.get(g):
            tp = min(preloaded[g])
            e[tp] = preloaded[g][tp]
        expected[g] = e or {(spec.topic_of(0), 0): -1}
    load.stats.recording = True
    first_commit = len(load.stats.commits)
    kill_at = time.monotonic()
    broker = next(b for b in cluster.brokers if b.broker_id == victim)
    survivors = [BrokerNode(b.node_id, b.host, b.port) for b in md.brokers if b.node_id != victim]
    await asyncio.get_running_loop().run_in_executor(None, broker.kill)
    for g in victim_groups:
        load.cluster.forget_coordinator(g)
    probes: List[float] = []
    prober = asyncio.ensure_future(_probe(load.cluster, survivors, probes))
    try:
        served = await wait_offsets_served(load.cluster, expected)
    finally:
        prober.cancel()
        await asyncio.gather(prober, return_exceptions=True)
    load.stats.recording = False
    if probes:
        probes.sort()
        report.probe_p99_ms = round(percentile(probes, 0.99), 2)
        report.probe_max_ms = round(probes[-1], 2)
    times = sorted(served.values())
    report.served_all_s = round(times[-1], 3) if times else 0.0
    report.served_p50_s = round(percentile(times, 0.5), 3) if times else 0.0
    index = {g: i for i, g in enumerate(load.groups)}
    victim_idx = {index[g] for g in victim_groups}
    others = sorted(ms for t, ms, gi in load.stats.commits[first_commit:]
                    if gi not in victim_idx and kill_at <= t <= kill_at + report.served_all_s)
    report.others_commits = len(others)
    if others:
        report.others_commit_p99_ms = round(percentile(others, 0.99), 2)
        report.others_commit_max_ms = round(others[-1], 2)
    beats = sorted(ms for t, ms, gi in load.stats.heartbeats
                   if gi not in victim_idx and kill_at <= t <= kill_at + report.served_all_s)
    report.others_heartbeats = len(beats)
    if beats:
        report.others_heartbeat_p99_ms = round(percentile(beats, 0.99), 2)
        report.others_heartbeat_max_ms = round(beats[-1], 2)
    report.timeline = _timeline(load.stats, kill_at, victim_idx, int(report.served_all_s) + 2)


async def _probe(cluster: ClusterClient, nodes: List[BrokerNode], out: List[float]) -> None:
    """ApiVersions to each of ``nodes`` every 100 ms (one in flight per broker); latencies in ms into ``out``."""
    async def one(node: BrokerNode) -> None:
        client = NetworkClient(f"group-load-probe-{node.broker_id}", request_timeout_ms=30000)
        try:
            while True:
                t0 = time.monotonic()
                try:
                    await client.send(node, ApiKey.API_VERSIONS, 3, {"client_software_name": "group-load",
                                                                     "client_software_version": "1"}, 30000)
                    out.append((time.monotonic() - t0) * 1000.0)
                except (BrokerChannelError, asyncio.TimeoutError):
                    pass
                await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
        finally:
            await client.close()
    await asyncio.gather(*(one(n) for n in nodes))


def _timeline(stats: LoadStats, start: float, moved: set, seconds: int) -> List[str]:
    """One line per second after ``start``: commits answered without error (by send time) for the groups that
    kept their coordinator and for the moved ones, the slowest of them, the heartbeats of the groups that kept
    their coordinator and the slowest of those, and the errors met in that second."""
    lines = []
    for sec in range(seconds):
        lo, hi = start + sec, start + sec + 1
        window = [(ms, gi in moved) for t, ms, gi in stats.commits if lo <= t < hi]
        errors: Dict[str, int] = {}
        for t, api, name in stats.error_times:
            if lo <= t < hi:
                errors[f"{api}:{name}"] = errors.get(f"{api}:{name}", 0) + 1
        slowest = max((ms for ms, _m in window), default=0.0)
        beats = [ms for t, ms, gi in stats.heartbeats if lo <= t < hi and gi not in moved]
        lines.append(f"{sec:3d}s: others {sum(1 for _ms, m in window if not m):5d} moved "
                     f"{sum(1 for _ms, m in window if m):5d} slowest {slowest:7.0f} ms; others' heartbeats "
                     f"{len(beats):4d} slowest {max(beats, default=0.0):6.0f} ms {errors or ''}")
    return lines


def _load_lines(cluster: Any, since: Dict[int, int]) -> List[str]:
    """The coordinators' own lines about loading ``__consumer_offsets`` partitions, logged after ``since``
    (broker id -> output length then): Kafka's "Finished loading offsets and group metadata", ours "Loaded"."""
    out = []
    for b in cluster.brokers:
        for line in b.output()[since.get(b.broker_id, 0):].splitlines():
            if "Finished loading offsets and group metadata" in line or "[GroupCoordinator] Loaded" in line:
                out.append(f"broker {b.broker_id}: {line.strip()[:240]}")
    return out


# ------------------------------------------------------------------------------------------------ CLI
def _spec(a: argparse.Namespace) -> LoadSpec:
    return LoadSpec(groups=a.groups, members=a.members, topics=a.topics, partitions=a.partitions,
                    member=MemberConfig(commit_interval_ms=a.commit_interval_ms,
                                        heartbeat_interval_ms=a.heartbeat_interval_ms,
                                        session_timeout_ms=a.session_timeout_ms),
                    start_rate=a.start_rate, offsets_partition=a.offsets_partition,
                    offsets_partitions=int(dict(kv.split("=", 1) for kv in a.override).get(
                        "offsets.topic.num.partitions", 50)))


def _run(coro: Any) -> Any:
    # The generator keeps thousands of members' objects alive; CPython's default young-generation threshold (700
    # allocations) makes it promote in-flight requests and run full collections every second or so, which would
    # show as latency. Collect young objects every 50,000 allocations instead (the broker is not affected).
    gc.set_threshold(50_000, 20, 100)
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def _print(obj: Any) -> None:
    print(json.dumps(asdict(obj), indent=2, default=str))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="group_load", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("load", "failover"):
        p = sub.add_parser(name)
        p.add_argument("--groups", type=int, default=1000)
        p.add_argument("--members", type=int, default=3)
        p.add_argument("--topics", type=int, default=100)
        p.add_argument("--partitions", type=int, default=1000, help="in total over --topics topics")
        p.add_argument("--commit-interval-ms", type=int, default=1000)
        p.add_argument("--heartbeat-interval-ms", type=int, default=3000)
        p.add_argument("--session-timeout-ms", type=int, default=45000)
        p.add_argument("--start-rate", type=float, default=0.0, help="groups started per second (0: all at once)")
        p.add_argument("--kafka", action="store_true", help="run Apache Kafka 3.9.1 brokers instead of ours")
        p.add_argument("--override", action="append", default=[], metavar="key=value")
        p.add_argument("--workdir", help="where the cluster's files go (default: a temporary directory)")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--offsets-partition", type=int, default=None,
                       help="only group ids of this __consumer_offsets partition (one coordinator, one log)")
    lp = sub.choices["load"]
    lp.add_argument("--bootstrap", help="an already running cluster (else one is started)")
    lp.add_argument("--brokers", type=int, default=1)
    lp.add_argument("--duration", type=float, default=30.0)
    lp.add_argument("--warmup", type=float, default=5.0)
    fp = sub.choices["failover"]
    fp.add_argument("--records", type=int, default=1_000_000)
    fp.add_argument("--preload-partitions", type=int, default=1000)
    fp.add_argument("--run", type=float, default=20.0, help="seconds of load measured before the kill")
    a = ap.parse_args(argv)
    random.seed(a.seed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cluster started here is stopped
    overrides = dict(kv.split("=", 1) for kv in a.override)
    spec = _spec(a)
    if a.cmd == "load" and a.bootstrap:
        async def on_existing() -> LoadReport:
            cc = ClusterClient(a.bootstrap)
            try:
                await create_topics(cc, {spec.topic_of(i): spec.partitions_per_topic
                                         for i in range(min(spec.groups, spec.topics))})
            finally:
                await cc.close()
            return await run_load(a.bootstrap, spec, a.duration, a.warmup)  # type: ignore[no-any-return]
        _print(_run(on_existing()))
        return 0
    workdir = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="group-load-"))
    cluster = BenchCluster(workdir, a.brokers if a.cmd == "load" else 3, a.kafka, overrides)
    cluster.start()
    try:
        if a.cmd == "load":
            async def on_fresh() -> LoadReport:
                cc = ClusterClient(cluster.bootstrap)
                try:
                    await create_topics(cc, {spec.topic_of(i): spec.partitions_per_topic
                                             for i in range(min(spec.groups, spec.topics))})
                finally:
                    await cc.close()
                return await run_load(cluster.bootstrap, spec, a.duration, a.warmup)  # type: ignore[no-any-return]
            _print(_run(on_fresh()))
        else:
            _print(_run(run_failover(cluster, spec, a.records, a.preload_partitions, a.run,
                                     "kafka" if a.kafka else "ours")))
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
