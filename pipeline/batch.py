"""The batch job: ``spark.read.format("kafka")`` over offset ranges and from a timestamp, and a report written
back with ``df.write.format("kafka")``.

- :func:`read_offset_range`: ``assign`` with ``startingOffsets``/``endingOffsets`` as JSON (exclusive end);
- :func:`read_since`: ``startingTimestamp`` (every partition) or ``startingOffsetsByTimestamp`` (JSON per partition),
  resolved by the broker's ListOffsets by timestamp;
- :func:`country_report` + :func:`write_report`: totals per country over both input topics, keyed by country,
  with headers, into the report topic.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

from pipeline.events import ORDER, PAGE_VIEW
from pipeline.topics import Topics

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def _reader(spark: "SparkSession", bootstrap: str, options: Optional[Mapping[str, str]] = None) -> object:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in (options or {}).items():
        r = r.option(k, v)
    return r


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """``{"topic": {"0": 12, ...}}``; -2 means earliest and -1 latest, as the connector defines them."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(offsets.items())}})


def read_offset_range(spark: "SparkSession", bootstrap: str, topic: str, starting: Mapping[int, int],
                      ending: Mapping[int, int], options: Optional[Mapping[str, str]] = None) -> "DataFrame":
    """Records of ``topic`` with starting[p] <= offset < ending[p], partitions by ``assign``."""
    parts = sorted(set(starting) | set(ending))
    return (_reader(spark, bootstrap, options).option("assign", json.dumps({topic: parts}))  # type: ignore
            .option("startingOffsets", offsets_json(topic, starting))
            .option("endingOffsets", offsets_json(topic, ending)).load())


def read_since(spark: "SparkSession", bootstrap: str, topic: str, timestamp_ms: int,
               per_partition: Optional[List[int]] = None,
               options: Optional[Mapping[str, str]] = None) -> "DataFrame":
    """Records of ``topic`` from the first offset whose timestamp is >= ``timestamp_ms`` up to the latest.

    Without ``per_partition`` this is ``startingTimestamp``; with it, ``startingOffsetsByTimestamp`` naming each
    partition (what a job does that resumes partitions from different times)."""
    r = _reader(spark, bootstrap, options).option("subscribe", topic)  # type: ignore[attr-defined]
    if per_partition is None:
        r = r.option("startingTimestamp", str(timestamp_ms))
    else:
        r = r.option("startingOffsetsByTimestamp", offsets_json(topic, {p: timestamp_ms for p in per_partition}))
    return r.option("endingOffsets", "latest").load()


def country_report(spark: "SparkSession", bootstrap: str, topics: Topics, users: "DataFrame") -> "DataFrame":
    """Totals per country over everything in the input topics (earliest to latest)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("user_id", StringType()), StructField("amount_cents", LongType())])
    raw = (_reader(spark, bootstrap).option("subscribe", f"{topics.page_views},{topics.orders}")  # type: ignore
           .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("includeHeaders", "true")
           .load())
    event_type = F.expr("element_at(filter(headers, h -> h.key = 'event-type'), 1).value").cast("string")
    events = raw.select(event_type.alias("event_type"), F.from_json(F.col("value").cast("string"), schema).alias("e"))
    return (events.select("event_type", "e.user_id", F.coalesce("e.amount_cents", F.lit(0)).alias("amount_cents"))
            .join(F.broadcast(users), "user_id")
            .groupBy("country")
            .agg(F.sum((F.col("event_type") == PAGE_VIEW).cast("long")).alias("page_views"),
                 F.sum((F.col("event_type") == ORDER).cast("long")).alias("orders"),
                 F.sum(F.when(F.col("event_type") == ORDER, F.col("amount_cents")).otherwise(0)).cast("long")
                 .alias("revenue_cents"))
            .orderBy("country"))


def write_report(report: "DataFrame", bootstrap: str, topic: str,
                 options: Optional[Mapping[str, str]] = None) -> None:
    """``df.write.format("kafka")``: key = country, value = JSON totals, a ``report`` header."""
    from pyspark.sql import functions as F

    out = report.select(F.col("country").alias("key"),
                        F.to_json(F.struct("country", "page_views", "orders", "revenue_cents")).alias("value"),
                        F.array(F.struct(F.lit("report").alias("key"),
                                         F.lit("country-totals").cast("binary").alias("value"))).alias("headers"))
    w = out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for k, v in (options or {}).items():
        w = w.option(k, v)
    w.save()


@dataclass(frozen=True)
class BatchSummary:
    range_records: int
    range_spec: str
    since_records: int
    since_timestamp_ms: int
    report_rows: int


def run_batch(spark: "SparkSession", bootstrap: str, topics: Topics, users: "DataFrame",
              end_offsets: Mapping[int, int], since_ms: int) -> BatchSummary:
    """The batch job of the runner: the middle third of the page views by offset, the page views since
    ``since_ms``, and the country report written to the report topic."""
    starting: Dict[int, int] = {p: e // 3 for p, e in end_offsets.items()}
    ending: Dict[int, int] = {p: 2 * e // 3 for p, e in end_offsets.items()}
    n_range = read_offset_range(spark, bootstrap, topics.page_views, starting, ending).count()
    n_since = read_since(spark, bootstrap, topics.page_views, since_ms,
                         options={"startingOffsetsByTimestampStrategy": "latest"}).count()
    report = country_report(spark, bootstrap, topics, users).cache()
    write_report(report, bootstrap, topics.report)
    rows = report.count()
    report.unpersist()
    return BatchSummary(n_range, f"{offsets_json(topics.page_views, starting)} .. "
                        f"{offsets_json(topics.page_views, ending)}", n_since, since_ms, rows)
