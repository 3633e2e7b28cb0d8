"""Consumer groups and consumers on 3 real broker processes: __consumer_offsets with replication factor 3
(commits answered only once replicated; a coordinator that lost leadership answers NOT_COORDINATOR; kill -9
of the coordinator's broker under an active group), fetching from the closest replica (KIP-392), and many
groups at once through the load generator's client (100 groups x 3 members; a coordinator killed under 30).
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.cluster_ops import (ApiKey, all_brokers_agree, call, controller_id, module_cluster, partitions,
                                       produce_values)
from tests.integration.cluster.conftest import wait_for
from tools.cluster import LocalCluster

OFFSETS = "__consumer_offsets"
NUM_OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of the test clusters (conftest FAST)
REQUEST_TIMED_OUT = 7
NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
ROTATED = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % offsets partitions."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % NUM_OFFSETS_PARTITIONS


def find_coordinator(cluster: LocalCluster, group: str) -> int:
    def ask() -> Any:
        for b in cluster.brokers:
            if not b.is_alive():
                continue
            r = call(b, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
            c = r.coordinators[0]
            return c.node_id if c.error_code == 0 else None
        return None

    found = wait_for(lambda: (lambda n: (n,) if n is not None and n >= 0 else None)(ask()), 60,
                     f"a coordinator for {group}")
    return int(found[0])


def _commit(broker: Any, group: str, topic: str, offset: int) -> Tuple[int, float]:
    t0 = time.monotonic()
    r = call(broker, ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                   "commit_timestamp": -1, "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code, time.monotonic() - t0


def _fetch_offset(broker: Any, group: str, topic: str) -> Tuple[int, int]:
    """(error code, committed offset) from OffsetFetch v8."""
    r = call(broker, ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
    g = r.groups[0]
    if g.error_code:
        return g.error_code, -1
    p = g.topics[0].partitions[0]
    return p.error_code, p.committed_offset


# ------------------------------------------------------------------------------------------------ commits
#: a paused follower stays in the ISR (long lag time, long ZooKeeper session); commits time out after 1.5 s
GROUP_OVERRIDES = {"offsets.commit.timeout.ms": "1500", "replica.lag.time.max.ms": "30000",
                   "zookeeper.session.timeout.ms": "20000", "auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with module_cluster(Path(tmp_path_factory.mktemp("groups")), zookeeper, overrides=GROUP_OVERRIDES) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("data", 1, 3)], operation_timeout=30)["data"].result(40)
        find_coordinator(c, "warm-up")  # creates __consumer_offsets
        wait_for(lambda: all_brokers_agree(c, OFFSETS, lambda p: len(p) == NUM_OFFSETS_PARTITIONS and all(
            len(x.replicas) == 3 and len(x.isr) == 3 for x in p.values())), 60, "__consumer_offsets in sync")
        yield c


def test_offsets_topic_is_replicated_three_ways(cluster: LocalCluster) -> None:
    p = partitions(cluster.brokers[0], OFFSETS)
    assert sorted(p) == list(range(NUM_OFFSETS_PARTITIONS))
    assert all(sorted(x.replicas) == [0, 1, 2] for x in p.values())
    assert sorted(x.leader for x in p.values()) == [0, 0, 1, 1, 2, 2]  # Kafka's placement: leaders spread


def test_commit_is_answered_only_once_replicated(cluster: LocalCluster) -> None:
    """offsets.commit.required.acks=-1: with one in-sync follower of the group's offsets partition paused, an
    OffsetCommit is not acknowledged; it fails with REQUEST_TIMED_OUT after offsets.commit.timeout.ms and the
    committed offset does not change. Once the follower runs again, commits are answered at once."""
    group = "g-replicated"
    coordinator = find_coordinator(cluster, group)
    part = offsets_partition(group)
    state = partitions(cluster.brokers[0], OFFSETS)[part]
    assert state.leader == coordinator
    broker = cluster.brokers[coordinator]
    assert _commit(broker, group, "data", 1)[0] == 0
    assert _fetch_offset(broker, group, "data") == (0, 1)
    ctrl = controller_id(cluster)
    follower = cluster.brokers[next(r for r in state.replicas if r not in (coordinator, ctrl))]
    follower.pause()
    try:
        code, elapsed = _commit(broker, group, "data", 2)
        assert code == REQUEST_TIMED_OUT, code
        assert elapsed >= 1.3, elapsed
        assert _fetch_offset(broker, group, "data") == (0, 1)
    finally:
        follower.resume()
    code, elapsed = _commit(broker, group, "data", 3)
    assert code == 0
    assert _fetch_offset(broker, group, "data") == (0, 3)
    # The paused follower is still in the ISR (it never fell behind longer than replica.lag.time.max.ms).
    assert set(partitions(cluster.brokers[0], OFFSETS)[part].isr) == {0, 1, 2}


def test_coordinator_that_lost_leadership_answers_not_coordinator(cluster: LocalCluster) -> None:
    """Leadership of the group's offsets partition moves (reordered replicas + preferred election): the old
    coordinator unloads the group and answers NOT_COORDINATOR to OffsetCommit, OffsetFetch, JoinGroup and
    Heartbeat; FindCoordinator names the new leader, which loaded the committed offsets."""
    group = "g-moved"
    old = find_coordinator(cluster, group)
    part = offsets_partition(group)
    assert _commit(cluster.brokers[old], group, "data", 5)[0] == 0
    replicas = list(partitions(cluster.brokers[0], OFFSETS)[part].replicas)
    new = next(r for r in replicas if r != old)
    order = [new] + [r for r in replicas if r != new]
    ctrl = cluster.brokers[controller_id(cluster)]
    r = call(ctrl, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [
        {"name": OFFSETS, "partitions": [{"partition_index": part, "replicas": order}]}]})
    assert [p.error_code for t in r.responses for p in t.partitions] == [0]
    wait_for(lambda: all_brokers_agree(cluster, OFFSETS, lambda p: list(p[part].replicas) == order), 30,
             "the reordered replicas")
    r = call(ctrl, ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 10000,
                                             "topic_partitions": [{"topic": OFFSETS, "partitions": [part]}]})
    assert [p.error_code for t in r.replica_election_results for p in t.partition_result] == [0]
    wait_for(lambda: all_brokers_agree(cluster, OFFSETS, lambda p: p[part].leader == new), 30, "the new leader")
    old_broker, new_broker = cluster.brokers[old], cluster.brokers[new]
    wait_for(lambda: _fetch_offset(old_broker, group, "data")[0] == NOT_COORDINATOR, 30, "the old one unloaded")
    assert _commit(old_broker, group, "data", 6)[0] == NOT_COORDINATOR
    j = call(old_broker, ApiKey.JOIN_GROUP, 7, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert j.error_code == NOT_COORDINATOR
    h = call(old_broker, ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m"})
    assert h.error_code == NOT_COORDINATOR
    assert find_coordinator(cluster, group) == new
    seen: List[Any] = []
    try:
        wait_for(lambda: seen.append(_fetch_offset(new_broker, group, "data")) or seen[-1] == (0, 5), 30, "")
    except AssertionError:
        raise AssertionError(f"the new coordinator answers OffsetFetch with {seen[-1:]}, not (0, 5)") from None
    codes: List[Any] = []
    t0 = time.monotonic()
    wait_for(lambda: codes.append(_commit(new_broker, group, "data", 7)) or codes[-1][0] == 0, 60, "a commit")
    print("commits to the new coordinator:", codes, time.monotonic() - t0)
    assert codes[0][0] == 0, codes
    assert _fetch_offset(new_broker, group, "data") == (0, 7)


# ------------------------------------------------------------------------------------------------ failover
def test_group_survives_the_coordinator_broker_dying(new_cluster: Any) -> None:
    """A consumer group member commits as it goes; the coordinator's broker is killed (SIGKILL) mid-way. The new
    leader of the group's offsets partition loads the group, the member goes on committing there; it then
    stops without committing its last records. A second member starts from the committed offsets: no record
    lost, and the only duplicates are the records consumed after the last commit."""
    cluster = new_cluster(3)
    topic, group, n_per = "work", "g-failover", 600
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, replica_assignment=ROTATED)], operation_timeout=30)[topic].result(40)
    wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: len(p) == 3 and all(
        len(x.isr) == 3 for x in p.values())), 60, "the topic in sync")
    produced: Set[Tuple[int, int]] = set()
    for part in range(3):
        acked = produce_values(cluster.bootstrap, topic, [f"w-{part}-{i}".encode() for i in range(n_per)], part)
        produced |= {(a[0], a[1]) for a in acked}
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 30000, "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 120000, "max.partition.fetch.bytes": 2000}
    first = Consumer(conf)
    first.subscribe([topic])
    consumed: List[Tuple[int, int]] = []
    position: Dict[int, int] = {}
    committed: Dict[int, int] = {}

    def consume_some(c: Consumer, n: int, sink: List[Tuple[int, int]], pos: Dict[int, int]) -> None:
        deadline = time.monotonic() + 90
        got = 0
        while got < n and time.monotonic() < deadline:
            for m in c.consume(min(50, n - got), 0.5):
                if m.error():
                    raise KafkaException(m.error())
                sink.append((m.partition(), m.offset()))
                pos[m.partition()] = m.offset() + 1
                got += 1
        assert got == n, f"consumed {got} of {n}"

    def commit(c: Consumer) -> None:
        offsets = [TopicPartition(topic, p, o) for p, o in sorted(position.items())]
        deadline = time.monotonic() + 60
        while True:
            try:
                res = c.commit(offsets=offsets, asynchronous=False)
                assert all(tp.error is None for tp in res), res
                committed.update(position)
                return
            except KafkaException as e:  # the coordinator is moving: retriable
                if time.monotonic() > deadline or not e.args[0].retriable():
                    raise
                time.sleep(0.2)

    for _ in range(6):
        consume_some(first, 100, consumed, position)
        commit(first)
    coordinator = find_coordinator(cluster, group)
    cluster.brokers[coordinator].kill()
    for _ in range(6):
        consume_some(first, 100, consumed, position)
        commit(first)
    new_coordinator = find_coordinator(cluster, group)
    assert new_coordinator != coordinator
    tail: List[Tuple[int, int]] = []
    consume_some(first, 150, tail, position)  # consumed, never committed
    first.close()
    # The committed offsets as the new coordinator has them.
    probe = Consumer(dict(conf, **{"group.id": group}))
    stored = {tp.partition: tp.offset for tp in probe.committed([TopicPartition(topic, p) for p in range(3)], 30)}
    probe.close()
    assert stored == {p: committed.get(p, -1001) for p in range(3)}, (stored, committed)
    second = Consumer(conf)
    second.subscribe([topic])
    rest: List[Tuple[int, int]] = []
    remaining = len(produced) - sum(o for o in committed.values())
    consume_some(second, remaining, rest, {})
    second.close()
    starts = {p: min(o for q, o in rest if q == p) for p in {q for q, _ in rest}}
    assert all(starts[p] == committed.get(p, 0) for p in starts), (starts, committed)
    everything = consumed + tail + rest
    assert set(everything) == produced  # nothing lost
    dupes = {x for x in everything if everything.count(x) > 1}
    assert dupes <= set(tail), "duplicates beyond the records consumed after the last commit"
    assert dupes == set(tail)  # the second member started exactly at the committed offsets


# ------------------------------------------------------------------------------------------------ KIP-392
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _fetch(broker: Any, version: int, topic: str, topic_id: Any, rack: str, offset: int = 0) -> Any:
    r = call(broker, ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": rack,
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return r.responses[0].partitions[0]


def test_fetch_from_the_closest_replica(new_cluster: Any) -> None:
    """broker.rack r0/r1/r2 and RackAwareReplicaSelector: a consumer Fetch (v11+) to the leader (rack r0) from a
    client in rack r2 is answered with preferred_read_replica 2 and no records; from r0 (or no rack) with the
    records. Broker 2 serves consumer fetches v11+ as a follower (up to the high watermark), refuses them before
    v11. A confluent-kafka consumer with client.rack=r2 reads every record, from broker 2."""
    racks = {0: "r0", 1: "r1", 2: "r2"}
    cluster = new_cluster(3, {"replica.selector.class": SELECTOR},
                          broker_overrides={i: {"broker.rack": r} for i, r in racks.items()})
    topic = "near"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1, 2]])], operation_timeout=30)[topic].result(40)
    wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: len(p[0].isr) == 3 and p[0].leader == 0), 60,
             "the topic in sync")
    acked = produce_values(cluster.bootstrap, topic, [f"n{i}".encode() for i in range(200)], 0)
    tid = call(cluster.brokers[0], ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0].topic_id
    leader, near = cluster.brokers[0], cluster.brokers[2]
    for version in (11, 12, 17):
        p = wait_for(lambda v=version: (lambda x: x if x.preferred_read_replica == 2 else None)(
            _fetch(leader, v, topic, tid, "r2")), 30, "the follower in r2 caught up and preferred")
        assert p.error_code == 0 and p.high_watermark == 200
        assert not p.records
        p = _fetch(leader, version, topic, tid, "r0")
        assert (p.error_code, p.preferred_read_replica) == (0, -1) and p.records
        p = _fetch(leader, version, topic, tid, "")
        assert (p.error_code, p.preferred_read_replica) == (0, -1) and p.records
        # (the follower learns the high watermark from its next fetch response)
        p = wait_for(lambda v=version: (lambda x: x if x.high_watermark == 200 else None)(
            _fetch(near, v, topic, tid, "r2")), 30, "the follower's high watermark at 200")
        assert (p.error_code, p.high_watermark, p.preferred_read_replica) == (0, 200, -1)
        assert p.records
    assert _fetch(near, 10, topic, tid, "").error_code == NOT_LEADER_OR_FOLLOWER
    stats: List[Dict[str, Any]] = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "client.rack": "r2", "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s))})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: List[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < 200 and time.monotonic() < deadline:
        for m in consumer.consume(100, 0.5):
            if m.error():
                raise KafkaException(m.error())
            got.append((m.offset(), m.value()))
    # librdkafka's statistics: the partition's leader is 0, the broker it fetches from is 2
    wait_for(lambda: consumer.poll(0.2) is None and any(
        s["topics"].get(topic, {}).get("partitions", {}).get("0", {}).get("broker") == 2 for s in stats), 30,
        "a statistics report fetching from broker 2")
    part = [s["topics"][topic]["partitions"]["0"] for s in stats if topic in s.get("topics", {})][-1]
    consumer.close()
    assert got == [(a[1], a[2]) for a in acked]
    assert (part["leader"], part["broker"]) == (0, 2)


# ------------------------------------------------------------------------------------------------ many groups
def _load_errors_that_matter(errors: Dict[str, int]) -> Dict[str, int]:
    """Errors a healthy run may see (a rebalance racing a commit or heartbeat) left out."""
    benign = ("REBALANCE_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
              "COORDINATOR_NOT_AVAILABLE", "BROKER_CONNECTION")
    return {k: n for k, n in errors.items() if not k.endswith(benign)}


def test_hundred_groups_of_three_members_commit_and_read_back(cluster: LocalCluster) -> None:
    """100 groups x 3 members of the load generator's client (tools/bench/group_client.py) on 10 topics of 10
    partitions: every group becomes Stable (as its members see it and as DescribeGroups says), every member
    commits its partitions every second, and every acknowledged offset is read back exactly by OffsetFetch."""
    from tools.bench.group_client import ClusterClient
    from tools.bench.group_load import LoadSpec, create_topics, run_load

    spec = LoadSpec(groups=100, members=3, topics=10, partitions=100, group_prefix="ci-many",
                    topic_prefix="ci-many-topic")

    async def scenario() -> Any:
        cc = ClusterClient(cluster.bootstrap)
        try:
            await create_topics(cc, {spec.topic_of(i): spec.partitions_per_topic for i in range(spec.topics)})
        finally:
            await cc.close()
        return await run_load(cluster.bootstrap, spec, duration_s=4.0, warmup_s=0.0)

    report = asyncio.run(scenario())
    assert report.commits > 0, report
    assert report.verified_offsets == 100 * 10, report  # every partition of every group was committed
    assert report.mismatched_offsets == 0, report
    assert _load_errors_that_matter(report.errors) == {}, report


def test_groups_are_served_again_after_their_coordinator_is_killed(new_cluster: Any) -> None:
    """30 groups x 3 members commit; __consumer_offsets (replication factor 3) also holds 3,000 preloaded commit
    records. The broker coordinating most groups (not the controller) is killed with SIGKILL: every one of its
    groups is answered again by a new coordinator with at least the offsets acknowledged before the kill; after
    the members stop, no offset they had acknowledged (before or after the kill) is lost, and every preloaded
    offset is read back exactly."""
    from tools.bench.group_load import LoadSpec, run_failover

    cluster = new_cluster(3)
    spec = LoadSpec(groups=30, members=3, topics=5, partitions=30, group_prefix="ci-failover",
                    topic_prefix="ci-failover-topic")
    report = asyncio.run(run_failover(cluster, spec, records=3000, preload_partitions=20, run_s=3.0))
    assert report.victim >= 0 and report.victim_groups > 0, report
    assert report.served_all_s > 0, report
    assert (report.preload_records, report.preload_verified, report.preload_mismatched) == (3000, 600, 0), report
    assert report.load is not None and report.load.verified_offsets == 30 * 6, report
    # No acknowledged commit is lost; one whose answer died with the broker may have been applied all the same
    # (read back higher than acknowledged), which is what a client must expect too.
    assert report.load.lost_offsets == 0, report
    assert _load_errors_that_matter(report.load.errors) == {}, report
