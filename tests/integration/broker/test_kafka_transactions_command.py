"""Kafka 3.9.1's own kafka-transactions (TransactionsCommand, KIP-664) against our broker: find-hanging and abort.

A hanging transaction is made the way KIP-664 describes one: a transactional batch the coordinator never heard
of (partition verification off, no AddPartitionsToTxn), written an hour "ago", so its EndTxn sends no marker to
the partition and the LSO stays stuck. Kafka's tool must find it (DescribeProducers, ListTransactions,
DescribeTransactions) and abort it (WriteTxnMarkers from a client, with the producer's coordinator epoch), after
which the LSO moves past it and read_committed readers see the records produced after it.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.clients import consume_from_start
from tests.harness.cluster_ops import call, run_kafka_tool

TOOL = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "transaction.state.log.num.partitions": "4", "offsets.topic.replication.factor": "1",
                 "transaction.partition.verification.enable": "false"}
    with running_broker(Path(tmp_path_factory.mktemp("hanging")), f"{zookeeper}/hang-{uuid.uuid4().hex[:8]}",
                        broker_id=0, overrides=overrides) as b:
        yield b


def _lso(b: BrokerProcess, topic: str) -> int:
    r = call(b, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset


def test_kafka_tool_finds_and_aborts_a_hanging_transaction(broker: BrokerProcess) -> None:
    topic = f"hang-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
    txn_id = f"hanging-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 30
    while call(broker, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn_id]}
               ).coordinators[0].error_code:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    while True:
        r = call(broker, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60000,
                                                      "producer_id": -1, "producer_epoch": -1})
        if r.error_code == 0:
            break
        assert time.monotonic() < deadline, r
        time.sleep(0.2)
    pid, epoch = r.producer_id, r.producer_epoch
    an_hour_ago = int(time.time() * 1000) - 3600_000
    batch = build_batch([(None, b"hanging", [], an_hour_ago)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=0, is_transactional=True)
    r = call(broker, ApiKey.PRODUCE, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 10000,
                                         "topic_data": [{"name": topic, "partition_data": [
                                             {"index": 0, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code == 0
    # the coordinator never heard of the partition: its commit writes no marker there
    r = call(broker, ApiKey.END_TXN, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                         "committed": True})
    assert r.error_code in (0, ErrorCode.INVALID_TXN_STATE), r
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(topic, value=f"after-{i}".encode())
    assert p.flush(20) == 0
    assert _lso(broker, topic) == 0  # stuck at the hanging batch

    found = run_kafka_tool(TOOL, ["--bootstrap-server", broker.bootstrap, "find-hanging", "--broker-id", "0",
                                  "--max-transaction-timeout", "5"])
    assert found.returncode == 0, found.stderr[-2000:]
    rows = [ln.split() for ln in found.stdout.splitlines() if ln.strip()]
    assert rows[0][:3] == ["Topic", "Partition", "ProducerId"], found.stdout
    hanging = [row for row in rows[1:] if row[0] == topic]
    assert len(hanging) == 1 and hanging[0][1:3] == ["0", str(pid)], found.stdout
    start_offset = hanging[0][rows[0].index("StartOffset")] if "StartOffset" in rows[0] else "0"
    assert start_offset == "0", found.stdout

    aborted = run_kafka_tool(TOOL, ["--bootstrap-server", broker.bootstrap, "abort", "--topic", topic,
                                    "--partition", "0", "--start-offset", "0"])
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr[-2000:]
    deadline = time.monotonic() + 20
    while _lso(broker, topic) != 7 and time.monotonic() < deadline:  # hanging + 5 + the ABORT marker
        time.sleep(0.2)
    assert _lso(broker, topic) == 7
    got = consume_from_start(broker.bootstrap, [(topic, 0)], 5, 20, {"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [f"after-{i}".encode() for i in range(5)]
    again = run_kafka_tool(TOOL, ["--bootstrap-server", broker.bootstrap, "find-hanging", "--broker-id", "0",
                                  "--max-transaction-timeout", "5"])
    assert again.returncode == 0 and topic not in again.stdout, again.stdout
