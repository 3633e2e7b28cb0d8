"""Start-up and shutdown of a real broker process: bad config, unknown keys, an unsupported listener, a port in use,
a locked log dir, ZooKeeper unreachable, a broker id in use, restart after SIGKILL (waits for the old ZooKeeper
session to expire), a clean SIGTERM stop, -daemon and bin/kafka-server-stop.sh, --override, and the log files.

Each failure must end start-up with one line on stderr, exit status 1, no traceback, the line printed once (it is
also in server.log), and, where the test says so, before any log is loaded: the log dir given to the failing broker
holds a partition left by a killed broker, whose loading would be logged ("Loaded 1 logs", "Recovering").

Each test starts its own broker(s), on a fresh ZooKeeper chroot (`zk_chroot`), each with its own LOG_DIR, so
bin/kafka-server-stop.sh (which stops the brokers of its LOG_DIR) only ever reaches this test's brokers.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import ROOT, BrokerProcess, free_port
from tests.harness.cluster_ops import run_kafka_tool
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


def run_to_exit(workdir: Path, zk_connect: str, overrides: Dict[str, str], timeout_s: float = 60.0,
                port: Optional[int] = None) -> Tuple[int, str, str]:
    """Run bin/kafka-server-start.sh until it exits by itself, with LOG_DIR ``workdir/logs``; (exit status, stdout,
    stderr)."""
    b = BrokerProcess(workdir, zk_connect, overrides=overrides, port=port)
    b.write_config()
    p = subprocess.run([str(ROOT / "bin" / "kafka-server-start.sh"), str(b.config_path)], cwd=str(workdir),
                       capture_output=True, timeout=timeout_s, start_new_session=True,
                       env=dict(os.environ, LOG_DIR=str(workdir / "logs")))
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def assert_one_line_failure(rc: int, out: str, err: str, *needles: str) -> str:
    """Exit 1, one stderr line holding every needle, printed once (stdout does not repeat it), no traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1, f"exit {rc}\n{out}\n{err}"
    assert len(lines) == 1, f"expected one stderr line, got:\n{err}"
    for needle in needles:
        assert needle in lines[0], lines[0]
    message = lines[0].removeprefix("ERROR ")
    assert message not in out, f"the error was printed twice:\n{out}"
    assert "Traceback" not in out + err
    return message


def assert_no_log_loaded(out: str) -> None:
    """Nothing of the log dir was read: LogManager logs "Loaded <n> logs" once it has loaded a dir (and
    "Recovering ..." for unflushed segments); test_restart_after_sigkill_... sees that line on a real load."""
    assert "Loaded " not in out and "Recovering" not in out, out


def dir_with_unclean_partition(new_broker: Callable[..., BrokerProcess]) -> Path:
    """A log dir holding one partition with data, left by a SIGKILLed broker (its loading would be logged)."""
    b = new_broker("killed", broker_id=0)
    b.start()
    produce_acked(b.bootstrap, create_topic(b.bootstrap), [b"kept"])
    b.kill()
    return b.log_dir


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
    message = assert_one_line_failure(rc, out, err, "log.segment.bytes", "abc")
    assert message in (tmp_path / "logs" / "server.log").read_text()  # recorded in server.log as well


@pytest.mark.parametrize("overrides, needles", [
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KRB:SASL_KERBEROS"},
     ["Listener KRB of listeners uses security protocol SASL_KERBEROS", "does not support"]),
    ({}, ["No security protocol defined for listener FOO"]),
], ids=["unsupported-protocol", "unknown-listener-name"])
def test_unsupported_listener_ends_startup_before_any_log_is_loaded(
        tmp_path: Path, zk_chroot: str, new_broker: Callable[..., BrokerProcess], overrides: Dict[str, str],
        needles: List[str]) -> None:
    log_dir = dir_with_unclean_partition(new_broker)
    name = "KRB" if overrides else "FOO"
    overrides = dict(overrides, listeners=f"{name}://127.0.0.1:{free_port()}", **{"log.dirs": str(log_dir)})
    rc, out, err = run_to_exit(tmp_path / "b", zk_chroot, overrides)
    assert_one_line_failure(rc, out, err, "listeners", *needles)
    assert_no_log_loaded(out)


def test_port_in_use_ends_startup_before_zookeeper_or_any_log(tmp_path: Path, zk_chroot: str,
                                                              new_broker: Callable[..., BrokerProcess]) -> None:
    """Kafka binds after loading every log; this broker probes its ports first: one line, exit 1, nothing loaded
    and ZooKeeper not even contacted (no cluster id read)."""
    log_dir = dir_with_unclean_partition(new_broker)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        rc, out, err = run_to_exit(tmp_path / "b", zk_chroot, {"log.dirs": str(log_dir)}, port=port)
    message = assert_one_line_failure(rc, out, err, f"Socket server failed to bind to 127.0.0.1:{port}",
                                      "Address already in use", "listener PLAINTEXT")
    assert_no_log_loaded(out)
    assert "Cluster ID" not in out, out
    assert message in (tmp_path / "b" / "logs" / "server.log").read_text()


def test_unusable_log_dir_ends_startup_naming_log_dirs_and_the_dir(tmp_path: Path, zk_chroot: str) -> None:
    """An existing log dir the broker cannot write (here: .lock cannot be opened, as an immutable or read-only dir
    gives; the tests run as root, which permission bits do not stop), one below a regular file, and a regular file:
    Kafka's ERROR line naming log.dirs and the dir, then Kafka's shutdown line; exit 1; before ZooKeeper is contacted
    or anything is loaded; no traceback."""
    locked = tmp_path / "locked"
    (locked / ".lock").mkdir(parents=True)
    (tmp_path / "file").write_text("not a dir")
    below_file = tmp_path / "file" / "logs"
    cases = [(locked, "cannot create or open .lock in it: Is a directory"),
             (below_file, "cannot create it: Not a directory"),
             (tmp_path / "file", "it is not a readable log directory (not a directory)")]
    for i, (log_dir, reason) in enumerate(cases):
        rc, out, err = run_to_exit(tmp_path / f"b{i}", zk_chroot, {"log.dirs": str(log_dir)})
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 1, f"exit {rc}\n{out}\n{err}"
        assert lines == [f"ERROR Failed to create or validate data directory {log_dir} (log.dirs): {reason}",
                         f"ERROR Shutdown broker because none of the specified log dirs from {log_dir} can be created "
                         f"or validated"], err
        assert "Traceback" not in out + err, out
        assert "Cluster ID" not in out, out  # ZooKeeper not contacted
        server_log = (tmp_path / f"b{i}" / "logs" / "server.log").read_text()
        assert lines[0].removeprefix("ERROR ") in server_log and lines[1].removeprefix("ERROR ") in server_log


def test_unreadable_config_and_log_dir_fail_with_one_line(tmp_path: Path) -> None:
    """The config file cannot be read, LOG_DIR cannot hold the broker's log files, a config file that is not UTF-8
    (read as Java reads it, ISO-8859-1): one line naming the file or variable, exit 1, no traceback; warnings
    printed with log4j's level name WARN."""
    start = [str(ROOT / "bin" / "kafka-server-start.sh")]

    def run(config: Path, log_dir: Path) -> Tuple[int, str, str]:
        p = subprocess.run(start + [str(config)], capture_output=True, timeout=60, cwd=str(tmp_path),
                           env=dict(os.environ, LOG_DIR=str(log_dir)))
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    (tmp_path / "config-dir").mkdir()
    rc, out, err = run(tmp_path / "config-dir", tmp_path / "logs")
    assert_one_line_failure(rc, out, err, f"Cannot read config file {tmp_path / 'config-dir'}: Is a directory")

    config = tmp_path / "server.properties"
    config.write_bytes(b"broker.id=0\nzookeeper.connect=127.0.0.1:1\nno.such.broker.key=caf\xe9\n"
                       b"log.segment.bytes=abc\n")
    (tmp_path / "file").write_text("not a dir")
    rc, out, err = run(config, tmp_path / "file" / "logs")
    assert_one_line_failure(rc, out, err, "Cannot write the broker's log files in "
                            f"LOG_DIR={tmp_path / 'file' / 'logs'}: Not a directory")

    rc, out, err = run(config, tmp_path / "logs")
    assert_one_line_failure(rc, out, err, "log.segment.bytes", "abc")
    warned = [ln for ln in out.splitlines() if "no.such.broker.key" in ln]
    assert len(warned) == 1, out
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARN The configuration 'no.such.broker.key' was "
                    r"supplied but isn't a known config\. \(", warned[0]), out
    assert "WARNING" not in out + err


def test_unknown_keys_only_warn(new_broker: Callable[..., BrokerProcess]) -> None:
    b = new_broker(overrides={"no.such.broker.key": "1", "num.io.threads": "8"})
    b.start()
    try:
        assert any("no.such.broker.key" in ln and "] WARN " in ln for ln in b.output().splitlines()), b.output()
        assert "WARNING" not in b.output()  # log4j's level names, as Kafka prints them
        topic = create_topic(b.bootstrap)
        produce_acked(b.bootstrap, topic, [b"x"])
        assert_values(b.bootstrap, topic, [b"x"])
    finally:
        assert b.stop() == 0


def test_unreachable_zookeeper_is_waited_for_then_ends_startup_with_one_line(tmp_path: Path) -> None:
    """Kafka waits zookeeper.connection.timeout.ms (default: zookeeper.session.timeout.ms, 18 s) for ZooKeeper."""
    port = free_port()  # nothing listens there
    began = time.monotonic()
    rc, out, err = run_to_exit(tmp_path, f"127.0.0.1:{port}", {"zookeeper.connection.timeout.ms": "4000"})
    elapsed = time.monotonic() - began
    # the cause: ZooKeeper's connect wait ran out (run_to_exit bounds the whole start at 60 s)
    assert_one_line_failure(rc, out, err, "Timed out waiting for connection", f"127.0.0.1:{port}", "4000 ms",
                            "zookeeper.connection.timeout.ms")
    assert elapsed >= 4.0, f"gave up after {elapsed:.1f} s, before zookeeper.connection.timeout.ms (4 s)"


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
        assert_one_line_failure(rc, out, err, "Failed to acquire lock on file .lock in", str(first.log_dir))
        assert_no_log_loaded(out)
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
    meta = first.log_dir / "meta.properties"
    assert f"Stored node id 0 doesn't match previous node id 1 in {meta}." in lines[0]  # Kafka 3.9's words
    assert "(broker.id=1)" in lines[0]
    other_cluster = zk_chroot + "-other"  # another chroot: another /cluster/id
    rc, out, err = run_to_exit(tmp_path / "c", other_cluster, {"broker.id": "0", "log.dirs": str(first.log_dir)})
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert f"Invalid cluster.id in: {meta}. Expected " in lines[0] and "zookeeper.connect" in lines[0], lines[0]
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
        assert "Loaded 1 logs from" in after  # the line whose absence proves nothing was loaded (above)
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


def test_daemon_and_stop_script_stop_exactly_the_brokers_of_their_log_dir(
        tmp_path: Path, zk_chroot: str, new_broker: Callable[..., BrokerProcess]) -> None:
    """-daemon returns at once, the broker runs detached with its console output in LOG_DIR/kafkaServer.out and a
    pid file there; kafka-server-stop.sh with that LOG_DIR stops it (clean shutdown) and leaves a broker of another
    LOG_DIR running; --all --dry-run lists every broker of the machine (Kafka's behaviour, opt-in)."""
    other = new_broker("other", broker_id=1)
    other.start()
    logs = tmp_path / "daemon-logs"
    env = dict(os.environ, LOG_DIR=str(logs))
    d = BrokerProcess(tmp_path / "daemon", zk_chroot, broker_id=0)
    d.write_config()
    p = subprocess.run([str(ROOT / "bin" / "kafka-server-start.sh"), "-daemon", str(d.config_path)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "started in the background" in p.stdout, p.stdout + p.stderr
    d.output_path = logs / "kafkaServer.out"
    d.pid = int(p.stdout.split("pid ")[1].split(",")[0])
    os.kill(d.pid, 0)  # the script returned (within its 60 s bound) and left the broker running: it did not wait
    try:
        d.wait_started()
        assert (logs / f"kafkaServer-{d.pid}.pid").read_text().strip() == str(d.pid)
        topic = create_topic(d.bootstrap)
        produce_acked(d.bootstrap, topic, [b"from-daemon"])
        assert_values(d.bootstrap, topic, [b"from-daemon"])
        every = subprocess.run([str(ROOT / "bin" / "kafka-server-stop.sh"), "--all", "--dry-run"], env=env,
                               capture_output=True, text=True, timeout=30)
        assert every.returncode == 0 and {str(d.pid), str(other.pid)} <= set(every.stdout.split()), every.stdout
        stop = subprocess.run([str(ROOT / "bin" / "kafka-server-stop.sh")], env=env, capture_output=True,
                              text=True, timeout=90)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not d.is_alive() and "shut down completed" in d.output()
        assert not list(logs.glob("kafkaServer-*.pid"))
        again = subprocess.run([str(ROOT / "bin" / "kafka-server-stop.sh")], env=env, capture_output=True,
                               text=True, timeout=30)
        assert again.returncode == 1 and "No kafka server to stop" in again.stdout
        assert other.is_alive()
        produce_acked(other.bootstrap, create_topic(other.bootstrap), [b"untouched"])
    finally:
        d.kill()
        assert other.stop() == 0


def test_overrides_and_the_log_files_of_log_dir(tmp_path: Path, zk_chroot: str,
                                                new_broker: Callable[..., BrokerProcess]) -> None:
    """--override is repeatable and wins over the file; LOG_DIR gets server.log, controller.log, state-change.log,
    log-cleaner.log and the pid file; the request log stays empty until its logger switch is turned on."""
    port = free_port()
    b = new_broker("a", broker_id=0)
    b.write_config()
    logs = tmp_path / "logs"
    console = tmp_path / "console.out"
    with open(console, "wb") as out:
        proc = subprocess.Popen([str(ROOT / "bin" / "kafka-server-start.sh"), str(b.config_path),
                                 "--override", "broker.id=7", f"--override=listeners=PLAINTEXT://127.0.0.1:{port}"],
                                env=dict(os.environ, LOG_DIR=str(logs)), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "[KafkaServer id=7] started" not in console.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, console.read_text()
            time.sleep(0.1)
        assert f"started (listeners: PLAINTEXT://127.0.0.1:{port})" in console.read_text()
        bootstrap = f"127.0.0.1:{port}"
        topic = create_topic(bootstrap)
        produce_acked(bootstrap, topic, [b"v"])
        assert_values(bootstrap, topic, [b"v"])
        assert (logs / f"kafkaServer-{proc.pid}.pid").exists()
        request_log = logs / "kafka-request.log"
        assert not request_log.exists() or request_log.read_text() == ""  # off by default
        # the switch at run time, with Kafka's own kafka-configs (broker-loggers), as an operator would flip it
        r = run_kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, "--entity-type",
                                                         "broker-loggers", "--entity-name", "7", "--alter",
                                                         "--add-config", "kafka.request.logger=DEBUG"])
        assert r.returncode == 0, r.stdout + r.stderr
        create_topic(bootstrap)
        assert "CreateTopics" in request_log.read_text() or "CREATE_TOPICS" in request_log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0 and "Traceback" not in console.read_text()
    assert not (logs / f"kafkaServer-{proc.pid}.pid").exists()
    server_log = (logs / "server.log").read_text()
    assert "[KafkaServer id=7] started" in server_log and "shut down completed" in server_log
    controller_log = (logs / "controller.log").read_text()
    assert "broker.cluster.controller" in controller_log, controller_log[:2000]
    assert "broker.cluster.controller" not in server_log  # a file of its own, as Kafka's controller.log
    assert "state.change.logger" in (logs / "state-change.log").read_text()
    assert "log cleaner" in (logs / "log-cleaner.log").read_text()

    # the switch in the logging configuration (here a copy of it): the request logger at DEBUG from the start
    ini = tmp_path / "logging.ini"
    text = (ROOT / "config" / "logging.ini").read_text()
    assert "[logger_request]\nlevel=WARN\n" in text
    ini.write_text(text.replace("[logger_request]\nlevel=WARN\n", "[logger_request]\nlevel=DEBUG\n"))
    c = new_broker("c", broker_id=0)
    c.start(extra_env={"LOG_DIR": str(tmp_path / "logs-c"), "BROKER_LOG_CONFIG": str(ini)})
    try:
        create_topic(c.bootstrap)
    finally:
        assert c.stop() == 0
    lines = (tmp_path / "logs-c" / "kafka-request.log").read_text()
    assert "CreateTopics" in lines or "CREATE_TOPICS" in lines, lines[:2000]

