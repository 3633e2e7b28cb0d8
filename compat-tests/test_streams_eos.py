"""A Kafka Streams 3.9.1 application with processing.guarantee=exactly_once_v2 against a real broker process.

The application (compat-tests/java/StreamsEos.java, compiled against the Kafka jars scripts/install-test.sh resolves
from Maven Central) keeps a running (count, sum) per key and writes every update to an output topic, with the
record cache off, so one input record makes exactly one update. The input is produced first; the test reads the
output with read_committed and checks it is exact: per key the updates are "1,v1", "2,v1+v2", ... up to the key's
true count and sum, each once and in order (a duplicate or a lost record breaks the sequence). Checked once with a
clean run (stopped by SIGTERM once it has committed everything) and once with the JVM killed -9 in the middle of
processing and restarted: the aborted transaction's updates stay invisible and the output is still exact.
"""
from __future__ import annotations

import importlib.util
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess, running_broker

_spec = importlib.util.spec_from_file_location("compat_java_jars", Path(__file__).parent / "java" / "jars.py")
jars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jars)  # type: ignore[union-attr]

SINGLE_BROKER = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 "transaction.state.log.num.partitions": "8", "offsets.topic.replication.factor": "1",
                 "offsets.topic.num.partitions": "8", "group.initial.rebalance.delay.ms": "0",
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
N_INPUT = 2000
KEYS = 20
PARTITIONS = 3
LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("streams")), f"{zookeeper}/streams-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=SINGLE_BROKER) as b:
        yield b


class StreamsApp:
    """One StreamsEos JVM; its stdout events are collected by a thread, its log4j output goes to a file."""

    def __init__(self, workdir: Path, broker: BrokerProcess, app_id: str, src: str, dst: str, sleep_ms: int) -> None:
        self.workdir, self.broker = workdir, broker
        self.log_path = workdir / "streams.log"
        log4j = workdir / "log4j.properties"
        log4j.write_text(LOG4J.format(path=self.log_path))
        try:
            self.cmd = jars.streams_command(broker.bootstrap, app_id, src, dst, workdir / "state", sleep_ms, log4j)
        except jars.JavaUnavailable as e:
            pytest.fail(f"Kafka Streams unavailable: {e}", pytrace=False)
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with open(self.workdir / f"stderr-{self.starts}.txt", "w") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.strip())

    def diagnostics(self) -> str:
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        warn = "\n".join(ln for ln in log.splitlines() if " WARN " in ln or " ERROR " in ln)
        return (f"\nstreams events: {self.lines}\nstreams WARN/ERROR (tail):\n{warn[-4000:]}"
                f"\nbroker output (tail):\n{self.broker.output()[-4000:]}")

    def wait_running(self, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not any('"to":"RUNNING"' in ln for ln in self.lines):
            if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None):
                pytest.fail("the Streams application did not reach RUNNING" + self.diagnostics(), pytrace=False)
            time.sleep(0.2)
        assert not [ln for ln in self.lines if '"event":"error"' in ln], self.diagnostics()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def freeze(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> int:
        """SIGTERM: the shutdown hook closes the application (committing), then the JVM exits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail("the Streams application did not stop within 60 s of SIGTERM" + self.diagnostics(),
                        pytrace=False)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class OutputReader:
    """A read_committed consumer assigned to the whole output topic from offset 0, read incrementally."""

    def __init__(self, bootstrap: str, topic: str, isolation: str = "read_committed") -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "isolation.level": isolation})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.records: list[tuple] = []

    def read_until(self, n: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while len(self.records) < n and time.monotonic() < deadline:
            for m in self.consumer.consume(1000, 0.3):
                if m.error():
                    raise KafkaException(m.error())
                self.records.append((m.partition(), m.offset(), m.key().decode(), m.value().decode()))
        return len(self.records)

    def close(self) -> None:
        self.consumer.close()


def _setup(broker: BrokerProcess, tag: str) -> tuple:
    src, dst = f"streams-in-{tag}", f"streams-out-{tag}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (src, dst)], operation_timeout=30).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    for i in range(N_INPUT):
        p.produce(src, key=f"k{i % KEYS}".encode(), value=str(i).encode())
    assert p.flush(30) == 0
    return src, dst


def _expected() -> dict[str, list[str]]:
    """Per key, the exact sequence of "count,sum" updates."""
    out: dict[str, list[str]] = {}
    totals: dict[str, list[int]] = {}
    for i in range(N_INPUT):
        k = f"k{i % KEYS}"
        c, s = totals.setdefault(k, [0, 0])
        totals[k] = [c + 1, s + i]
        out.setdefault(k, []).append(f"{c + 1},{s + i}")
    return out


def _committed_output(broker: BrokerProcess, dst: str, isolation: str = "read_committed",
                      expect: int = N_INPUT) -> list[tuple]:
    """Everything a fresh reader sees (waiting a little past ``expect`` records, so extra records show)."""
    r = OutputReader(broker.bootstrap, dst, isolation)
    try:
        r.read_until(expect, 30)
        r.read_until(expect + 1, 3)
        return r.records
    finally:
        r.close()


def _assert_exact(records: list[tuple], app: StreamsApp) -> None:
    by_key: dict[str, list[str]] = {}
    for _, _, k, v in records:
        by_key.setdefault(k, []).append(v)
    want = _expected()
    wrong = {k: (by_key.get(k, [])[:3], len(by_key.get(k, [])), want[k][-1], len(want[k]))
             for k in want if by_key.get(k) != want[k]}
    assert not wrong and set(by_key) == set(want), \
        f"output not exact (key: first updates, number of updates, want last, want number): {wrong}" + \
        app.diagnostics()
    assert len(records) == N_INPUT


def _run_to_completion(app: StreamsApp, reader: OutputReader) -> None:
    got = reader.read_until(N_INPUT, 180)
    assert got >= N_INPUT, f"only {got} of {N_INPUT} updates committed" + app.diagnostics()
    rc = app.stop()
    assert rc in (0, 143), f"StreamsEos exited with {rc}" + app.diagnostics()
    assert any('"event":"closed","clean":"true"' in ln for ln in app.lines), app.diagnostics()


def test_streams_exactly_once_v2_per_key_sum_is_exact(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    src, dst = _setup(broker, tag)
    app = StreamsApp(tmp_path, broker, f"eos-sum-{tag}", src, dst, sleep_ms=0)
    reader = OutputReader(broker.bootstrap, dst)
    try:
        app.start()
        app.wait_running()
        _run_to_completion(app, reader)
    finally:
        reader.close()
        app.close()
    _assert_exact(_committed_output(broker, dst), app)
    # nothing aborted in a clean run: read_uncommitted sees the same records
    assert len(_committed_output(broker, dst, "read_uncommitted")) == N_INPUT


def _freeze_with_open_transaction(app: StreamsApp, committed: OutputReader, uncommitted: OutputReader) -> int:
    """SIGSTOP the application at a moment when its open transaction already has records in the output log
    (read_uncommitted ahead of read_committed once both have settled); the number of committed updates then."""
    for _ in range(20):
        uncommitted.read_until(N_INPUT, 0.3)
        app.freeze()
        # frozen: nothing more is written; let both readers see everything there is
        done, seen = committed.read_until(N_INPUT, 1.5), uncommitted.read_until(N_INPUT * 2, 1.5)
        if done < N_INPUT // 2 and seen > done:
            return done
        app.thaw()
    pytest.fail("never caught the application with an open transaction holding records" + app.diagnostics(),
                pytrace=False)


def test_streams_exactly_once_v2_survives_kill_9(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    src, dst = _setup(broker, tag)
    # ~3 ms a record: about 6 s of processing, so the kill lands in the middle with a transaction open
    app = StreamsApp(tmp_path, broker, f"eos-kill-{tag}", src, dst, sleep_ms=3)
    reader = OutputReader(broker.bootstrap, dst)
    dirty = OutputReader(broker.bootstrap, dst, "read_uncommitted")
    try:
        app.start()
        app.wait_running()
        seen = reader.read_until(N_INPUT // 5, 120)
        assert seen >= N_INPUT // 5, f"only {seen} updates committed before the kill" + app.diagnostics()
        at_kill = _freeze_with_open_transaction(app, reader, dirty)
        open_records = len(dirty.records) - at_kill
        app.kill()
        app.start()
        _run_to_completion(app, reader)
    finally:
        reader.close()
        dirty.close()
        app.close()
    committed = _committed_output(broker, dst)
    _assert_exact(committed, app)
    # the killed transaction's records are in the log (read_uncommitted sees them), aborted
    uncommitted = _committed_output(broker, dst, "read_uncommitted", expect=N_INPUT + open_records)
    assert len(uncommitted) >= N_INPUT + open_records, (len(uncommitted), open_records)
    print(f"\nkilled after {at_kill} committed updates with {open_records} records of the open transaction in "
          f"the log; read_uncommitted sees {len(uncommitted)} records in all")
