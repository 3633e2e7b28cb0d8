"""Stock-client (confluent-kafka) helpers of the Spark tests: topics, produce with keys/headers/partitions,
read back everything up to the high watermark, and a streaming query run into a memory table."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Header = Tuple[str, Optional[bytes]]


@dataclass(frozen=True)
class Rec:
    """One record as a stock client saw it (or is to write it)."""

    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Header, ...] = ()
    timestamp_ms: int = 0


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 1,
                 config: Optional[Dict[str, str]] = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})], operation_timeout=30)[name].result(40)
    return name


def produce(bootstrap: str, topic: str, records: Sequence[Mapping[str, Any]], extra: Optional[Dict[str, Any]] = None,
            timeout_s: float = 60.0) -> List[Rec]:
    """Produce dicts with value and optional key, headers, partition, timestamp (idempotent, acks=all, default
    batching); every record must be acknowledged. Returns what was acknowledged, in order."""
    conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"}
    conf.update(extra or {})
    p = Producer(conf)
    acked: List[Rec] = []
    errors: List[str] = []

    def delivered(headers: Tuple[Header, ...]) -> Any:
        # a delivery report carries no headers: remember the ones sent
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        return cb

    for r in records:
        kwargs = {k: v for k, v in r.items() if v is not None}
        while True:
            try:
                p.produce(topic, on_delivery=delivered(tuple(r.get("headers") or ())), **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(timeout_s)
    assert left == 0 and not errors, f"produce to {topic}: {left} undelivered, errors {errors[:5]}"
    return acked


def read_all(bootstrap: str, topic: str, timeout_s: float = 60.0,
             extra: Optional[Dict[str, Any]] = None) -> List[Rec]:
    """Every record of every partition from the log start offset up to the high watermark."""
    conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": unique("verify"),
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(extra or {})
    c = Consumer(conf)
    try:
        md = c.list_topics(topic, timeout=15)
        parts = sorted(md.topics[topic].partitions)
        marks = {p: _watermarks(c, topic, p) for p in parts}
        todo = {p for p in parts if marks[p][1] > marks[p][0]}
        c.assign([TopicPartition(topic, p, marks[p][0]) for p in parts])
        out: List[Rec] = []
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        todo.discard(m.partition())
                        continue
                    raise KafkaException(m.error())
                out.append(Rec(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                               m.timestamp()[1]))
                if m.offset() >= marks[m.partition()][1] - 1:
                    todo.discard(m.partition())
        assert not todo, f"could not read {topic} partitions {sorted(todo)} up to {marks} in {timeout_s}s"
        return out
    finally:
        c.close()


def _watermarks(c: Consumer, topic: str, partition: int, timeout_s: float = 30.0) -> Tuple[int, int]:
    """ListOffsets earliest/latest, retried while retriable (a new leader answers OFFSET_NOT_AVAILABLE until its
    high watermark caught up, as Kafka's does)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> Tuple[int, int]:
    """(log start offset, high watermark) of one partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("marks")})
    try:
        return _watermarks(c, topic, partition)
    finally:
        c.close()


def spark_rows(df: Any) -> List[Rec]:
    """A Kafka DataFrame (the connector's schema) as Rec values, in (partition, offset) order."""
    cols = df.columns
    out = []
    for r in df.collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]) \
            if "headers" in cols and r["headers"] is not None else ()
        out.append(Rec(r["partition"], r["offset"], None if r["key"] is None else bytes(r["key"]),
                       None if r["value"] is None else bytes(r["value"]), headers,
                       int(r["timestamp"].timestamp() * 1000) if "timestamp" in cols else 0))
    return sorted(out, key=lambda x: (x.partition, x.offset))


def memory_query(spark: Any, name: str, options: Mapping[str, str], checkpoint: Path,
                 available_now: bool = True, processing_time: str = "1 second", parquet: Optional[Path] = None) -> Any:
    """Start ``readStream.format("kafka")`` with ``options`` into the memory table ``name`` (checkpointed), or into
    Parquet files under ``parquet`` (the file sink can resume from its checkpoint; the memory sink cannot)."""
    r = spark.readStream.format("kafka")
    for k, v in options.items():
        r = r.option(k, v)
    w = r.load().writeStream.queryName(name).outputMode("append").option("checkpointLocation", str(checkpoint))
    w = w.format("parquet").option("path", str(parquet)) if parquet is not None else w.format("memory")
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime=processing_time)
    return w.start()


def table_rows(spark: Any, name: str) -> List[Rec]:
    return spark_rows(spark.table(name))


def parquet_rows(spark: Any, path: Path) -> List[Rec]:
    return spark_rows(spark.read.parquet(str(path)))


def wait_for(pred: Any, timeout_s: float, what: str, query: Any = None) -> Any:
    """Poll ``pred`` until truthy (an exception counts as not yet); fail naming ``what`` (and the query's
    exception if it died)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        try:
            last = pred()
        except Exception as e:  # a broker may be failing over: "not yet"
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last {last!r})")
