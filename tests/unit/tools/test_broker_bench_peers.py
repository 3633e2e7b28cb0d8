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
    assert ours.split()[-1] == "0.400"  # ours has no ratio columns (CPU to the microsecond: CpuMeter)
    assert kafka.split()[-2:] == ["1.50", "0.50"]  # rec/s ratio, then CPU-per-record ratio
    assert "ERROR KafkaException: boom" in tansu


def test_only_keeps_the_scenarios_whose_rows_name_a_word() -> None:
    scs = broker_bench.scenarios(1000, 10, quick=True)
    chosen = broker_bench.select(scs, ["lz4"])
    rows = [row for sc in chosen for row in broker_bench.scenario_rows(sc)]
    assert rows == ["1000x100B acks=1 lz4", "1000x100B acks=all lz4", "10x10KiB acks=all lz4"]
    assert broker_bench.select(scs, []) == scs
    every = [row for sc in scs for row in broker_bench.scenario_rows(sc)]
    assert "consume 1000x100B" in every and len(every) == len(set(every)) == 20
    assert [row for sc in broker_bench.select(scs, ["consume 10x"]) for row in broker_bench.scenario_rows(sc)] == [
        "10x10KiB acks=1 none", "consume 10x10KiB"]


def test_rounds_give_each_figure_its_median_and_a_failed_round_is_left_out() -> None:
    def row(rps: float) -> dict:
        return {"records_per_s": rps, "broker_cpu_us_per_record": rps / 1000, "codec": "lz4"}
    rounds = [{"r": {"ours": row(100.0), "tansu": {"error": "boom"}}},
              {"r": {"ours": row(300.0), "tansu": row(50.0)}},
              {"r": {"ours": row(200.0), "tansu": row(70.0)}}]
    merged = broker_bench.median_rows(rounds)
    assert merged["r"]["ours"] == {"records_per_s": 200.0, "broker_cpu_us_per_record": 0.2, "codec": "lz4",
                                   "rounds": 3}
    assert merged["r"]["tansu"]["records_per_s"] == 60.0 and merged["r"]["tansu"]["rounds"] == 2
    failed = broker_bench.median_rows([{"r": {"kafka": {"error": "a"}}}, {"r": {"kafka": {"error": "b"}}}])
    assert failed == {"r": {"kafka": {"error": "a"}}}


def test_only_matching_nothing_exits_2() -> None:
    assert broker_bench.main(["--quick", "--only", "nosuchrow"]) == 2
