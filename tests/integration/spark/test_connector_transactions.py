"""Spark's Kafka connector over a topic written by a transactional producer (confluent-kafka): one committed
transaction, one aborted, one committed, so the partition holds three control records (transaction markers).

- kafka.isolation.level=read_committed (batch and streaming) returns exactly the committed records;
- the default read_uncommitted returns every data record, and the markers are offset gaps the connector reads
  across without reporting data loss (failOnDataLoss=true).

These need the broker's transaction coordinator (InitProducerId with a transactional.id, AddPartitionsToTxn,
EndTxn, WriteTxnMarkers); they fail, not skip, while it is missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Tuple

from confluent_kafka import Producer

from tests.harness.broker_process import BrokerProcess
from tests.integration.spark.kafka_io import create_topic, memory_query, spark_rows, table_rows, unique

COMMITTED_1 = [f"c{i}".encode() for i in range(50)]
ABORTED = [f"a{i}".encode() for i in range(30)]
COMMITTED_2 = [f"c{i}".encode() for i in range(50, 100)]
#: data offsets: markers sit at 50 (commit), 81 (abort) and 132 (commit)
DATA_OFFSETS = [*range(0, 50), *range(51, 81), *range(82, 132)]


def _transactions(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("spark-txn"),
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    txns: List[Tuple[List[bytes], bool]] = [(COMMITTED_1, True), (ABORTED, False), (COMMITTED_2, True)]
    for values, commit in txns:
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v, partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)


def _batch(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_read_committed_skips_aborted_transactions(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    t = create_topic(broker.bootstrap, unique("txn-rc"))
    _transactions(broker.bootstrap, t)
    got = spark_rows(_batch(spark, broker, t, **{"kafka.isolation.level": "read_committed"}))
    assert [r.value for r in got] == COMMITTED_1 + COMMITTED_2
    assert [r.offset for r in got] == [*range(0, 50), *range(82, 132)]

    name = unique("txn_rc").replace("-", "_")
    q = memory_query(spark, name, {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": t,
                                   "startingOffsets": "earliest", "kafka.isolation.level": "read_committed",
                                   "maxOffsetsPerTrigger": "40"}, tmp_path / "ckpt")
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert [r.value for r in table_rows(spark, name)] == COMMITTED_1 + COMMITTED_2


def test_transaction_markers_are_offset_gaps(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    t = create_topic(broker.bootstrap, unique("txn-ru"))
    _transactions(broker.bootstrap, t)
    got = spark_rows(_batch(spark, broker, t))
    assert [r.value for r in got] == COMMITTED_1 + ABORTED + COMMITTED_2
    assert [r.offset for r in got] == DATA_OFFSETS

    name = unique("txn_ru").replace("-", "_")
    q = memory_query(spark, name, {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": t,
                                   "startingOffsets": "earliest", "failOnDataLoss": "true",
                                   "maxOffsetsPerTrigger": "50"}, tmp_path / "ckpt")
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    rows = table_rows(spark, name)
    assert [(r.offset, r.value) for r in rows] == list(zip(DATA_OFFSETS, COMMITTED_1 + ABORTED + COMMITTED_2))
