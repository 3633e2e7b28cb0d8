"""Transactions with a stock client (confluent-kafka / librdkafka) against a real single broker process.

The broker runs with the single-broker settings of Kafka's quickstart (``transaction.state.log.replication.factor=1``,
``transaction.state.log.min.isr=1``) and Kafka's default 50 ``__transaction_state`` partitions. Checked: a fresh
broker answers ``init_transactions`` with no request of the client timing out (creating ``__transaction_state`` on
the first FindCoordinator); a transaction over 3 partitions commits and a read_committed consumer sees exactly the committed records in
order while aborted ones stay hidden; a second producer with the same ``transactional.id`` fences the first,
whose open transaction is aborted; DescribeTransactions/ListTransactions report the coordinator's state; after
a restart the coordinator reloads ``__transaction_state`` (the next producer continues from the logged epoch); and
a transaction left open by a broker killed with SIGKILL is reloaded as Ongoing and aborted once it times out, so
read_committed consumers never see it.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import call
from tests.harness.txn_init import init_transactions_without_timeouts, stats_producer

#: Kafka's quickstart overrides of the replicated internal-topic defaults
SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "offsets.topic.replication.factor": "1",
                 # look for timed-out transactions often (Kafka: every 10 s)
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
READ_COMMITTED = {"isolation.level": "read_committed"}
READ_UNCOMMITTED = {"isolation.level": "read_uncommitted"}


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("txn")), f"{zookeeper}/txn-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=SINGLE_BROKER) as b:
        yield b


def _topic(b: BrokerProcess, partitions: int = 3) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)
    return name


def _producer(b: BrokerProcess, tid: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000,
                     **extra})


def _values(b: BrokerProcess, topic: str, partitions: int, expected: int, extra: dict,
            timeout_s: float = 20.0) -> List[Tuple[int, bytes]]:
    got = consume_from_start(b.bootstrap, [(topic, p) for p in range(partitions)], expected, timeout_s, extra)
    return [(m.partition(), m.value()) for m in got]


def _describe(b: BrokerProcess, tid: str) -> object:
    return call(b, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def _wait_state(b: BrokerProcess, tid: str, state: str, timeout_s: float = 20.0) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        d = _describe(b, tid)
        if d.error_code == 0 and d.transaction_state == state or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


def _max(key: ApiKey, version: int) -> int:
    lo, hi = proto.API_VERSIONS_RANGE[key]
    return max(lo, min(version, hi))


def test_init_transactions_on_a_fresh_broker_is_answered_without_a_request_timing_out(
        broker: BrokerProcess) -> None:
    tid = f"fresh-{uuid.uuid4().hex[:6]}"
    p, stats = stats_producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
                               "transaction.timeout.ms": 60000})
    init_transactions_without_timeouts(p, stats)
    d = _describe(broker, tid)
    assert (d.error_code, d.transaction_state, d.producer_epoch) == (0, "Empty", 0)
    meta = call(broker, ApiKey.METADATA, 12, {"topics": [{"name": "__transaction_state",
                                                          "topic_id": uuid.UUID(int=0)}],
                                              "allow_auto_topic_creation": False})
    t = meta.topics[0]
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 50)


def test_commit_to_three_partitions_is_seen_by_read_committed_in_order(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    tid = f"commit-{uuid.uuid4().hex[:6]}"
    p = _producer(broker, tid)
    p.init_transactions(30)
    p.begin_transaction()
    sent = [(i % 3, f"c-{i}".encode()) for i in range(30)]
    for part, value in sent:
        p.produce(topic, value=value, partition=part)
    assert p.flush(20) == 0
    d = _describe(broker, tid)
    assert d.transaction_state == "Ongoing"
    assert sorted(t.topic for t in d.topics) == [topic]
    assert sorted(d.topics[0].partitions) == [0, 1, 2]
    p.commit_transaction(30)
    got = _values(broker, topic, 3, len(sent), READ_COMMITTED)
    for part in range(3):
        assert [v for pp, v in got if pp == part] == [v for pp, v in sent if pp == part]
    d = _wait_state(broker, tid, "CompleteCommit")
    assert (d.transaction_state, d.topics) == ("CompleteCommit", [])
    listed = call(broker, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["CompleteCommit"],
                                                         "producer_id_filters": [], "duration_filter": -1})
    assert listed.error_code == 0
    assert (tid, "CompleteCommit") in [(s.transactional_id, s.transaction_state) for s in listed.transaction_states]


def test_aborted_records_stay_hidden_from_read_committed(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    p = _producer(broker, f"abort-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    committed: List[Tuple[int, bytes]] = []
    for round_, commit in enumerate((True, False, True, False, True)):
        p.begin_transaction()
        batch = [(i % 3, f"r{round_}-{i}".encode()) for i in range(9)]
        for part, value in batch:
            p.produce(topic, value=value, partition=part)
        assert p.flush(20) == 0
        if commit:
            p.commit_transaction(30)
            committed.extend(batch)
        else:
            p.abort_transaction(30)
    got = _values(broker, topic, 3, len(committed), READ_COMMITTED)
    for part in range(3):
        assert [v for pp, v in got if pp == part] == [v for pp, v in committed if pp == part]
    # nothing more arrives: the aborted records are not delivered late either
    assert len(_values(broker, topic, 3, len(committed) + 1, READ_COMMITTED, timeout_s=3)) == len(committed)
    # read_uncommitted sees the aborted records too (45 data records in all)
    assert len(_values(broker, topic, 3, 45, READ_UNCOMMITTED)) == 45


def test_a_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    first = _producer(broker, tid)
    first.init_transactions(30)
    first.begin_transaction()
    for i in range(6):
        first.produce(topic, value=f"zombie-{i}".encode(), partition=i % 3)
    assert first.flush(20) == 0
    epoch_before = _describe(broker, tid).producer_epoch

    second = _producer(broker, tid)
    second.init_transactions(30)        # aborts the first producer's open transaction, then bumps the epoch again
    d = _describe(broker, tid)
    assert d.producer_epoch == epoch_before + 2 and d.transaction_state in ("Empty", "CompleteAbort")
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(30)
    err = fenced.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err

    second.begin_transaction()
    for i in range(3):
        second.produce(topic, value=f"live-{i}".encode(), partition=i)
    assert second.flush(20) == 0
    second.commit_transaction(30)
    got = _values(broker, topic, 3, 3, READ_COMMITTED)
    assert sorted(v for _, v in got) == [b"live-0", b"live-1", b"live-2"]
    assert len(_values(broker, topic, 3, 4, READ_COMMITTED, timeout_s=3)) == 3   # the zombie's records: aborted


def test_the_coordinator_reloads_its_state_after_a_restart(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    tid = f"restart-{uuid.uuid4().hex[:6]}"
    p = _producer(broker, tid)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"before-restart", partition=0)
    assert p.flush(20) == 0
    p.commit_transaction(30)
    before = _wait_state(broker, tid, "CompleteCommit")
    del p
    assert broker.stop() == 0
    broker.start()
    after = _wait_state(broker, tid, "CompleteCommit", timeout_s=60)
    assert (after.error_code, after.transaction_state, after.producer_id, after.producer_epoch) == \
        (0, "CompleteCommit", before.producer_id, before.producer_epoch)
    q = _producer(broker, tid)
    q.init_transactions(30)
    d = _describe(broker, tid)
    assert (d.producer_id, d.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
    q.begin_transaction()
    q.produce(topic, value=b"after-restart", partition=0)
    assert q.flush(20) == 0
    q.commit_transaction(30)
    assert [v for _, v in _values(broker, topic, 1, 2, READ_COMMITTED)] == [b"before-restart", b"after-restart"]


def test_a_transaction_open_when_the_broker_is_killed_is_aborted_after_its_timeout(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    tid = f"crash-{uuid.uuid4().hex[:6]}"
    p = _producer(broker, tid, **{"transaction.timeout.ms": 4000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"crash-{i}".encode(), partition=i % 3)
    assert p.flush(20) == 0
    before = _describe(broker, tid)
    assert before.transaction_state == "Ongoing"
    broker.kill()
    del p
    broker.start(timeout=90)
    # reloaded as Ongoing, then aborted by the coordinator under a bumped epoch once its timeout passed
    d = _wait_state(broker, tid, "CompleteAbort", timeout_s=60)
    assert (d.transaction_state, d.producer_id, d.producer_epoch) == \
        ("CompleteAbort", before.producer_id, before.producer_epoch + 1)
    q = _producer(broker, tid)
    q.init_transactions(30)
    q.begin_transaction()
    for i in range(3):
        q.produce(topic, value=f"after-{i}".encode(), partition=i)
    assert q.flush(20) == 0
    q.commit_transaction(30)
    got = _values(broker, topic, 3, 4, READ_COMMITTED, timeout_s=10)
    assert sorted(v for _, v in got) == [b"after-0", b"after-1", b"after-2"]


@pytest.mark.parametrize("step", range(7))
def test_every_version_of_the_transaction_apis_against_the_broker(broker: BrokerProcess, step: int) -> None:
    """One raw transaction per step, each API at version min(step, its newest): FindCoordinator(key_type 1),
    InitProducerId, AddPartitionsToTxn, a transactional Produce, AddOffsetsToTxn, EndTxn, then DescribeTransactions
    and ListTransactions; the step's EndTxn also checks Kafka's error mapping of a fenced epoch by version."""
    topic = _topic(broker, partitions=1)
    tid = f"raw{step}-{uuid.uuid4().hex[:6]}"
    v = {k: _max(k, step) for k in (ApiKey.FIND_COORDINATOR, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
                                    ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.LIST_TRANSACTIONS)}
    v[ApiKey.FIND_COORDINATOR] = max(1, v[ApiKey.FIND_COORDINATOR])        # key_type exists from v1
    deadline = time.monotonic() + 30
    while True:
        fc = call(broker, ApiKey.FIND_COORDINATOR, v[ApiKey.FIND_COORDINATOR],
                  {"key_type": 1, "key": tid, "coordinator_keys": [tid]})
        entry = fc.coordinators[0] if v[ApiKey.FIND_COORDINATOR] >= 4 else fc
        if entry.error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (entry.error_code, entry.node_id) == (0, 0)
    init = call(broker, ApiKey.INIT_PRODUCER_ID, v[ApiKey.INIT_PRODUCER_ID],
                {"transactional_id": tid, "transaction_timeout_ms": 60000})
    assert (init.error_code, init.producer_epoch) == (0, 0)
    pid = init.producer_id
    if v[ApiKey.ADD_PARTITIONS_TO_TXN] >= 4:   # the broker-to-broker form (the client form is v0-3)
        r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, v[ApiKey.ADD_PARTITIONS_TO_TXN], {"transactions": [
            {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "verify_only": False,
             "topics": [{"name": topic, "partitions": [0]}]}]})
        codes = [p.partition_error_code for x in r.results_by_transaction for t in x.topic_results
                 for p in t.results_by_partition]
    else:
        r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, v[ApiKey.ADD_PARTITIONS_TO_TXN], {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        codes = [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]
    assert codes == [0]
    batch = build_batch([(None, f"raw-{step}".encode())], producer_id=pid, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
    produced = call(broker, ApiKey.PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000,
                                                "topic_data": [{"name": topic, "partition_data": [
                                                    {"index": 0, "records": batch}]}]})
    assert produced.responses[0].partition_responses[0].error_code == 0
    r = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, v[ApiKey.ADD_OFFSETS_TO_TXN],
             {"transactional_id": tid, "producer_id": pid, "producer_epoch": 0, "group_id": f"g-{tid}"})
    assert r.error_code == 0
    d = _describe(broker, tid)
    assert d.transaction_state == "Ongoing" and topic in [t.topic for t in d.topics]
    assert "__consumer_offsets" in [t.topic for t in d.topics]
    end = {"transactional_id": tid, "producer_id": pid, "producer_epoch": 1, "committed": True}
    fenced = call(broker, ApiKey.END_TXN, v[ApiKey.END_TXN], end).error_code
    assert fenced == (47 if v[ApiKey.END_TXN] < 2 else 90)                # INVALID_PRODUCER_EPOCH / PRODUCER_FENCED
    assert call(broker, ApiKey.END_TXN, v[ApiKey.END_TXN], {**end, "producer_epoch": 0}).error_code == 0
    assert _wait_state(broker, tid, "CompleteCommit").transaction_state == "CompleteCommit"
    assert [m.value() for m in consume_from_start(broker.bootstrap, [(topic, 0)], 1, 15, READ_COMMITTED)] == \
        [f"raw-{step}".encode()]
    listed = call(broker, ApiKey.LIST_TRANSACTIONS, v[ApiKey.LIST_TRANSACTIONS],
                  {"state_filters": [], "producer_id_filters": [pid], "duration_filter": -1})
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == \
        [(tid, "CompleteCommit")]
