"""Transactions on a real 3-broker cluster under faults (broker processes from ``bin/``, the shared ZooKeeper),
with stock clients (confluent-kafka, and the Java client for the timeout scenario).

``__transaction_state`` and the data topics have RF 3 and ``min.insync.replicas`` 2. Each fault scenario picks a
transactional id whose coordinator C is not the controller K, and a data topic of three partitions led by C, K
and the third broker L (explicit replica assignments), so the roles are known:

* (a) the coordinator is killed -9 while the transaction is in PrepareCommit: L is SIGSTOPped so that the marker
  of its partition cannot be written, the producer commits (EndTxn is answered once PrepareCommit is logged), C is
  killed and L resumed; the new coordinator loads PrepareCommit and completes the commit; read_committed then sees
  every record of the transaction once;
* (b) the leader of a data partition is killed -9 before its marker is written (SIGSTOPped first, so the marker is
  still pending when it dies): the marker lands on the partition's new leader and the transaction completes;
* (c) a transaction left open past ``transaction.timeout.ms`` is aborted by the coordinator under a bumped epoch;
  the Java producer's next send and its commit fail with InvalidProducerEpochException (abortable), its
  abortTransaction with ProducerFencedException; librdkafka's producer is fenced (fatal); in both cases a new
  producer with the same transactional.id initialises and commits. These answers are exactly those of a real
  Kafka 3.9.1 broker to the same clients (checked by running the same scenarios against it).

The broker killed mid-transaction on a single broker is covered by tests/integration/broker/test_transactions.py.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import (
    ApiKey,
    all_brokers_agree,
    call,
    controller_id,
    module_cluster,
    wait_for,
)
from tools.cluster import LocalCluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("compat_java_jars", ROOT / "compat-tests" / "java" / "jars.py")
jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jars)  # type: ignore[union-attr]

TXN_TOPIC = "__transaction_state"
TXN_PARTITIONS = 6
SESSION_MS = 6000
LAG_MS = 1500
OVERRIDES = {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
             "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
             "zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": str(LAG_MS),
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
READ_COMMITTED = {"isolation.level": "read_committed"}
PER_PARTITION = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[LocalCluster]:
    with module_cluster(tmp_path_factory.mktemp("txn-cluster"), zookeeper, 3, OVERRIDES) as c:
        yield c


# ------------------------------------------------------------------------------------------------ helpers
def _live(c: LocalCluster) -> list[Any]:
    return [b for b in c.brokers if b.is_alive()]


def _live_bootstrap(c: LocalCluster) -> str:
    return ",".join(b.bootstrap for b in _live(c))


def _full_isr(c: LocalCluster, topic: str) -> Any:
    return all_brokers_agree(c, topic, lambda ps: all(p.leader >= 0 and len(p.isr) == 3 for p in ps.values()))


def _all_healthy(c: LocalCluster, topics: tuple[str, ...] = ()) -> None:
    """Every broker running, every partition of ``__transaction_state`` (and ``topics``) with all 3 in its ISR."""
    for b in c.brokers:
        if not b.is_alive():
            b.start()
    _coordinator(c, "probe")  # the first FindCoordinator(TRANSACTION) creates __transaction_state
    for t in (TXN_TOPIC, *topics):
        wait_for(lambda t=t: _full_isr(c, t), 90, f"{t} with full ISRs on every broker")


def _coordinator(c: LocalCluster, tid: str) -> int:
    """The broker FindCoordinator(TRANSACTION) names for ``tid`` (first use creates __transaction_state)."""
    def ask() -> Any:
        for b in _live(c):
            r = call(b, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
            if r.error_code == 0:
                return (r.node_id,)
        return None
    return int(wait_for(ask, 60, f"a coordinator for {tid}")[0])


def _describe(c: LocalCluster, tid: str) -> Any:
    b = c.broker(_coordinator(c, tid))
    return call(b, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def _describe_once(c: LocalCluster, tid: str) -> Any:
    """DescribeTransactions at the coordinator a live broker names now (None while none is named)."""
    for b in _live(c):
        r = call(b, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
        if r.error_code == 0:
            return call(c.broker(r.node_id), ApiKey.DESCRIBE_TRANSACTIONS, 0,
                        {"transactional_ids": [tid]}).transaction_states[0]
    return None


def _wait_state(c: LocalCluster, tid: str, state: str, timeout_s: float) -> Any:
    def check() -> Any:
        d = _describe_once(c, tid)
        return d if d is not None and d.error_code == 0 and d.transaction_state == state else None
    return wait_for(check, timeout_s, f"{tid} in {state}", interval_s=0.2,
                    detail=lambda: _outputs_tail(c))


def _outputs_tail(c: LocalCluster) -> str:
    return "\n".join(f"--- broker {b.broker_id}:\n{b.output()[-3000:]}" for b in c.brokers)


def _roles(c: LocalCluster, tag: str) -> tuple[str, int, int, int]:
    """(transactional id, coordinator C, controller K, third broker L) with C != K."""
    _all_healthy(c)
    k = controller_id(c)
    for n in range(50):
        tid = f"{tag}-{uuid.uuid4().hex[:6]}-{n}"
        coord = _coordinator(c, tid)
        if coord != k:
            third = next(b for b in range(3) if b not in (coord, k))
            return tid, coord, k, third
    raise AssertionError("no transactional id found whose coordinator is not the controller")


def _topic(c: LocalCluster, leaders: list[int]) -> str:
    """A topic whose partition i is led by ``leaders[i]`` (RF 3, min.insync.replicas 2)."""
    name = f"txn-{uuid.uuid4().hex[:8]}"
    assignment = [[lead] + [b for b in range(3) if b != lead] for lead in leaders]
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=len(leaders), replica_assignment=assignment, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[name].result(40)
    def online() -> Any:
        ps = _full_isr(c, name)
        return ps and [ps[i].leader for i in range(len(leaders))] == leaders
    wait_for(online, 60, f"{name} online with its assigned leaders")
    return name


def _open_transaction(c: LocalCluster, tid: str, topic: str) -> tuple[Producer, dict[int, list[bytes]]]:
    """A confluent-kafka producer with an Ongoing transaction of PER_PARTITION records in each of 3 partitions."""
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 120000,
                  "message.timeout.ms": 60000})
    p.init_transactions(60)
    p.begin_transaction()
    sent: dict[int, list[bytes]] = {i: [f"{tid}-p{i}-{j}".encode() for j in range(PER_PARTITION)] for i in range(3)}
    for part, values in sent.items():
        for v in values:
            p.produce(topic, value=v, partition=part)
    assert p.flush(30) == 0
    d = _describe(c, tid)
    assert d.transaction_state == "Ongoing" and sorted(d.topics[0].partitions) == [0, 1, 2], d
    return p, sent


def _pending_partitions(c: LocalCluster, tid: str, coordinator: int) -> tuple[str, list[int]]:
    d = call(c.broker(coordinator), ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]
    return d.transaction_state, sorted(p for t in d.topics for p in t.partitions)


def _wait_pending_only(c: LocalCluster, tid: str, coordinator: int, partition: int) -> tuple[str, list[int]]:
    """Wait until the transaction waits for the marker of ``partition`` alone; (state, pending partitions)."""
    def check() -> Any:
        state = _pending_partitions(c, tid, coordinator)
        return state if state[1] == [partition] else None
    return wait_for(check, 10, f"the transaction waiting for the marker of partition {partition} only")  # type: ignore


def _assert_committed(c: LocalCluster, topic: str, sent: dict[int, list[bytes]]) -> None:
    """read_committed sees exactly the transaction's records, each once, in order (and nothing more arrives)."""
    total = sum(len(v) for v in sent.values())
    got = consume_from_start(_live_bootstrap(c), [(topic, i) for i in range(3)], total + 1, 20, READ_COMMITTED)
    by_part = {i: [m.value() for m in got if m.partition() == i] for i in range(3)}
    assert by_part == sent, f"read_committed saw {by_part}"


def _resume(c: LocalCluster, broker_id: int) -> None:
    b = c.broker(broker_id)
    if b.is_alive():
        b.resume()


# ------------------------------------------------------------------------------------------------ (a)
def test_coordinator_killed_in_prepare_commit_the_new_one_completes_it(cluster: LocalCluster) -> None:
    c = cluster
    tid, coord, ctrl, third = _roles(c, "kill-coord")
    topic = _topic(c, [coord, ctrl, third])
    producer, sent = _open_transaction(c, tid, topic)
    c.broker(third).pause()  # the marker of partition 2 (led by `third`) cannot be written
    try:
        t0 = time.monotonic()
        producer.commit_transaction(60)  # answered once PrepareCommit is logged (after `third` leaves the ISR)
        committed_in = time.monotonic() - t0
        state = _wait_pending_only(c, tid, coord, 2)
        assert state[0] == "PrepareCommit", state
        logged = {b.broker_id: len(b.output()) for b in c.brokers}
        c.broker(coord).kill()
    finally:
        _resume(c, third)
    t_kill = time.monotonic()
    # the new coordinator (elected once the killed one's session expires) loads PrepareCommit and finishes it
    d = _wait_state(c, tid, "CompleteCommit", SESSION_MS / 1000 + 60)
    completed_in = time.monotonic() - t_kill
    new_coord = _coordinator(c, tid)
    assert new_coord != coord and d.topics == [], d
    loaded = c.broker(new_coord).output()[logged[new_coord]:]
    assert re.search(r"; [1-9][0-9]* transactions resume sending markers", loaded), \
        f"broker {new_coord} did not resume the markers of a loaded PrepareCommit:\n{loaded[-4000:]}"
    _assert_committed(c, topic, sent)
    print(f"\ncommit answered in {committed_in:.1f}s with broker {third} stopped; coordinator {coord} killed in "
          f"PrepareCommit; broker {new_coord} completed the commit {completed_in:.1f}s after the kill")
    c.broker(coord).start()
    _all_healthy(c, (topic,))
    _assert_committed(c, topic, sent)


# ------------------------------------------------------------------------------------------------ (b)
def test_leader_killed_before_its_marker_the_new_leader_gets_it(cluster: LocalCluster) -> None:
    c = cluster
    tid, coord, ctrl, third = _roles(c, "kill-leader")
    topic = _topic(c, [coord, ctrl, third])
    producer, sent = _open_transaction(c, tid, topic)
    c.broker(third).pause()
    try:
        producer.commit_transaction(60)
        state = _wait_pending_only(c, tid, coord, 2)
        assert state[0] == "PrepareCommit", state
    finally:
        c.broker(third).kill()  # SIGKILL reaches a stopped process: it dies without writing the marker
    t_kill = time.monotonic()
    d = _wait_state(c, tid, "CompleteCommit", SESSION_MS / 1000 + 60)
    completed_in = time.monotonic() - t_kill
    assert d.topics == [], d
    new_leader = all_brokers_agree(c, topic, lambda ps: ps[2].leader in (coord, ctrl), brokers=[coord, ctrl])
    assert new_leader is not None, "partition 2 has no new leader"
    _assert_committed(c, topic, sent)
    print(f"\nleader {third} of partition 2 killed before its marker; new leader {new_leader[2].leader}; "
          f"transaction completed {completed_in:.1f}s after the kill")
    c.broker(third).start()
    _all_healthy(c, (topic,))
    _assert_committed(c, topic, sent)


# ------------------------------------------------------------------------------------------------ (c)
def test_timed_out_transaction_is_aborted_java_producer_as_kafka(cluster: LocalCluster) -> None:
    c = cluster
    _all_healthy(c)
    prefix = f"jt-{uuid.uuid4().hex[:6]}"
    try:
        cmd = jars.java_command("txn-timeout:3000", c.bootstrap, prefix)
    except jars.JavaUnavailable as e:
        pytest.fail(f"Java client unavailable: {e}", pytrace=False)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    steps: dict[str, dict[str, Any]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            ev = json.loads(line)
            steps[ev["step"]] = ev
    why = f"\njava stdout:\n{proc.stdout}\njava stderr (tail):\n{proc.stderr[-3000:]}"
    assert steps.get("done", {}).get("ok") is True, why
    opened, timed_out = steps["open"]["describe"], steps["timedOut"]["describe"]
    assert (opened["state"], opened["partitions"]) == ("Ongoing", 3), why
    # the coordinator aborted it under a bumped epoch
    assert (timed_out["state"], timed_out["producerId"], timed_out["producerEpoch"]) == \
        ("CompleteAbort", opened["producerId"], opened["producerEpoch"] + 1), why
    # Kafka 3.9.1's answers to kafka-clients 4.3.0: abortable epoch errors, then fenced on abort
    assert (steps["afterTimeout"]["sendError"], steps["afterTimeout"]["commitError"]) == \
        ("InvalidProducerEpochException", "InvalidProducerEpochException"), why
    assert (steps["abort"]["error"] or "").startswith("org.apache.kafka.common.errors.ProducerFencedException"), why
    new = steps["newProducer"]["describe"]
    assert new["producerId"] == opened["producerId"] and new["producerEpoch"] == opened["producerEpoch"] + 2, why
    assert steps["readCommitted"]["values"] == {str(p): [f"new-{p}"] for p in range(3)}, why
    assert steps["readUncommitted"]["values"] == {str(p): [f"expired-{p}", f"new-{p}"] for p in range(3)}, why


def test_timed_out_transaction_fences_librdkafka_and_a_new_producer_works(cluster: LocalCluster) -> None:
    c = cluster
    _all_healthy(c)
    tid = f"timeout-{uuid.uuid4().hex[:6]}"
    topic = _topic(c, [0, 1, 2])
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 3000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"expired-{i}".encode(), partition=i)
    assert p.flush(30) == 0
    before = _describe(c, tid)
    d = _wait_state(c, tid, "CompleteAbort", 30)
    assert (d.producer_id, d.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
    p.produce(topic, value=b"late", partition=0)
    # as against Kafka 3.9.1: INVALID_PRODUCER_EPOCH on the produce is fatal fencing for librdkafka, raised by the
    # flush that waits for it and by every transactional call after it
    with pytest.raises(KafkaException) as on_flush:
        p.flush(30)
    with pytest.raises(KafkaException) as on_commit:
        p.commit_transaction(30)
    for raised in (on_flush, on_commit):
        err = raised.value.args[0]
        assert err.fatal() and err.code() == KafkaError._FENCED, err
    q = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid})
    q.init_transactions(60)
    q.begin_transaction()
    for i in range(3):
        q.produce(topic, value=f"new-{i}".encode(), partition=i)
    q.commit_transaction(60)
    _assert_committed(c, topic, {i: [f"new-{i}".encode()] for i in range(3)})
