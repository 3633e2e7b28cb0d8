"""A mixed cluster: our brokers (``bin/kafka-server-start.sh``) and real Apache Kafka 3.9.1 brokers
(``kafka.Kafka``) in ONE ZooKeeper chroot, as during a broker-by-broker replacement of a Kafka cluster.

``MixedCluster(workdir, zk_connect, ours=[0, 1], kafka=[2])`` builds the processes; ``start(order)`` starts
them in that order (the first one started wins ``/controller``). Every node has the same interface
(``start``/``stop`` (SIGTERM, controlled shutdown)/``kill`` (SIGKILL)/``pause`` (SIGSTOP)/``resume``/
``is_alive``/``log_dir``/``output``), and :meth:`MixedCluster.zk` reads the znodes both kinds write.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from tests.harness.kafka import _LOG4J, KafkaUnavailable, RealKafkaBroker, kafka_classpath
from tools.cluster import BrokerProcess, free_port

#: Settings shared by both kinds (the same server.properties keys mean the same in both).
COMMON = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "num.partitions": "1",
    "auto.leader.rebalance.enable": "false",
}


class KafkaNode(RealKafkaBroker):
    """RealKafkaBroker that can be restarted, paused and SIGTERMed without waiting."""

    kind = "kafka"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._start_offset = 0

    def start(self, timeout: float = 120.0, wait: bool = True) -> None:  # type: ignore[override]
        java = shutil.which("java")
        if java is None:
            raise KafkaUnavailable("java not found on PATH")
        props = {"broker.id": str(self.broker_id), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "log.dirs": str(self.log_dir), "zookeeper.connect": self.zk_connect}
        props.update(self.overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.workdir / "kafka-log4j.properties"
        text = _LOG4J
        if os.environ.get("MIXED_KAFKA_REQUEST_LOG"):  # debugging: every request Kafka answers, as JSON
            text = text.replace("kafka.request.logger=WARN", "kafka.request.logger=DEBUG")
        log4j.write_text(text)
        self._start_offset = len(self.output())
        with open(self.output_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, "-Xmx384m", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 f"-Dlog4j.configuration=file:{log4j}", "-cp", kafka_classpath(), "kafka.Kafka",
                 str(self.config_path)],
                cwd=str(self.workdir), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        if wait:
            self.wait_started(timeout)

    def wait_started(self, timeout: float = 120.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}:\n{self.output()[-4000:]}")
            if f"[KafkaServer id={self.broker_id}] started" in self.output_since_start():
                return
            time.sleep(0.1)
        raise TimeoutError(f"Kafka {self.broker_id} did not start within {timeout}s:\n{self.output()[-4000:]}")

    def output_since_start(self) -> str:
        return self.output()[self._start_offset:]

    def terminate(self) -> None:
        if self.is_alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGTERM)

    def pause(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)


class OurNode(BrokerProcess):
    kind = "ours"


Node = Any  # OurNode | KafkaNode


class MixedCluster:
    def __init__(self, workdir: Path, zk_connect: str, ours: Iterable[int], kafka: Iterable[int],
                 overrides: Optional[Dict[str, str]] = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.zk_connect = zk_connect
        self.props = dict(COMMON)
        self.props.update(overrides or {})
        self.nodes: Dict[int, Node] = {}
        self.retired: List[Node] = []  # nodes replaced by the other kind (their output is still checked)
        for i in ours:
            self.nodes[i] = OurNode(self.workdir, zk_connect, broker_id=i, overrides=dict(self.props))
        for i in kafka:
            self.nodes[i] = KafkaNode(self.workdir, zk_connect, i, port=free_port(), overrides=dict(self.props))
        self._zk: Any = None

    def replace(self, broker_id: int, kind: str) -> Node:
        """Swap a stopped broker for one of the other kind with the same id, port and log directory, as an
        operator replacing a cluster's brokers one at a time does. Not started."""
        old = self.nodes[broker_id]
        assert not old.is_alive(), f"stop broker {broker_id} first"
        if kind == "ours":
            new: Node = OurNode(self.workdir, self.zk_connect, broker_id=broker_id, port=old.port,
                                overrides=dict(self.props), log_dir=old.log_dir)
        else:
            new = KafkaNode(self.workdir, self.zk_connect, broker_id, port=old.port, overrides=dict(self.props))
            new.log_dir = old.log_dir
        self.retired.append(old)
        self.nodes[broker_id] = new
        return new

    # ------------------------------------------------------------------ processes
    def __getitem__(self, broker_id: int) -> Node:
        return self.nodes[broker_id]

    def ids(self, kind: Optional[str] = None) -> List[int]:
        return sorted(i for i, n in self.nodes.items() if kind is None or n.kind == kind)

    def kind(self, broker_id: int) -> str:
        return str(self.nodes[broker_id].kind)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def start(self, order: Iterable[int], first_becomes_controller: bool = True) -> None:
        order = list(order)
        first, rest = order[0], order[1:]
        self.nodes[first].start()
        if first_becomes_controller:
            self.wait_controller(lambda c: c == first, 60, f"broker {first} to win /controller")
        for i in rest:
            self.nodes[i].start(wait=False)
        for i in rest:
            self.nodes[i].wait_started(120)
        self.wait_registered(set(self.nodes), 60)
        self.wait_metadata_ready(60)

    def wait_metadata_ready(self, timeout: float) -> None:
        """Until every live broker's Metadata lists every live broker and the controller: a broker learns
        them only from the controller's UpdateMetadata, which can trail its start-up (a client asking too
        early gets controller -1 and no brokers, and librdkafka's admin client then stalls)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            live = {i for i, n in self.nodes.items() if n.is_alive()}
            ctrl = self.controller_id()
            try:
                ok = True
                for i in live:
                    md = AdminClient({"bootstrap.servers": self.nodes[i].bootstrap}).list_topics(timeout=5)
                    last = (i, md.controller_id, sorted(md.brokers))
                    if md.controller_id != ctrl or set(md.brokers) != live:
                        ok = False
                        break
                if ok:
                    return
            except Exception as e:  # a broker still starting
                last = e
            time.sleep(0.2)
        raise AssertionError(f"brokers' metadata never agreed on the cluster (last: {last})")

    def kill_all(self) -> None:
        for n in list(self.nodes.values()) + self.retired:
            try:
                if n.proc is not None and n.proc.poll() is None:
                    os.killpg(n.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            n.kill()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    # ------------------------------------------------------------------ ZooKeeper view
    def zk(self) -> Any:
        if self._zk is None:
            from kazoo.client import KazooClient

            self._zk = KazooClient(hosts=self.zk_connect)
            self._zk.start(timeout=20)
        return self._zk

    def zk_json(self, path: str) -> Tuple[Optional[Dict[str, Any]], Any]:
        zk = self.zk()
        if not zk.exists(path):
            return None, None
        data, stat = zk.get(path)
        return (json.loads(data) if data else None), stat

    def controller_id(self) -> Optional[int]:
        data, _ = self.zk_json("/controller")
        return None if data is None else int(data["brokerid"])

    def controller_epoch(self) -> int:
        data, _ = self.zk_json("/controller_epoch")
        return int(data) if data is not None else 0  # type: ignore[arg-type]

    def wait_controller(self, pred: Any, timeout: float, what: str) -> int:
        deadline = time.monotonic() + timeout
        c = None
        while time.monotonic() < deadline:
            c = self.controller_id()
            if c is not None and pred(c):
                return c
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what} (controller: {c})")

    def registered(self) -> set:
        zk = self.zk()
        return {int(c) for c in zk.get_children("/brokers/ids")} if zk.exists("/brokers/ids") else set()

    def wait_registered(self, ids: set, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.registered() == set(ids):
                return
            time.sleep(0.1)
        raise AssertionError(f"registered brokers {self.registered()} != {ids}")

    def partition_state(self, topic: str, partition: int) -> Optional[Dict[str, Any]]:
        data, _ = self.zk_json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return data

    # ------------------------------------------------------------------ logs on disk
    def segment_files(self, broker_id: int, topic: str, partition: int) -> Dict[str, bytes]:
        d = self.nodes[broker_id].log_dir / f"{topic}-{partition}"
        if not d.is_dir():
            return {}
        return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name.endswith(".log")}

    def checkpoint(self, broker_id: int, topic: str, partition: int) -> str:
        p = self.nodes[broker_id].log_dir / f"{topic}-{partition}" / "leader-epoch-checkpoint"
        return p.read_text() if p.exists() else ""

    def outputs(self) -> str:
        parts = []
        for i, n in sorted(self.nodes.items()):
            parts.append(f"===== {n.kind} broker {i} ({n.output_path.name}) =====\n{n.output()[-5000:]}")
        return "\n".join(parts)


def kafka_dump_log_segments(files: List[Path], *extra: str) -> str:
    """Run Kafka's own ``kafka.tools.DumpLogSegments`` over ``files`` (segments, indexes, producer snapshots);
    its output (stdout and stderr)."""
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("java not found on PATH")
    out = subprocess.run([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:/dev/null",
                          "-cp", kafka_classpath(), "kafka.tools.DumpLogSegments",
                          "--files", ",".join(str(f) for f in files), *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return out.stdout.decode("utf-8", "replace")


def kafka_tool(main_class: str, *args: str, timeout: float = 120) -> Tuple[int, str]:
    """Run one of Kafka 3.9.1's own command-line tools (e.g. ``org.apache.kafka.tools.TopicCommand``) from its
    jars; (exit status, stdout+stderr)."""
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("java not found on PATH")
    out = subprocess.run([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j.configuration=file:/dev/null",
                          "-cp", kafka_classpath(), main_class, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return out.returncode, out.stdout.decode("utf-8", "replace")
