"""Leadership across 3 real broker processes: preferred and unclean leader elections (ElectLeaders through
confluent-kafka's AdminClient, raw requests, the ZooKeeper znode, the topic config), automatic preferred-leader
rebalancing, consumers validating their position after a leader change (KIP-320), and an idempotent producer
carried across a controlled leader move and a kill -9 of the leader.

Each test starts its own cluster (they stop and kill brokers).
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Dict, List

from confluent_kafka import Consumer, ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.harness.cluster_ops import (ApiKey, BackgroundProducer, all_brokers_agree, call, controller_id,
                                       partitions, produce_values, zk_client)
from tests.harness.clients import consume_from_start
from tests.integration.cluster.conftest import wait_for
from tools.cluster import LocalCluster

NOT_LEADER_OR_FOLLOWER = 6
NOT_CONTROLLER = 41
INVALID_REPLICATION_FACTOR = 38
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84

ROTATED = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def _create(cluster: LocalCluster, topic: str, assignment: List[List[int]],
            config: Dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment, config=config or {})],
                        operation_timeout=30)[topic].result(40)
    wait_for(lambda: all_brokers_agree(cluster, topic, lambda p: len(p) == len(assignment) and all(
        set(x.isr) == set(x.replicas) and x.leader == x.replicas[0] for x in p.values())), 60,
        f"{topic} created and in sync everywhere")


def _agree(cluster: LocalCluster, topic: str, check: Callable[[Dict[int, Any]], bool], what: str,
           timeout_s: float = 60) -> Dict[int, Any]:
    return wait_for(lambda: all_brokers_agree(cluster, topic, check), timeout_s, what)


def _restart(cluster: LocalCluster, broker_id: int) -> None:
    b = cluster.brokers[broker_id]
    b.start()


def _bounce(cluster: LocalCluster, broker_id: int, topics: List[str]) -> None:
    """Stop a broker with SIGTERM (controlled shutdown: its leaderships move first), start it again and wait
    until it is back in the ISR of every partition of ``topics``."""
    assert cluster.brokers[broker_id].stop() == 0
    for t in topics:
        _agree(cluster, t, lambda p: all(x.leader != broker_id and broker_id not in x.isr for x in p.values()),
               f"{t} led and replicated without broker {broker_id}")
    _restart(cluster, broker_id)
    for t in topics:
        _agree(cluster, t, lambda p: all(set(x.isr) == set(x.replicas) for x in p.values()),
               f"broker {broker_id} back in the ISR of {t}")


def _state_version(cluster: LocalCluster, topic: str, partition: int) -> int:
    """The partition epoch: the version of the partition state znode (every ISR change bumps it)."""
    with zk_client(cluster) as zk:
        return int(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[1].version)


def _elect(admin: AdminClient, kind: ElectionType, tps: List[TopicPartition]) -> Dict[Any, Any]:
    res = admin.elect_leaders(kind, tps).result(60)  # (this confluent-kafka rejects timeout kwargs here)
    def code(e: Any) -> Any:
        return None if e is None else (e.code() if hasattr(e, "code") else e.args[0].code())

    return {(tp.topic, tp.partition): code(e) for tp, e in res.items()}


# ----------------------------------------------------------------------------------------------- preferred
def test_preferred_leader_election(new_cluster: Any) -> None:
    """A broker bounces, its partitions keep the leader they moved to (no auto rebalance); ElectLeaders
    PREFERRED (confluent-kafka's AdminClient, sent to the controller) moves one back, the
    /admin/preferred_replica_election znode another; a non-controller answers NOT_CONTROLLER; electing again
    is ELECTION_NOT_NEEDED."""
    cluster = new_cluster(3, {"auto.leader.rebalance.enable": "false"})
    ctrl = controller_id(cluster)
    bounced = next(b for b in (1, 2, 0) if b != ctrl)
    _create(cluster, "pref", ROTATED)
    _create(cluster, "pref-zk", ROTATED)
    p = bounced  # the partition whose preferred leader is the bounced broker
    before = produce_values(cluster.bootstrap, "pref", [f"x{i}".encode() for i in range(5)], partition=p)
    _bounce(cluster, bounced, ["pref", "pref-zk"])
    for t in ("pref", "pref-zk"):
        now = partitions(cluster.brokers[ctrl], t)
        assert now[p].leader != bounced and now[p].replicas[0] == bounced, now
    epoch_before = partitions(cluster.brokers[ctrl], "pref")[p].leader_epoch
    other = next(b for b in cluster.brokers if b.broker_id != controller_id(cluster))
    r = call(other, ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 10000,
                                              "topic_partitions": [{"topic": "pref", "partitions": [p]}]})
    assert [(x.topic, y.partition_id, y.error_code) for x in r.replica_election_results
            for y in x.partition_result] == [("pref", p, NOT_CONTROLLER)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("pref", p)]) == {("pref", p): None}
    now = _agree(cluster, "pref", lambda x: x[p].leader == bounced, "the preferred leader back on every broker")
    assert now[p].leader_epoch > epoch_before
    assert all(x.leader == x.replicas[0] for x in now.values())
    assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("pref", p)]) == {("pref", p): ELECTION_NOT_NEEDED}
    # pref-zk is still led elsewhere: the legacy znode moves it back, and is deleted when done.
    assert partitions(cluster.brokers[ctrl], "pref-zk")[p].leader != bounced
    with zk_client(cluster) as zk:
        zk.create("/admin/preferred_replica_election", json.dumps(
            {"version": 1, "partitions": [{"topic": "pref-zk", "partition": p}]}).encode(), makepath=True)
        _agree(cluster, "pref-zk", lambda x: x[p].leader == bounced, "the znode election done")
        wait_for(lambda: zk.exists("/admin/preferred_replica_election") is None, 30, "the znode removed")
    # Data still flows through the moved leaders, and the replica that led in between (at an epoch it never
    # appended in) follows again at once: it truncates that epoch away instead of looping on it.
    version = _state_version(cluster, "pref", p)
    acked = before + produce_values(cluster.bootstrap, "pref", [b"a", b"b"], partition=p)
    got = consume_from_start(cluster.bootstrap, [("pref", p)], 7, 30)
    assert [m.value() for m in got] == [a[2] for a in acked]
    wait_for(lambda: all(_leo(b, "pref", p) == 7 for b in cluster.brokers), 10, "every replica at offset 7")
    assert all_brokers_agree(cluster, "pref", lambda x: len(x[p].isr) == 3)
    assert _state_version(cluster, "pref", p) == version, "the ISR changed (a follower fell out and came back)"


def test_auto_leader_rebalance_moves_leadership_back(new_cluster: Any) -> None:
    """auto.leader.rebalance.enable with a 1 s check interval: after a bounce, the returning broker's preferred
    partition is led by it again without any admin request."""
    cluster = new_cluster(3, {"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1",
                              "leader.imbalance.per.broker.percentage": "10"})
    ctrl = controller_id(cluster)
    bounced = next(b for b in (1, 2, 0) if b != ctrl)
    _create(cluster, "rebal", ROTATED)
    assert cluster.brokers[bounced].stop() == 0
    _agree(cluster, "rebal", lambda x: x[bounced].leader != bounced, "leadership moved off the stopped broker")
    _restart(cluster, bounced)
    t0 = time.monotonic()
    now = _agree(cluster, "rebal", lambda x: all(p.leader == p.replicas[0] and len(p.isr) == 3 for p in x.values()),
                 "every partition led by its preferred replica again", 60)
    assert now[bounced].leader == bounced
    print(f"preferred leader back {time.monotonic() - t0:.1f}s after the restart")


# ----------------------------------------------------------------------------------------------- unclean
def test_unclean_leader_election(new_cluster: Any) -> None:
    """Both ISR members of [a, b] partitions die (b first, so the ISR shrinks to [a]; then a); the controller
    stays up. Broker b returns: with unclean.leader.election.enable=false the partitions stay offline (and a
    PREFERRED election fails); ElectLeaders UNCLEAN elects b for one topic, turning unclean.leader.election.enable
    on elects it for the other. Records only a had are gone, those b had are served."""
    cluster = new_cluster(3, {"auto.leader.rebalance.enable": "false", "unclean.leader.election.enable": "false"})
    ctrl = controller_id(cluster)
    a, b = [x for x in (0, 1, 2) if x != ctrl]
    for t in ("unclean-api", "unclean-cfg"):
        _create(cluster, t, [[a, b]])
    first = {t: produce_values(cluster.bootstrap, t, [f"{t}-{i}".encode() for i in range(20)], 0)
             for t in ("unclean-api", "unclean-cfg")}
    for t in first:
        wait_for(lambda t=t: _leo(cluster.brokers[b], t) == 20, 30, f"{t} replicated to broker {b}")
    cluster.brokers[b].kill()
    for t in first:
        _agree(cluster, t, lambda x: x[0].isr == (a,), f"{t}: ISR shrunk to [{a}]")
    for t in first:  # acknowledged by broker a alone
        produce_values(cluster.bootstrap, t, [b"only-on-a"] * 5, 0)
    cluster.brokers[a].kill()
    for t in first:
        _agree(cluster, t, lambda x: x[0].leader == -1, f"{t} offline")
    # One live broker (the controller): RF 2 is refused.
    admin = AdminClient({"bootstrap.servers": cluster.brokers[ctrl].bootstrap})
    fut = admin.create_topics([NewTopic("rf2", 1, 2)], operation_timeout=10)["rf2"]
    try:
        fut.result(30)
        raise AssertionError("RF 2 with 1 live broker was accepted")
    except KafkaException as e:
        assert e.args[0].code() == INVALID_REPLICATION_FACTOR
    cluster.brokers[b].start()
    wait_for(lambda: len(call(cluster.brokers[ctrl], ApiKey.METADATA, 12, {"topics": []}).brokers) == 2, 30,
             f"broker {b} registered again")
    time.sleep(2)  # time the controller would need to elect broker b if it (wrongly) did
    for t in first:
        assert all_brokers_agree(cluster, t, lambda x: x[0].leader == -1), f"{t} got a leader without unclean"
    assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("unclean-api", 0)]) == {
        ("unclean-api", 0): PREFERRED_LEADER_NOT_AVAILABLE}
    assert _elect(admin, ElectionType.UNCLEAN, [TopicPartition("unclean-api", 0)]) == {("unclean-api", 0): None}
    now = _agree(cluster, "unclean-api", lambda x: x[0].leader == b, f"broker {b} elected (unclean, by the admin)")
    assert now[0].isr == (b,)
    # The topic config: turning unclean election on lets the controller elect by itself.
    res = admin.incremental_alter_configs([ConfigResource(
        "topic", "unclean-cfg", incremental_configs=[_set("unclean.leader.election.enable", "true")])])
    for f in res.values():
        f.result(30)
    _agree(cluster, "unclean-cfg", lambda x: x[0].leader == b, f"broker {b} elected (unclean, by the topic config)")
    for t, acked in first.items():
        assert _leo(cluster.brokers[b], t) == 20, t  # the 5 records only broker a had are gone
        got = consume_from_start(cluster.bootstrap, [(t, 0)], 20, 30)
        assert [m.value() for m in got] == [x[2] for x in acked], t
    # The new leader takes writes, after the records it had.
    more = produce_values(cluster.bootstrap, "unclean-api", [b"after"], 0)
    assert more[0][1] == 20


def _set(name: str, value: str) -> Any:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def _leo(broker: Any, topic: str, partition: int = 0) -> int:
    r = call(broker, ApiKey.LIST_OFFSETS, 1, {"replica_id": -2, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    return int(p.offset) if p.error_code == 0 else -1


# ----------------------------------------------------------------------------------------------- KIP-320
def _ofle(broker: Any, topic: str, current: int, epoch: int) -> Any:
    r = call(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
    return r.topics[0].partitions[0]


def _fetch(broker: Any, topic: str, topic_id: Any, offset: int, current: int, last_fetched: int = -1) -> Any:
    r = call(broker, ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "fetch_offset": offset, "last_fetched_epoch": last_fetched,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return r.responses[0].partitions[0]


def test_position_validation_after_a_leader_change(new_cluster: Any) -> None:
    """KIP-320 answers after a leader change (epoch 0 -> 1 at offset 10): OffsetForLeaderEpoch gives the end of
    each epoch, FENCED_LEADER_EPOCH for an older current epoch, UNKNOWN_LEADER_EPOCH for a newer one and
    NOT_LEADER_OR_FOLLOWER from a follower; Fetch v12 and ListOffsets check the current epoch the same way and a
    fetch whose last fetched epoch diverged gets the diverging epoch; a confluent-kafka consumer reading across
    the change sees every record once."""
    cluster = new_cluster(3, {"auto.leader.rebalance.enable": "false"})
    topic = "epochs"
    _create(cluster, topic, [[0, 1, 2]])
    first = produce_values(cluster.bootstrap, topic, [f"e0-{i}".encode() for i in range(10)], 0)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = _drain(consumer, 10)
    assert cluster.brokers[0].stop() == 0  # controlled shutdown: leadership to broker 1, leader epoch 1
    p = _agree(cluster, topic, lambda x: x[0].leader == 1 and x[0].leader_epoch == 1, "broker 1 leads at epoch 1")
    assert p[0].isr == (1, 2)
    second = produce_values(cluster.bootstrap, topic, [f"e1-{i}".encode() for i in range(5)], 0)
    assert [a[1] for a in second] == list(range(10, 15))
    seen += _drain(consumer, 5)
    consumer.close()
    assert seen == [a[2] for a in first + second]
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    r = _ofle(leader, topic, 1, 0)
    assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 10)
    r = _ofle(leader, topic, 1, 1)
    assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 1, 15)
    r = _ofle(leader, topic, -1, 0)  # no current epoch: not checked
    assert (r.error_code, r.end_offset) == (0, 10)
    assert _ofle(leader, topic, 0, 0).error_code == FENCED_LEADER_EPOCH
    assert _ofle(leader, topic, 7, 0).error_code == UNKNOWN_LEADER_EPOCH
    assert _ofle(follower, topic, 1, 0).error_code == NOT_LEADER_OR_FOLLOWER
    tid = call(leader, ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0].topic_id
    assert _fetch(leader, topic, tid, 0, 0).error_code == FENCED_LEADER_EPOCH
    assert _fetch(leader, topic, tid, 0, 7).error_code == UNKNOWN_LEADER_EPOCH
    ok = _fetch(leader, topic, tid, 12, 1, last_fetched=1)
    assert ok.error_code == 0 and ok.high_watermark == 15 and ok.diverging_epoch.epoch == -1
    # A consumer that fetched offsets 10-11 "in epoch 0" (as if it had read from a diverged replica) is told
    # where epoch 0 really ended.
    div = _fetch(leader, topic, tid, 12, 1, last_fetched=0)
    assert div.error_code == 0
    assert (div.diverging_epoch.epoch, div.diverging_epoch.end_offset) == (0, 10)
    lo = call(leader, ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": 0, "timestamp": -1}]}]})
    assert lo.topics[0].partitions[0].error_code == FENCED_LEADER_EPOCH
    lo = call(leader, ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": 1, "timestamp": -1}]}]})
    assert (lo.topics[0].partitions[0].error_code, lo.topics[0].partitions[0].offset,
            lo.topics[0].partitions[0].leader_epoch) == (0, 15, 1)
    # The returning broker truncates nothing, catches up and rejoins.
    _restart(cluster, 0)
    _agree(cluster, topic, lambda x: set(x[0].isr) == {0, 1, 2}, "broker 0 back in the ISR")
    assert _leo(cluster.brokers[0], topic) == 15


def _drain(consumer: Consumer, n: int, timeout_s: float = 60) -> List[bytes]:
    out: List[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        for m in consumer.consume(100, 0.5):
            if m.error():
                raise KafkaException(m.error())
            out.append(m.value())
    assert len(out) == n, f"consumed {len(out)} of {n}"
    return out


# ----------------------------------------------------------------------------------------------- idempotence
def _producers(broker: Any, topic: str) -> Dict[int, Any]:
    r = call(broker, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    p = r.topics[0].partitions[0]
    if p.error_code != 0:
        return {}
    return {s.producer_id: (s.producer_epoch, s.last_sequence) for s in p.active_producers}


def test_idempotent_producer_survives_leader_changes(new_cluster: Any) -> None:
    """An idempotent acks=all producer (confluent-kafka) keeps producing while the leader is moved by a
    controlled shutdown and then killed with SIGKILL: no fatal error (OutOfOrderSequence, UnknownProducerId),
    every record acknowledged, read back exactly once in order; every replica knows the producer (producer
    state on followers) with the last sequence."""
    cluster = new_cluster(3, {"auto.leader.rebalance.enable": "false", "min.insync.replicas": "2"})
    topic = "idem"
    _create(cluster, topic, [[0, 1, 2]])
    producer = BackgroundProducer(cluster.bootstrap, topic, 0, prefix="i", rate_per_s=150,
                                  extra={"max.in.flight.requests.per.connection": 5}).start()
    producer.wait_acked(100, 60, "at the start")
    # 1. a controlled move: SIGTERM the leader (its leadership moves before it goes), then bring it back
    assert cluster.brokers[0].stop() == 0
    p = _agree(cluster, topic, lambda x: x[0].leader in (1, 2), "a new leader after the controlled shutdown")
    n = len(producer.acked)
    producer.wait_acked(n + 100, 60, "after the controlled move")
    _restart(cluster, 0)
    _agree(cluster, topic, lambda x: len(x[0].isr) == 3, "broker 0 back in the ISR")
    # 2. a crash: SIGKILL the current leader
    crashed = p[0].leader
    cluster.brokers[crashed].kill()
    _agree(cluster, topic, lambda x: x[0].leader not in (-1, crashed), "a new leader after the kill")
    n = len(producer.acked)
    producer.wait_acked(n + 100, 90, "after the kill")
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    # librdkafka reports a success without an offset (None) only for DUPLICATE_SEQUENCE_NUMBER or an answer of
    # error 0 with base_offset -1, neither of which the broker should send: name such acks instead of failing a sort
    unknown = [a for a in producer.acked if a[1] is None]
    assert not unknown, f"{len(unknown)} records acknowledged without an offset: {unknown[:5]}"
    acked = sorted(producer.acked, key=lambda a: a[1])
    assert len(acked) == producer.sent
    assert [a[2] for a in acked] == [f"i-{i}".encode() for i in range(producer.sent)]
    assert [a[1] for a in acked] == list(range(producer.sent))
    got = consume_from_start(cluster.bootstrap, [(topic, 0)], producer.sent, 90)
    assert [m.value() for m in got] == [a[2] for a in acked]
    # The crashed broker returns; once every replica is at the end, each knows the one producer and its last
    # sequence (the followers built producer state from the replicated batches).
    _restart(cluster, crashed)
    _agree(cluster, topic, lambda x: len(x[0].isr) == 3, "the crashed broker back in the ISR", 90)
    seen: List[Any] = []

    def same_state() -> Any:
        s = {b.broker_id: _producers(b, topic) for b in cluster.brokers}
        seen.append(s)
        return s if len({tuple(sorted(v.items())) for v in s.values()}) == 1 else None

    try:
        states = wait_for(same_state, 30, "the same producer state on every replica")
    except AssertionError:
        raise AssertionError(f"producer states differ: {seen[-1]} (sent {producer.sent})") from None
    (state,) = {tuple(sorted(v.items())) for v in states.values()}
    assert len(state) == 1, state
    (_pid, (epoch, last_seq)) = state[0]
    assert epoch == 0 and last_seq == producer.sent - 1
