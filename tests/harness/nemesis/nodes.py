"""The cluster's processes, each started inside its own network namespace (``ip netns exec``): ZooKeeper
(Debian's, as tools.cluster.ZooKeeperProcess runs it, but listening on its namespace address), our brokers
(``bin/kafka-server-start.sh``, via tools.cluster.BrokerProcess) and Apache Kafka 3.9.1 brokers (``kafka.Kafka``
from the cached Maven jars, via tests.harness.mixed_cluster.KafkaNode). Every broker listens on, and advertises,
its namespace address, so clients and replication go over the bridge.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from tests.harness.kafka import _LOG4J, KafkaUnavailable, kafka_classpath
from tests.harness.mixed_cluster import KafkaNode
from tools.cluster import ZOOKEEPER_JAR, BrokerProcess, _ZK_EXTRA_JARS, _terminate_pid, broker_command, zookeeper_ok

BROKER_PORT = 9092
ZK_PORT = 2181


def group_pids(pgid: int) -> List[int]:
    """The live processes of process group ``pgid`` (a broker started with ``start_new_session``: ``ip netns exec``
    execs the start script, which starts python or java)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(name))
    return out


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class NsZooKeeper:
    """Standalone ZooKeeper in a namespace, listening on ``host:2181``."""

    def __init__(self, workdir: Path, host: str, prefix: List[str], tick_time_ms: int = 500) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.prefix = prefix
        self.tick_time_ms = tick_time_ms
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.output_path = self.workdir / "zookeeper.out"

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{ZK_PORT}"

    def start(self, timeout: float = 60.0) -> None:
        java = shutil.which("java")
        if java is None or not os.path.exists(ZOOKEEPER_JAR):
            raise RuntimeError(f"ZooKeeper needs java and {ZOOKEEPER_JAR}: run bash scripts/install.sh")
        data = self.workdir / "zookeeper"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(f"tickTime={self.tick_time_ms}\ndataDir={data}\nclientPort={ZK_PORT}\n"
                       f"clientPortAddress={self.host}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
                       f"4lw.commands.whitelist=*\nminSessionTimeout={2 * self.tick_time_ms}\n")
        cp = ":".join(["/etc/zookeeper/conf", ZOOKEEPER_JAR] + [j for j in _ZK_EXTRA_JARS if os.path.exists(j)])
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.prefix + [java, "-Xmx256m", "-cp", cp, f"-Dzookeeper.log.dir={self.workdir}",
                               "-Dzookeeper.root.logger=INFO,CONSOLE",
                               "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}; see {self.output_path}")
            if zookeeper_ok(self.host, ZK_PORT):
                return
            time.sleep(0.1)
        raise TimeoutError(f"ZooKeeper did not answer on {self.connect_string} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            _terminate_pid(self.proc.pid, 10)


class OurNsBroker(BrokerProcess):
    """Our broker (bin/kafka-server-start.sh) inside a namespace, listening on ``host:9092``."""

    kind = "ours"

    def __init__(self, workdir: Path, zk_connect: str, broker_id: int, host: str, prefix: List[str],
                 log_dir: Path, overrides: Dict[str, str]) -> None:
        props = dict(overrides, listeners=f"PLAINTEXT://{host}:{BROKER_PORT}")
        super().__init__(workdir, zk_connect, broker_id=broker_id, port=BROKER_PORT, overrides=props,
                         log_dir=log_dir)
        self.host = host
        self.prefix = prefix

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{BROKER_PORT}"

    def start(self, wait: bool = True, timeout: float = 90.0, extra_env: Optional[Dict[str, str]] = None,
              write_config: bool = True) -> None:
        if write_config:
            self.write_config()
        self._start_offset = len(self.output())
        env = dict(os.environ, LOG_DIR=str(self.logs_dir))
        env.update(extra_env or {})
        self._out = open(self.output_path, "ab")
        self._terminated = False
        self.proc = subprocess.Popen(self.prefix + broker_command() + [str(self.config_path)],
                                     cwd=str(self.workdir), stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid
        if wait:
            self.wait_started(timeout)


class KafkaNsBroker(KafkaNode):
    """Apache Kafka 3.9.1 (``kafka.Kafka``) inside a namespace, listening on ``host:9092``."""

    kind = "kafka"

    def __init__(self, workdir: Path, zk_connect: str, broker_id: int, host: str, prefix: List[str],
                 log_dir: Path, overrides: Dict[str, str]) -> None:
        props = dict(overrides, listeners=f"PLAINTEXT://{host}:{BROKER_PORT}")
        super().__init__(workdir, zk_connect, broker_id, port=BROKER_PORT, overrides=props)
        self.log_dir = Path(log_dir)
        self.host = host
        self.prefix = prefix

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{BROKER_PORT}"

    def start(self, timeout: float = 120.0, wait: bool = True) -> None:  # type: ignore[override]
        java = shutil.which("java")
        if java is None:
            raise KafkaUnavailable("java not found on PATH")
        props = {"broker.id": str(self.broker_id), "log.dirs": str(self.log_dir),
                 "zookeeper.connect": self.zk_connect}
        props.update(self.overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.workdir / "kafka-log4j.properties"
        log4j.write_text(_LOG4J)
        self._start_offset = len(self.output())
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.prefix + [java, "-Xmx384m", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                               f"-Dlog4j.configuration=file:{log4j}", "-cp", kafka_classpath(), "kafka.Kafka",
                               str(self.config_path)],
                cwd=str(self.workdir), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        if wait:
            self.wait_started(timeout)


Broker = Any  # OurNsBroker | KafkaNsBroker
