"""bin/kafka-cluster.sh as a user runs it (issue 17 points 5 and 6), and the bound on a broker's shutdown without
ZooKeeper.

* start 3, kill -9 one, ``restart --broker`` it, ``status``; ``stop --broker`` one and start it by hand as a user
  would (``kafka-server-start.sh -daemon``, another LOG_DIR): ``status`` finds it; ``stop`` stops all four
  processes and then ZooKeeper, and nothing of the cluster is left running; an immediate ``start`` on the same
  ports works although their sockets are in TIME-WAIT.
* a broker whose ZooKeeper was stopped exits on SIGTERM within (controlled.shutdown.max.retries - 1) x
  controlled.shutdown.retry.backoff.ms plus the rest of its shutdown (it took ~130 s before).

Every process gets its own directory and free ports (the script's own ZooKeeper), so nothing reaches another
test's processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.pid_files import is_broker_process
from tools.cluster import ROOT, LocalCluster, free_port, port_is_free

SCRIPT = str(ROOT / "bin" / "kafka-cluster.sh")


def _cli(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=timeout)


def _base_port(n: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + n < 65536 and all(port_is_free(base + i) for i in range(n)):
            return base
    raise RuntimeError("no run of free ports")


def _pids(workdir: Path) -> Dict[int, int]:
    state = json.loads((workdir / "cluster.json").read_text())
    return {b["id"]: b["pid"] for b in state["brokers"]}


def _status(workdir: Path) -> tuple[int, Dict[str, str]]:
    r = _cli("status", "--dir", str(workdir))
    lines = {line.split(":")[0]: line for line in r.stdout.splitlines()}
    return r.returncode, lines


def _processes_naming(text: str) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(")", 1)[-1].split()[0] == "Z"
        except OSError:
            continue
        if text in cmd and not zombie:
            found.append(int(entry))
    return found


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_kafka_cluster_sh_restarts_one_broker_and_stops_everything(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    base, zk_port = _base_port(3), free_port()
    ports = [base, base + 1, base + 2]
    try:
        r = _cli("start", "--dir", str(workdir), "--brokers", "3", "--base-port", str(base), "--zk-port", str(zk_port),
                 "--override", "zookeeper.session.timeout.ms=3000",
                 "--override", "controlled.shutdown.retry.backoff.ms=500")
        assert r.returncode == 0, r.stderr
        started = _pids(workdir)
        rc, lines = _status(workdir)
        assert rc == 0 and all(lines[f"broker {i}"].endswith(f"pid {started[i]} up") for i in range(3)), lines

        # kill -9 one broker: status says so; restart it by id
        os.kill(started[1], signal.SIGKILL)
        _wait(lambda: not is_broker_process(started[1]), 10, "the killed broker to die")
        rc, lines = _status(workdir)
        assert rc == 1 and lines["broker 1"] == f"broker 1: 127.0.0.1:{ports[1]} down", lines
        r = _cli("restart", "--broker", "1", "--dir", str(workdir))
        assert r.returncode == 0, r.stderr
        restarted = _pids(workdir)[1]
        assert restarted != started[1] and is_broker_process(restarted)
        assert r.stdout.startswith(f"broker 1: 127.0.0.1:{ports[1]} (pid {restarted}")
        rc, lines = _status(workdir)
        assert rc == 0 and lines["broker 1"].endswith(f"pid {restarted} up"), lines

        # stop one by id, then a restart by hand, as a user would: another LOG_DIR, a relative properties path
        r = _cli("stop", "--broker", "2", "--dir", str(workdir))
        assert r.returncode == 0 and r.stdout.strip() == f"Stopped broker 2 (pid {started[2]})", (r.stdout, r.stderr)
        assert not is_broker_process(started[2])
        rc, lines = _status(workdir)
        assert rc == 1 and lines["broker 2"].endswith(" down") and lines["broker 0"].endswith(" up"), lines
        manual_logs = tmp_path / "manual-logs"
        r = subprocess.run([str(ROOT / "bin" / "kafka-server-start.sh"), "-daemon", "server-2.properties"],
                           cwd=workdir, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, LOG_DIR=str(manual_logs)))
        assert r.returncode == 0, r.stderr
        manual = int(r.stdout.split("(pid ")[1].split(",")[0])
        _wait(lambda: "started (listeners" in (manual_logs / "kafkaServer.out").read_text(errors="replace"), 60,
              "the broker started by hand to serve")
        rc, lines = _status(workdir)
        assert rc == 0, lines
        assert lines["broker 2"] == f"broker 2: 127.0.0.1:{ports[2]} pid {manual} up (started outside kafka-cluster.sh)"
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[0]}"}).list_topics(timeout=10)
        assert sorted(md.brokers) == [0, 1, 2]

        # stop: every broker (the one started by hand included), then ZooKeeper; nothing left
        every = [started[0], restarted, manual]
        t0 = time.monotonic()
        r = _cli("stop", "--dir", str(workdir))
        stop_s = time.monotonic() - t0
        assert r.returncode == 0 and r.stdout.strip() == "Stopped 3 broker(s) and ZooKeeper", (r.stdout, r.stderr)
        assert not any(is_broker_process(p) for p in every)
        assert _processes_naming(str(workdir)) == []  # no broker, no ZooKeeper of this directory
        assert all(port_is_free(p) and _refused(p) for p in ports + [zk_port])
        assert not (workdir / "cluster.json").exists()
        assert stop_s < 30, stop_s
        r = _cli("status", "--dir", str(workdir))
        assert r.returncode == 1 and "broker 0: " in r.stdout and "down" in r.stdout

        # point 6: start again at once on the same ports (their sockets may well be in TIME-WAIT), then stop
        r = _cli("start", "--dir", str(workdir), "--brokers", "3", "--base-port", str(base), "--zk-port", str(zk_port))
        assert r.returncode == 0, r.stderr
        r = _cli("stop", "--dir", str(workdir))
        assert r.returncode == 0, r.stderr
        assert _processes_naming(str(workdir)) == []
    finally:
        for pid in _processes_naming(str(workdir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for i in range(3):
        out = (workdir / f"broker-{i}.out").read_text(errors="replace")
        assert "Traceback" not in out, out[-4000:]


def test_unknown_broker_id_and_start_without_cluster(tmp_path: Path) -> None:
    r = _cli("start", "--broker", "1", "--dir", str(tmp_path / "none"))
    assert r.returncode == 1 and "No cluster recorded" in r.stderr and "Traceback" not in r.stderr
    r = _cli("restart", "--dir", str(tmp_path / "none"))
    assert r.returncode == 2 and "--broker" in r.stderr  # argparse: restart needs the broker id


@pytest.mark.slow
def test_brokers_without_zookeeper_stop_on_sigterm_within_the_bound(tmp_path: Path) -> None:
    """The issue's case, with the controller stuck: ZooKeeper stopped under a 3-broker cluster, one broker killed,
    records produced so the leaders shrink their ISRs (AlterPartition: the controller's event thread then waits
    for ZooKeeper), then SIGTERM. The bound (BrokerServer.controlled_shutdown): every controlled-shutdown attempt
    fails at once without ZooKeeper, so the brokers exit within (max.retries - 1) x backoff = 2 x 2 s plus the rest
    of their shutdown (under a second; the controller does not wait for its stuck event), without a traceback."""
    backoff_ms, retries = 2000, 3
    cluster = LocalCluster(tmp_path, 3, overrides={"controlled.shutdown.retry.backoff.ms": str(backoff_ms),
                                                   "zookeeper.session.timeout.ms": "4000",
                                                   "replica.lag.time.max.ms": "1500"})
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("r3", 6, 3)])["r3"].result(30)  # every broker leads partitions
        _wait(lambda: all(b.output().count("Created log for partition r3-") == 6 for b in cluster.brokers), 30,
              "every replica of r3 to exist")
        md = admin.list_topics("r3", timeout=10)
        controller = md.controller_id
        victim = next(b.broker_id for b in cluster.brokers if b.broker_id != controller)
        survivors = [b for b in cluster.brokers if b.broker_id != victim]
        led = [p.id for p in md.topics["r3"].partitions.values() if p.leader != victim]
        assert cluster.zookeeper is not None
        cluster.zookeeper.stop()
        cluster.broker(victim).kill()
        producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in survivors), "acks": "1"})
        for p in led:
            producer.produce("r3", b"x" * 100, partition=p)
        assert producer.flush(15) == 0
        _wait(lambda: any("Shrinking ISR of r3-" in b.output() for b in survivors), 15, "an ISR shrink")
        time.sleep(0.5)  # its AlterPartition reaches the controller, whose event thread now waits for ZooKeeper
        t0 = time.monotonic()
        for b in survivors:
            b.terminate()
        codes = {b.broker_id: b.stop(timeout=60) for b in survivors}
        elapsed = time.monotonic() - t0
    finally:
        cluster.kill()
    bound_s = (retries - 1) * backoff_ms / 1000.0
    assert set(codes.values()) == {0}, codes
    assert elapsed < bound_s + 6.0, f"{elapsed:.1f}s to stop without ZooKeeper (bound {bound_s:g}s + the rest)"
    for b in survivors:
        out = b.output()
        assert "Traceback" not in out, out[-6000:]
        assert f"Controlled shutdown attempt {retries}/{retries}: no connection to ZooKeeper" in out
        assert "Proceeding to do an unclean shutdown" in out and "shut down completed" in out
