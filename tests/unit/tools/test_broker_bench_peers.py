"""broker_bench's peer list, ratios and table: what a reader compares across brokers (no network)."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from tools.bench import broker_bench
from tools.bench.broker_bench import PeerMissing, check_peer_installed, format_table, parse_peers, ratio


def test_parse_peers_keeps_order_and_drops_repeats() -> None:
    assert parse_peers("tansu, Kafka,tansu,") == ["tansu", "kafka"]
    assert parse_peers("") == []


def test_parse_peers_rejects_unknown_names() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="redpanda"):
        parse_peers("kafka,redpanda")


def test_unknown_peer_on_the_command_line_exits_with_usage() -> None:
    with pytest.raises(SystemExit):
        broker_bench.main(["--peers", "nope"])


def test_ratio_is_nan_when_a_side_is_missing_or_zero() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(float("nan"), 2.0))


def test_missing_tansu_fails_with_the_install_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_bench, "TANSU_BIN", tmp_path / "tansu")
    with pytest.raises(PeerMissing, match="scripts/install-bench.sh"):
        check_peer_installed("tansu")
    assert broker_bench.main(["--quick", "--peers", "tansu"]) == 2


def test_table_gives_peers_ours_over_peer_ratios_and_shows_errors() -> None:
    results = {
        "100B acks=1 lz4": {
            "ours": {"records_per_s": 900_000.0, "mb_per_s": 90.0, "broker_cpu_s": 0.4,
                     "broker_cpu_us_per_record": 0.4},
            "kafka": {"records_per_s": 600_000.0, "mb_per_s": 60.0, "broker_cpu_s": 0.8,
                      "broker_cpu_us_per_record": 0.8},
            "tansu": {"error": "KafkaException: boom"},
        },
    }
    lines = format_table(results, ["ours", "kafka", "tansu"]).splitlines()
    assert len(lines) == 4
    ours, kafka, tansu = lines[1:]
    assert ours.split()[-1] == "0.40"  # ours has no ratio columns
    assert kafka.split()[-2:] == ["1.50", "0.50"]  # rec/s ratio, then CPU-per-record ratio
    assert "ERROR KafkaException: boom" in tansu
