"""The pipeline end to end with Spark's real Kafka connector against a broker process.

``test_streaming_job_exactly_once_across_a_forced_restart``: the generator (pipeline.generator) produces a
deterministic stream of page views and orders, some out of order and some minutes late; the streaming job runs as
``python -m pipeline stream`` in its own process and is SIGKILLed in the middle of a micro-batch of the Kafka-sink
query that emits windows, then restarted on the same checkpoints. The watermark is then pushed past every window and
events older than it are sent (they must be dropped). The aggregates are computed here, in plain Python, from the
generated events, and compared with:

- the Parquet output: exactly those rows, each once (the file sink is exactly-once across the restart);
- the Kafka output: every window present with exactly that value (nothing lost), keys and headers as the job sets
  them; a window may appear twice only if the killed micro-batch emitted it (the Kafka sink is at-least-once and
  Spark replays that batch).

``test_runner_command``: ``bin/pipeline.sh run`` against the same broker prints per-batch progress, runs the batch
job and ends with a summary whose self-check passes.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from confluent_kafka import Consumer, TopicPartition

from pipeline import checkpoint, events, generator
from pipeline.runner import caught_up, end_offsets
from pipeline.streaming import KAFKA_QUERY, PARQUET_QUERY
from pipeline.topics import Topics, create_topics
from tests.harness.broker_process import BrokerProcess
from tests.integration.spark.conftest import FAST_JVM
from tests.integration.spark.kafka_io import read_all

ROOT = Path(__file__).resolve().parents[3]
WATERMARK_DELAY_MS = 10 * 60_000


def expected_windows(plan: events.EventPlan) -> Dict[Tuple[int, str], Tuple[int, int, int]]:
    """(window start ms, country) -> (page views, orders, revenue cents), written out independently of the job."""
    country = {u.user_id: u.country for u in plan.users}
    acc: Dict[Tuple[int, str], List[int]] = defaultdict(lambda: [0, 0, 0])
    for e in plan.events:
        a = acc[(e.event_time_ms // 60_000 * 60_000, country[e.user_id])]
        if e.event_type == "order":
            a[1] += 1
            a[2] += e.amount_cents
        else:
            a[0] += 1
    return {k: (v[0], v[1], v[2]) for k, v in acc.items()}


class StreamProcess:
    """``python -m pipeline stream`` in its own process group, output in a file."""

    def __init__(self, args: List[str], log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PIPELINE_SPARK_CONF=f"spark.driver.extraJavaOptions={FAST_JVM}")
        self.log = log
        self._out = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline", "stream", *args], cwd=str(ROOT), env=env,
                                     stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()

    def terminate(self, timeout_s: float = 90.0) -> int:
        """SIGTERM to the Python process only (as ``kill <pid>``): it stops the queries, then Spark's JVM."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        finally:
            self._out.close()
        return rc


def _wait(pred: Any, timeout_s: float, what: str, proc: StreamProcess, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise AssertionError(f"the streaming job exited while waiting for {what}:\n{proc.output()[-5000:]}")
        got = pred()
        if got:
            return got
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}:\n{proc.output()[-5000:]}")


def _emitting_batch_in_flight(ckpt: Path) -> Optional[checkpoint.BatchOffsets]:
    """A planned, uncommitted batch whose watermark moved (so it emits windows), after two committed ones."""
    pending = checkpoint.uncommitted(ckpt)
    if pending is None or len(checkpoint.committed_batches(ckpt)) < 2:
        return None
    before = checkpoint.read_offsets(ckpt, pending.batch_id - 1)
    return pending if pending.watermark_ms > before.watermark_ms > 0 else None


def _output_end(c: Consumer, topic: str) -> int:
    return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1] for p in range(3))


def _kill_mid_batch(proc: StreamProcess, ckpt: Path, bootstrap: str, out_topic: str, total: int,
                    per_batch: int) -> checkpoint.BatchOffsets:
    """SIGKILL the job during a micro-batch of the Kafka-sink query that emits windows, preferably once some of its
    rows are already in the output topic (SIGSTOP as soon as the topic grows, then SIGKILL if the batch is still
    uncommitted), so the replay writes them again. Among the last two batches it kills without waiting."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4().hex[:6]}"})
    try:
        while True:
            pending = _wait(lambda: _emitting_batch_in_flight(ckpt), 240,
                            "a micro-batch of the Kafka-sink query that emits windows", proc, interval_s=0.01)
            if total - sum(pending.end_offsets.values()) < 2 * per_batch:
                proc.kill()
                return pending
            before = _output_end(c, out_topic)
            while checkpoint.uncommitted(ckpt) == pending:
                if _output_end(c, out_topic) > before:
                    os.killpg(proc.proc.pid, signal.SIGSTOP)
                    if checkpoint.uncommitted(ckpt) == pending:
                        proc.kill()
                        return pending
                    os.killpg(proc.proc.pid, signal.SIGCONT)
                    break
    finally:
        c.close()


def test_streaming_job_exactly_once_across_a_forced_restart(spark: Any, broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    bs = broker.bootstrap
    topics = Topics(f"e2e-{uuid.uuid4().hex[:6]}.")
    create_topics(bs, topics, partitions=3, replication_factor=1)
    plan = events.generate(seed=11, num_events=2000, span_ms=30 * 60_000)
    assert any(e.late for e in plan.events) and any(e.event_type == "order" for e in plan.events)
    generator.produce_users(bs, plan.users, topics)
    generator.produce_events(bs, plan.events, topics)
    want = expected_windows(plan)

    work = tmp_path / "work"
    args = ["--bootstrap", bs, "--prefix", topics.prefix, "--work-dir", str(work), "--max-offsets-per-trigger", "250",
            "--trigger-interval", "1 second"]
    kafka_ckpt, parquet_ckpt = work / "checkpoints" / KAFKA_QUERY, work / "checkpoints" / PARQUET_QUERY

    total = sum(end_offsets(bs, [topics.page_views, topics.orders]).values())
    first = StreamProcess(args, tmp_path / "stream-1.out")
    try:
        killed = _kill_mid_batch(first, kafka_ckpt, bs, topics.window_stats, total, 250)
    finally:
        if first.alive():
            first.kill()
    assert checkpoint.uncommitted(kafka_ckpt) == killed, "the killed batch was committed after all"
    committed_before = checkpoint.last_committed(kafka_ckpt)
    assert committed_before is not None and committed_before.batch_id == killed.batch_id - 1
    prev_watermark = committed_before.watermark_ms

    second = StreamProcess(args, tmp_path / "stream-2.out")
    try:
        ckpts = (kafka_ckpt, parquet_ckpt)
        inputs = [topics.page_views, topics.orders]
        targets = end_offsets(bs, inputs)
        _wait(lambda: all(caught_up(c, targets) for c in ckpts), 240, "both queries to read every event", second)
        push = events.watermark_push(plan)
        generator.produce_events(bs, [push], topics)
        need = push.event_time_ms - WATERMARK_DELAY_MS
        _wait(lambda: all((checkpoint.last_committed(c) or killed).watermark_ms >= need for c in ckpts), 120,
              "the watermark to pass every window", second)
        late = events.too_late(plan, 20)
        generator.produce_events(bs, late, topics)
        targets = end_offsets(bs, inputs)
        _wait(lambda: all(caught_up(c, targets) for c in ckpts), 120, "the too-late events to be read", second)
    finally:
        rc = second.terminate()
    out2 = second.output()
    assert rc == 0, out2[-5000:]
    assert f"{KAFKA_QUERY}: resuming after committed batch {killed.batch_id - 1}, replaying planned batch " \
           f"{killed.batch_id}" in out2, out2[-5000:]
    for q in (KAFKA_QUERY, PARQUET_QUERY):
        total = next(line for line in out2.splitlines() if line.startswith(f"pipeline: {q}: ") and " batches, " in line)
        dropped = int(total.split(", ")[-1].split()[0])
        assert dropped > 0, f"{q} dropped no too-late row: {total}"

    # Parquet: exactly the aggregates, each window once
    rows = spark.read.parquet(str(work / "window-stats")).collect()
    got = [((int(r.window_start.timestamp() * 1000), r.country), (r.page_views, r.orders, r.revenue_cents))
           for r in rows]
    assert len(got) == len({k for k, _ in got}), "a window appears twice in the Parquet output"
    assert dict(got) == want
    assert all(int(r.window_end.timestamp() * 1000) - int(r.window_start.timestamp() * 1000) == 60_000 for r in rows)

    # Kafka: nothing lost, values exact, duplicates only from the replayed batch
    records = read_all(bs, topics.window_stats)
    by_key: Dict[Tuple[int, str], List[Any]] = defaultdict(list)
    for r in records:
        v = json.loads(r.value)  # type: ignore[arg-type]
        k = (v["window_start_ms"], v["country"])
        assert r.key == f"{k[0]}|{k[1]}".encode()
        assert r.headers == (("window-start-ms", str(k[0]).encode()), ("producer", b"pipeline.streaming"))
        by_key[k].append((v["page_views"], v["orders"], v["revenue_cents"]))
    assert set(by_key) == set(want), (sorted(set(want) - set(by_key))[:5], sorted(set(by_key) - set(want))[:5])
    for k, vals in by_key.items():
        assert set(vals) == {want[k]}, (k, vals, want[k])
        if len(vals) > 1:
            end = k[0] + 60_000
            assert len(vals) == 2 and prev_watermark <= end <= killed.watermark_ms, (
                f"window {k} written {len(vals)} times but the replayed batch {killed.batch_id} emitted only windows "
                f"ending in [{prev_watermark}, {killed.watermark_ms}]")


def test_runner_command(broker: BrokerProcess, tmp_path: Path) -> None:
    prefix = f"run-{uuid.uuid4().hex[:6]}."
    env = dict(os.environ, PIPELINE_SPARK_CONF=f"spark.driver.extraJavaOptions={FAST_JVM}")
    r = subprocess.run([str(ROOT / "bin" / "pipeline.sh"), "run", "--bootstrap", broker.bootstrap, "--prefix", prefix,
                        "--events", "900", "--rate", "0", "--work-dir", str(tmp_path / "run"),
                        "--max-offsets-per-trigger", "300", "--trigger-interval", "1 second", "--too-late", "10"],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout
    assert r.returncode == 0, out[-5000:] + r.stderr[-3000:]
    assert "pipeline: streaming job: " in out and '"outputMode": "append"' in out
    batch_lines = [line for line in out.splitlines() if line.startswith(f"[{KAFKA_QUERY}] batch ")]
    assert batch_lines and all(" records, out " in line and " lag " in line for line in batch_lines), out[-3000:]
    assert "pipeline: batch: offset range " in out and "pipeline: batch: country report, 5 rows" in out
    assert "equal to the aggregates computed from the events: yes" in out
    assert "result OK" in out
    report = read_all(broker.bootstrap, f"{prefix}report")
    assert len(report) == 5 and all(rec.headers == (("report", b"country-totals"),) for rec in report)
    totals = [json.loads(rec.value) for rec in report]  # type: ignore[arg-type]
    plan = events.generate(7, 900)  # the runner's default seed: same events, whatever the start time
    views = sum(1 for e in plan.events if e.event_type == "page_view") + 1  # + the watermark push
    assert sum(t["page_views"] for t in totals) == views + sum(1 for e in events.too_late(plan, 10)
                                                              if e.event_type == "page_view")
