"""The bin/ and scripts/ commands: argument handling as Kafka's (--help, --version, bad options), the
missing-ZooKeeper hint, a real foreground ZooKeeper, zookeeper-server-stop.sh stopping exactly the ZooKeeper of its
LOG_DIR, and scripts/quickstart.sh stopping everything it started (ZooKeeper included) on Ctrl-C or on
bin/kafka-server-stop.sh.

Every process here gets its own LOG_DIR (logs and pid files) and free ports, so nothing reaches another test's
processes."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker import __version__
from broker.pid_files import is_broker_process
from tests.harness.clients import consume_from_start
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


def test_broker_command_line_is_kafkas(tmp_path: Path) -> None:
    """kafka.Kafka's: --help prints the usage and option list on stderr and exits 1 (it is never taken for a file),
    --version prints the version and exits 0, a stray argument or unknown option is named before the usage."""
    start = str(ROOT / "bin/kafka-server-start.sh")
    cfg = tmp_path / "server.properties"
    cfg.write_text("zookeeper.connect=127.0.0.1:1\n")
    for args in (["--help"], [str(cfg), "--help"], ["-daemon", "--help"]):
        r = run([start, *args], LOG_DIR=str(tmp_path / "logs"))
        assert r.returncode == 1 and r.stdout == "", (args, r.stdout, r.stderr)
        assert r.stderr.startswith("USAGE: kafka-server-start.sh [-daemon] server.properties "
                                   "[--override property=value]*"), r.stderr
        assert "--override <String>" in r.stderr and "--version" in r.stderr
        assert "realpath" not in r.stderr
    r = run([start, "--version"])
    assert r.returncode == 0 and r.stdout.split()[0] == __version__ and r.stderr == ""
    r = run([start, str(cfg), "stray"])
    assert r.returncode == 1 and r.stderr.splitlines()[0] == "Found non argument parameters: stray"
    r = run([start, str(cfg), "--overide", "a=b"])
    assert r.returncode == 1 and r.stderr.splitlines()[0] == "overide is not a recognized option"
    r = run([start, str(cfg), "--override"])
    assert r.returncode == 1 and r.stderr.splitlines()[0] == "Option override requires an argument"
    assert not (tmp_path / "logs").exists()  # nothing started, nothing logged


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


def _zk_properties(tmp_path: Path, name: str) -> tuple[Path, int]:
    port = free_port()
    cfg = tmp_path / f"{name}.properties"
    cfg.write_text(f"dataDir={tmp_path / name}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                   "admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
    return cfg, port


def _wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout_s}s")


def _zk_answers(port: int) -> bool:
    try:
        return four_letter_word("127.0.0.1", port, "ruok") == "imok"
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_zookeeper_daemon_is_stopped_by_its_pid_file_only(tmp_path: Path) -> None:
    """-daemon records the pid in LOG_DIR; zookeeper-server-stop.sh with that LOG_DIR stops that ZooKeeper and no
    other (Kafka's script stops every QuorumPeerMain of the machine: here that takes --all)."""
    mine_cfg, mine_port = _zk_properties(tmp_path, "mine")
    other_cfg, other_port = _zk_properties(tmp_path, "other")
    mine_logs, other_logs = tmp_path / "mine-logs", tmp_path / "other-logs"
    start = str(ROOT / "bin/zookeeper-server-start.sh")
    stop = str(ROOT / "bin/zookeeper-server-stop.sh")
    r = run([start, "-daemon", str(mine_cfg)], LOG_DIR=str(mine_logs))
    assert r.returncode == 0, r.stderr
    r = run([start, "-daemon", str(other_cfg)], LOG_DIR=str(other_logs))
    assert r.returncode == 0, r.stderr
    mine_pid = int((mine_logs / "zookeeper.pid").read_text())
    other_pid = int((other_logs / "zookeeper.pid").read_text())
    try:
        _wait_for(lambda: _zk_answers(mine_port) and _zk_answers(other_port), 60, "both ZooKeepers answer")
        r = run([stop], LOG_DIR=str(mine_logs))
        assert r.returncode == 0, r.stdout + r.stderr
        assert not _alive(mine_pid) and not _zk_answers(mine_port)
        assert _alive(other_pid) and _zk_answers(other_port)
        r = run([stop], LOG_DIR=str(mine_logs))
        assert r.returncode == 1 and "No zookeeper server to stop" in r.stdout
        r = run([stop], LOG_DIR=str(other_logs))
        assert r.returncode == 0 and not _alive(other_pid)
    finally:
        for pid in (mine_pid, other_pid):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _start_quickstart(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, str, Path]:
    """scripts/quickstart.sh on free ports with its own LOG_DIR, data dirs and ZooKeeper config; (process, LOG_DIR,
    bootstrap, console output file), once the broker has started.

    A free port can be taken by another test between choosing it and ZooKeeper binding it (CI runs tests in
    parallel): a ZooKeeper that reports "Address already in use" is retried on new ports, twice at most; any other
    failure fails at once."""
    for attempt in range(3):
        base = tmp_path / f"attempt-{attempt}"
        base.mkdir()
        zk_cfg, zk_port = _zk_properties(base, "zk")
        logs = base / "logs"
        port = free_port()
        console = base / "quickstart.out"
        with open(console, "wb") as out:
            proc = subprocess.Popen(
                ["bash", str(ROOT / "scripts/quickstart.sh"), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                 "--override", f"zookeeper.connect=127.0.0.1:{zk_port}", "--override", f"log.dirs={base / 'data'}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env=dict(os.environ, LOG_DIR=str(logs), ZOOKEEPER_CONFIG=str(zk_cfg)))
        _wait_for(lambda: "started (listeners" in console.read_text() or proc.poll() is not None, 300,
                  "the quickstart broker started")
        if proc.poll() is None:
            return proc, logs, f"127.0.0.1:{port}", console
        zk_out = logs / "zookeeper.out"
        if not (zk_out.exists() and "Address already in use" in zk_out.read_text(errors="replace")):
            break
    raise AssertionError(console.read_text())


def _serves(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("quickstart", 1, 1)], operation_timeout=30)["quickstart"].result(30)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("quickstart", value=b"hello")
    assert p.flush(30) == 0
    assert [m.value() for m in consume_from_start(bootstrap, [("quickstart", 0)], 1, 30)] == [b"hello"]


@pytest.mark.parametrize("how", ["ctrl-c", "kafka-server-stop"])
def test_quickstart_stops_everything_it_started(tmp_path: Path, how: str) -> None:
    """The quickstart installs, starts a ZooKeeper and a broker; Ctrl-C (SIGINT to its process group, as the
    terminal sends it) or bin/kafka-server-stop.sh stops the broker cleanly and then the ZooKeeper it started."""
    proc, logs, bootstrap, console = _start_quickstart(tmp_path)
    zk_pid = int((logs / "zookeeper.pid").read_text())
    broker_pids = [int(f.read_text()) for f in logs.glob("kafkaServer-*.pid")]
    try:
        assert len(broker_pids) == 1 and is_broker_process(broker_pids[0]) and _alive(zk_pid)
        _serves(bootstrap)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            r = run([str(ROOT / "bin/kafka-server-stop.sh")], LOG_DIR=str(logs))
            assert r.returncode == 0, r.stdout + r.stderr
        assert proc.wait(120) == 0, console.read_text()[-4000:]
        out = console.read_text()
        assert "shut down completed" in out and "Traceback" not in out
        assert not _alive(broker_pids[0]) and not _alive(zk_pid)
        assert not (logs / "zookeeper.pid").exists() and not list(logs.glob("kafkaServer-*.pid"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in broker_pids + [zk_pid]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
