"""``python -m pipeline`` / ``bin/pipeline.sh``: the whole pipeline against a local cluster, or its parts.

    run       start ZooKeeper + brokers under --work-dir (unless --bootstrap names a cluster), create the topics,
              produce the users and the events (live, at --rate) while the streaming job runs, push the watermark
              past every window, send events that are too late, stop the job, run the batch job, print a summary
              and check the aggregates against the events (exit 1 if they differ or a query failed)
    generate  produce users and events (deterministic --seed; --start-ms fixes the time base)
    stream    run the streaming job until SIGTERM/SIGINT (or, with --available-now, until caught up)
    batch     run the batch job

Progress: one line per micro-batch and query (records in/out, lag in offsets, watermark, late rows dropped).
"""
from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple

from confluent_kafka import Consumer, TopicPartition

from pipeline import checkpoint, events, expected, generator
from pipeline.streaming import KAFKA_QUERY, PARQUET_QUERY, SINKS, StreamOptions
from pipeline.topics import Topics, create_topics

if TYPE_CHECKING:  # pragma: no cover
    from pipeline.batch import BatchSummary


def say(msg: str) -> None:
    print(f"pipeline: {msg}", flush=True)


# ------------------------------------------------------------------------------------------------ Kafka helpers
def end_offsets(bootstrap: str, topic_names: Sequence[str], timeout_s: float = 30.0) -> Dict[Tuple[str, int], int]:
    """(topic, partition) -> high watermark, for every partition of the topics."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pipeline-offsets", "enable.auto.commit": False})
    try:
        md = c.list_topics(timeout=timeout_s)
        out: Dict[Tuple[str, int], int] = {}
        for t in topic_names:
            for p in sorted(md.topics[t].partitions):
                out[(t, p)] = c.get_watermark_offsets(TopicPartition(t, p), timeout=timeout_s)[1]
        return out
    finally:
        c.close()


def caught_up(ckpt: Path, targets: Dict[Tuple[str, int], int]) -> bool:
    last = checkpoint.last_committed(ckpt)
    return last is not None and all(last.end_offsets.get(tp, 0) >= off for tp, off in targets.items())


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str,
               failed: Callable[[], Optional[str]] = lambda: None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        err = failed()
        if err:
            raise RuntimeError(f"while waiting for {what}: {err}")
        if pred():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")


# ------------------------------------------------------------------------------------------------ commands
def _stream_options(args: argparse.Namespace, bootstrap: str) -> StreamOptions:
    return StreamOptions(bootstrap=bootstrap, work_dir=Path(args.work_dir), topics=Topics(args.prefix),
                         starting_offsets=args.starting_offsets,
                         max_offsets_per_trigger=args.max_offsets_per_trigger or None,
                         trigger_interval=args.trigger_interval, available_now=getattr(args, "available_now", False),
                         sinks=tuple(args.sinks.split(",")))


def cmd_generate(args: argparse.Namespace) -> int:
    topics = Topics(args.prefix)
    create_topics(args.bootstrap, topics, partitions=args.partitions, replication_factor=args.replication_factor)
    plan = events.generate(args.seed, args.events, start_ms=args.start_ms)
    generator.produce_users(args.bootstrap, plan.users, topics)
    r = generator.produce_events(args.bootstrap, plan.events, topics, rate_per_s=args.rate,
                                 on_progress=lambda n: say(f"generator: {n}/{len(plan.events)} events"))
    say(f"generator: {r.count} events produced ({dict(r.per_topic)}), start {plan.start_ms}")
    if args.push:
        generator.produce_events(args.bootstrap, [events.watermark_push(plan)], topics)
        say("generator: watermark push sent")
    if args.too_late:
        generator.produce_events(args.bootstrap, events.too_late(plan, args.too_late), topics)
        say(f"generator: {args.too_late} too-late events sent")
    return 0


class _Stop:
    def __init__(self) -> None:
        self.flag = threading.Event()

    def install(self) -> None:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda *_: self.flag.set())


def cmd_stream(args: argparse.Namespace) -> int:
    from pipeline import connector, streaming
    from pipeline.progress import ProgressPrinter

    stop = _Stop()
    stop.install()
    opts = _stream_options(args, args.bootstrap)
    spark = connector.spark_session("pipeline-stream")
    printer = ProgressPrinter(lambda line: print(line, flush=True))
    spark.streams.addListener(printer)
    for q in (PARQUET_QUERY, KAFKA_QUERY):
        pending = checkpoint.uncommitted(opts.checkpoint(q))
        last = checkpoint.last_committed(opts.checkpoint(q))
        if last is not None:
            say(f"{q}: resuming after committed batch {last.batch_id}"
                + (f", replaying planned batch {pending.batch_id}" if pending else ""))
    say(f"streaming job: {streaming.describe(opts)}")
    queries = streaming.start(spark, opts)
    rc = 0
    while not stop.flag.is_set():
        if all(not q.isActive for q in queries):
            break
        failed = [q for q in queries if q.exception() is not None]
        if failed:
            say(f"query {failed[0].name} failed: {failed[0].exception()}")
            rc = 1
            break
        stop.flag.wait(0.5)
    for q in queries:
        if q.isActive:
            q.stop()
        if q.exception() is not None:
            rc = 1
    printer.drain(queries)
    for name, t in sorted(printer.totals.items()):
        say(f"{name}: {t.batches} batches, {t.input_rows} records in, {t.output_rows} rows out, "
            f"{t.dropped_by_watermark} late rows dropped")
    spark.stop()
    return rc


def cmd_batch(args: argparse.Namespace) -> int:
    from pipeline import batch, connector, streaming

    topics = Topics(args.prefix)
    spark = connector.spark_session("pipeline-batch")
    users = streaming.users_dimension(spark, args.bootstrap, topics)
    ends = {p: off for (t, p), off in end_offsets(args.bootstrap, [topics.page_views]).items()}
    since = args.since_ms if args.since_ms is not None else int(time.time() * 1000) - 10 * 60_000
    s = batch.run_batch(spark, args.bootstrap, topics, users, ends, since)
    _print_batch(s)
    spark.stop()
    return 0


def _print_batch(s: "BatchSummary") -> None:
    say(f"batch: offset range {s.range_spec}: {s.range_records} page views")
    say(f"batch: since timestamp {s.since_timestamp_ms}: {s.since_records} page views")
    say(f"batch: country report, {s.report_rows} rows written with df.write.format('kafka')")


def cmd_run(args: argparse.Namespace) -> int:
    from tools.cluster import LocalCluster

    work = Path(args.work_dir).resolve()
    # a run regenerates its events: checkpoints, output and the throwaway cluster of an earlier run do not apply
    for stale in ("checkpoints", "window-stats", "cluster"):
        shutil.rmtree(work / stale, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        say(f"starting ZooKeeper and {args.brokers} broker(s) under {work / 'cluster'}")
        cluster = LocalCluster(work / "cluster", args.brokers,
                               overrides={"group.initial.rebalance.delay.ms": "0"})
        cluster.start()
        bootstrap = cluster.bootstrap
    say(f"bootstrap {bootstrap}")
    try:
        return _run(args, bootstrap, work, len(cluster.brokers) if cluster else None)
    finally:
        if cluster is not None:
            say("stopping the cluster")
            cluster.stop()


def _run(args: argparse.Namespace, bootstrap: str, work: Path, brokers: Optional[int]) -> int:
    from pipeline import batch, connector, streaming
    from pipeline.progress import ProgressPrinter

    topics = Topics(args.prefix)
    rf = args.replication_factor or min(3, brokers or 1)
    create_topics(bootstrap, topics, partitions=args.partitions, replication_factor=rf)
    held = sum(end_offsets(bootstrap, [topics.page_views, topics.orders]).values())
    if held:
        say(f"the input topics {topics.page_views} and {topics.orders} already hold {held} records (an earlier run?): "
            "pass another --prefix")
        return 1
    plan = events.generate(args.seed, args.events)
    generator.produce_users(bootstrap, plan.users, topics)
    opts = _stream_options(args, bootstrap)
    opts.work_dir = work
    spark = connector.spark_session("pipeline")
    printer = ProgressPrinter(lambda line: print(line, flush=True))
    spark.streams.addListener(printer)
    say(f"streaming job: {streaming.describe(opts)}")
    queries = streaming.start(spark, opts)

    def failed() -> Optional[str]:
        for q in queries:
            if q.exception() is not None:
                return f"query {q.name} failed: {q.exception()}"
        return None

    t0 = time.monotonic()
    # produced while the queries run (Spark works in its JVM), so the progress lines show the lag shrinking
    generator.produce_events(bootstrap, plan.events, topics, rate_per_s=args.rate,
                             on_progress=lambda n: say(f"generator: {n}/{len(plan.events)} events produced"))
    inputs = [topics.page_views, topics.orders]
    ckpts = [opts.checkpoint(q) for q in (PARQUET_QUERY, KAFKA_QUERY) if q.split("-")[-1] in opts.sinks]
    targets = end_offsets(bootstrap, inputs)
    wait_until(lambda: all(caught_up(c, targets) for c in ckpts), args.timeout, "the queries to catch up", failed)
    say(f"all {len(plan.events)} events processed in {time.monotonic() - t0:.1f}s; pushing the watermark")
    push = events.watermark_push(plan)
    generator.produce_events(bootstrap, [push], topics)
    need = push.event_time_ms - opts.watermark_delay_ms

    def watermark_passed(c: Path) -> bool:
        last = checkpoint.last_committed(c)
        return last is not None and last.watermark_ms >= need

    wait_until(lambda: all(watermark_passed(c) for c in ckpts), args.timeout, "the watermark to pass", failed)
    late = events.too_late(plan, args.too_late)
    generator.produce_events(bootstrap, late, topics)
    targets = end_offsets(bootstrap, inputs)
    wait_until(lambda: all(caught_up(c, targets) for c in ckpts), args.timeout, "the too-late events", failed)
    for q in queries:
        q.stop()
    printer.drain(queries)
    elapsed = time.monotonic() - t0
    err = failed()

    users = streaming.users_dimension(spark, bootstrap, topics)
    ends = {p: off for (t, p), off in end_offsets(bootstrap, [topics.page_views]).items()}
    b = batch.run_batch(spark, bootstrap, topics, users, ends, plan.start_ms + plan.span_ms // 2)
    _print_batch(b)

    want = expected.window_stats(plan.events, plan.users, opts.window_ms)
    ok = err is None
    say("summary:")
    n_late = sum(1 for e in plan.events if e.late)
    views = sum(1 for e in plan.events if e.event_type == events.PAGE_VIEW)
    say(f"  events: {len(plan.events)} ({views} page views, {len(plan.events) - views} orders; {n_late} late "
        f"but within the allowed lateness), {len(late)} too late (after the watermark push), 1 watermark push")
    for name, t in sorted(printer.totals.items()):
        say(f"  {name}: {t.batches} batches, {t.input_rows} records in, {t.output_rows} rows out, "
            f"{t.dropped_by_watermark} late rows dropped by the watermark")
    if "parquet" in opts.sinks:
        got = {(int(r.window_start.timestamp() * 1000), r.country): (r.page_views, r.orders, r.revenue_cents)
               for r in spark.read.parquet(str(opts.parquet_dir)).collect()}
        match = got == want
        ok = ok and match
        say(f"  parquet {opts.parquet_dir}: {len(got)} window rows; equal to the aggregates computed from the "
            f"events: {'yes' if match else 'NO'}")
    if "kafka" in opts.sinks:
        out = batch.read_offset_range(spark, bootstrap, topics.window_stats,
                                      {p: -2 for (t, p) in end_offsets(bootstrap, [topics.window_stats])},
                                      {p: -1 for (t, p) in end_offsets(bootstrap, [topics.window_stats])})
        keys = [r.key for r in out.select(out.key.cast("string").alias("key")).collect()]
        say(f"  kafka {topics.window_stats}: {len(keys)} records, {len(set(keys))} distinct windows")
        ok = ok and len(set(keys)) == len(want)
    say(f"  streaming time {elapsed:.1f}s; result {'OK' if ok else 'FAILED'}" + (f" ({err})" if err else ""))
    spark.stop()
    return 0 if ok else 1


# ------------------------------------------------------------------------------------------------ CLI
def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")

    def common(p: argparse.ArgumentParser, bootstrap_required: bool) -> None:
        p.add_argument("--bootstrap", required=bootstrap_required, help="host:port of a running cluster")
        p.add_argument("--prefix", default="pipeline.", help="topic name prefix (default pipeline.)")

    def stream_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--work-dir", default=".pipeline", help="checkpoints and Parquet output")
        p.add_argument("--starting-offsets", default="earliest")
        p.add_argument("--max-offsets-per-trigger", type=int, default=500)
        p.add_argument("--trigger-interval", default="2 seconds")
        p.add_argument("--sinks", default=",".join(SINKS))

    run = sub.add_parser("run", help="the whole pipeline")
    common(run, False)
    stream_args(run)
    run.add_argument("--brokers", type=int, default=1, help="brokers to start when no --bootstrap is given")
    run.add_argument("--events", type=int, default=3000)
    run.add_argument("--seed", type=int, default=7)
    run.add_argument("--rate", type=float, default=500.0, help="events/s (0: as fast as possible)")
    run.add_argument("--partitions", type=int, default=3)
    run.add_argument("--replication-factor", type=int, default=0, help="default min(3, brokers)")
    run.add_argument("--too-late", type=int, default=20)
    run.add_argument("--timeout", type=float, default=300.0)

    gen = sub.add_parser("generate", help="produce users and events")
    common(gen, True)
    gen.add_argument("--events", type=int, default=3000)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--start-ms", type=int, default=None)
    gen.add_argument("--rate", type=float, default=0.0)
    gen.add_argument("--partitions", type=int, default=3)
    gen.add_argument("--replication-factor", type=int, default=1)
    gen.add_argument("--push", action="store_true", help="then the watermark push")
    gen.add_argument("--too-late", type=int, default=0, help="then this many too-late events")

    st = sub.add_parser("stream", help="the streaming job until SIGTERM")
    common(st, True)
    stream_args(st)
    st.add_argument("--available-now", action="store_true", help="Trigger.AvailableNow: stop when caught up")

    bt = sub.add_parser("batch", help="the batch job")
    common(bt, True)
    bt.add_argument("--since-ms", type=int, default=None)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from pipeline.connector import ConnectorJarsMissing

    args = parser().parse_args(argv)
    if args.command is None:
        args = parser().parse_args(["run", *(argv or [])])
    try:
        return {"run": cmd_run, "generate": cmd_generate, "stream": cmd_stream, "batch": cmd_batch}[args.command](args)
    except ConnectorJarsMissing as e:
        print(f"pipeline: {e}", file=sys.stderr)
        return 2
