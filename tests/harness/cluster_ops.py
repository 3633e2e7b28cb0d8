"""Helpers for multi-broker integration tests (tests/integration/cluster/): raw requests to one broker process,
metadata as each broker sees it, ZooKeeper reads on a cluster's chroot, stock-client produce/consume, and
Kafka's own replica assignment (written out here from Kafka's AdminUtils, independently of the broker's code)
to compare placements with.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from confluent_kafka import Producer
from kazoo.client import KazooClient

from broker.protocol.api import ApiKey
from tests.harness.kafka import KAFKA_LIBS, kafka_classpath
from tests.harness.waiting import wait_for
from tests.integration.broker.wire import RawClient
from tools.cluster import BrokerProcess, LocalCluster

__all__ = ["ApiKey", "PartitionInfo", "RawClient", "call", "metadata", "partitions", "wait_for", "zk_client",
           "broker_epoch", "controller_epoch", "controller_id", "all_brokers_agree", "produce_values",
           "BackgroundProducer", "kafka_assignment", "rack_aware_assignment", "matches_kafka_assignment",
           "partition_dirs", "run_kafka_tool", "module_cluster", "assert_no_traceback"]


# ------------------------------------------------------------------------------------------------ raw requests
def _bootstrap(target: Any) -> str:
    return target.bootstrap if isinstance(target, BrokerProcess) else str(target)


def call(target: Any, key: ApiKey, version: int, body: Dict[str, Any], timeout_s: float = 30.0) -> Any:
    """One request on a fresh connection to one broker (a BrokerProcess or host:port); the decoded response."""
    with RawClient(_bootstrap(target), timeout_s=timeout_s) as c:
        return c.request(key, version, body, client_id="cluster-test")


@dataclass(frozen=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: Tuple[int, ...]
    isr: Tuple[int, ...]
    offline: Tuple[int, ...]
    error: int


def metadata(target: Any, topics: Optional[Sequence[str]] = None) -> Any:
    body = {"topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": False}
    return call(target, ApiKey.METADATA, 12, body)


def partitions(target: Any, topic: str) -> Dict[int, PartitionInfo]:
    """partition -> PartitionInfo as one broker's metadata cache has it ({} if it does not know the topic)."""
    m = metadata(target, [topic])
    t = m.topics[0]
    if t.error_code != 0:
        return {}
    return {p.partition_index: PartitionInfo(p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                             tuple(p.offline_replicas), p.error_code) for p in t.partitions}


def all_brokers_agree(cluster: LocalCluster, topic: str, check: Callable[[Dict[int, PartitionInfo]], bool],
                      brokers: Optional[Sequence[int]] = None) -> Optional[Dict[int, PartitionInfo]]:
    """The partitions of ``topic`` when every (given, live) broker's metadata satisfies ``check`` alike, else None."""
    seen = None
    for b in cluster.brokers:
        if (brokers is not None and b.broker_id not in brokers) or not b.is_alive():
            continue
        p = partitions(b, topic)
        if not p or not check(p) or (seen is not None and p != seen):
            return None
        seen = p
    return seen


def controller_id(cluster: LocalCluster) -> int:
    with zk_client(cluster) as zk:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])


# ------------------------------------------------------------------------------------------------ ZooKeeper
@contextmanager
def zk_client(cluster: LocalCluster) -> Iterator[KazooClient]:
    """A kazoo client on the cluster's chroot (its zookeeper.connect)."""
    zk = KazooClient(hosts=cluster.zk_connect, timeout=15)
    zk.start(timeout=15)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def broker_epoch(cluster: LocalCluster, broker_id: int) -> int:
    """KIP-380 broker epoch: the czxid of /brokers/ids/<id>."""
    with zk_client(cluster) as zk:
        return int(zk.get(f"/brokers/ids/{broker_id}")[1].czxid)


def controller_epoch(cluster: LocalCluster) -> int:
    with zk_client(cluster) as zk:
        return int(zk.get("/controller_epoch")[0])


# ------------------------------------------------------------------------------------------------ stock clients
def produce_values(bootstrap: str, topic: str, values: Sequence[bytes], partition: Optional[int] = None,
                   extra: Optional[Dict[str, Any]] = None, timeout_s: float = 60.0) -> List[Tuple[int, int, bytes]]:
    """Produce with an idempotent acks=all confluent-kafka producer; (partition, offset, value) of each ack.
    Any delivery error fails."""
    conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 5, "message.timeout.ms": int(timeout_s * 1000)}
    conf.update(extra or {})
    p = Producer(conf)
    acked: List[Tuple[int, int, bytes]] = []
    errors: List[Any] = []

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for v in values:
        kwargs: Dict[str, Any] = {"value": v, "on_delivery": cb}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(timeout_s)
    assert left == 0 and not errors, f"produce failed: {left} undelivered, errors {errors[:5]}"
    return acked


class BackgroundProducer:
    """An idempotent acks=all confluent-kafka producer sending ``prefix-<n>`` values until stopped.

    ``acked`` holds (partition, offset, value) of every acknowledged record, ``errors`` every delivery or fatal
    error, in order."""

    def __init__(self, bootstrap: str, topic: str, partition: Optional[int] = 0, prefix: str = "v",
                 rate_per_s: float = 200.0, extra: Optional[Dict[str, Any]] = None) -> None:
        conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                                "error_cb": self._on_error}
        conf.update(extra or {})
        self.producer = Producer(conf)
        self.topic, self.partition, self.prefix, self.rate = topic, partition, prefix, rate_per_s
        self.acked: List[Tuple[int, int, bytes]] = []
        self.errors: List[Any] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self.errors.append(err)

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            kwargs: Dict[str, Any] = {"value": f"{self.prefix}-{self.sent}".encode(), "on_delivery": self._cb}
            if self.partition is not None:
                kwargs["partition"] = self.partition
            try:
                self.producer.produce(self.topic, **kwargs)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(1.0 / self.rate)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def wait_acked(self, n: int, timeout_s: float, what: str = "") -> None:
        wait_for(lambda: len(self.acked) >= n or self.errors, timeout_s, f"{n} acknowledged records {what}")
        assert not self.errors, f"producer errors: {self.errors[:5]}"

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(30)
        left = self.producer.flush(timeout_s)
        assert left == 0, f"{left} records still undelivered after {timeout_s}s"


# ------------------------------------------------------------------------------------------------ assignment
def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def kafka_assignment(brokers: Sequence[int], num_partitions: int, rf: int, start_index: int, shift: int,
                     start_partition: int = 0) -> Dict[int, List[int]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware with a given start index and replica shift."""
    arr = sorted(brokers)
    n = len(arr)
    out: Dict[int, List[int]] = {}
    current = start_partition
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        out[current] = [arr[first]] + [arr[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        current += 1
    return out


def rack_aware_assignment(racks: Mapping[int, str], num_partitions: int, rf: int, start_index: int, shift: int,
                          start_partition: int = 0) -> Dict[int, List[int]]:
    """AdminUtils.assignReplicasToBrokersRackAware with a given start index and replica shift."""
    by_rack: Dict[str, List[int]] = {}
    for b, r in racks.items():
        by_rack.setdefault(r, []).append(b)
    queues = {r: sorted(bs) for r, bs in by_rack.items()}
    names = sorted(queues)
    arranged: List[int] = []
    i = 0
    while len(arranged) < len(racks):
        q = queues[names[i]]
        if q:
            arranged.append(q.pop(0))
        i = (i + 1) % len(names)
    n, num_racks = len(arranged), len(names)
    out: Dict[int, List[int]] = {}
    current = start_partition
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas, with_racks, with_brokers = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                if ((racks[b] not in with_racks or len(with_racks) == num_racks)
                        and (b not in with_brokers or len(with_brokers) == n)):
                    replicas.append(b)
                    with_racks.add(racks[b])
                    with_brokers.add(b)
                    break
        out[current] = replicas
        current += 1
    return out


def matches_kafka_assignment(actual: Mapping[int, Sequence[int]], brokers: Sequence[int], rf: int,
                             racks: Optional[Mapping[int, str]] = None) -> bool:
    """True when some start index and shift make Kafka's algorithm produce exactly ``actual``."""
    want = {p: list(r) for p, r in actual.items()}
    n = len(brokers)
    for start in range(n):
        for shift in range(n):
            if racks is None:
                got = kafka_assignment(brokers, len(want), rf, start, shift)
            else:
                got = rack_aware_assignment(racks, len(want), rf, start, shift)
            if got == want:
                return True
    return False


# ------------------------------------------------------------------------------------------------ disk
def partition_dirs(broker: BrokerProcess, topic: str) -> List[str]:
    """Names of the partition directories of ``topic`` in one broker's log dir (live ones, not ``-delete``)."""
    if not broker.log_dir.exists():
        return []
    return sorted(d.name for d in broker.log_dir.iterdir()
                  if d.is_dir() and d.name.rsplit("-", 1)[0] == topic and d.name.rsplit("-", 1)[1].isdigit())


def any_dirs_of(broker: BrokerProcess, topic: str) -> List[str]:
    """Every directory of ``topic`` in one broker's log dir, ``<tp>.<uuid>-delete`` ones included."""
    if not broker.log_dir.exists():
        return []
    return sorted(d.name for d in broker.log_dir.iterdir() if d.is_dir() and d.name.startswith(topic + "-"))


# ------------------------------------------------------------------------------------------------ Kafka's tools
def run_kafka_tool(main_class: str, args: Sequence[str], timeout_s: float = 180.0) -> subprocess.CompletedProcess:
    """Run one of Apache Kafka 3.9.1's own command-line tools (from the jars the install step resolved)."""
    java = shutil.which("java")
    assert java is not None, "java not found"
    cp = kafka_classpath()
    assert KAFKA_LIBS.exists()
    return subprocess.run([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                           "-Dlog4j.configuration=file:/dev/null", "-cp", cp, main_class, *args],
                          capture_output=True, text=True, timeout=timeout_s)


# ------------------------------------------------------------------------------------------------ fixtures
def assert_no_traceback(cluster: LocalCluster) -> None:
    for b in cluster.brokers:
        out = b.output()
        assert "Traceback" not in out, f"broker {b.broker_id} logged a traceback:\n{out[-6000:]}"


@contextmanager
def module_cluster(workdir: Path, zookeeper: str, num_brokers: int = 3, overrides: Optional[Dict[str, str]] = None,
                   broker_overrides: Optional[Dict[int, Dict[str, str]]] = None) -> Iterator[LocalCluster]:
    """A cluster shared by the tests of one module, on the session's ZooKeeper in its own chroot, with the same
    fast-failure settings as the ``new_cluster`` fixture; killed at the end and checked for tracebacks."""
    from tests.integration.cluster.conftest import FAST

    props = dict(FAST)
    props.update(overrides or {})
    c = LocalCluster(workdir, num_brokers, zk_connect=f"{zookeeper}/m-{uuid.uuid4().hex[:10]}", overrides=props,
                     broker_overrides=broker_overrides)
    try:
        c.start()
        yield c
    finally:
        c.kill()
    assert_no_traceback(c)
