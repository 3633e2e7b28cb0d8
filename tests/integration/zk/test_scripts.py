"""The bin/ start scripts: argument handling, the missing-ZooKeeper hint, and a real foreground ZooKeeper."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.harness.zookeeper import four_letter_word, free_port

ROOT = Path(__file__).resolve().parents[3]


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))


def test_zookeeper_start_without_jar_explains_install(tmp_path: Path) -> None:
    cfg = tmp_path / "zk.properties"
    cfg.write_text("clientPort=1\n")
    r = run([str(ROOT / "bin/zookeeper-server-start.sh"), str(cfg)], ZOOKEEPER_JAR=str(tmp_path / "none.jar"))
    assert r.returncode == 1
    assert "scripts/install.sh" in r.stderr


def test_start_scripts_usage_errors(tmp_path: Path) -> None:
    for script in ("server-start.sh", "kafka-server-start.sh", "zookeeper-server-start.sh"):
        r = run([str(ROOT / "bin" / script)])
        assert r.returncode == 1 and "USAGE" in r.stderr, script
    r = run([str(ROOT / "bin/server-start.sh"), str(tmp_path / "missing.properties")])
    assert r.returncode == 1 and "not found" in r.stderr


def test_zookeeper_start_runs_in_foreground(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "zk.properties"
    cfg.write_text(f"dataDir={tmp_path / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                   "admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
    proc = subprocess.Popen([str(ROOT / "bin/zookeeper-server-start.sh"), "config-placeholder"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, LOG_DIR=str(tmp_path / "logs")))
    proc.wait(30)
    assert proc.returncode == 1  # relative path resolved from cwd: the file does not exist there
    proc = subprocess.Popen([str(ROOT / "bin/zookeeper-server-start.sh"), "zk.properties"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, LOG_DIR=str(tmp_path / "logs")))
    try:
        answer = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = four_letter_word("127.0.0.1", port, "ruok")
                break
            except OSError:
                time.sleep(0.1)
        assert answer == "imok"
    finally:
        proc.terminate()
        proc.wait(30)
