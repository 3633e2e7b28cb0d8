"""Spark's Kafka connector, streaming side (spark.readStream.format("kafka")), against one broker process.

Each path has its own assertion: failOnDataLoss=true fails with the connector's data-loss error once DeleteRecords
or retention removed offsets the query had not read, and false skips exactly the removed range; the deprecated
consumer-based offset fetching with groupIdPrefix and kafka.group.id (the groups show up on the broker);
Trigger.AvailableNow with maxOffsetsPerTrigger; Trigger.ProcessingTime from the latest offsets; partitions added
while the query runs.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.harness.broker_process import BrokerProcess
from tests.integration.spark.kafka_io import (
    create_topic,
    memory_query,
    parquet_rows,
    produce,
    table_rows,
    unique,
    wait_for,
    watermarks,
)

DATA_LOSS = "Some data may have been lost because they are not available in Kafka any more"


def _opts(broker: BrokerProcess, topic: str, **extra: str) -> Dict[str, str]:
    o = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest"}
    o.update(extra)
    return o


def _name(prefix: str) -> str:
    return unique(prefix).replace("-", "_")


def _progress(q: Any) -> List[Dict[str, Any]]:
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in q.recentProgress]


def _values(rows: List[Any]) -> List[bytes]:
    return [r.value for r in rows]


def _consume_first_100(spark: Any, broker: BrokerProcess, topic: str, ckpt: Path, out: Path) -> None:
    """Produce d000-d099 and read them with a checkpointed query into Parquet under ``out``."""
    produce(broker.bootstrap, topic, [{"value": f"d{i:03d}".encode(), "partition": 0} for i in range(100)])
    q = memory_query(spark, _name("first"), _opts(broker, topic), ckpt, parquet=out)
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert _values(parquet_rows(spark, out)) == [f"d{i:03d}".encode() for i in range(100)]


def _delete_records(broker: BrokerProcess, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, before)], operation_timeout=30).values():
        f.result(30)
    assert watermarks(broker.bootstrap, topic)[0] == before


def _restart_fails_with_data_loss(spark: Any, broker: BrokerProcess, topic: str, ckpt: Path, out: Path) -> str:
    from pyspark.errors import StreamingQueryException

    q = memory_query(spark, _name("loss"), _opts(broker, topic, failOnDataLoss="true"), ckpt, parquet=out)
    with pytest.raises(StreamingQueryException) as e:
        q.awaitTermination(120)
    return str(e.value)


def test_fail_on_data_loss_true_after_delete_records(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """The query had read offsets 0-99; DeleteRecords moves the log start to 150 before it reads 100-199: the
    restarted query (failOnDataLoss=true) fails with the connector's data-loss error (the fetch at 100 got
    OFFSET_OUT_OF_RANGE)."""
    t = create_topic(broker.bootstrap, unique("loss-true"))
    _consume_first_100(spark, broker, t, tmp_path / "ckpt", tmp_path / "out")
    produce(broker.bootstrap, t, [{"value": f"d{i:03d}".encode(), "partition": 0} for i in range(100, 200)])
    _delete_records(broker, t, 150)
    msg = _restart_fails_with_data_loss(spark, broker, t, tmp_path / "ckpt", tmp_path / "out")
    assert DATA_LOSS in msg, msg
    assert f"Could not read records in offset [100, 200) for topic partition {t}-0" in msg, msg
    assert len(parquet_rows(spark, tmp_path / "out")) == 100, "the failed batch wrote output"


def test_fail_on_data_loss_false_after_delete_records(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """Same deletion with failOnDataLoss=false: the query skips exactly the deleted offsets 100-149 and reads
    150-199, once each."""
    t = create_topic(broker.bootstrap, unique("loss-false"))
    _consume_first_100(spark, broker, t, tmp_path / "ckpt", tmp_path / "out")
    produce(broker.bootstrap, t, [{"value": f"d{i:03d}".encode(), "partition": 0} for i in range(100, 200)])
    _delete_records(broker, t, 150)
    q = memory_query(spark, _name("skip"), _opts(broker, t, failOnDataLoss="false"), tmp_path / "ckpt",
                     parquet=tmp_path / "out")
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    rows = parquet_rows(spark, tmp_path / "out")
    assert [(r.offset, r.value) for r in rows] == [(i, f"d{i:03d}".encode()) for i in [*range(100), *range(150, 200)]]


def test_fail_on_data_loss_after_retention(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """retention.bytes deletes the oldest segments, including offsets the query had not read yet: with
    failOnDataLoss=true the restarted query fails with the data-loss error; restarted again with false it reads
    exactly what retention left, from the new log start offset to the end."""
    t = create_topic(broker.bootstrap, unique("retention"),
                     config={"segment.bytes": "4096", "retention.bytes": "8192", "retention.ms": "-1"})
    _consume_first_100(spark, broker, t, tmp_path / "ckpt", tmp_path / "out")
    pad = "p" * 40
    produce(broker.bootstrap, t, [{"value": f"d{i:03d}{pad}".encode(), "partition": 0} for i in range(100, 300)],
            extra={"batch.num.messages": 20})
    start = wait_for(lambda: watermarks(broker.bootstrap, t)[0] > 100 and watermarks(broker.bootstrap, t)[0], 60,
                     "retention to delete segments past offset 100")
    assert 100 < start < 300
    msg = _restart_fails_with_data_loss(spark, broker, t, tmp_path / "ckpt", tmp_path / "out")
    assert DATA_LOSS in msg, msg

    start = watermarks(broker.bootstrap, t)[0]
    q = memory_query(spark, _name("after_retention"), _opts(broker, t, failOnDataLoss="false"), tmp_path / "ckpt",
                     parquet=tmp_path / "out")
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    rows = parquet_rows(spark, tmp_path / "out")
    assert [(r.offset, r.value) for r in rows[100:]] == [(i, f"d{i:03d}{pad}".encode()) for i in range(start, 300)]


def _groups(broker: BrokerProcess) -> Dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result()
    return {g.group_id: g for g in listed.valid}


def test_consumer_based_offset_fetching_with_group_ids(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true: the driver finds offsets with a KafkaConsumer
    that subscribes (so it joins a consumer group on the broker). With groupIdPrefix the group is
    ``<prefix>-...-driver-0``; with kafka.group.id it is exactly that id. Both queries read everything."""
    t = create_topic(broker.bootstrap, unique("deprecated"), partitions=2)
    produce(broker.bootstrap, t, [{"value": f"g{i}".encode(), "partition": i % 2} for i in range(200)])
    prefix = unique("pipeline-prefix")
    exact = unique("pipeline-exact-group")
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    try:
        n1, n2 = _name("prefix"), _name("exact")
        q1 = memory_query(spark, n1, _opts(broker, t, groupIdPrefix=prefix), tmp_path / "c1", available_now=False)
        q2 = memory_query(spark, n2, _opts(broker, t, **{"kafka.group.id": exact}), tmp_path / "c2",
                          available_now=False)
        try:
            for q, n in ((q1, n1), (q2, n2)):
                wait_for(lambda: len(table_rows(spark, n)) == 200, 90, f"{n} to read 200 records", q)
            produce(broker.bootstrap, t, [{"value": f"h{i}".encode(), "partition": i % 2} for i in range(20)])
            for q, n in ((q1, n1), (q2, n2)):
                wait_for(lambda: len(table_rows(spark, n)) == 220, 90, f"{n} to read the 20 new records", q)
                assert sorted(_values(table_rows(spark, n))) == sorted(
                    [f"g{i}".encode() for i in range(200)] + [f"h{i}".encode() for i in range(20)])
            groups = _groups(broker)
            driver = [g for g in groups if g.startswith(prefix + "-") and "-driver-" in g]
            assert driver, f"no group with prefix {prefix}: {sorted(groups)}"
            assert exact in groups, sorted(groups)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            desc = admin.describe_consumer_groups([exact, driver[0]])
            for gid, f in desc.items():
                d = f.result(15)
                assert len(d.members) == 1, (gid, d)
                assigned = {tp.partition for tp in d.members[0].assignment.topic_partitions if tp.topic == t}
                assert assigned == {0, 1}, (gid, d)
        finally:
            q1.stop()
            q2.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")


def test_available_now_with_max_offsets_per_trigger(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """Trigger.AvailableNow reads what was there at start in several rate-limited micro-batches, then stops."""
    t = create_topic(broker.bootstrap, unique("avail"), partitions=2)
    acked = produce(broker.bootstrap, t, [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(1000)])
    name = _name("avail")
    q = memory_query(spark, name, _opts(broker, t, maxOffsetsPerTrigger="300"), tmp_path / "ckpt")
    assert q.awaitTermination(120) is True
    assert q.exception() is None, q.exception()
    sizes = [p["numInputRows"] for p in _progress(q) if p["numInputRows"]]
    assert sum(sizes) == 1000 and len(sizes) >= 4 and max(sizes) <= 300, sizes
    assert [(r.partition, r.offset) for r in table_rows(spark, name)] == sorted((r.partition, r.offset) for r in acked)


def test_processing_time_trigger_from_latest(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """startingOffsets=latest with Trigger.ProcessingTime(1 s): nothing from before the start, each later wave
    read once, at most one micro-batch per interval."""
    t = create_topic(broker.bootstrap, unique("ptime"), partitions=2)
    produce(broker.bootstrap, t, [{"value": f"old{i}".encode()} for i in range(50)])
    name = _name("ptime")
    q = memory_query(spark, name, _opts(broker, t, startingOffsets="latest"), tmp_path / "ckpt",
                     available_now=False, processing_time="1 second")
    try:
        wait_for(lambda: q.lastProgress is not None, 60, "the first micro-batch", q)
        w1 = produce(broker.bootstrap, t, [{"value": f"w1-{i}".encode()} for i in range(30)])
        wait_for(lambda: len(table_rows(spark, name)) >= 30, 60, "wave 1", q)
        w2 = produce(broker.bootstrap, t, [{"value": f"w2-{i}".encode()} for i in range(30)])
        wait_for(lambda: len(table_rows(spark, name)) >= 60, 60, "wave 2", q)
        rows = table_rows(spark, name)
        assert sorted(_values(rows)) == sorted(r.value for r in w1 + w2)
        # the sink holds a batch's rows before Spark posts that batch's progress: wait for both waves' progress
        wait_for(lambda: len([p for p in _progress(q) if p["numInputRows"]]) >= 2, 30,
                 "the progress of the micro-batches that read the two waves", q)
        progress = _progress(q)
        starts = [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() for p in progress]
        # the trigger fires on the interval's clock ticks: never more than one micro-batch per second
        assert len(starts) >= 2 and starts == sorted(starts), starts
        assert len(starts) - 1 <= starts[-1] - starts[0] + 0.5, starts
        assert len([p for p in progress if p["numInputRows"]]) >= 2
    finally:
        q.stop()


def test_partitions_added_while_running(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """CreatePartitions while a subscribe query runs: the query finds the new partitions and reads them from 0."""
    t = create_topic(broker.bootstrap, unique("grow"), partitions=2)
    first = produce(broker.bootstrap, t, [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(40)])
    name = _name("grow")
    q = memory_query(spark, name, _opts(broker, t), tmp_path / "ckpt", available_now=False)
    try:
        wait_for(lambda: len(table_rows(spark, name)) == 40, 60, "the first 40 records", q)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(t, 4)], operation_timeout=30)[t].result(30)
        later = produce(broker.bootstrap, t, [{"value": f"b{i}".encode(), "partition": i % 4} for i in range(80)])
        assert {r.partition for r in later} == {0, 1, 2, 3}
        wait_for(lambda: len(table_rows(spark, name)) == 120, 90, "the records of the new partitions", q)
        rows = table_rows(spark, name)
        assert [(r.partition, r.offset, r.value) for r in rows] == sorted(
            (r.partition, r.offset, r.value) for r in first + later)
        assert min(r.offset for r in rows if r.partition >= 2) == 0
    finally:
        q.stop()
