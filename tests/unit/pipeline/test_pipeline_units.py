"""The pipeline's pure parts, without Spark or a broker: the connector jar check, the deterministic event plan,
the aggregates computed in Python, the checkpoint reader and the progress summary."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import checkpoint, events, expected
from pipeline.connector import ConnectorJarsMissing, connector_jars, required_artifacts
from pipeline.progress_summary import format_line, summarize
from pipeline.topics import Topics

# ------------------------------------------------------------------------------------------------ connector jars


def _jars(d: Path, version: str, skip: str = "") -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name in (f"spark-sql-kafka-0-10_2.13-{version}.jar", f"spark-token-provider-kafka-0-10_2.13-{version}.jar",
                 "kafka-clients-3.9.0.jar", "commons-pool2-2.12.0.jar"):
        if not name.startswith(skip) or not skip:
            (d / name).write_bytes(b"PK")


def test_all_jars_present(tmp_path: Path) -> None:
    _jars(tmp_path, "4.0.0")
    got = connector_jars(tmp_path, "4.0.0")
    assert [p.name for p in got] == ["spark-sql-kafka-0-10_2.13-4.0.0.jar",
                                     "spark-token-provider-kafka-0-10_2.13-4.0.0.jar", "kafka-clients-3.9.0.jar",
                                     "commons-pool2-2.12.0.jar"]


@pytest.mark.parametrize("missing,coordinates", [
    ("spark-sql-kafka", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"),
    ("spark-token-provider", "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0"),
    ("kafka-clients", "org.apache.kafka:kafka-clients"),
    ("commons-pool2", "org.apache.commons:commons-pool2"),
])
def test_a_missing_jar_is_named(tmp_path: Path, missing: str, coordinates: str) -> None:
    _jars(tmp_path, "4.0.0", skip=missing)
    with pytest.raises(ConnectorJarsMissing) as e:
        connector_jars(tmp_path, "4.0.0")
    assert coordinates in str(e.value) and "scripts/install.sh" in str(e.value)


def test_connector_of_another_spark_version_does_not_count(tmp_path: Path) -> None:
    _jars(tmp_path, "4.0.1")
    with pytest.raises(ConnectorJarsMissing, match="spark-sql-kafka-0-10_2.13:4.0.0"):
        connector_jars(tmp_path, "4.0.0")


def test_no_directory_at_all(tmp_path: Path) -> None:
    with pytest.raises(ConnectorJarsMissing, match=str(tmp_path / "absent")):
        connector_jars(tmp_path / "absent", "4.0.0")


def test_required_artifacts_follow_the_spark_version() -> None:
    assert required_artifacts("9.9.9")[0].coordinates == "org.apache.spark:spark-sql-kafka-0-10_2.13:9.9.9"


# ------------------------------------------------------------------------------------------------ events
def test_plan_is_deterministic_and_shifts_with_the_start() -> None:
    a = events.generate(seed=3, num_events=500, start_ms=60_000_000)
    b = events.generate(seed=3, num_events=500, start_ms=60_000_000)
    c = events.generate(seed=3, num_events=500, start_ms=120_000_000)
    assert [e.value() for e in a.events] == [e.value() for e in b.events]
    assert [e.event_time_ms - 60_000_000 for e in a.events] == [e.event_time_ms - 120_000_000 for e in c.events]
    assert events.generate(seed=4, num_events=500, start_ms=60_000_000).events != a.events


def test_late_events_stay_inside_the_allowed_lateness() -> None:
    """Out of order and late, but never more than MAX_LATENESS_MS behind an event produced before them: far inside
    the job's 10-minute watermark delay, whatever the micro-batch boundaries."""
    plan = events.generate(seed=5, num_events=3000, start_ms=0, span_ms=30 * 60_000)
    assert any(e.late for e in plan.events)
    out_of_order = 0
    high = 0
    for e in plan.events:
        if e.event_time_ms < high:
            out_of_order += 1
        assert high - e.event_time_ms <= events.MAX_LATENESS_MS + 30 * 60_000 // 3000
        high = max(high, e.event_time_ms)
    assert out_of_order > 100


def test_watermark_push_and_too_late_events() -> None:
    plan = events.generate(seed=5, num_events=200, start_ms=0)
    push = events.watermark_push(plan)
    assert push.event_time_ms == plan.max_event_time_ms + events.PUSH_AHEAD_MS
    late = events.too_late(plan, 10)
    assert len(late) == 10 and all(e.event_time_ms < push.event_time_ms - 10 * 60_000 for e in late)
    assert {e.event_type for e in late} == {events.PAGE_VIEW, events.ORDER}


def test_event_wire_format() -> None:
    e = events.Event("1-2", events.ORDER, "u001", 1234, "ios", order_id="o1", amount_cents=550)
    assert e.key == b"u001"
    assert json.loads(e.value()) == {"event_id": "1-2", "type": "order", "user_id": "u001", "event_time_ms": 1234,
                                     "order_id": "o1", "amount_cents": 550}
    assert e.kafka_headers() == [("event-type", b"order"), ("source", b"ios"), ("schema", b"1")]


def test_expected_window_stats() -> None:
    users = [events.User("a", "DE", "free"), events.User("b", "JP", "pro")]
    evs = [events.Event("1", events.PAGE_VIEW, "a", 60_000, "web", page="/"),
           events.Event("2", events.ORDER, "a", 119_999, "web", order_id="o", amount_cents=10),
           events.Event("3", events.PAGE_VIEW, "b", 120_000, "web", page="/"),
           events.Event("4", events.PAGE_VIEW, "nobody", 120_000, "web", page="/")]
    assert expected.window_stats(evs, users) == {(60_000, "DE"): (1, 1, 10), (120_000, "JP"): (1, 0, 0)}


def test_topic_names() -> None:
    t = Topics("x.y-")
    assert t.all() == ["x.y-page-views", "x.y-orders", "x.y-users", "x.y-window-stats", "x.y-report"]
    assert t.input_pattern == "x\\.y\\-(page-views|orders)"


# ------------------------------------------------------------------------------------------------ checkpoint
def _offsets(d: Path, batch: int, watermark: int, ends: dict) -> None:
    (d / "offsets").mkdir(parents=True, exist_ok=True)
    (d / "offsets" / str(batch)).write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": watermark, "batchTimestampMs": 5, "conf": {}}) + "\n"
        + json.dumps(ends) + "\n")


def _commit(d: Path, batch: int) -> None:
    (d / "commits").mkdir(parents=True, exist_ok=True)
    (d / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def test_checkpoint_reader(tmp_path: Path) -> None:
    assert checkpoint.last_committed(tmp_path) is None and checkpoint.uncommitted(tmp_path) is None
    _offsets(tmp_path, 0, 0, {"t": {"0": 10, "1": 4}})
    _commit(tmp_path, 0)
    _offsets(tmp_path, 1, 700, {"t": {"0": 20, "1": 9}})
    (tmp_path / "offsets" / ".1.crc").write_text("")
    last = checkpoint.last_committed(tmp_path)
    assert last is not None and last.batch_id == 0 and last.end_offsets == {("t", 0): 10, ("t", 1): 4}
    pending = checkpoint.uncommitted(tmp_path)
    assert pending is not None and (pending.batch_id, pending.watermark_ms) == (1, 700)
    _commit(tmp_path, 1)
    assert checkpoint.uncommitted(tmp_path) is None


# ------------------------------------------------------------------------------------------------ progress
def test_progress_summary() -> None:
    p = {"name": "q", "batchId": 4, "numInputRows": 300, "batchDuration": 900,
         "eventTime": {"watermark": "2026-01-01T00:00:00.000Z"},
         "stateOperators": [{"numRowsRemoved": 7, "numRowsDroppedByWatermark": 2}],
         "sources": [{"endOffset": {"t": {"0": 100, "1": 50}}, "latestOffset": {"t": {"0": 130, "1": 50, "2": 5}}}],
         "sink": {"numOutputRows": -1}}
    b = summarize(p)
    assert (b.batch_id, b.input_rows, b.output_rows, b.lag, b.dropped_by_watermark) == (4, 300, 7, 35, 2)
    assert format_line(b).startswith("[q] batch 4: in 300 records, out 7 rows, lag 35 offsets")
    p["sink"] = {"numOutputRows": 12}
    assert summarize(p).output_rows == 12


def test_the_unit_tests_of_the_pipeline_import_without_pyspark() -> None:
    """pyspark (~300 MB, a JVM bridge) belongs to the Spark integration tests; the unit lane must not load it."""
    import subprocess
    import sys
    code = ("import sys, tests.unit.pipeline.test_pipeline_units; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
