"""The log side of transactions against a real broker process, driven with raw requests as a transaction
coordinator would (InitProducerId for a producer id, transactional Produce, WriteTxnMarkers), read back with
confluent-kafka at both isolation levels, across a kill -9, and checked on disk with Kafka 3.9's DumpLogSegments.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from broker.storage.txn_index import AbortedTxn, read_aborted_txns
from tests.harness.broker_process import BrokerProcess
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import run_kafka_tool
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import RawClient

TXN_ID = "txn-log-test"
OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # the partitions here are in no coordinator's transaction: KIP-890 verification would refuse the produce
    "transaction.partition.verification.enable": "false",
}


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("txnlog")), f"{zookeeper}/txn-{uuid.uuid4().hex[:10]}",
                      overrides=OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        rc = b.stop()
        out = b.output()
        assert "Traceback" not in out, out[-6000:]
        assert rc == 0


def _topic(broker: BrokerProcess) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    return topic


def _call(broker: BrokerProcess, key: ApiKey, version: int, body: Dict[str, Any]) -> Any:
    with RawClient(broker.bootstrap, timeout_s=40) as c:
        return c.request(key, version, body, client_id="txn-log-test")


def _producer_id(broker: BrokerProcess) -> int:
    r = _call(broker, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1})
    assert r.error_code == 0 and r.producer_epoch == 0
    return int(r.producer_id)


def _produce(broker: BrokerProcess, topic: str, values: List[bytes], pid: int = -1, seq: int = -1) -> int:
    """One batch (transactional when ``pid`` is given); its base offset."""
    txn = pid >= 0
    batch = build_batch([(b"k", v, []) for v in values], producer_id=pid, producer_epoch=0 if txn else -1,
                        base_sequence=seq, is_transactional=txn)
    r = _call(broker, ApiKey.PRODUCE, 9, {"transactional_id": TXN_ID if txn else None, "acks": -1,
                                          "timeout_ms": 10000, "topic_data": [
                                              {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return int(p.base_offset)


def _markers(broker: BrokerProcess, version: int, markers: List[tuple]) -> Dict[tuple, int]:
    """WriteTxnMarkers: (producer id, committed, coordinator epoch, [(topic, partition)]) each; {(pid, tp): error}."""
    body = {"markers": [{"producer_id": pid, "producer_epoch": 0, "transaction_result": committed,
                         "coordinator_epoch": coord, "topics": [{"name": t, "partition_indexes": [p]} for t, p in tps]}
                        for pid, committed, coord, tps in markers]}
    r = _call(broker, ApiKey.WRITE_TXN_MARKERS, version, body)
    return {(m.producer_id, (t.name, p.partition_index)): p.error_code for m in r.markers for t in m.topics
            for p in t.partitions}


def _latest(broker: BrokerProcess, topic: str, isolation: int) -> int:
    r = _call(broker, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.offset)


def _fetch(broker: BrokerProcess, topic: str, isolation: int) -> Any:
    r = _call(broker, ApiKey.FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                         "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                                         "topics": [{"topic": topic, "partitions": [
                                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                                         "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0]


def _values(broker: BrokerProcess, topic: str, isolation: str, expected: int) -> List[bytes]:
    """Everything a confluent-kafka consumer reads (asking for one record more than ``expected``)."""
    got = consume_from_start(broker.bootstrap, [(topic, 0)], expected + 1, timeout_s=8,
                             extra={"isolation.level": isolation})
    return [m.value() for m in got]


def _txn_index_files(broker: BrokerProcess, topic: str) -> List[Path]:
    d = broker.log_dir / f"{topic}-0"
    return sorted(d / n for n in os.listdir(d) if n.endswith(".txnindex"))


def test_committed_and_aborted_transactions_through_restarts(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    a, b = _producer_id(broker), _producer_id(broker)
    assert _produce(broker, topic, [b"a1", b"a2"], a, 0) == 0       # 0-1 A (to be aborted)
    assert _produce(broker, topic, [b"b1"], b, 0) == 2               # 2   B (to be committed)
    assert _produce(broker, topic, [b"p1"]) == 3                     # 3   plain
    assert _produce(broker, topic, [b"a3"], a, 2) == 4               # 4   A
    assert _latest(broker, topic, 1) == 0 and _latest(broker, topic, 0) == 5  # the LSO is held by A's start
    producers = _call(broker, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    assert {p.producer_id: p.current_txn_start_offset
            for p in producers.topics[0].partitions[0].active_producers} == {a: 0, b: 2}

    assert _markers(broker, 1, [(a, False, 0, [(topic, 0)])]) == {(a, (topic, 0)): 0}            # 5 ABORT
    assert _latest(broker, topic, 1) == 2                                                         # B is open
    assert _markers(broker, 0, [(b, True, 0, [(topic, 0), (topic, 9)])]) == {                     # 6 COMMIT (v0)
        (b, (topic, 0)): 0, (b, (topic, 9)): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _latest(broker, topic, 1) == _latest(broker, topic, 0) == 7
    # a zombie coordinator and an old producer epoch are refused by the log
    assert _markers(broker, 1, [(b, False, -1, [(topic, 0)])]) == {
        (b, (topic, 0)): ErrorCode.TRANSACTION_COORDINATOR_FENCED}

    assert _values(broker, topic, "read_committed", 2) == [b"b1", b"p1"]
    assert _values(broker, topic, "read_uncommitted", 5) == [b"a1", b"a2", b"b1", b"p1", b"a3"]
    committed, uncommitted = _fetch(broker, topic, 1), _fetch(broker, topic, 0)
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(a, 0)]
    assert committed.last_stable_offset == 7 and uncommitted.aborted_transactions is None

    # the aborted transaction is in the segment's .txnindex, in Kafka's format: (A, 0, marker 5, LSO 2: B open)
    (index,) = _txn_index_files(broker, topic)
    assert index.read_bytes() == AbortedTxn(a, 0, 5, 2).encode()

    # a transaction left open across a crash keeps holding the LSO, and the later marker releases it
    assert _produce(broker, topic, [b"b2"], b, 1) == 7
    assert _latest(broker, topic, 1) == 7
    broker.kill()
    index.unlink()  # lost with the crash: recovery rebuilds it by replaying the markers
    broker.start()
    wait_for(lambda: _latest(broker, topic, 0) == 8, 30, "the partition is served again")
    assert _latest(broker, topic, 1) == 7
    assert index.read_bytes() == AbortedTxn(a, 0, 5, 2).encode()
    assert _values(broker, topic, "read_committed", 2) == [b"b1", b"p1"]
    assert _markers(broker, 1, [(b, True, 0, [(topic, 0)])]) == {(b, (topic, 0)): 0}
    assert _latest(broker, topic, 1) == 9
    assert _values(broker, topic, "read_committed", 3) == [b"b1", b"p1", b"b2"]


def test_kafka_dump_log_segments_reads_our_txn_index_and_markers(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    a, b = _producer_id(broker), _producer_id(broker)
    _produce(broker, topic, [b"x"], a, 0)      # 0 A
    _produce(broker, topic, [b"y"], b, 0)      # 1 B
    assert _markers(broker, 1, [(b, False, 3, [(topic, 0)])]) == {(b, (topic, 0)): 0}   # 2: B aborted, A open
    assert _markers(broker, 1, [(a, False, 3, [(topic, 0)])]) == {(a, (topic, 0)): 0}   # 3: A aborted
    (index,) = _txn_index_files(broker, topic)
    assert read_aborted_txns(str(index)) == [AbortedTxn(b, 1, 2, 0), AbortedTxn(a, 0, 3, 4)]
    out = run_kafka_tool("kafka.tools.DumpLogSegments", ["--files", str(index)])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"version: 0 producerId: {b} firstOffset: 1 lastOffset: 2 lastStableOffset: 0" in out.stdout, out.stdout
    assert f"version: 0 producerId: {a} firstOffset: 0 lastOffset: 3 lastStableOffset: 4" in out.stdout, out.stdout
    log = index.with_suffix(".log")
    dump = run_kafka_tool("kafka.tools.DumpLogSegments", ["--files", str(log), "--print-data-log"])
    assert dump.returncode == 0, dump.stdout + dump.stderr
    assert dump.stdout.count("endTxnMarker: ABORT coordinatorEpoch: 3") == 2, dump.stdout
    assert "isControl: true" in dump.stdout and "isTransactional: true" in dump.stdout


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_every_version(broker: BrokerProcess, version: int) -> None:
    topic = _topic(broker)
    pid = _producer_id(broker)
    _produce(broker, topic, [b"v"], pid, 0)
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    assert _markers(broker, version, [(pid, True, 1, [(topic, 0), (missing, 0)])]) == {
        (pid, (topic, 0)): 0, (pid, (missing, 0)): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _latest(broker, topic, 1) == 2
    assert _values(broker, topic, "read_committed", 1) == [b"v"]
