"""Start-up and shutdown of a real broker process: bad config, unknown keys, ZooKeeper unreachable, a broker id in
use, restart after SIGKILL (waits for the old ZooKeeper session to expire), and a clean SIGTERM stop.

Each test starts its own broker(s), on a fresh ZooKeeper chroot (`zk_chroot`). bin/kafka-server-stop.sh is not used:
it signals every broker on the machine, including other test runs; SIGTERM to our own process is what it sends.
"""
from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import ROOT, BrokerProcess, free_port
from tests.integration.broker.conftest import consume


@pytest.fixture
def new_broker(tmp_path: Path, zk_chroot: str) -> Iterator[Callable[..., BrokerProcess]]:
    """Factory of BrokerProcess objects on this test's chroot; any still running at the end is killed."""
    made: List[BrokerProcess] = []

    def make(name: str = "a", **kwargs: object) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, zk_chroot, **kwargs)  # type: ignore[arg-type]
        made.append(b)
        return b

    yield make
    for b in made:
        b.kill()


def run_to_exit(workdir: Path, zk_connect: str, overrides: Dict[str, str],
                timeout_s: float = 60.0) -> Tuple[int, str, str]:
    """Run bin/kafka-server-start.sh until it exits by itself; (exit status, stdout, stderr)."""
    b = BrokerProcess(workdir, zk_connect, overrides=overrides)
    b.write_config()
    p = subprocess.run([str(ROOT / "bin" / "kafka-server-start.sh"), str(b.config_path)], cwd=str(workdir),
                       capture_output=True, timeout=timeout_s, start_new_session=True)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def produce_acked(bootstrap: str, topic: str, values: List[bytes]) -> List[int]:
    """Produce with acks=all and return the acknowledged offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    acked: List[int] = []

    def cb(err, msg) -> None:
        assert err is None, err
        acked.append(msg.offset())

    for v in values:
        p.produce(topic, value=v, on_delivery=cb)
    assert p.flush(30) == 0
    return acked


def create_topic(bootstrap: str) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    return name


def assert_values(bootstrap: str, topic: str, values: List[bytes]) -> None:
    got = consume(bootstrap, topic, 0, len(values))
    assert [m.value() for m in got] == values


def test_bad_config_value_exits_with_one_line_naming_the_key(tmp_path: Path, zk_chroot: str) -> None:
    rc, out, err = run_to_exit(tmp_path, zk_chroot, {"log.segment.bytes": "abc"})
    assert rc != 0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one stderr line, got:\n{err}"
    assert "log.segment.bytes" in lines[0] and "abc" in lines[0]
    assert "Traceback" not in out + err


def test_unknown_keys_only_warn(new_broker: Callable[..., BrokerProcess]) -> None:
    b = new_broker(overrides={"no.such.broker.key": "1", "num.io.threads": "8"})
    b.start()
    try:
        assert any("no.such.broker.key" in ln and "WARN" in ln for ln in b.output().splitlines()), b.output()
        topic = create_topic(b.bootstrap)
        produce_acked(b.bootstrap, topic, [b"x"])
        assert_values(b.bootstrap, topic, [b"x"])
    finally:
        assert b.stop() == 0


def test_unreachable_zookeeper_exits_naming_the_address(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    rc, out, err = run_to_exit(tmp_path, f"127.0.0.1:{port}", {"zookeeper.connection.timeout.ms": "2000"})
    assert rc != 0
    assert f"127.0.0.1:{port}" in err, err
    assert "Traceback" not in out + err


def test_second_broker_with_the_same_id_refuses_to_start(tmp_path: Path, zk_chroot: str,
                                                         new_broker: Callable[..., BrokerProcess]) -> None:
    first = new_broker("a", broker_id=0)
    first.start()
    try:
        rc, out, err = run_to_exit(tmp_path / "b", zk_chroot, {"broker.id": "0"})
        assert rc != 0
        assert "Broker id 0" in err and "already registered" in err, err
        assert first.is_alive()
        topic = create_topic(first.bootstrap)  # the first broker is unharmed
        produce_acked(first.bootstrap, topic, [b"still-here"])
        assert_values(first.bootstrap, topic, [b"still-here"])
    finally:
        assert first.stop() == 0


def test_second_broker_on_the_same_log_dirs_refuses_to_start(tmp_path: Path, zk_chroot: str,
                                                              new_broker: Callable[..., BrokerProcess]) -> None:
    first = new_broker("a", broker_id=0)
    first.start()
    try:
        topic = create_topic(first.bootstrap)
        produce_acked(first.bootstrap, topic, [b"mine"])
        before = sorted(p.name for p in first.log_dir.iterdir())
        rc, out, err = run_to_exit(tmp_path / "b", zk_chroot, {"broker.id": "1", "log.dirs": str(first.log_dir)})
        assert rc == 1
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Failed to acquire lock on file .lock in" in lines[0], err
        assert "Traceback" not in out + err
        assert sorted(p.name for p in first.log_dir.iterdir()) == before
        assert first.is_alive()
        produce_acked(first.bootstrap, topic, [b"still-mine"])
        assert_values(first.bootstrap, topic, [b"mine", b"still-mine"])
    finally:
        assert first.stop() == 0


def test_meta_properties_must_match_the_config_and_the_cluster(tmp_path: Path, zk_chroot: str,
                                                                 new_broker: Callable[..., BrokerProcess]) -> None:
    """meta.properties binds a log dir to one broker id and one cluster (/cluster/id): either mismatch stops start-up
    with one line, before any partition is touched."""
    first = new_broker("a", broker_id=0)
    first.start()
    topic = create_topic(first.bootstrap)
    produce_acked(first.bootstrap, topic, [b"kept"])
    assert first.stop() == 0
    rc, out, err = run_to_exit(tmp_path / "b", zk_chroot, {"broker.id": "1", "log.dirs": str(first.log_dir)})
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert "Configured broker.id 1 doesn't match stored broker.id 0 in meta.properties" in lines[0]
    other_cluster = zk_chroot + "-other"  # another chroot: another /cluster/id
    rc, out, err = run_to_exit(tmp_path / "c", other_cluster, {"broker.id": "0", "log.dirs": str(first.log_dir)})
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert "doesn't match stored clusterId" in lines[0] and "wrong cluster" in lines[0]
    assert "Traceback" not in out + err
    first.start()  # the right broker on the right cluster still finds its data
    assert_values(first.bootstrap, topic, [b"kept"])
    assert first.stop() == 0


def test_repeated_sigterm_during_shutdown_still_exits_cleanly(new_broker: Callable[..., BrokerProcess]) -> None:
    """Operators and scripts often signal twice; once shutdown has begun further SIGTERMs change nothing (as for
    Kafka's JVM): the broker finishes its clean shutdown and exits 0, never dying of the signal."""
    b = new_broker("a", broker_id=0)
    b.start()
    topic = create_topic(b.bootstrap)
    produce_acked(b.bootstrap, topic, [b"v"])
    assert b.proc is not None
    for _ in range(20):
        if b.proc.poll() is not None:
            break
        b.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    assert b.proc.wait(60) == 0
    assert "shut down completed" in b.output()
    b.start()
    assert_values(b.bootstrap, topic, [b"v"])
    assert b.stop() == 0


def test_restart_after_sigkill_waits_for_the_old_session_then_serves(
        new_broker: Callable[..., BrokerProcess]) -> None:
    b = new_broker(broker_id=0)
    b.start()
    topic = create_topic(b.bootstrap)
    values = [f"before-kill-{i}".encode() for i in range(5)]
    assert produce_acked(b.bootstrap, topic, values) == list(range(5))
    b.kill()
    b.output_path = b.workdir / "broker-0-restart.out"  # wait_started() looks for the "started" line afresh
    b.start(timeout=60)  # same port, same log dir; the old session's /brokers/ids/0 is still there
    try:
        after = b.output()
        assert "waiting up to" in after and "Stale registration of broker 0 has expired" in after, after
        assert_values(b.bootstrap, topic, values)
        produce_acked(b.bootstrap, topic, [b"after-restart"])
        assert_values(b.bootstrap, topic, values + [b"after-restart"])
    finally:
        assert b.stop() == 0


def test_sigterm_stops_cleanly_and_a_restart_finds_the_data(new_broker: Callable[..., BrokerProcess]) -> None:
    b = new_broker(broker_id=0)
    b.start()
    topic = create_topic(b.bootstrap)
    values = [f"v{i}".encode() for i in range(20)]
    produce_acked(b.bootstrap, topic, values)
    assert b.proc is not None
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(30) == 0
    out = b.output()
    assert "shut down completed" in out and "Traceback" not in out
    b._close()
    b.output_path = b.workdir / "broker-0-restart.out"
    b.start()
    try:
        # A clean shutdown closes the ZooKeeper session: no stale registration to wait for.
        assert "Stale registration" not in b.output() and "started (listeners" in b.output()
        assert_values(b.bootstrap, topic, values)
    finally:
        assert b.stop() == 0


def test_server_stop_script_targets_broker_processes(new_broker: Callable[..., BrokerProcess]) -> None:
    """kafka-server-stop.sh finds our broker (dry run: actually running it would stop every broker here)."""
    b = new_broker(broker_id=0)
    b.start()
    try:
        p = subprocess.run([str(ROOT / "bin" / "kafka-server-stop.sh"), "--dry-run"], capture_output=True,
                           timeout=30)
        assert p.returncode == 0
        assert b.proc is not None and str(b.proc.pid) in p.stdout.decode().split(), p.stdout
    finally:
        assert b.stop() == 0
