"""Exactly-once consume-transform-produce with confluent-kafka against a real broker process.

A read_committed consumer in a group feeds a transactional producer that writes the transformed
records and commits the consumer's offsets in the same transaction (send_offsets_to_transaction,
i.e. AddOffsetsToTxn + TxnOffsetCommit); one transaction in the middle is aborted and replayed.
Afterwards a read_committed reader sees every input exactly once, the group's committed offsets are
the input's end offsets, and a read_uncommitted reader also sees the aborted copies. While a
transaction with offsets is open, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import call
from tests.harness.txn_init import init_transactions_without_timeouts, stats_producer
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

#: single-broker overrides of Kafka's replicated internal-topic defaults, as Kafka's quickstart config has them
SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4",
                 "offsets.topic.replication.factor": "1"}
N_INPUT = 300


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("eos")), f"{zookeeper}/eos-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=SINGLE_BROKER) as b:
        yield b


def _topics(b: BrokerProcess, *names: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=30).values():
        f.result(30)


def _produce_input(b: BrokerProcess, topic: str) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(N_INPUT):
        p.produce(topic, key=str(i % 7).encode(), value=f"in-{i}".encode())
    assert p.flush(30) == 0


def _offset_fetch_stable(b: BrokerProcess, group: str, topic: str) -> List[int]:
    r = call(b, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": True,
                                           "topics": [{"name": topic, "partition_indexes": [0, 1, 2]}]})
    return [p.error_code for p in r.topics[0].partitions]


def test_consume_transform_produce_exactly_once(broker: BrokerProcess) -> None:
    src, dst = f"eos-in-{uuid.uuid4().hex[:6]}", f"eos-out-{uuid.uuid4().hex[:6]}"
    group = f"eos-g-{uuid.uuid4().hex[:6]}"
    _topics(broker, src, dst)
    _produce_input(broker, src)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer, stats = stats_producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"eos-{group}",
                                      "transaction.timeout.ms": 60000})
    init_transactions_without_timeouts(producer, stats)
    consumer.subscribe([src])
    processed = 0
    aborted_copies = 0
    transactions = 0
    checked_unstable = False
    deadline = time.monotonic() + 120
    try:
        while processed < N_INPUT and time.monotonic() < deadline:
            msgs = consumer.consume(40, 1.0)
            if not msgs:
                continue
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, key=m.key(), value=b"out-" + m.value(),
                                 headers=[("src-offset", str(m.offset()).encode())])
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if not checked_unstable:
                # the offsets are written but not committed: require_stable fetches must wait
                producer.flush(30)
                codes = _offset_fetch_stable(broker, group, src)
                assert ErrorCode.UNSTABLE_OFFSET_COMMIT in codes, codes
                checked_unstable = True
            if transactions == 2:  # abort one transaction, rewind to the committed offsets, redo
                producer.flush(30)  # abort_transaction drops unsent records; the aborted copies must be in the log
                producer.abort_transaction(30)
                aborted_copies += len(msgs)
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
                transactions += 1
                continue
            producer.commit_transaction(30)
            transactions += 1
            processed += len(msgs)
    finally:
        consumer.close()
    assert processed == N_INPUT, f"processed {processed} of {N_INPUT} input records"
    assert aborted_copies > 0

    committed_out = consume_from_start(broker.bootstrap, [(dst, p) for p in range(3)], N_INPUT, 30,
                                       {"isolation.level": "read_committed"})
    values = sorted(m.value() for m in committed_out)
    assert values == sorted(f"out-in-{i}".encode() for i in range(N_INPUT)), "read_committed saw a wrong set"
    everything = consume_from_start(broker.bootstrap, [(dst, p) for p in range(3)], N_INPUT + aborted_copies, 30,
                                    {"isolation.level": "read_uncommitted"})
    assert len(everything) == N_INPUT + aborted_copies

    # the group's committed offsets (stable now) are the input's end offsets
    assert _offset_fetch_stable(broker, group, src) == [0, 0, 0]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        ends: Dict[int, int] = {p: c.get_watermark_offsets(TopicPartition(src, p), 10)[1] for p in range(3)}
        got: List[Tuple[int, int]] = [(tp.partition, tp.offset) for tp in
                                      c.committed([TopicPartition(src, p) for p in range(3)], 30)]
    finally:
        c.close()
    # a partition the keys never hashed to has nothing to commit (no offset, or 0)
    assert [(p, o) for p, o in got if ends[p] > 0] == [(p, e) for p, e in sorted(ends.items()) if e > 0]
    assert all(o in (-1001, 0) for p, o in got if ends[p] == 0), got


def _find_coordinator(b: BrokerProcess, key_type: int, key: str) -> None:
    """FindCoordinator until answered, as a client asks before it talks to a coordinator: the first ask creates
    the internal topic (``__transaction_state``, ``__consumer_offsets``) and its partitions then load."""
    deadline = time.monotonic() + 30
    while True:
        r = call(b, ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        if r.coordinators[0].error_code == 0:
            return
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def _init_transactional(b: BrokerProcess, txn_id: str) -> Tuple[int, int]:
    deadline = time.monotonic() + 30
    _find_coordinator(b, 1, txn_id)
    while True:
        r = call(b, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60000,
                                                 "producer_id": -1, "producer_epoch": -1})
        if r.error_code == 0:
            return r.producer_id, r.producer_epoch
        assert r.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS), r
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def _produce_txn(b: BrokerProcess, version: int, txn_id: str, topic: str, pid: int, epoch: int, seq: int) -> Any:
    from broker.protocol.records.builder import build_batch
    batch = build_batch([(None, b"unverified")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    r = call(b, ApiKey.PRODUCE, version, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 10000,
                                          "topic_data": [{"name": topic, "partition_data": [
                                              {"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def test_a_partition_not_added_to_the_transaction_is_refused_kip_890(broker: BrokerProcess) -> None:
    """Leader-side verification: a transactional batch for a partition the coordinator does not have in the
    producer's transaction is refused (INVALID_TXN_STATE below Produce v11, TRANSACTION_ABORTABLE at v11) and
    nothing is appended; after AddPartitionsToTxn the same batch is accepted."""
    topic = f"kip890-{uuid.uuid4().hex[:6]}"
    _topics(broker, topic, partitions=1)
    txn_id = f"kip890-{uuid.uuid4().hex[:6]}"
    pid, epoch = _init_transactional(broker, txn_id)
    old = _produce_txn(broker, 10, txn_id, topic, pid, epoch, 0)
    assert (old.error_code, old.error_message) == (ErrorCode.INVALID_TXN_STATE,
                                                  "Partition was not added to the transaction"), old
    new = _produce_txn(broker, 11, txn_id, topic, pid, epoch, 0)
    assert new.error_code == ErrorCode.TRANSACTION_ABORTABLE, new
    assert consume_from_start(broker.bootstrap, [(topic, 0)], 1, 3) == []
    r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    ok = _produce_txn(broker, 11, txn_id, topic, pid, epoch, 0)
    assert (ok.error_code, ok.base_offset) == (0, 0), ok
    r = call(broker, ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                         "committed": True})
    assert r.error_code == 0
    got = consume_from_start(broker.bootstrap, [(topic, 0)], 1, 20, {"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"unverified"]


@pytest.mark.parametrize("version", range(0, 5))
def test_txn_offset_commit_every_version(broker: BrokerProcess, version: int) -> None:
    """TxnOffsetCommit vN inside a transaction: accepted, pending (UNSTABLE for require_stable), then committed."""
    topic = f"toc-{version}-{uuid.uuid4().hex[:6]}"
    _topics(broker, topic, partitions=3)
    txn_id, group = f"toc-{uuid.uuid4().hex[:6]}", f"toc-g-{uuid.uuid4().hex[:6]}"
    pid, epoch = _init_transactional(broker, txn_id)
    r = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn_id, "producer_id": pid,
                                                    "producer_epoch": epoch, "group_id": group})
    assert r.error_code == 0, r
    body: Dict[str, Any] = {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                            "topics": [{"name": topic, "partitions": [
                                {"partition_index": p, "committed_offset": 10 + p, "committed_leader_epoch": -1,
                                 "committed_metadata": f"m{p}"} for p in range(3)]}]}
    if version >= 3:
        body.update(generation_id=-1, member_id="", group_instance_id=None)
    _find_coordinator(broker, 0, group)  # alone in its broker, this test is the first to use a group
    r = call(broker, ApiKey.TXN_OFFSET_COMMIT, version, body)
    assert [p.error_code for p in r.topics[0].partitions] == [0, 0, 0], r
    assert set(_offset_fetch_stable(broker, group, topic)) == {ErrorCode.UNSTABLE_OFFSET_COMMIT}
    r = call(broker, ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                         "committed": True})
    assert r.error_code == 0, r
    deadline = time.monotonic() + 20
    while True:  # the markers are written after EndTxn answers
        r = call(broker, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "require_stable": True,
                                                  "topics": [{"name": topic, "partition_indexes": [0, 1, 2]}]})
        rows = [(p.error_code, p.committed_offset, p.metadata) for p in r.topics[0].partitions]
        if rows == [(0, 10, "m0"), (0, 11, "m1"), (0, 12, "m2")] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert rows == [(0, 10, "m0"), (0, 11, "m1"), (0, 12, "m2")]
