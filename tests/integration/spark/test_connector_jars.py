"""Without the connector's jars nothing Spark-related passes silently: the pipeline's commands stop with the missing
artifact's coordinates, and the Spark tests fail (never skip) with the same message."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.connector import connector_jars

ROOT = Path(__file__).resolve().parents[3]
MISSING = "org.apache.spark:spark-sql-kafka-0-10_2.13:"


def _jars_without_the_connector(tmp_path: Path) -> Path:
    d = tmp_path / "jars"
    d.mkdir()
    for jar in connector_jars():
        if not jar.name.startswith("spark-sql-kafka"):
            (d / jar.name).symlink_to(jar)
    return d


def test_pipeline_command_names_the_missing_artifact(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PIPELINE_SPARK_KAFKA_JARS=str(_jars_without_the_connector(tmp_path)))
    r = subprocess.run([sys.executable, "-m", "pipeline", "batch", "--bootstrap", "127.0.0.1:9"], cwd=str(ROOT),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert MISSING in r.stderr and "bash scripts/install.sh" in r.stderr, r.stderr


def test_spark_tests_fail_instead_of_skipping(tmp_path: Path) -> None:
    env = dict(os.environ, PIPELINE_SPARK_KAFKA_JARS=str(tmp_path / "nothing-here"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/integration/spark/test_connector_batch.py::test_min_partitions_splits_offset_ranges"],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout[-3000:]
    assert "1 error" in r.stdout and "skipped" not in r.stdout, r.stdout[-3000:]
    assert MISSING in r.stdout, r.stdout[-3000:]
