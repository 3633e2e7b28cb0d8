"""Group join benchmark: N confluent-kafka consumers subscribing at once, ours beside Apache Kafka 3.9.1.

    .venv/bin/python -m tools.bench.group_join_bench [--trials 3] [--members 3,30]
        [--assignors range,cooperative-sticky] [--static no,yes] [--brokers ours,kafka] [--cold] [--timeline]

Measures the time from creating N consumers (librdkafka via confluent-kafka; each polled by a thread of its own)
that subscribe at once to a topic of 2N partitions, until every partition is held by exactly one of them and
the N hold equal shares (within one partition): "joined and balanced". ``group.initial.rebalance.delay.ms=0``
on both brokers, the topic created beforehand. With ``--timeline`` also the number of generations the group went
through (DescribeGroups cannot tell it; the clients' JoinGroup answers can, from librdkafka's ``cgrp`` debug log,
which slows the clients: the times of such a run are not comparable with a run without it; 0 without it).

What it showed first (3 members, range, 2026-11-28): both brokers form generation 1 with the first member alone
(the delay is 0) and generation 2 with all three. Which is faster depends on where the first member is when the
other two arrive ~2 ms later: still in its SyncGroup (answered REBALANCE_IN_PROGRESS, it rejoins at once: ~0.1 s)
or already Stable (it learns of the rebalance from its next heartbeat: ~1 heartbeat interval). Ours completes
generation 1 sooner and so lands in the second case more often.

Why (issue 19, read against Kafka 3.9's GroupCoordinator and both brokers' logs): the coordinators follow the same
rules (InitialDelayedJoin of 0 ms completes generation 1 on its timer without waiting for KIP-394 pending members; a
known member's join in CompletingRebalance/Stable starts a DelayedJoin that completes once every member rejoined; a
parked or later SyncGroup of the old generation, and heartbeats, answer REBALANCE_IN_PROGRESS). What differs is when
the others arrive relative to the first member's window [generation 1 formed .. its SyncGroup and first heartbeat
answered]: (a) Kafka's window is ~5-10 ms (JoinGroup answered from the purgatory's executor thread, the leader's
Metadata and SyncGroup round trips at 1-4 ms each), ours ~1 ms; (b) librdkafka decommissions its bootstrap broker
once the first Metadata answer names broker 0: a FindCoordinator still in flight on it fails (_DESTROY_BROKER) and
is retried on a ~50 ms tick, which lines the clients up. Kafka answers that FindCoordinator after ~4 ms, so usually
every client takes the retry; ours answers in <1 ms, so often one client gets through and joins ~50 ms ahead of
the rest (then Kafka is as slow: its trials with a client ahead also take ~1 heartbeat interval).

What decided it (2026-11-29): not the clients' FindCoordinator retry (every client waits the same ~50 ms for
broker 0's connection on both brokers) but how long the first member stays reachable by a rebalance without a
heartbeat. Kafka's generation 1 forms 3-5 ms after the join that armed its 0 ms InitialDelayedJoin (timer wheel,
executor thread), and its first member's SyncGroup comes later still; in Kafka's fast trials (--timeline) generation
1 still holds one member, but the others, 2-5 ms behind, arrive before that member is Stable, it is answered
REBALANCE_IN_PROGRESS and generation 2 forms 9-22 ms later. Ours formed generation 1 on the next loop turn (~1 ms)
and answered the SyncGroup at once, so the first member was Stable before the others arrived and learned of the
rebalance from its next heartbeat (1 s). The coordinator now waits at least 5 ms for a new group's first generation
(GroupConfig.initial_join_min_ms), each arrival extending it: without debug logging the 3-member median went from
1.015 s to 0.076 s (Kafka 0.108 s). With ``--timeline`` the debug logging spreads the clients further apart than
5 ms: ours was then 1.03 s in 3 of 3 trials (generations 1 with 1-2 members, then 2), Kafka 0.127 s median.

Warm (default): one fresh broker of each kind per configuration, ``__consumer_offsets`` created and loaded by a
throwaway group first, a new topic and group per trial. ``--cold``: a fresh broker per trial and no
``__consumer_offsets`` yet (the first group on a new cluster: FindCoordinator creates and loads it).
``--timeline``: prints, per member, when JoinGroup/SyncGroup were sent and answered (ms from the start) and the
generation ids it saw. Nothing here asserts: it prints figures (median of the trials).
"""
from __future__ import annotations

import argparse
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port

#: librdkafka cgrp debug lines worth a timeline entry: (pattern, label)
_EVENTS = [
    (re.compile(r"FindCoordinator response error: (\w+)"), "FindCoordinator error {0}"),
    (re.compile(r"[Ss]tate change .* -> wait-coord|Group .* not yet coordinator", re.S), None),
    (re.compile(r"Joining group .* with (\d+) subscribed"), "JoinGroup sent"),
    (re.compile(r"JoinGroup response: GenerationId (-?\d+), Protocol ([\w-]*), LeaderId \S*( \(me\))?, "
                r"my MemberId \S*, member metadata count (\d+): (\w+)"), "JoinGroup answer gen {0} members {3} {4}"),
    (re.compile(r"JoinGroup failed: Broker: ([\w ]+)"), "JoinGroup error {0}"),
    (re.compile(r"Sending SyncGroup"), "SyncGroup sent"),
    (re.compile(r"SyncGroup response: (\w+)"), "SyncGroup answer {0}"),
]


class _ClientLog(logging.Handler):
    """Collects librdkafka's debug lines of one consumer with their arrival time."""

    def __init__(self, t0: List[float]) -> None:
        super().__init__(logging.DEBUG)
        self.t0 = t0
        self.lines: List[Tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.perf_counter() - self.t0[0], record.getMessage()))

    def events(self) -> List[Tuple[float, str]]:
        out = []
        for t, line in self.lines:
            for pat, label in _EVENTS:
                m = pat.search(line)
                if m and label:
                    out.append((t, label.format(*m.groups())))
                    break
        return out

    def generations(self) -> List[int]:
        gens = []
        for _t, line in self.lines:
            m = re.search(r"JoinGroup response: GenerationId (\d+)", line)
            if m and int(m.group(1)) not in gens:
                gens.append(int(m.group(1)))
        return gens


class Broker:
    """ZooKeeper plus one broker, ours or Kafka 3.9.1's."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.workdir = workdir
        self.zk = ZooKeeperProcess(workdir, free_port())
        props = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1",
                 "num.partitions": "1"}
        if kind == "kafka":
            from tests.harness.kafka import RealKafkaBroker
            self.b: Any = RealKafkaBroker(workdir, "", 0, overrides=props, heap="1g", full_jit=True)
        else:
            self.b = BrokerProcess(workdir, "", overrides=props)

    @property
    def bootstrap(self) -> str:
        return str(self.b.bootstrap)

    def start(self) -> None:
        self.zk.start()
        self.b.zk_connect = f"{self.zk.connect_string}/join"
        self.b.start()

    def stop(self) -> None:
        try:
            self.b.kill()
        finally:
            self.zk.stop()


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every partition has a leader in the metadata the clients will see
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} has no leaders")


def _warm_offsets_topic(bootstrap: str) -> None:
    """Create and load ``__consumer_offsets`` (one member joins a throwaway group)."""
    topic = f"warm-{uuid.uuid4().hex[:6]}"
    _create_topic(bootstrap, topic, 1)
    r = run_trial(bootstrap, topic, 1, 1, "range", False, timeout=30)
    if r[0] is None:
        raise TimeoutError("warm-up group did not join")


def run_trial(bootstrap: str, topic: str, partitions: int, members: int, assignor: str, static: bool,
              timeline: bool = False, timeout: float = 60.0) -> Tuple[Optional[float], int, List[_ClientLog]]:
    """(seconds until joined and balanced or None, generations seen, the clients' logs)."""
    from confluent_kafka import Consumer
    group = f"{topic}-g"
    t0 = [time.perf_counter()]
    logs: List[_ClientLog] = []
    consumers = []
    for i in range(members):
        conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                                "partition.assignment.strategy": assignor, "client.id": f"c{i}",
                                }
        if timeline:
            conf["debug"] = "cgrp"
        if static:
            conf["group.instance.id"] = f"{group}-{i}"
        lg = logging.getLogger(f"group_join_bench.{uuid.uuid4().hex}")
        lg.propagate = False
        lg.setLevel(logging.DEBUG)
        h = _ClientLog(t0)
        lg.addHandler(h)
        logs.append(h)
        conf["logger"] = lg  # librdkafka's log lines, delivered by poll()
        consumers.append(Consumer(conf))
    for c in consumers:
        c.subscribe([topic])
    share = partitions // members
    took: Optional[float] = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            held = [{tp.partition for tp in c.assignment()} for c in consumers]
            sizes = [len(h) for h in held]
            if sum(sizes) == partitions and len(set().union(*held)) == partitions \
                    and all(share <= s <= share + (1 if partitions % members else 0) for s in sizes):
                took = time.perf_counter() - t0[0]
                break
            for c in consumers:  # serves rebalance events (assign) and, with --timeline, the debug log
                c.poll(0)
            time.sleep(0.002)
    finally:
        for c in consumers:
            c.close()
    gens = sorted({g for h in logs for g in h.generations()})
    return took, len(gens), logs


def _print_timeline(kind: str, logs: List[_ClientLog]) -> None:
    print(f"  timeline ({kind}), ms from the first consumer's creation:")
    for i, h in enumerate(logs):
        for t, line in h.lines:
            if re.search(r"JoinGroup|SyncGroup|FindCoordinator|MEMBER_ID|coordinator", line):
                print(f"    c{i} {t * 1000:6.0f} ms: {line[:160]}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--members", default="3,30")
    ap.add_argument("--assignors", default="range,cooperative-sticky")
    ap.add_argument("--static", default="no,yes")
    ap.add_argument("--brokers", default="ours,kafka")
    ap.add_argument("--cold", action="store_true", help="fresh broker per trial, no __consumer_offsets yet")
    ap.add_argument("--timeline", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    for n in [int(x) for x in a.members.split(",")]:
        for assignor in a.assignors.split(","):
            for static in [s == "yes" for s in a.static.split(",")]:
                row: Dict[str, Any] = {"members": n, "assignor": assignor, "static": static}
                for kind in a.brokers.split(","):
                    times: List[float] = []
                    gens: List[int] = []
                    broker: Optional[Broker] = None
                    for trial in range(a.trials):
                        work = Path(tempfile.mkdtemp(prefix="group-join-bench-"))
                        try:
                            if broker is None or a.cold:
                                broker = Broker(kind, work)
                                broker.start()
                                if not a.cold:
                                    _warm_offsets_topic(broker.bootstrap)
                            topic = f"gj-{uuid.uuid4().hex[:6]}"
                            _create_topic(broker.bootstrap, topic, 2 * n)
                            took, ng, logs = run_trial(broker.bootstrap, topic, 2 * n, n, assignor, static,
                                                       timeline=a.timeline)
                            shutil.rmtree(work, ignore_errors=True) if a.cold else None
                            times.append(took if took is not None else float("inf"))
                            gens.append(ng)
                            if a.timeline:  # the clients' account of the first trial, the coordinator's of each
                                if trial == 0:
                                    _print_timeline(kind, logs)
                                print(f"  trial {trial} ({kind}): {times[-1]:.3f} s")
                                for line in broker.b.output().splitlines():
                                    if f"{topic}-g" in line:
                                        print("    broker:", line[:220])
                        finally:
                            if a.cold and broker is not None:
                                broker.stop()
                                broker = None
                    if broker is not None:
                        broker.stop()
                    row[kind] = (statistics.median(times), min(times), max(times), statistics.median(gens))
                    print(f"{n:3d} {assignor:18s} static={'yes' if static else 'no ':3s} {kind:5s} "
                          f"median {row[kind][0]:.3f} s (min {row[kind][1]:.3f}, max {row[kind][2]:.3f}), "
                          f"generations {gens}", flush=True)
                rows.append(row)
    print(f"\n{'members':>7s} {'assignor':18s} {'static':6s} " + " ".join(
        f"{k + ' s (gens)':>16s}" for k in a.brokers.split(",")) + ("   (cold)" if a.cold else ""))
    for row in rows:
        print(f"{row['members']:7d} {row['assignor']:18s} {'yes' if row['static'] else 'no':6s} " + " ".join(
            f"{row[k][0]:10.3f} ({row[k][3]:.0f})".rjust(16) for k in a.brokers.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
