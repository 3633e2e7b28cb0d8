"""Spark's Kafka connector, batch side (spark.read / df.write format "kafka"), against one broker process.

Each test produces with confluent-kafka (default batching), reads with the connector and compares with what the
broker acknowledged: subscribe / subscribePattern / assign, offset ranges as JSON, timestamps, minPartitions,
headers, df.write.format("kafka") (topic and partition columns), a compacted topic with offset gaps, and batches
compressed by Apache Kafka's own Java producer (each codec).
"""
from __future__ import annotations

import json
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

from pipeline import batch
from tests.harness.broker_process import BrokerProcess
from tests.harness.kafka import kafka_classpath
from tests.integration.spark.kafka_io import (
    create_topic,
    memory_query,
    produce,
    read_all,
    spark_rows,
    table_rows,
    unique,
    wait_for,
    watermarks,
)


def _read(spark: Any, broker: BrokerProcess, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_subscribe_pattern_and_assign(spark: Any, broker: BrokerProcess) -> None:
    base = unique("sub")
    a = create_topic(broker.bootstrap, f"{base}.a", partitions=3)
    b = create_topic(broker.bootstrap, f"{base}.b", partitions=1)
    create_topic(broker.bootstrap, f"{base}-other", partitions=1)
    acked_a = produce(broker.bootstrap, a, [{"key": f"k{i % 11}".encode(), "value": f"a{i}".encode()}
                                            for i in range(300)])
    acked_b = produce(broker.bootstrap, b, [{"value": f"b{i}".encode()} for i in range(50)])
    produce(broker.bootstrap, f"{base}-other", [{"value": b"not matched"}])

    got = spark_rows(_read(spark, broker, subscribe=a))
    assert [(r.partition, r.offset, r.key, r.value) for r in got] == sorted(
        (r.partition, r.offset, r.key, r.value) for r in acked_a)

    both = _read(spark, broker, subscribePattern=f"{base}\\.(a|b)")
    assert sorted(r.topic for r in both.select("topic").distinct().collect()) == [a, b]
    values = sorted(bytes(r.value) for r in both.select("value").collect())
    assert values == sorted([r.value for r in acked_a] + [r.value for r in acked_b])

    assigned = spark_rows(_read(spark, broker, assign=json.dumps({a: [0, 2]})))
    want = sorted((r.partition, r.offset, r.value) for r in acked_a if r.partition in (0, 2))
    assert [(r.partition, r.offset, r.value) for r in assigned] == want and want


def test_offset_range_json_earliest_latest(spark: Any, broker: BrokerProcess) -> None:
    """startingOffsets/endingOffsets as JSON (exact offsets, -2 earliest, -1 latest) through the batch job's
    read_offset_range (assign); the end is exclusive."""
    t = create_topic(broker.bootstrap, unique("range"), partitions=3)
    acked = produce(broker.bootstrap, t, [{"value": f"r{i}".encode(), "partition": i % 3} for i in range(90)])
    got = spark_rows(batch.read_offset_range(spark, broker.bootstrap, t, {0: 10, 1: -2, 2: 5}, {0: 20, 1: -1, 2: 7}))
    want = [r for r in acked if (r.partition == 0 and 10 <= r.offset < 20) or r.partition == 1
            or (r.partition == 2 and 5 <= r.offset < 7)]
    assert [(r.partition, r.offset, r.value) for r in got] == sorted((r.partition, r.offset, r.value) for r in want)
    assert len(got) == 10 + 30 + 2

    everything = spark_rows(_read(spark, broker, subscribe=t, startingOffsets="earliest", endingOffsets="latest"))
    assert len(everything) == 90


def test_by_timestamp(spark: Any, broker: BrokerProcess) -> None:
    """startingTimestamp (all partitions), startingOffsetsByTimestamp (per partition) and endingTimestamp,
    resolved by the broker's ListOffsets by timestamp."""
    t = create_topic(broker.bootstrap, unique("ts"), partitions=2)
    t0 = (int(time.time()) - 3600) * 1000
    acked = produce(broker.bootstrap, t, [{"value": f"t{i}".encode(), "partition": i % 2, "timestamp": t0 + i * 1000}
                                          for i in range(100)])
    assert all(r.timestamp_ms == t0 + int(r.value[1:]) * 1000 for r in acked)

    since = spark_rows(batch.read_since(spark, broker.bootstrap, t, t0 + 40_000))
    assert sorted(r.value for r in since) == sorted(r.value for r in acked if r.timestamp_ms >= t0 + 40_000)

    per = spark_rows(_read(spark, broker, subscribe=t,
                           startingOffsetsByTimestamp=json.dumps({t: {"0": t0 + 10_000, "1": t0 + 71_000}})))
    want = [r for r in acked if (r.partition == 0 and r.timestamp_ms >= t0 + 10_000)
            or (r.partition == 1 and r.timestamp_ms >= t0 + 71_000)]
    assert sorted(r.value for r in per) == sorted(r.value for r in want)

    window = spark_rows(_read(spark, broker, subscribe=t, startingTimestamp=str(t0 + 20_000),
                              endingTimestamp=str(t0 + 30_000)))
    assert sorted(r.value for r in window) == sorted(r.value for r in acked
                                                     if t0 + 20_000 <= r.timestamp_ms < t0 + 30_000)


def test_min_partitions_splits_offset_ranges(spark: Any, broker: BrokerProcess) -> None:
    t = create_topic(broker.bootstrap, unique("minp"), partitions=2)
    acked = produce(broker.bootstrap, t, [{"value": f"m{i}".encode(), "partition": i % 2} for i in range(1000)])
    df = _read(spark, broker, subscribe=t, minPartitions="8")
    assert df.rdd.getNumPartitions() >= 8
    got = spark_rows(df)
    assert [(r.partition, r.offset) for r in got] == sorted((r.partition, r.offset) for r in acked)
    assert len({(r.partition, r.offset) for r in got}) == 1000
    # every Spark partition read a distinct, non-empty slice
    sizes = df.rdd.glom().map(len).collect()
    assert len([s for s in sizes if s]) >= 8 and sum(sizes) == 1000


def test_headers_read_and_written(spark: Any, broker: BrokerProcess) -> None:
    """includeHeaders returns each record's headers in order (repeated keys, a null value); df.write.format("kafka")
    writes the headers column back, and a stock consumer sees them."""
    src = create_topic(broker.bootstrap, unique("hdr"))
    dst = create_topic(broker.bootstrap, unique("hdr-out"))
    records: List[Dict[str, Any]] = []
    for i in range(40):
        headers = [("trace", f"t{i}".encode()), ("dup", b"1"), ("dup", b"2")]
        if i % 5 == 0:
            headers.append(("nullable", None))
        records.append({"key": f"k{i}".encode(), "value": f"v{i}".encode(), "headers": headers})
    acked = produce(broker.bootstrap, src, records)
    df = _read(spark, broker, subscribe=src, includeHeaders="true")
    got = spark_rows(df)
    assert [(r.key, r.value, r.headers) for r in got] == [(r.key, r.value, r.headers) for r in acked]
    assert got[0].headers == (("trace", b"t0"), ("dup", b"1"), ("dup", b"2"), ("nullable", None))

    df.selectExpr("key", "value", "headers").write.format("kafka") \
        .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst).save()
    out = read_all(broker.bootstrap, dst)
    assert [(r.key, r.value, r.headers) for r in out] == [(r.key, r.value, r.headers) for r in acked]


def test_batch_write_topic_and_partition_columns(spark: Any, broker: BrokerProcess) -> None:
    """df.write.format("kafka") routes each row by its topic and partition columns; a null key is kept null."""
    t1 = create_topic(broker.bootstrap, unique("w1"), partitions=3)
    t2 = create_topic(broker.bootstrap, unique("w2"), partitions=2)
    rows = [(t1 if i % 2 else t2, (i % 3) if i % 2 else (i % 2), None if i % 7 == 0 else f"k{i}", f"v{i}")
            for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, partition int, key string, value string")
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).save()
    for t in (t1, t2):
        got = read_all(broker.bootstrap, t)
        want = sorted(((p, None if k is None else k.encode(), v.encode()) for tt, p, k, v in rows if tt == t),
                      key=lambda x: x[2])
        assert sorted(((r.partition, r.key, r.value) for r in got), key=lambda x: x[2]) == want


def test_compacted_topic_with_offset_gaps(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    """After the log cleaner compacted a topic, its offsets have gaps; the connector (failOnDataLoss=true, the
    default) reads exactly the surviving records, batch and streaming."""
    t = create_topic(broker.bootstrap, unique("compact"), config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100", "min.compaction.lag.ms": "0"})
    produce(broker.bootstrap, t, [{"key": f"key-{k}".encode(), "value": f"{k}:{rnd}".encode()}
                                  for rnd in range(30) for k in range(20)], extra={"batch.num.messages": 20})
    high = watermarks(broker.bootstrap, t)[1]
    assert high == 600

    def compacted() -> Any:
        recs = read_all(broker.bootstrap, t)
        return recs if len(recs) < 300 else None
    survivors = wait_for(compacted, 90, "the log cleaner to compact the topic")
    offsets = [r.offset for r in survivors]
    assert offsets[-1] == high - 1 and len(offsets) < offsets[-1] + 1, "no offset gaps to read across"
    latest = {}
    for r in survivors:
        latest[r.key] = r.value
    assert latest == {f"key-{k}".encode(): f"{k}:29".encode() for k in range(20)}

    got = spark_rows(_read(spark, broker, subscribe=t))
    assert [(r.offset, r.key, r.value) for r in got] == [(r.offset, r.key, r.value) for r in survivors]

    name = unique("compacted").replace("-", "_")
    q = memory_query(spark, name, {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": t,
                                   "startingOffsets": "earliest", "maxOffsetsPerTrigger": "50"},
                     tmp_path / "ckpt")
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    streamed = table_rows(spark, name)
    assert [(r.offset, r.value) for r in streamed] == [(r.offset, r.value) for r in survivors]


# ------------------------------------------------------------------------------------------------ Java producer
_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _batch_codecs(partition_dir: Path) -> List[tuple]:
    """(base offset, records, codec id) of every batch in the partition's .log segments (v2 batch header)."""
    out = []
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            attributes = struct.unpack_from(">h", data, pos + 21)[0]
            count = struct.unpack_from(">i", data, pos + 57)[0]
            out.append((base, count, attributes & 0x7))
            pos += 12 + length
    return out


def test_java_producer_compressed_batches(spark: Any, broker: BrokerProcess) -> None:
    """Apache Kafka 3.9.1's own console producer (the Java client) writes batches compressed with gzip, snappy,
    lz4 and zstd; the connector decompresses every one and returns every line in order."""
    t = create_topic(broker.bootstrap, unique("javacomp"))
    sent: List[bytes] = []
    for codec in _CODECS.values():
        lines = [f"{codec}-{i}-{'x' * (i % 50)}" for i in range(400)]
        r = subprocess.run(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:/dev/null", "-cp",
             kafka_classpath(), "kafka.tools.ConsoleProducer",
             "--bootstrap-server", broker.bootstrap, "--topic", t,
             "--compression-codec", codec, "--producer-property", "linger.ms=50",
             "--producer-property", "acks=all"],
            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        sent += [x.encode() for x in lines]
    batches = _batch_codecs(broker.log_dir / f"{t}-0")
    assert {_CODECS.get(c) for _, _, c in batches} == set(_CODECS.values()), batches
    assert max(n for _, n, _ in batches) > 1, "the Java producer sent no multi-record batch"

    got = spark_rows(_read(spark, broker, subscribe=t))
    assert [r.value for r in got] == sent
    assert [r.offset for r in got] == list(range(len(sent)))
