"""A real Apache Kafka 3.9.1 broker (ZooKeeper mode) for compatibility tests, from the jars the install step resolved.

``scripts/install.sh`` copies Kafka's jars from Maven Central into ``.cache/kafka-3.9.1/libs``; a broker is run
as Kafka's own ``kafka.Kafka`` main class with a properties file written here. A missing jar directory fails
the test loudly (it never skips).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from broker.protocol.api import ApiKey
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import RawClient
from tools.cluster import ROOT, free_port

KAFKA_LIBS = ROOT / ".cache" / "kafka-3.9.1" / "libs"

_LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
"""


class KafkaUnavailable(RuntimeError):
    """Kafka's jars or java are missing."""


def java_program(source: Path) -> List[str]:
    """``java`` arguments that run the single-file program ``source`` (a class of the same name, its main) with
    Kafka's jars on the classpath: ``-cp <classes>:<libs>/* <Name>``, the file compiled once with javac (shared by
    the test processes through the temporary directory, keyed by its text and the classpath, made atomically);
    without a javac ``-cp <libs>/* <source>``, the JVM's source launcher, which compiles it again on every run (a
    second or more of CPU each time)."""
    classpath = kafka_classpath()
    javac = shutil.which("javac")
    if javac is None:
        return ["-cp", classpath, str(source)]
    key = hashlib.sha256(source.read_bytes() + b"\0" + classpath.encode()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"java-{source.stem}-{key}"
    if not (out / f"{source.stem}.class").is_file():
        work = Path(tempfile.mkdtemp(prefix=f"java-{source.stem}-", dir=tempfile.gettempdir()))
        r = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(work), str(source)], capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError(f"javac {source} failed:\n{r.stdout}\n{r.stderr}")
        try:
            os.rename(work, out)  # atomic; a process that got there first keeps its copy
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    return ["-cp", f"{out}{os.pathsep}{classpath}", source.stem]


def kafka_classpath() -> str:
    if not (KAFKA_LIBS / ".complete").exists():
        raise KafkaUnavailable(f"Apache Kafka 3.9.1 jars not found in {KAFKA_LIBS}: run bash scripts/install.sh")
    return f"{KAFKA_LIBS / '*'}:{KAFKA_LIBS / 'tiered' / '*'}"  # tiered/: LocalTieredStorage (Kafka's test jars)


class RealKafkaBroker:
    """``kafka.Kafka server.properties`` in its own process; output in ``kafka-<id>.out``."""

    def __init__(self, workdir: Path, zk_connect: str, broker_id: int, port: Optional[int] = None,
                 overrides: Optional[Dict[str, str]] = None, heap: str = "512m", full_jit: bool = False) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.zk_connect = zk_connect
        self.broker_id = broker_id
        self.port = port or free_port()
        self.log_dir = self.workdir / f"kafka-real-logs-{broker_id}"
        self.overrides = dict(overrides or {})
        self.config_path = self.workdir / f"kafka-real-{broker_id}.properties"
        self.output_path = self.workdir / f"kafka-{broker_id}.out"
        self.proc: Optional[subprocess.Popen[bytes]] = None
        #: -Xmx (benchmarks at scale pass Kafka's own default, kafka-server-start.sh's 1G)
        self.heap = heap
        #: C2 as well as C1 (benchmarks, whose figures compare): a test's broker compiles with C1 only, which
        #: halves its start-up CPU (~2.5 s less per start, more once traffic flows) on the shared 2-core machines
        self.full_jit = full_jit

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def jvm_options(self) -> list:
        """Heap, GC and JIT: sized for tests (a benchmark runs kafka-server-start.sh's, or passes full_jit)."""
        return [f"-Xmx{self.heap}", "-XX:+UseSerialGC", *([] if self.full_jit else ["-XX:TieredStopAtLevel=1"])]

    def start(self, timeout: float = 90.0) -> None:
        java = shutil.which("java")
        if java is None:
            raise KafkaUnavailable("java not found on PATH")
        props = {"broker.id": str(self.broker_id), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "log.dirs": str(self.log_dir), "zookeeper.connect": self.zk_connect,
                 "zookeeper.session.timeout.ms": "6000", "group.initial.rebalance.delay.ms": "0"}
        props.update(self.overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.workdir / "kafka-log4j.properties"
        log4j.write_text(_LOG4J)
        since = len(self.output())  # a restart appends: only what this run prints counts
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, *self.jvm_options(), f"-Dlog4j.configuration=file:{log4j}", "-cp",
                 kafka_classpath(), "kafka.Kafka", str(self.config_path)],
                cwd=str(self.workdir), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}:\n{self.output()[-4000:]}")
            if f"[KafkaServer id={self.broker_id}] started" in self.output()[since:]:
                self._wait_controller_known(deadline)
                return
            time.sleep(0.1)
        raise TimeoutError(f"Kafka {self.broker_id} did not start within {timeout}s:\n{self.output()[-4000:]}")

    def _wait_controller_known(self, deadline: float) -> None:
        """Kafka logs "started" before its first UpdateMetadata from the controller arrives. A Metadata answer
        given in that gap names no controller and no broker, and librdkafka's admin client then waits for a
        controller until its request times out (CreateTopics timed out this way in CI). Wait, as a client would
        want, until this broker's Metadata names a controller and this broker. Only a plain PLAINTEXT broker
        is asked: a secured listener needs a login first, and those tests authenticate their own clients."""
        if "listeners" in self.overrides or "listener.security.protocol.map" in self.overrides:
            return

        def controller_known() -> bool:
            with RawClient(self.bootstrap, timeout_s=10) as c:
                m = c.request(ApiKey.METADATA, 1, {"topics": []}, client_id="harness-ready")
            return m.controller_id >= 0 and any(b.node_id == self.broker_id for b in m.brokers)

        wait_for(controller_known, max(deadline - time.monotonic(), 1.0),
                 f"Kafka {self.broker_id}'s Metadata to name a controller and itself",
                 detail=lambda: self.output()[-4000:])

    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
