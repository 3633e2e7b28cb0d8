"""Admin operations across 3 real broker processes: CreateTopics (placement, errors, explicit and rack-aware
assignments, NOT_CONTROLLER), DeleteTopics (logs and znodes gone on every replica), CreatePartitions (new
replicas placed and started), partition reassignment (Kafka's own kafka-reassign-partitions tool, cancel, the
legacy znode) and DeleteRecords (waits for every live replica's log start offset).

Most tests share one module cluster (they only use their own topics and never kill a broker for good); its
ZooKeeper session timeout is long enough that a broker paused for a few seconds (SIGSTOP) stays registered.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.harness.cluster_ops import (ApiKey, BackgroundProducer, all_brokers_agree, any_dirs_of, call,
                                       controller_id, kafka_assignment, matches_kafka_assignment, metadata,
                                       module_cluster, partition_dirs, partitions, produce_values, run_kafka_tool,
                                       zk_client)
from tests.harness.clients import consume_from_start
from tests.integration.cluster.conftest import ClusterView, wait_for
from tools.cluster import LocalCluster

INVALID_REPLICATION_FACTOR = 38
NOT_CONTROLLER = 41
REQUEST_TIMED_OUT = 7

#: replica dirs renamed "-delete" are removed after 1 s instead of Kafka's 60 s; log start offsets are
#: checkpointed every second; a paused broker keeps its ZooKeeper session for 20 s
MODULE_OVERRIDES = {"log.segment.delete.delay.ms": "1000", "log.flush.start.offset.checkpoint.interval.ms": "1000",
                    "zookeeper.session.timeout.ms": "20000", "auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def cluster(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with module_cluster(Path(tmp_path_factory.mktemp("admin")), zookeeper, overrides=MODULE_OVERRIDES) as c:
        yield c


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _assigned(name: str, assignment: List[List[int]]) -> NewTopic:
    # (confluent-kafka wants the partition count along with an explicit assignment)
    return NewTopic(name, len(assignment), replica_assignment=assignment)


def _create(bootstrap: str, topic: NewTopic) -> None:
    """CreateTopics through confluent-kafka's AdminClient (kept alive until the answer is in)."""
    admin = _admin(bootstrap)
    admin.create_topics([topic], operation_timeout=30)[topic.topic].result(40)


def _replicas(p: Dict[int, Any]) -> Dict[int, List[int]]:
    return {i: list(x.replicas) for i, x in p.items()}


def _settled(cluster: LocalCluster, topic: str, n: int, rf: int) -> Dict[int, Any]:
    """Wait until every broker's metadata shows ``n`` partitions, each with ``rf`` in-sync replicas led by the
    preferred replica."""
    return wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: len(p) == n and all(
        len(x.replicas) == rf and set(x.isr) == set(x.replicas) and x.leader == x.replicas[0] for x in p.values())),
        60, f"{topic}: {n} partitions fully in sync on every broker")


def _consume_all(bootstrap: str, topic: str, parts: List[int], n: int, extra: Any = None) -> List[Any]:
    got = consume_from_start(bootstrap, [(topic, p) for p in parts], n, 90, extra)
    return [(m.partition(), m.offset(), m.value()) for m in got]


# ----------------------------------------------------------------------------------------------- CreateTopics
def test_create_topics_places_replicas_as_kafka_does(cluster: LocalCluster) -> None:
    """Stock client (confluent-kafka sends CreateTopics to the controller): 6 partitions x RF 3 and 3 x RF 2 are
    placed as Kafka's AdminUtils does (round robin from a random start, shifted followers), every broker leads its
    share, every replica is in sync, data flows through every partition."""
    view = ClusterView(cluster.bootstrap)
    view.create_topic("spread", 6, 3)
    view.create_topic("spread2", 3, 2)
    p = _settled(cluster, "spread", 6, 3)
    assert matches_kafka_assignment(_replicas(p), [0, 1, 2], 3), _replicas(p)
    leaders = [x.leader for x in p.values()]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]
    p2 = _settled(cluster, "spread2", 3, 2)
    assert matches_kafka_assignment(_replicas(p2), [0, 1, 2], 2), _replicas(p2)
    assert sorted(x.leader for x in p2.values()) == [0, 1, 2]
    # Each broker hosts a directory for exactly the partitions it is a replica of.
    for b in cluster.brokers:
        want = sorted(f"spread-{i}" for i, x in p.items() if b.broker_id in x.replicas)
        wait_for(lambda b=b, want=want: partition_dirs(b, "spread") == want, 30, f"dirs on broker {b.broker_id}")
    acked = []
    for part in range(6):
        acked += produce_values(cluster.bootstrap, "spread", [f"s{part}-{i}".encode() for i in range(10)], part)
    got = _consume_all(cluster.bootstrap, "spread", list(range(6)), 60)
    assert sorted(got) == sorted(acked)


def test_replication_factor_above_live_brokers(cluster: LocalCluster) -> None:
    ctrl = cluster.brokers[controller_id(cluster)]
    r = call(ctrl, ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "too-many", "num_partitions": 1,
                                                       "replication_factor": 4}], "timeout_ms": 10000})
    t = r.topics[0]
    assert t.error_code == INVALID_REPLICATION_FACTOR, t
    assert "4" in (t.error_message or "") and "3" in (t.error_message or "")
    admin = _admin(cluster.bootstrap)
    fut = admin.create_topics([NewTopic("too-many", 1, 4)], operation_timeout=10)["too-many"]
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    assert e.value.args[0].code() == INVALID_REPLICATION_FACTOR
    assert partitions(cluster.brokers[0], "too-many") == {}
    with zk_client(cluster) as zk:
        assert zk.exists("/brokers/topics/too-many") is None


def test_explicit_replica_assignment_is_honoured(cluster: LocalCluster) -> None:
    wanted = {0: [2, 0], 1: [2, 1], 2: [1, 2], 3: [0, 1]}
    _create(cluster.bootstrap, _assigned("explicit", [wanted[i] for i in range(4)]))
    p = _settled(cluster, "explicit", 4, 2)
    assert _replicas(p) == wanted
    assert {i: x.leader for i, x in p.items()} == {0: 2, 1: 2, 2: 1, 3: 0}
    with zk_client(cluster) as zk:
        znode = json.loads(zk.get("/brokers/topics/explicit")[0])
    assert znode["partitions"] == {str(i): r for i, r in wanted.items()}
    for b in cluster.brokers:
        want = sorted(f"explicit-{i}" for i, r in wanted.items() if b.broker_id in r)
        wait_for(lambda b=b, want=want: partition_dirs(b, "explicit") == want, 30, f"dirs on broker {b.broker_id}")
    # A replica on a broker that does not exist.
    r = call(cluster.brokers[controller_id(cluster)], ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": "explicit-bad", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [0, 7]}]}], "timeout_ms": 10000})
    assert r.topics[0].error_code == 39  # INVALID_REPLICA_ASSIGNMENT


def test_create_topics_on_a_non_controller(cluster: LocalCluster) -> None:
    """Raw CreateTopics to a broker that is not the controller: NOT_CONTROLLER (ZooKeeper mode), nothing created;
    a stock client bootstrapped on that broker only still creates the topic (it asks the controller)."""
    ctrl = controller_id(cluster)
    for b in cluster.brokers:
        if b.broker_id == ctrl:
            continue
        for version in (0, 4, 7):
            r = call(b, ApiKey.CREATE_TOPICS, version, {"topics": [{"name": "via-other", "num_partitions": 1,
                                                                    "replication_factor": 3}], "timeout_ms": 5000})
            assert r.topics[0].error_code == NOT_CONTROLLER, (b.broker_id, version, r)
    with zk_client(cluster) as zk:
        assert zk.exists("/brokers/topics/via-other") is None
    other = next(b for b in cluster.brokers if b.broker_id != ctrl)
    _create(other.bootstrap, NewTopic("via-other", 2, 3))
    _settled(cluster, "via-other", 2, 3)


def test_brokers_without_rack_show_none(cluster: LocalCluster) -> None:
    m = metadata(cluster.brokers[1])
    assert [(b.node_id, b.rack) for b in sorted(m.brokers, key=lambda b: b.node_id)] == [(0, None), (1, None),
                                                                                      (2, None)]


def test_rack_aware_placement_and_racks_in_metadata(new_cluster: Any) -> None:
    """broker.rack on every broker (racks a, a, b): every partition of an RF 2 topic has a replica in each rack,
    as Kafka's rack-aware assignment places them (broker 2, alone in rack b, holds a replica of every
    partition); racks appear in the registration znodes, Metadata and DescribeCluster."""
    racks = {0: "a", 1: "a", 2: "b"}
    c = new_cluster(3, broker_overrides={i: {"broker.rack": r} for i, r in racks.items()})
    view = ClusterView(c.bootstrap)
    view.create_topic("racked", 6, 2)
    p = _settled(c, "racked", 6, 2)
    reps = _replicas(p)
    assert all({racks[r] for r in x} == {"a", "b"} for x in reps.values()), reps
    assert matches_kafka_assignment(reps, [0, 1, 2], 2, racks), reps
    assert sum(2 in x for x in reps.values()) == 6
    for b in c.brokers:
        m = metadata(b)
        assert {x.node_id: x.rack for x in m.brokers} == racks
    d = call(c.brokers[0], ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert {x.broker_id: x.rack for x in d.brokers} == racks
    nodes = view.admin.describe_cluster().result(30).nodes
    assert {n.id: n.rack for n in nodes} == racks
    with zk_client(c) as zk:
        for i, r in racks.items():
            assert json.loads(zk.get(f"/brokers/ids/{i}")[0])["rack"] == r


# ----------------------------------------------------------------------------------------------- DeleteTopics
def test_delete_topics_removes_every_replica_log(cluster: LocalCluster) -> None:
    view = ClusterView(cluster.bootstrap)
    view.create_topic("doomed", 3, 3)
    _settled(cluster, "doomed", 3, 3)
    produce_values(cluster.bootstrap, "doomed", [f"d{i}".encode() for i in range(30)])
    for b in cluster.brokers:
        wait_for(lambda b=b: partition_dirs(b, "doomed") == ["doomed-0", "doomed-1", "doomed-2"], 30,
                 f"doomed dirs on broker {b.broker_id}")
    view.admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(40)
    for b in cluster.brokers:
        # renamed <tp>.<uuid>-delete at once, removed after log.segment.delete.delay.ms (1 s here)
        wait_for(lambda b=b: any_dirs_of(b, "doomed") == [], 60, f"no doomed dir left on broker {b.broker_id}")
    with zk_client(cluster) as zk:
        wait_for(lambda: zk.exists("/admin/delete_topics/doomed") is None, 30, "the deletion znode removed")
        assert zk.exists("/brokers/topics/doomed") is None
        assert zk.exists("/config/topics/doomed") is None
    for b in cluster.brokers:
        wait_for(lambda b=b: partitions(b, "doomed") == {}, 30, f"broker {b.broker_id} forgot the topic")
    # The name can be used again, with fresh logs.
    view.create_topic("doomed", 1, 3)
    _settled(cluster, "doomed", 1, 3)
    assert all(_log_end(b, "doomed", 0) == 0 for b in cluster.brokers)


# ----------------------------------------------------------------------------------------------- CreatePartitions
def test_create_partitions_places_and_starts_new_replicas(cluster: LocalCluster) -> None:
    view = ClusterView(cluster.bootstrap)
    view.create_topic("growing", 2, 3)
    before = _settled(cluster, "growing", 2, 3)
    produce_values(cluster.bootstrap, "growing", [b"x"] * 10)
    view.admin.create_partitions([NewPartitions("growing", 5)], operation_timeout=30)["growing"].result(40)
    p = _settled(cluster, "growing", 5, 3)
    assert {i: p[i].replicas for i in (0, 1)} == {i: before[i].replicas for i in (0, 1)}
    # Kafka's AdminZkClient.createPartitions: start index = the position of partition 0's first replica,
    # replica shift the same, partitions numbered on from the existing count.
    start = sorted([0, 1, 2]).index(before[0].replicas[0])
    assert _replicas({i: p[i] for i in (2, 3, 4)}) == kafka_assignment([0, 1, 2], 3, 3, start, start, 2)
    for b in cluster.brokers:
        wait_for(lambda b=b: partition_dirs(b, "growing") == [f"growing-{i}" for i in range(5)], 30,
                 f"new partition dirs on broker {b.broker_id}")
    acked: List[Any] = []
    for part in (2, 3, 4):
        acked += produce_values(cluster.bootstrap, "growing", [f"p{part}-{i}".encode() for i in range(5)],
                                partition=part)
    got = _consume_all(cluster.bootstrap, "growing", [2, 3, 4], sum(1 for a in acked if a[0] >= 2))
    assert sorted(got) == sorted(a for a in acked if a[0] >= 2)
    # Every replica of the new partitions holds the records (followers fetched them).
    for part in (2, 3, 4):
        n = sum(1 for a in acked if a[0] == part)
        wait_for(lambda part=part, n=n: all(
            _log_end(b, "growing", part) == n for b in cluster.brokers), 30, f"growing-{part} replicated")


def _log_end(broker: Any, topic: str, partition: int) -> int:
    """The log end offset of one replica, leader or follower (ListOffsets LATEST with the debugging replica id
    -2, which Kafka serves from any replica and answers with the LEO)."""
    r = call(broker, ApiKey.LIST_OFFSETS, 1, {"replica_id": -2, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    return int(p.offset) if p.error_code == 0 else -1


# ----------------------------------------------------------------------------------------------- reassignment
def _list_reassignments(cluster: LocalCluster) -> Dict[Any, Any]:
    r = call(cluster.brokers[controller_id(cluster)], ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
             {"timeout_ms": 10000, "topics": None})
    assert r.error_code == 0
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in r.topics for p in t.partitions}


def test_reassignment_with_kafkas_tool_moves_data(cluster: LocalCluster, tmp_path: Path) -> None:
    """kafka-reassign-partitions (Kafka 3.9.1's own tool, Admin.alterPartitionReassignments) moves a partition
    with data from brokers [0, 1] to [2, 1] while an idempotent producer keeps writing: broker 2 catches up and
    joins the ISR, leadership leaves broker 0, broker 0's replica is deleted, no acknowledged record is lost
    or duplicated, and the partition's replicas end up holding the same records."""
    topic = "moving"
    _create(cluster.bootstrap, _assigned(topic, [[0, 1]]))
    _settled(cluster, topic, 1, 2)
    preload = produce_values(cluster.bootstrap, topic, [f"pre-{i}".encode() * 20 for i in range(3000)], partition=0)
    producer = BackgroundProducer(cluster.bootstrap, topic, 0, prefix="live", rate_per_s=100).start()
    producer.wait_acked(50, 60, "before the move")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    out = run_kafka_tool(tool, ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
                                "--execute"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Successfully started partition reassignment for {topic}-0" in out.stdout, out.stdout
    done = wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: p[0].replicas == (2, 1) and
                                              set(p[0].isr) == {1, 2} and p[0].leader in (1, 2)), 90,
                    "the reassignment to complete on every broker")
    assert done[0].leader == 2  # the first target replica in the ISR
    assert _list_reassignments(cluster) == {}
    verify = run_kafka_tool(tool, ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
                                   "--verify", "--preserve-throttles"])
    assert f"Reassignment of partition {topic}-0 is completed" in verify.stdout, verify.stdout + verify.stderr
    wait_for(lambda: any_dirs_of(cluster.brokers[0], topic) == [], 60, "broker 0's replica deleted")
    assert partition_dirs(cluster.brokers[2], topic) == [f"{topic}-0"]
    with zk_client(cluster) as zk:
        znode = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    assert znode["partitions"] == {"0": [2, 1]}
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas")
    n_before = len(producer.acked)
    producer.wait_acked(n_before + 50, 60, "after the move")
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    acked = preload + producer.acked
    got = _consume_all(cluster.bootstrap, topic, [0], len(acked))
    assert [g[2] for g in got] == [a[2] for a in sorted(acked, key=lambda a: a[1])]
    assert [g[1] for g in got] == sorted(a[1] for a in acked)
    wait_for(lambda: _log_end(cluster.brokers[1], topic, 0) == _log_end(cluster.brokers[2], topic, 0) == len(acked),
             30, "both new replicas at the same log end")


def test_cancel_an_ongoing_reassignment(cluster: LocalCluster) -> None:
    """AlterPartitionReassignments adds a replica on a broker that is paused (SIGSTOP, still registered), so
    the reassignment stays in progress (ListPartitionReassignments shows adding/removing); replicas=null
    cancels it: the original replicas come back, the adding replica is deleted once its broker runs again."""
    topic = "cancelled"
    ctrl = controller_id(cluster)
    paused = next(b for b in (2, 1, 0) if b != ctrl)
    origin = [b for b in (0, 1, 2) if b != paused]
    _create(cluster.bootstrap, _assigned(topic, [origin]))
    _settled(cluster, topic, 1, 2)
    acked = produce_values(cluster.bootstrap, topic, [f"c{i}".encode() for i in range(100)], partition=0)
    target = [origin[0], paused]
    controller = cluster.brokers[ctrl]
    broker = cluster.brokers[paused]
    broker.pause()
    try:
        r = call(controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": target}]}]})
        assert r.error_code == 0
        assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, 0)]
        ongoing = _list_reassignments(cluster)
        assert ongoing == {(topic, 0): ([origin[0], paused, origin[1]], [paused], [origin[1]])}, ongoing
        with zk_client(cluster) as zk:
            znode = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        assert znode["partitions"]["0"] == [origin[0], paused, origin[1]]
        assert znode["adding_replicas"] == {"0": [paused]} and znode["removing_replicas"] == {"0": [origin[1]]}
        r = call(controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": None}]}]})
        assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [(0, 0)]
        assert _list_reassignments(cluster) == {}
    finally:
        broker.resume()
    p = wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: p[0].replicas == tuple(origin)
                                           and set(p[0].isr) == set(origin)), 60, "the original replicas back")
    assert p[0].leader == origin[0]
    with zk_client(cluster) as zk:
        znode = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    assert znode["partitions"] == {"0": origin}
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas")
    wait_for(lambda: any_dirs_of(broker, topic) == [], 60, "the cancelled replica deleted on the paused broker")
    got = _consume_all(cluster.bootstrap, topic, [0], len(acked))
    assert [g[2] for g in got] == [a[2] for a in acked]


def test_reassignment_through_the_legacy_znode(cluster: LocalCluster) -> None:
    """/admin/reassign_partitions (what pre-2.4 tools write): the controller carries it out and deletes the
    znode when done."""
    topic = "legacy"
    _create(cluster.bootstrap, _assigned(topic, [[0, 1], [1, 2]]))
    _settled(cluster, topic, 2, 2)
    acked = produce_values(cluster.bootstrap, topic, [f"l{i}".encode() * 10 for i in range(500)], partition=0)
    with zk_client(cluster) as zk:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 2]}]}).encode(), makepath=True)
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, 90, "the reassignment znode removed")
    p = wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: p[0].replicas == (1, 2)
                                           and set(p[0].isr) == {1, 2}), 60, "partition 0 on [1, 2]")
    assert p[0].leader == 1 and p[1].replicas == (1, 2)
    wait_for(lambda: any_dirs_of(cluster.brokers[0], topic) == [], 60, "broker 0's replica deleted")
    got = _consume_all(cluster.bootstrap, topic, [0], len(acked))
    assert [g[2] for g in got] == [a[2] for a in acked]


# ----------------------------------------------------------------------------------------------- DeleteRecords
def _delete_records(broker: Any, topic: str, offset: int, timeout_ms: int) -> Any:
    r = call(broker, ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": offset}]}], "timeout_ms": timeout_ms})
    return r.topics[0].partitions[0]


def _log_start(broker: Any, topic: str, partition: int) -> int:
    """One replica's log start offset (ListOffsets EARLIEST with the debugging replica id)."""
    r = call(broker, ApiKey.LIST_OFFSETS, 1, {"replica_id": -2, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -2}]}]})
    p = r.topics[0].partitions[0]
    return int(p.offset) if p.error_code == 0 else -1


def _log_start_checkpoint(broker: Any, topic: str) -> Any:
    path = broker.log_dir / "log-start-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        t, p, off = line.split()
        if (t, p) == (topic, "0"):
            return int(off)
    return None


def test_delete_records_waits_for_every_live_replica(cluster: LocalCluster) -> None:
    """DeleteRecords is answered only once every live replica's log start offset passed the offset: with a
    follower paused it times out (REQUEST_TIMED_OUT, the leader's own low watermark moved); once the follower
    runs again it adopts the leader's log start offset and the same request succeeds; every replica's
    log-start-offset-checkpoint then shows the new offset."""
    topic = "trimmed"
    _create(cluster.bootstrap, _assigned(topic, [[0, 1, 2]]))
    _settled(cluster, topic, 1, 3)
    produce_values(cluster.bootstrap, topic, [f"r{i}".encode() for i in range(100)], partition=0)
    leader = cluster.brokers[0]
    ctrl = controller_id(cluster)
    follower = cluster.brokers[next(b for b in (2, 1) if b != ctrl)]
    # Everyone replicated everything first.
    wait_for(lambda: all(_log_end(b, topic, 0) == 100 for b in cluster.brokers), 30, "all replicas at 100")
    ok = _delete_records(leader, topic, 10, 10000)
    assert (ok.error_code, ok.low_watermark) == (0, 10)
    follower.pause()
    try:
        t0 = time.monotonic()
        late = _delete_records(leader, topic, 40, 1500)
        elapsed = time.monotonic() - t0
        assert late.error_code == REQUEST_TIMED_OUT, late
        assert elapsed >= 1.3, elapsed
    finally:
        follower.resume()
    done = _delete_records(leader, topic, 40, 30000)
    assert (done.error_code, done.low_watermark) == (0, 40)
    # A consumer now starts at 40; every replica's log start offset is 40 (followers adopted the leader's).
    got = _consume_all(cluster.bootstrap, topic, [0], 60)
    assert [g[1] for g in got] == list(range(40, 100))
    for b in cluster.brokers:
        wait_for(lambda b=b: _log_start(b, topic, 0) == 40, 30, f"log start offset 40 on broker {b.broker_id}")
    # A follower stopped cleanly has it in its log-start-offset-checkpoint, and restarts with it.
    assert follower.stop() == 0
    assert _log_start_checkpoint(follower, topic) == 40
    follower.start()
    wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: len(p[0].isr) == 3), 60, "the follower back in sync")
    assert _log_start(follower, topic, 0) == 40
    # The confluent-kafka AdminClient (sent to the leader) gets the same answer.
    admin = _admin(cluster.bootstrap)
    res = admin.delete_records([TopicPartition(topic, 0, 70)])
    assert res[TopicPartition(topic, 0, 70)].result(30).low_watermark == 70
    for b in cluster.brokers:
        wait_for(lambda b=b: _log_start(b, topic, 0) == 70, 30, f"log start offset 70 on broker {b.broker_id}")
