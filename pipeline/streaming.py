"""The Structured Streaming job: page views and orders in, per-minute statistics per country out.

Plan (output mode **append**: a window's row is emitted once, when the watermark passes the window's end, and
never changes afterwards; that is what makes the file sink exactly-once and the Kafka output final):

    readStream.format("kafka")  subscribePattern <prefix>(page-views|orders), startingOffsets, includeHeaders,
                                maxOffsetsPerTrigger
      -> event type from the ``event-type`` header, the rest parsed from the JSON value
      -> withWatermark(event_time, 10 minutes)
      -> stream-static join with the users dimension (read once from the compacted users topic) for the country
      -> groupBy(window(event_time, 1 minute), country): page views, orders, revenue
      -> Parquet (checkpointed file sink)            query "window-stats-parquet"
      -> writeStream.format("kafka") keys + headers  query "window-stats-kafka" (acks=all, idempotent producer)

Both queries keep their own checkpoint under ``<work_dir>/checkpoints/``; restarted with the same work dir they
resume after the last committed micro-batch (Spark replays a batch that was planned but not committed, so the
Kafka sink may repeat that one batch's rows; the file sink does not).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from pipeline.events import ORDER, PAGE_VIEW
from pipeline.topics import Topics

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

PARQUET_QUERY = "window-stats-parquet"
KAFKA_QUERY = "window-stats-kafka"
SINKS = ("parquet", "kafka")


@dataclass
class StreamOptions:
    """Everything the job can be told; the defaults are the pipeline's."""

    bootstrap: str
    work_dir: Path
    topics: Topics = field(default_factory=Topics)
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: Optional[int] = 500
    trigger_interval: str = "2 seconds"
    available_now: bool = False
    watermark_delay_ms: int = 10 * 60_000
    window_ms: int = 60_000
    sinks: Sequence[str] = SINKS
    #: extra ``kafka.*`` options for the source (e.g. kafka.isolation.level)
    source_options: Dict[str, str] = field(default_factory=dict)

    def checkpoint(self, query: str) -> Path:
        return Path(self.work_dir) / "checkpoints" / query

    @property
    def parquet_dir(self) -> Path:
        return Path(self.work_dir) / "window-stats"


def users_dimension(spark: "SparkSession", bootstrap: str, topics: Topics) -> "DataFrame":
    """The users topic read once (batch) and frozen: the latest value per key, as (user_id, country, segment)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType
    from pyspark.sql.window import Window

    schema = StructType([StructField("user_id", StringType()), StructField("country", StringType()),
                         StructField("segment", StringType())])
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topics.users).option("startingOffsets", "earliest")
           .option("endingOffsets", "latest").load())
    latest = (raw.withColumn("rn", F.row_number().over(Window.partitionBy("key").orderBy(F.col("offset").desc())))
              .where("rn = 1 AND value IS NOT NULL")
              .select(F.from_json(F.col("value").cast("string"), schema).alias("u")).select("u.*"))
    rows = latest.collect()
    if not rows:
        raise RuntimeError(f"the users dimension ({topics.users}) is empty: run the generator first")
    return spark.createDataFrame(rows, schema)


def read_events(spark: "SparkSession", opts: StreamOptions) -> "DataFrame":
    """The Kafka source and the parsing: one row per event with a timestamp event_time."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("event_id", StringType()), StructField("user_id", StringType()),
                         StructField("event_time_ms", LongType()), StructField("page", StringType()),
                         StructField("order_id", StringType()), StructField("amount_cents", LongType())])
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", opts.bootstrap)
              .option("subscribePattern", opts.topics.input_pattern)
              .option("startingOffsets", opts.starting_offsets).option("includeHeaders", "true"))
    if opts.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(opts.max_offsets_per_trigger))
    for k, v in opts.source_options.items():
        reader = reader.option(k, v)
    raw = reader.load()
    event_type = F.expr("element_at(filter(headers, h -> h.key = 'event-type'), 1).value").cast("string")
    return (raw.select(event_type.alias("event_type"),
                       F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .select("event_type", "e.event_id", "e.user_id",
                    F.timestamp_millis(F.col("e.event_time_ms")).alias("event_time"),
                    F.coalesce(F.col("e.amount_cents"), F.lit(0)).alias("amount_cents")))


def window_stats(events: "DataFrame", users: "DataFrame", opts: StreamOptions) -> "DataFrame":
    """Per (one-minute window, country): page views, orders and revenue in cents, with a watermark."""
    from pyspark.sql import functions as F

    is_view = (F.col("event_type") == PAGE_VIEW).cast("long")
    is_order = (F.col("event_type") == ORDER).cast("long")
    return (events.withWatermark("event_time", f"{opts.watermark_delay_ms} milliseconds")
            .join(F.broadcast(users), "user_id")
            .groupBy(F.window("event_time", f"{opts.window_ms} milliseconds"), "country")
            .agg(F.sum(is_view).alias("page_views"), F.sum(is_order).alias("orders"),
                 F.sum(F.when(F.col("event_type") == ORDER, F.col("amount_cents")).otherwise(0)).cast("long")
                 .alias("revenue_cents"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "country", "page_views", "orders", "revenue_cents"))


def kafka_records(stats: "DataFrame") -> "DataFrame":
    """(key, value, headers) for the Kafka sink: key ``<window start ms>|<country>``, a JSON value, headers."""
    from pyspark.sql import functions as F

    start_ms = F.unix_millis("window_start")
    value = F.to_json(F.struct(start_ms.alias("window_start_ms"), F.unix_millis("window_end").alias("window_end_ms"),
                               "country", "page_views", "orders", "revenue_cents"))
    headers = F.array(
        F.struct(F.lit("window-start-ms").alias("key"), start_ms.cast("string").cast("binary").alias("value")),
        F.struct(F.lit("producer").alias("key"), F.lit("pipeline.streaming").cast("binary").alias("value")))
    return stats.select(F.concat_ws("|", start_ms.cast("string"), "country").alias("key"), value.alias("value"),
                        headers.alias("headers"))


def _trigger(writer: object, opts: StreamOptions) -> object:
    if opts.available_now:
        return writer.trigger(availableNow=True)  # type: ignore[attr-defined]
    return writer.trigger(processingTime=opts.trigger_interval)  # type: ignore[attr-defined]


def start(spark: "SparkSession", opts: StreamOptions, users: Optional["DataFrame"] = None) -> List["StreamingQuery"]:
    """Start the job's queries (one per sink in ``opts.sinks``) and return them running."""
    unknown = set(opts.sinks) - set(SINKS)
    if unknown:
        raise ValueError(f"unknown sinks {sorted(unknown)}; choose from {SINKS}")
    if users is None:
        users = users_dimension(spark, opts.bootstrap, opts.topics)
    stats = window_stats(read_events(spark, opts), users, opts)
    queries = []
    if "parquet" in opts.sinks:
        w = (stats.writeStream.queryName(PARQUET_QUERY).format("parquet").outputMode("append")
             .option("path", str(opts.parquet_dir))
             .option("checkpointLocation", str(opts.checkpoint(PARQUET_QUERY))))
        queries.append(_trigger(w, opts).start())  # type: ignore[attr-defined]
    if "kafka" in opts.sinks:
        w = (kafka_records(stats).writeStream.queryName(KAFKA_QUERY).format("kafka").outputMode("append")
             .option("kafka.bootstrap.servers", opts.bootstrap).option("topic", opts.topics.window_stats)
             .option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
             .option("checkpointLocation", str(opts.checkpoint(KAFKA_QUERY))))
        queries.append(_trigger(w, opts).start())  # type: ignore[attr-defined]
    return queries


def describe(opts: StreamOptions) -> str:
    """One line saying what runs (for the runner's banner)."""
    return json.dumps({"subscribePattern": opts.topics.input_pattern, "startingOffsets": opts.starting_offsets,
                       "maxOffsetsPerTrigger": opts.max_offsets_per_trigger, "includeHeaders": True,
                       "trigger": "availableNow" if opts.available_now else opts.trigger_interval,
                       "watermarkDelayMs": opts.watermark_delay_ms, "windowMs": opts.window_ms, "outputMode": "append",
                       "sinks": list(opts.sinks)})
