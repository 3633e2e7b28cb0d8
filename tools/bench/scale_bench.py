"""Scale benchmark: partitions, replicas, connections and consumer groups at production size, our broker beside
Apache Kafka 3.9.1, one after the other on one ZooKeeper, same machine, same clients.

    .venv/bin/python -m tools.bench.scale_bench [--quick] [--only ours|kafka] [--partitions 10000]
        [--rows partitions,cluster,connections,groups] [--connections 10000] [--groups 1000] [--json]

Each row group runs on fresh brokers in a fresh ZooKeeper chroot, first ours (``bin/kafka-server-start.sh``
processes, tools/cluster.py's BrokerProcess), then Kafka (``kafka.Kafka`` from the jars the install step resolved,
started with the JVM options ``kafka-server-start.sh`` gives it: ``-Xmx1G -Xms1G`` and kafka-run-class.sh's G1
settings, ``KAFKA_JVM_OPTS`` below, not the test harness's ``-Xmx512m -XX:+UseSerialGC``; logging with the harness's
log4j configuration, INFO into one file). Both run with their
defaults except ``zookeeper.session.timeout.ms`` = 6 s (3 s with ``--quick``), ``auto.leader.rebalance.enable=false``
(so that only the preferred election below moves leaders), ``group.initial.rebalance.delay.ms`` 0, and the offsets
and transaction topics' replication factor = number of brokers (min ISR 2 at 3).
"All led" is always read from a broker's Metadata answer (v12, every topic, over one raw socket of the project's
codec): every partition of the topics has a leader (>= 0; not the broker being stopped where that matters).

- **partitions** (one broker; ``--partitions`` N, default 10,000 as 100 topics x 100 partitions, RF 1), in order:
  create (CreateTopics for all topics at once -> all led); Metadata for all topics, p50/p99 of the raw round trip
  (request out -> whole answer in, not decoded); descriptors (``/proc/<pid>/fd`` of the broker's process tree,
  counting those that point into partition directories) per partition at 1 segment; produce throughput of 100 B
  records (confluent-kafka, acks=all, linger.ms 5) to one partition and spread round-robin over 1,000 partitions
  (explicit partitions), each twice (the second pass reported: a partition's first data costs more), and their
  ratio, with the CPU per record of the client (this process, librdkafka's threads included) and of the broker,
  and the ratio the client's CPU alone allows (its CPU per record single / spread); then the same with the Java
  client (Kafka's ``kafka-producer-perf-test``, acks=all, linger.ms 5) to the one partition and to a topic of
  1,000 partitions (its sticky partitioner: the Java client sends many partitions' batches per ProduceRequest,
  librdkafka one partition per request); a clean restart (SIGTERM -> exit, then start -> all led); a restart after kill -9 with unflushed records
  in every partition (start -> all led, recovery included; started once ZooKeeper dropped the killed broker's
  registration, which Kafka needs); last, 20 segments rolled in each partition (``segment.bytes`` 1000 on the
  topics, one 600 B record per batch), chunk by chunk for as many partitions K as the 20,000-descriptor limit
  and a time budget (300 s) allow, and the descriptors per rolled partition (Kafka keeps one per segment, so it
  stops near 700 partitions; ours holds the active segments plus a bounded cache, so K is N when time allows);
  RSS of the process tree after each phase.
- **cluster** (3 brokers, N partitions at RF 3, i.e. N replicas on every broker): create -> all led and -> every
  ISR full; one acks=all record to each partition (confluent-kafka, explicit partitions, after an untimed pass for
  metadata and connections), with 1 and with 5 requests in flight per connection: records/s (librdkafka sends one
  ProduceRequest per partition, so this is one replication round trip per partition); controlled shutdown of a non-controller broker (SIGTERM -> Metadata shows no partition led by it, and
  -> its process exited); kill -9 of the other non-controller broker (-> every partition led again; the
  controller notices through the ZooKeeper session timeout, included); restart of each (-> every ISR full);
  preferred-leader election with Kafka's own ``kafka-leader-election.sh`` (LeaderElectionCommand from the jars,
  ``--all-topic-partitions``) -> every partition led by its first replica; reassignment of 1,000 partitions of a
  topic at RF 2 (each with 100 records) moving one replica each, with Kafka's own ``kafka-reassign-partitions.sh
  --execute`` -> Metadata shows the target replicas all in sync, and -> ``--verify`` says complete (the same Kafka
  tools for both brokers, so the client side is the same).
- **connections** (one broker, one 1-partition topic): a producer at 1,000 records/s (acks=all, idempotent,
  linger.ms 0) and a consumer reading along: produce (ack) p50/p99 and end-to-end (produce call -> consumer) p99,
  without and then with 10,000 idle connections, each having sent ApiVersions (``tools/bench/idle_connections.py``,
  child processes of at most 5,000 sockets each, for the descriptor limit); answered/refused counts and the RSS
  growth per idle connection (noise at ``--quick``'s 200: a JVM may even shrink meanwhile).
- **groups** (3 brokers, ``offsets.topic.num.partitions`` 50): ``tools/bench/group_load.py``'s failover run:
  1 M offset records preloaded, 1,000 groups x 3 members committing every second for 20 s (time to Stable,
  OffsetCommit p50/p99), then SIGKILL of the busiest non-controller coordinator and the time until every one of its
  groups is served again (session timeout and loading included; the coordinators' own load times from their logs),
  and every acknowledged offset read back (the last acknowledged one, or a later commit whose answer died with
  the killed broker: its record may have reached the new leader first, with Kafka as with ours; counted apart).

Prints a table per row group (ours, kafka, ours/kafka, target) and a summary against the targets; nothing here
asserts. A row that fails leaves a gap with its error; the others still run. Progress goes to stderr. The full run
(10,000 partitions, both brokers) takes a long time on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import psutil
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from broker.protocol.api import ApiKey, decode_response_with_header, encode_request
from tests.harness.kafka import RealKafkaBroker, kafka_classpath
from tools.bench import group_load
from tools.bench.idle_connections import IdleConnectionsProcess
from tools.cluster import BrokerProcess, ZooKeeperProcess, free_port
from tools.producer_perf import percentile

ROWS = ("partitions", "cluster", "connections", "groups")
SESSION_TIMEOUT_MS = 6000  # --quick: 3000
#: kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (Kafka 3.9.1)
KAFKA_JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
                  "-Djava.awt.headless=true"]
#: kafka-run-class.sh's heap for the command-line tools
KAFKA_TOOL_JVM_OPTS = ["-Xmx256M", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
START_TIMEOUT_S = 1800.0
LED_TIMEOUT_S = 1800.0
IDLE_PER_WORKER = 5000
MB = 1024 * 1024


def log(msg: str) -> None:
    """Progress on stderr (stdout carries only the tables)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ sizes
@dataclass
class Sizes:
    """Every count the rows use; ``--quick`` shrinks them to seconds of work."""

    partitions: int = 10_000
    spread: int = 1_000
    produce_records: int = 300_000
    java_records: int = 1_000_000
    segments: int = 20
    roll_budget_s: float = 300.0
    metadata_requests: int = 200
    unflushed_per_partition: int = 10
    reassign: int = 1_000
    reassign_records: int = 100
    connections: int = 10_000
    latency_s: float = 20.0
    groups: int = 1_000
    group_members: int = 3
    group_load_partitions: int = 1_000
    group_preload_partitions: int = 1_000
    group_records: int = 1_000_000
    group_run_s: float = 20.0
    session_timeout_ms: int = SESSION_TIMEOUT_MS

    @classmethod
    def quick(cls) -> "Sizes":
        return cls(partitions=300, spread=300, produce_records=20_000, java_records=20_000, roll_budget_s=30.0, metadata_requests=50,
                   unflushed_per_partition=5, reassign=30, reassign_records=10, connections=200, latency_s=3.0,
                   groups=20, group_members=2, group_load_partitions=100, group_preload_partitions=10,
                   group_records=1_000, group_run_s=3.0, session_timeout_ms=3000)

    def topic_sizes(self, total: int) -> List[int]:
        """``total`` partitions as topics of ~100 partitions (100 topics x 100 at 10,000)."""
        topics = max(1, total // 100)
        return [total // topics + (1 if i < total % topics else 0) for i in range(topics)]


# ------------------------------------------------------------------------------------------------ processes
class KafkaServerStart(RealKafkaBroker):
    """Kafka 3.9.1's ``kafka.Kafka`` with the JVM options of ``kafka-server-start.sh`` (the harness's
    RealKafkaBroker runs ``-Xmx512m -XX:+UseSerialGC``, sized for tests); output in ``kafka-<id>.out``."""

    def jvm_options(self) -> list:
        return list(KAFKA_JVM_OPTS)

    def stop(self, timeout: float = 600.0) -> int:
        return super().stop(timeout)


class Node:
    """One broker of either kind: start/stop/kill, and its process tree's descriptors and RSS."""

    def __init__(self, kind: str, workdir: Path, zk: str, broker_id: int, overrides: Dict[str, str]) -> None:
        self.kind = kind
        self.broker_id = broker_id
        if kind == "ours":
            self.b: Any = BrokerProcess(workdir, zk, broker_id=broker_id, port=free_port(), overrides=overrides)
        else:
            self.b = KafkaServerStart(workdir, zk, broker_id=broker_id, port=free_port(), overrides=overrides)

    @property
    def bootstrap(self) -> str:
        return str(self.b.bootstrap)

    @property
    def log_dir(self) -> Path:
        return Path(os.path.realpath(self.b.log_dir))

    def start(self) -> None:
        self.b.start(timeout=START_TIMEOUT_S)

    def stop(self) -> int:
        return int(self.b.stop(timeout=900.0))

    def terminate(self) -> None:
        """SIGTERM without waiting."""
        proc = self.b.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 15)
            if self.kind == "ours":
                self.b._terminated = True

    def wait_exit(self, timeout: float = 900.0) -> None:
        self.b.proc.wait(timeout)

    def kill(self) -> None:
        self.b.kill()

    def alive(self) -> bool:
        return bool(self.b.is_alive())

    def pid(self) -> int:
        return int(self.b.proc.pid)

    def processes(self) -> List[psutil.Process]:
        p = psutil.Process(self.pid())
        return [p] + p.children(recursive=True)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the process tree so far."""
        total = 0.0
        for p in self.processes():
            try:
                c = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += c.user + c.system
        return total

    def rss_bytes(self) -> int:
        total = 0
        for p in self.processes():
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def fd_targets(self) -> List[str]:
        out: List[str] = []
        for p in self.processes():
            d = f"/proc/{p.pid}/fd"
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                try:
                    out.append(os.readlink(f"{d}/{n}"))
                except OSError:
                    pass
        return out

    def fds_by_topic(self) -> Tuple[int, Dict[str, int]]:
        """(all descriptors, descriptors pointing into each topic's partition directories)."""
        targets = self.fd_targets()
        root = str(self.log_dir) + "/"
        per: Dict[str, int] = {}
        for t in targets:
            if t.startswith(root):
                part_dir = t[len(root):].split("/", 1)[0]
                topic = part_dir.rsplit("-", 1)[0] if "-" in part_dir else part_dir
                per[topic] = per.get(topic, 0) + 1
        return len(targets), per


def make_nodes(kind: str, workdir: Path, zk_root: str, row: str, count: int, overrides: Dict[str, str],
               sz: Sizes) -> Tuple[List[Node], str]:
    """``count`` brokers of ``kind`` on a fresh chroot; (nodes, chroot connect string)."""
    zk = f"{zk_root}/{kind}-{row}-{uuid.uuid4().hex[:6]}"
    base = {"auto.leader.rebalance.enable": "false", "offsets.topic.replication.factor": str(min(3, count)),
            "transaction.state.log.replication.factor": str(min(3, count)),
            "transaction.state.log.min.isr": str(min(2, count)), "group.initial.rebalance.delay.ms": "0",
            "zookeeper.session.timeout.ms": str(sz.session_timeout_ms)}
    base.update(overrides)
    return [Node(kind, workdir / f"{kind}-{row}", zk, i, base) for i in range(count)], zk


def zk_broker_gone(zk: str, broker_id: int, timeout_s: float = 60.0) -> None:
    """Wait until ``/brokers/ids/<id>`` is gone (a killed broker's session expired)."""
    c = KazooClient(hosts=zk)
    c.start(timeout=15)
    try:
        wait_for(lambda: c.exists(f"/brokers/ids/{broker_id}") is None, timeout_s,
                 f"ZooKeeper to drop broker {broker_id}'s registration")
    finally:
        c.stop()
        c.close()


# ------------------------------------------------------------------------------------------------ wire
class Wire:
    """One blocking connection speaking the project's codec, reconnecting after any failure."""

    def __init__(self, bootstrap: str, timeout_s: float = 120.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.addr = (host, int(port))
        self.timeout_s = timeout_s
        self.sock: Optional[socket.socket] = None
        self.cid = 0

    def _conn(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=5)
            self.sock.settimeout(self.timeout_s)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("EOF")  # an OSError
            got += k
        return bytes(buf)

    def raw(self, api: int, version: int, body: Any) -> bytes:
        """Send one request; the whole response frame (size prefix included), not decoded. A connection the broker
        closed since the last request (it restarted) is opened again once."""
        for attempt in (1, 2):
            self.cid += 1
            frame = encode_request(api, version, self.cid, "scale-bench", body)
            reused = self.sock is not None
            try:
                sock = self._conn()
                sock.sendall(frame)
                head = self._recv_exact(sock, 4)
                return head + self._recv_exact(sock, struct.unpack(">i", head)[0])
            except OSError:
                self.close()
                if not reused or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def call(self, api: int, version: int, body: Any) -> Any:
        return decode_response_with_header(api, version, self.raw(api, version, body))[1]


METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


@dataclass
class Snapshot:
    """What one Metadata answer says: partition -> (leader, replicas, isr), the controller and the live brokers."""

    parts: Dict[Tuple[str, int], Tuple[int, Tuple[int, ...], Tuple[int, ...]]] = field(default_factory=dict)
    controller: int = -1
    brokers: Dict[int, str] = field(default_factory=dict)

    def topic_sizes(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for t, _ in self.parts:
            out[t] = out.get(t, 0) + 1
        return out

    def leaders(self) -> Dict[int, int]:
        out: Dict[int, int] = {}
        for leader, _, _ in self.parts.values():
            out[leader] = out.get(leader, 0) + 1
        return out


def snapshot(wire: Wire) -> Snapshot:
    m = wire.call(ApiKey.METADATA, 12, METADATA_ALL)
    s = Snapshot(controller=m.controller_id, brokers={b.node_id: f"{b.host}:{b.port}" for b in m.brokers})
    for t in m.topics:
        if t.error_code:
            continue
        for p in t.partitions:
            s.parts[(t.name, p.partition_index)] = (p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
    return s


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``predicate`` (exceptions count as false) until it is truthy; its value, or TimeoutError."""
    deadline = time.monotonic() + timeout_s
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            v = predicate()
            if v:
                return v
        except Exception as exc:
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}"
                       + (f" (last error: {last})" if last else ""))


def wait_partitions(wire: Wire, expect: Dict[str, int], what: str, avoid: Optional[int] = None,
                    isr: Optional[int] = None, preferred: bool = False,
                    replicas: Optional[Dict[Tuple[str, int], Sequence[int]]] = None,
                    timeout_s: float = LED_TIMEOUT_S) -> float:
    """Poll Metadata until every partition of ``expect`` (topic -> partition count) is led (not by ``avoid``;
    with ``isr`` members; by its first replica if ``preferred``; with exactly ``replicas`` if given, all in sync);
    returns time.monotonic() of the answer that showed it. Polls no faster than the answers take to decode, so a
    10,000-partition poll does not take a core from the brokers."""
    def check() -> Optional[float]:
        t0 = time.monotonic()
        s = snapshot(wire)
        seen = time.monotonic()
        ok = all(s.topic_sizes().get(t, 0) >= n for t, n in expect.items())
        if ok:
            for (t, p), (leader, reps, isrs) in s.parts.items():
                if t not in expect:
                    continue
                if leader < 0 or leader == avoid or (isr is not None and len(isrs) < isr) or \
                        (preferred and (not reps or leader != reps[0])):
                    ok = False
                    break
                if replicas is not None and (t, p) in replicas:
                    want = list(replicas[(t, p)])
                    if list(reps) != want or sorted(isrs) != sorted(want):
                        ok = False
                        break
        check.pause = max(0.05, 2 * (seen - t0))  # type: ignore[attr-defined]
        return seen if ok else None

    deadline = time.monotonic() + timeout_s
    last: Optional[BaseException] = None
    check.pause = 0.05  # type: ignore[attr-defined]
    while time.monotonic() < deadline:
        try:
            r = check()
            if r is not None:
                return r
        except Exception as exc:
            last = exc
        time.sleep(check.pause)  # type: ignore[attr-defined]
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}"
                       + (f" (last error: {last})" if last else ""))


# ------------------------------------------------------------------------------------------------ clients
_ADMINS: Dict[str, AdminClient] = {}


def admin_for(bootstrap: str) -> AdminClient:
    a = _ADMINS.get(bootstrap)
    if a is None:
        a = _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000,
                                              "log_level": 2})
    return a


def create_topics(bootstrap: str, topics: Dict[str, int], rf: int, config: Optional[Dict[str, str]] = None,
                  assignment: Optional[Dict[str, List[List[int]]]] = None) -> None:
    """One CreateTopics request for every topic (operation_timeout 0: the answer does not wait for leaders)."""
    new = []
    for name, n in topics.items():
        if assignment and name in assignment:
            # librdkafka wants the partition count with an assignment, and no replication factor
            new.append(NewTopic(name, len(assignment[name]), replica_assignment=assignment[name],
                                config=config or {}))
        else:
            new.append(NewTopic(name, n, rf, config=config or {}))
    futures = admin_for(bootstrap).create_topics(new, operation_timeout=0, request_timeout=600)
    for name, f in futures.items():
        f.result(timeout=660)


def producer_conf(bootstrap: str, **extra: Any) -> Dict[str, Any]:
    conf: Dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
                            "enable.idempotence": False, "message.timeout.ms": 600_000, "log_level": 2}
    conf.update(extra)
    return conf


def _process_cpu_s() -> float:
    """CPU seconds of this process so far, every thread (librdkafka's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce_to(bootstrap: str, targets: Sequence[Tuple[str, int]], records: int, size: int = 100,
               warmup: bool = True, node: Optional["Node"] = None, **extra: Any) -> Dict[str, float]:
    """``records`` x ``size`` B round-robin over ``targets`` (explicit partitions): records/s of the acknowledged,
    and the CPU per record of the client (this process) and, given ``node``, of the broker's process tree."""
    p = Producer(producer_conf(bootstrap, **extra))
    payload = os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")
    counts = [0, 0]

    def cb(err: Any, _msg: Any) -> None:
        counts[err is None] += 1

    def send(topic: str, part: int) -> None:
        while True:
            try:
                p.produce(topic, payload, partition=part, on_delivery=cb)
                return
            except BufferError:
                p.poll(0.01)

    if warmup:  # metadata, connections: one record per target, untimed
        for t, part in targets:
            send(t, part)
        p.flush(600)
        counts[:] = [0, 0]
    n = len(targets)
    broker_cpu0 = node.cpu_seconds() if node is not None else 0.0
    cpu0 = _process_cpu_s()
    t0 = time.perf_counter()
    for i in range(records):
        t, part = targets[i % n]
        send(t, part)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(600)
    elapsed = time.perf_counter() - t0
    per_record = 1e6 / max(1, counts[1])
    out = {"records": counts[1], "errors": counts[0] + left, "seconds": elapsed,
           "records_per_s": counts[1] / elapsed if elapsed else float("nan"),
           "client_us_per_record": (_process_cpu_s() - cpu0) * per_record}
    if node is not None:
        out["broker_us_per_record"] = (node.cpu_seconds() - broker_cpu0) * per_record
    return out


#: the JVM options of Kafka's kafka-producer-perf-test.sh (kafka-run-class.sh: -Xmx256M, G1, full JIT)
PERF_TEST_JVM_OPTS = ["-Xmx256M", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
_PERF_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec")


def java_produce(bootstrap: str, topic: str, records: int, node: Optional["Node"] = None) -> Dict[str, float]:
    """Kafka's own producer benchmark (``kafka-producer-perf-test.sh``: ProducerPerformance from the 3.9.1 jars,
    the Java client) sending ``records`` x 100 B to ``topic`` (acks=all, linger.ms 5, the client's defaults
    otherwise: 16 KB batches, the uniform sticky partitioner over every partition of the topic). The Java client
    puts the batches of many partitions in one ProduceRequest, which librdkafka does not."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not found on PATH")
    cmd = [java, *PERF_TEST_JVM_OPTS, "-Dlog4j.configuration=file:/dev/null", "-cp", kafka_classpath(),
           "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
           "--record-size", "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
           "acks=all", "linger.ms=5"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_cpu0 = node.cpu_seconds() if node is not None else 0.0
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = r.stdout.decode("utf-8", "replace")
    found = [m for m in (_PERF_LINE.match(line) for line in out.splitlines()) if m]
    if r.returncode != 0 or not found:
        raise RuntimeError(f"ProducerPerformance failed (exit {r.returncode}): {out[-500:]}")
    sent, rps = int(found[-1].group(1)), float(found[-1].group(2))
    res = {"records": float(sent), "records_per_s": rps,
           "client_us_per_record": ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))
           * 1e6 / max(1, sent)}
    if node is not None:
        res["broker_us_per_record"] = (node.cpu_seconds() - broker_cpu0) * 1e6 / max(1, sent)
    return res


def kafka_tool(main_class: str, args: Sequence[str], timeout_s: float = 1800.0) -> Tuple[int, str]:
    """One of Kafka 3.9.1's own command-line tools, as kafka-run-class.sh runs it: (exit status, output)."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not found on PATH")
    r = subprocess.run([java, *KAFKA_TOOL_JVM_OPTS, "-Dlog4j.configuration=file:/dev/null", "-cp", kafka_classpath(),
                        main_class, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    return r.returncode, r.stdout.decode("utf-8", "replace")


# ------------------------------------------------------------------------------------------------ row: partitions
def count_segments(node: Node, tps: Sequence[Tuple[str, int]]) -> int:
    """``.log`` files in the directories of ``tps``."""
    n = 0
    for t, p in tps:
        try:
            n += sum(1 for f in os.scandir(node.log_dir / f"{t}-{p}") if f.name.endswith(".log"))
        except FileNotFoundError:
            pass
    return n


def fds_into(node: Node, tps: Sequence[Tuple[str, int]]) -> int:
    """Descriptors of the broker's process tree pointing into the directories of ``tps``."""
    dirs = {f"{t}-{p}" for t, p in tps}
    root = str(node.log_dir) + "/"
    return sum(1 for x in node.fd_targets() if x.startswith(root) and x[len(root):].split("/", 1)[0] in dirs)


def set_topic_config(bootstrap: str, topics: Iterable[str], config: Dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) of ``config`` for every topic."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    resources = [ConfigResource("topic", t, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]) for t in topics]
    for f in admin_for(bootstrap).incremental_alter_configs(resources, request_timeout=600).values():
        f.result(660)


def roll_segments(kind: str, node: Node, tps: List[Tuple[str, int]], segments: int,
                  budget_s: float) -> Tuple[int, bool, float]:
    """Roll ``segments`` segments in as many partitions of ``tps`` as the descriptor limit and ``budget_s`` allow,
    chunk by chunk: each chunk is sized from what the previous one showed, the descriptors added per new segment
    (first guess 1, Kafka's) so that no chunk can take the broker past ``limit - 3000``, and the rolls per second
    so that it ends within the budget (Kafka rolls ~5 segments/s here: each roll writes and fsyncs files). One
    600 B record per batch, ``segment.bytes`` 1000: each record rolls a segment. Returns (partitions rolled,
    whether all were, rolls per second over all chunks)."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per_segment, rolls_per_s, rolling_s = 1.0, 0.0, 0.0
    done = 0
    t_start = time.monotonic()
    p = Producer(producer_conf(node.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1}))
    try:
        while done < len(tps):
            before = node.fds_by_topic()[0]
            left_s = budget_s - (time.monotonic() - t_start)
            chunk = min(len(tps) - done, 1000, int((limit - 3000 - before) / (segments * max(per_segment, 0.02))),
                        10 if done == 0 else int(rolls_per_s * left_s / segments))
            if chunk < 1:
                break
            part = tps[done:done + chunk]
            t0 = time.monotonic()
            for _ in range(segments):
                for t, q in part:
                    while True:
                        try:
                            p.produce(t, b"s" * 600, partition=q)
                            break
                        except BufferError:
                            p.poll(0.01)
                if p.flush(600):
                    raise RuntimeError("segment records not acknowledged")
            rolling_s += time.monotonic() - t0
            rolls_per_s = chunk * segments / max(1e-3, time.monotonic() - t0)
            done += chunk
            time.sleep(0.5)
            per_segment = max(0.0, node.fds_by_topic()[0] - before) / (chunk * segments)
            log(f"[{kind}] partitions: {done} partitions rolled, {per_segment:.2f} descriptors per new segment, "
                f"{rolls_per_s:.0f} rolls/s")
    finally:
        del p
    return done, done == len(tps), done * segments / max(1e-3, rolling_s)


def row_partitions(kind: str, work: Path, zk_root: str, sz: Sizes) -> Dict[str, float]:
    """One broker, N partitions: create, Metadata, descriptors, RSS, produce spread, restarts, 20 segments."""
    res: Dict[str, float] = {}
    (node,), zk = make_nodes(kind, work, zk_root, "partitions", 1, {}, sz)
    node.start()
    try:
        wire = Wire(node.bootstrap)
        fds0, _ = node.fds_by_topic()
        res["rss_empty_mb"] = node.rss_bytes() / MB
        sizes = sz.topic_sizes(sz.partitions)
        topics = {f"scale{i:03d}": n for i, n in enumerate(sizes)}
        all_tps = [(t, p) for t, n in topics.items() for p in range(n)]
        n_parts = len(all_tps)
        log(f"[{kind}] partitions: creating {n_parts} partitions in {len(topics)} topics")
        t0 = time.monotonic()
        create_topics(node.bootstrap, topics, 1)
        res["create_s"] = wait_partitions(wire, topics, f"{n_parts} partitions led") - t0
        log(f"[{kind}] partitions: all led after {res['create_s']:.1f} s")
        time.sleep(2)
        fds, per = node.fds_by_topic()
        res["fds_total"] = fds
        res["fds_per_partition_1seg"] = sum(per.get(t, 0) for t in topics) / n_parts
        res["fds_per_partition_all"] = (fds - fds0) / n_parts
        res["rss_created_mb"] = node.rss_bytes() / MB

        log(f"[{kind}] partitions: {sz.metadata_requests} Metadata requests for all topics")
        lat = []
        size = 0
        for _ in range(sz.metadata_requests):
            t = time.perf_counter()
            size = len(wire.raw(ApiKey.METADATA, 12, METADATA_ALL))
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        res["metadata_p50_ms"], res["metadata_p99_ms"] = percentile(lat, 0.5), percentile(lat, 0.99)
        res["metadata_bytes"] = size

        log(f"[{kind}] partitions: produce {sz.produce_records} x 100 B to 1 partition, then over {sz.spread}")
        create_topics(node.bootstrap, {"single": 1, "spread": sz.spread}, 1)
        wait_partitions(wire, {"single": 1, "spread": sz.spread}, "topics single and spread led")
        step = max(1, n_parts // sz.spread)
        spread_tps = all_tps[::step][:sz.spread]
        # each twice: a partition's first data costs more (Kafka: the first pages of its preallocated index
        # files, 3-20 ms per partition here); the second pass is the steady state reported
        first = produce_to(node.bootstrap, [("single", 0)], sz.produce_records)
        single = produce_to(node.bootstrap, [("single", 0)], sz.produce_records, node=node)
        first_spread = produce_to(node.bootstrap, spread_tps, sz.produce_records)
        spread = produce_to(node.bootstrap, spread_tps, sz.produce_records, node=node)
        res["produce_single_first_rps"] = first["records_per_s"]
        res["produce_spread_first_rps"] = first_spread["records_per_s"]
        res["produce_single_rps"] = single["records_per_s"]
        res["produce_spread_rps"] = spread["records_per_s"]
        res["produce_spread_partitions"] = len(spread_tps)
        res["produce_spread_over_single"] = spread["records_per_s"] / single["records_per_s"]
        res["produce_errors"] = single["errors"] + spread["errors"]
        # librdkafka sends one ProduceRequest per partition batch: spread over 1,000 partitions at linger.ms 5 a
        # batch holds tens of records where one partition's holds thousands, and the client's own CPU per record
        # grows with it. The client's ceiling: the spread/single ratio it allows with the CPU it used for single.
        for key, run in (("single", single), ("spread", spread)):
            res[f"produce_{key}_client_us"] = run["client_us_per_record"]
            res[f"produce_{key}_broker_us"] = run["broker_us_per_record"]
        res["produce_spread_client_ceiling"] = single["client_us_per_record"] / spread["client_us_per_record"]
        log(f"[{kind}] partitions: the same with the Java client (kafka-producer-perf-test), 1 partition, then a "
            f"topic of {sz.spread}")
        java_produce(node.bootstrap, "single", sz.java_records)  # JIT and metadata warm-up, untimed
        java_single = java_produce(node.bootstrap, "single", sz.java_records, node=node)
        java_produce(node.bootstrap, "spread", sz.java_records)
        java_spread = java_produce(node.bootstrap, "spread", sz.java_records, node=node)
        res["java_single_rps"] = java_single["records_per_s"]
        res["java_spread_rps"] = java_spread["records_per_s"]
        res["java_spread_over_single"] = java_spread["records_per_s"] / java_single["records_per_s"]
        for key, run in (("single", java_single), ("spread", java_spread)):
            res[f"java_{key}_client_us"] = run["client_us_per_record"]
            res[f"java_{key}_broker_us"] = run["broker_us_per_record"]
        res["rss_produced_mb"] = node.rss_bytes() / MB

        everything = dict(topics, single=1, spread=sz.spread)
        log(f"[{kind}] partitions: clean restart")
        t0 = time.monotonic()
        node.stop()
        res["clean_stop_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        node.start()
        res["clean_restart_s"] = wait_partitions(wire, everything, "all led after a clean restart") - t0
        log(f"[{kind}] partitions: led {res['clean_restart_s']:.1f} s after start; unflushed records, then kill -9")
        unflushed = produce_to(node.bootstrap, all_tps, sz.unflushed_per_partition * n_parts, warmup=False)
        res["unflushed_records"] = unflushed["records"]
        node.kill()
        zk_broker_gone(zk, 0)
        t0 = time.monotonic()
        node.start()
        res["kill9_restart_s"] = wait_partitions(wire, everything, "all led after kill -9") - t0
        log(f"[{kind}] partitions: led {res['kill9_restart_s']:.1f} s after start (after kill -9)")
        time.sleep(2)
        res["rss_restarted_mb"] = node.rss_bytes() / MB
        res["fds_total_restarted"] = node.fds_by_topic()[0]
        res["fds_per_partition_restarted"] = fds_into(node, all_tps) / n_parts

        log(f"[{kind}] partitions: rolling {sz.segments} segments per partition, within the descriptor limit and "
            f"{sz.roll_budget_s:.0f} s")
        set_topic_config(node.bootstrap, topics, {"segment.bytes": "1000"})
        time.sleep(3)  # topic config changes reach the log through ZooKeeper notifications
        k, complete, res["rolls_per_s"] = roll_segments(kind, node, all_tps, sz.segments, sz.roll_budget_s)
        time.sleep(2)
        rolled = all_tps[:k]
        res["seg_partitions"] = k
        res["seg_all_partitions"] = 1.0 if complete else 0.0
        res["segments_per_partition"] = count_segments(node, rolled) / max(1, k)
        res["fds_per_partition_20seg"] = fds_into(node, rolled) / max(1, k)
        fds, per = node.fds_by_topic()
        res["fds_total_loaded"] = fds
        res["fds_per_partition_all_20seg"] = sum(per.get(t, 0) for t in topics) / n_parts
        res["rss_loaded_mb"] = node.rss_bytes() / MB
        wire.close()
    finally:
        kill_all([node])
    return res


def start_all(nodes: Sequence[Node]) -> None:
    """Start the brokers side by side (each start waits for its broker), as a cluster restart would."""
    errors: List[BaseException] = []

    def one(n: Node) -> None:
        try:
            n.start()
        except BaseException as exc:  # noqa: B036 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        kill_all(nodes)
        raise errors[0]


def kill_all(nodes: Iterable[Node]) -> None:
    """The end of a row: nothing is measured any more, and a controlled shutdown of the last brokers of a
    cluster waits for retries that cannot succeed."""
    for n in nodes:
        try:
            n.kill()
        except Exception:
            pass


# ------------------------------------------------------------------------------------------------ row: cluster
def row_cluster(kind: str, work: Path, zk_root: str, sz: Sizes) -> Dict[str, float]:
    """Three brokers, N partitions at RF 3: create, controlled shutdown, kill -9, preferred election, reassignment."""
    res: Dict[str, float] = {}
    nodes, zk = make_nodes(kind, work, zk_root, "cluster", 3, {}, sz)
    start_all(nodes)
    try:
        wires = [Wire(n.bootstrap) for n in nodes]
        wait_for(lambda: len(snapshot(wires[0]).brokers) == 3, 120, "3 brokers in Metadata")
        sizes = sz.topic_sizes(sz.partitions)
        topics = {f"rep{i:03d}": n for i, n in enumerate(sizes)}
        n_parts = sum(sizes)
        bootstrap = ",".join(n.bootstrap for n in nodes)
        log(f"[{kind}] cluster: creating {n_parts} partitions at RF 3")
        t0 = time.monotonic()
        create_topics(bootstrap, topics, 3)
        res["create_s"] = wait_partitions(wires[0], topics, "all led") - t0
        res["create_isr_s"] = wait_partitions(wires[0], topics, "every ISR full", isr=3) - t0
        log(f"[{kind}] cluster: led after {res['create_s']:.1f} s, ISRs full after {res['create_isr_s']:.1f} s")
        time.sleep(2)
        res["rss_mb_max"] = max(n.rss_bytes() for n in nodes) / MB
        res["fds_max"] = max(n.fds_by_topic()[0] for n in nodes)

        # acks=all spread over every partition, one record each: librdkafka sends a ProduceRequest per partition,
        # so each waits for its own replication round trip (the cost the kill -9 torture at size depends on)
        targets = [(t, p) for t, n in topics.items() for p in range(n)]
        for key, inflight in (("spread_inflight1_rps", 1), ("spread_inflight5_rps", 5)):
            log(f"[{kind}] cluster: one acks=all record to each of {len(targets)} partitions, "
                f"{inflight} request(s) in flight per connection")
            got = produce_to(bootstrap, targets, len(targets), **{"max.in.flight.requests.per.connection": inflight})
            res[key] = got["records_per_s"]
            res[key.replace("_rps", "_errors")] = got["errors"]
            log(f"[{kind}] cluster: {got['records_per_s']:.0f} records/s ({got['errors']} errors)")

        s = snapshot(wires[0])
        others = [n for n in nodes if n.broker_id != s.controller]
        victim, watcher = others[0], nodes[s.controller]
        lead = s.leaders().get(victim.broker_id, 0)
        log(f"[{kind}] cluster: controlled shutdown of broker {victim.broker_id} (leads {lead})")
        t0 = time.monotonic()
        victim.terminate()
        res["ctrl_shutdown_moved_s"] = wait_partitions(wires[s.controller], topics, "leaderships moved",
                                                       avoid=victim.broker_id) - t0
        victim.wait_exit()
        res["ctrl_shutdown_exit_s"] = time.monotonic() - t0
        log(f"[{kind}] cluster: moved after {res['ctrl_shutdown_moved_s']:.1f} s, exited after "
            f"{res['ctrl_shutdown_exit_s']:.1f} s; restarting it")
        t0 = time.monotonic()
        victim.start()
        res["rejoin_after_stop_s"] = wait_partitions(wires[s.controller], topics, "ISRs full again", isr=3) - t0

        s = snapshot(wires[0])
        others = [n for n in nodes if n.broker_id != s.controller]
        victim = max(others, key=lambda n: s.leaders().get(n.broker_id, 0))
        log(f"[{kind}] cluster: kill -9 of broker {victim.broker_id} (leads {s.leaders().get(victim.broker_id, 0)})")
        t0 = time.monotonic()
        victim.kill()
        res["kill9_led_s"] = wait_partitions(wires[watcher.broker_id], topics, "all led after kill -9",
                                             avoid=victim.broker_id) - t0
        zk_broker_gone(zk, victim.broker_id)
        t0 = time.monotonic()
        victim.start()
        res["rejoin_after_kill_s"] = wait_partitions(wires[watcher.broker_id], topics, "ISRs full again",
                                                     isr=3) - t0
        log(f"[{kind}] cluster: all led {res['kill9_led_s']:.1f} s after kill -9; back in every ISR "
            f"{res['rejoin_after_kill_s']:.1f} s after start")

        s = snapshot(wires[0])
        res["not_preferred_before"] = sum(1 for (t, _), (ld, reps, _) in s.parts.items()
                                          if t in topics and reps and ld != reps[0])
        cfg = work / f"{kind}-admin.properties"
        cfg.write_text("request.timeout.ms=600000\ndefault.api.timeout.ms=1800000\n")
        log(f"[{kind}] cluster: preferred election ({int(res['not_preferred_before'])} partitions not on "
            f"their preferred leader)")
        t0 = time.monotonic()
        holder: Dict[str, Any] = {}
        th = threading.Thread(target=lambda: holder.update(r=kafka_tool(
            "org.apache.kafka.tools.LeaderElectionCommand",
            ["--bootstrap-server", bootstrap, "--election-type", "preferred", "--all-topic-partitions",
             "--admin.config", str(cfg)])), daemon=True)
        th.start()
        res["preferred_election_s"] = wait_partitions(wires[0], topics, "preferred leaders", preferred=True) - t0
        th.join(1800)
        res["preferred_election_tool_s"] = time.monotonic() - t0
        log(f"[{kind}] cluster: preferred leaders after {res['preferred_election_s']:.1f} s "
            f"(tool exited {holder.get('r', (None,))[0]})")

        r = min(sz.reassign, n_parts)
        assign = {"moves": [[i % 3, (i + 1) % 3] for i in range(r)]}
        target = {("moves", i): [(i + 1) % 3, (i + 2) % 3] for i in range(r)}
        log(f"[{kind}] cluster: reassignment of {r} partitions (RF 2, {sz.reassign_records} records each)")
        create_topics(bootstrap, {"moves": r}, 2, assignment=assign)
        wait_partitions(wires[0], {"moves": r}, "moves led", isr=2)
        produce_to(bootstrap, [("moves", i) for i in range(r)], r * sz.reassign_records, warmup=False)
        plan = work / f"{kind}-reassign.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": reps} for (t, p), reps in target.items()]}))
        t0 = time.monotonic()
        rc, out = kafka_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                             ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan), "--execute",
                              "--command-config", str(cfg)])
        if rc != 0:
            raise RuntimeError(f"kafka-reassign-partitions --execute exited {rc}: {out[-2000:]}")
        res["reassign_execute_s"] = time.monotonic() - t0
        res["reassign_moved_s"] = wait_partitions(wires[0], {"moves": r}, "replicas moved", replicas=target) - t0

        def verified() -> bool:
            rc, out = kafka_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                 ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan), "--verify",
                                  "--command-config", str(cfg)])
            return rc == 0 and "still in progress" not in out and "is completed" in out

        wait_for(verified, LED_TIMEOUT_S, "--verify to report the reassignment complete", interval=0.5)
        res["reassign_verified_s"] = time.monotonic() - t0
        res["reassign_partitions"] = r
        log(f"[{kind}] cluster: reassignment moved after {res['reassign_moved_s']:.1f} s, verified after "
            f"{res['reassign_verified_s']:.1f} s")
        for w in wires:
            w.close()
    finally:
        kill_all(nodes)
    return res


# ------------------------------------------------------------------------------------------------ row: connections
def open_idle(bootstrap: str, count: int) -> IdleConnectionsProcess:
    """``count`` idle connections (tools/bench/idle_connections.py), held by child processes of at most
    IDLE_PER_WORKER sockets each: one descriptor per socket, 20,000 per process here."""
    load = IdleConnectionsProcess(bootstrap, count, processes=max(1, math.ceil(count / IDLE_PER_WORKER)))
    load.start()
    return load


def latency_run(bootstrap: str, topic: str, seconds: float, rate: int = 1000) -> Dict[str, float]:
    """A producer at ``rate`` records/s (acks=all, idempotent, linger.ms 0, 100 B) and a consumer reading along:
    ack and end-to-end latency percentiles (ms), after a warm-up of a quarter of ``seconds`` (at least 1 s; a
    JVM's JIT is still at work in the first seconds) that is not counted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 500})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    e2e: List[float] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            for m in c.consume(100, 0.1):
                if m.error() is None and m.value()[8:9] == b"M":
                    e2e.append((time.time() - struct.unpack(">d", m.value()[:8])[0]) * 1000)

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                  "max.in.flight.requests.per.connection": 5})
    acks: List[float] = []
    errors = [0]

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors[0] += 1
        elif msg.value()[8:9] == b"M":
            acks.append(msg.latency() * 1000)

    pad = b"x" * 91
    warm = int(max(1.0, seconds / 4) * rate)
    total = warm + int(seconds * rate)
    t0 = time.perf_counter()
    for i in range(total):
        target = t0 + i / rate
        now = time.perf_counter()
        if target > now:
            p.poll(0)
            time.sleep(target - now)
        p.produce(topic, struct.pack(">d", time.time()) + (b"M" if i >= warm else b"W") + pad, partition=0,
                  on_delivery=cb)
    p.flush(60)
    time.sleep(1.0)
    stop.set()
    th.join(10)
    c.close()
    acks.sort()
    e2e.sort()
    return {"produce_p50_ms": percentile(acks, 0.5), "produce_p99_ms": percentile(acks, 0.99),
            "e2e_p50_ms": percentile(e2e, 0.5), "e2e_p99_ms": percentile(e2e, 0.99), "acked": len(acks),
            "consumed": len(e2e), "errors": errors[0]}


def row_connections(kind: str, work: Path, zk_root: str, sz: Sizes) -> Dict[str, float]:
    """One broker, a 1-partition topic: latency without and with ``sz.connections`` idle connections."""
    res: Dict[str, float] = {}
    (node,), _ = make_nodes(kind, work, zk_root, "connections", 1, {}, sz)
    node.start()
    try:
        wire = Wire(node.bootstrap)
        create_topics(node.bootstrap, {"lat": 1}, 1)
        wait_partitions(wire, {"lat": 1}, "lat led")
        wire.close()
        log(f"[{kind}] connections: latency at 1,000 records/s for {sz.latency_s:.0f} s, no idle connections")
        base = latency_run(node.bootstrap, "lat", sz.latency_s)
        time.sleep(2)
        rss0, fds0 = node.rss_bytes(), node.fds_by_topic()[0]
        log(f"[{kind}] connections: opening {sz.connections} idle connections")
        t0 = time.monotonic()
        idle = open_idle(node.bootstrap, sz.connections)
        res["idle_open_s"] = time.monotonic() - t0
        try:
            r = idle.result
            res["idle_accepted"] = r.answered
            res["idle_refused"] = r.requested - r.answered
            res["idle_closed"], res["idle_timeout"] = r.outcomes["closed"], r.outcomes["timeout"]
            res["idle_refused_tcp"], res["idle_error"] = r.outcomes["refused"], r.outcomes["error"]
            res["idle_answer_p99_ms"] = r.summary()["answer_ms_p99"]  # type: ignore[assignment]
            time.sleep(3)
            rss1 = node.rss_bytes()
            res["broker_fds_with_idle"] = node.fds_by_topic()[0]
            res["rss_per_idle_kb"] = (rss1 - rss0) / 1024 / max(1, r.answered)
            res["rss_with_idle_mb"] = rss1 / MB
            log(f"[{kind}] connections: {r.answered} answered, {r.requested - r.answered} not "
                f"({dict(r.outcomes)}, {r.samples[:2]}); latency again")
            loaded = latency_run(node.bootstrap, "lat", sz.latency_s)
            res["idle_still_open"] = idle.count_open()
        finally:
            idle.stop()
        res["broker_fds_before_idle"] = fds0
        for k in ("produce_p50_ms", "produce_p99_ms", "e2e_p50_ms", "e2e_p99_ms"):
            res[f"{k}_base"] = base[k]
            res[f"{k}_idle"] = loaded[k]
        res["produce_p99_ratio"] = loaded["produce_p99_ms"] / base["produce_p99_ms"]
        res["e2e_p99_ratio"] = loaded["e2e_p99_ms"] / base["e2e_p99_ms"]
        res["latency_errors"] = base["errors"] + loaded["errors"]
    finally:
        kill_all([node])
    return res


# ------------------------------------------------------------------------------------------------ row: groups
class _GroupCluster:
    """Our Nodes in the shape tools/bench/group_load.py's run_failover expects of its BenchCluster."""

    def __init__(self, kind: str, nodes: List[Node]) -> None:
        self.kafka = kind == "kafka"
        self.nodes = nodes
        self.brokers = [n.b for n in nodes]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def broker(self, broker_id: int) -> Any:
        return self.nodes[broker_id].b


def row_groups(kind: str, work: Path, zk_root: str, sz: Sizes) -> Dict[str, float]:
    """Three brokers: tools/bench/group_load.py's failover run (preload, load, SIGKILL of the busiest
    non-controller coordinator, every group served again)."""
    nodes, _ = make_nodes(kind, work, zk_root, "groups", 3, {"offsets.topic.num.partitions": "50"}, sz)
    start_all(nodes)
    try:
        wire = Wire(nodes[0].bootstrap)
        wait_for(lambda: len(snapshot(wire).brokers) == 3, 120, "3 brokers in Metadata")
        wire.close()
        spec = group_load.LoadSpec(groups=sz.groups, members=sz.group_members, topics=min(100, sz.groups),
                                   partitions=sz.group_load_partitions)
        log(f"[{kind}] groups: {sz.groups} groups x {sz.group_members} members, preload {sz.group_records} offset "
            f"records, {sz.group_run_s:.0f} s of load, then SIGKILL of a coordinator")
        rep = group_load._run(group_load.run_failover(_GroupCluster(kind, nodes), spec, sz.group_records,
                                                      sz.group_preload_partitions, sz.group_run_s, kind=kind))
    finally:
        kill_all(nodes)
    res: Dict[str, float] = {"groups": sz.groups, "members": sz.groups * sz.group_members,
                             "preload_records": rep.preload_records, "preload_s": rep.preload_s,
                             "victim_groups": rep.victim_groups, "served_all_s": rep.served_all_s,
                             "served_p50_s": rep.served_p50_s, "others_commit_p99_ms": rep.others_commit_p99_ms,
                             "preload_mismatched": rep.preload_mismatched}
    if rep.load is not None:
        res.update(join_s=rep.load.join_s, commit_rate=rep.load.commit_rate, commit_p50_ms=rep.load.commit_p50_ms,
                   commit_p99_ms=rep.load.commit_p99_ms, commit_max_ms=rep.load.commit_max_ms,
                   mismatched_offsets=rep.load.mismatched_offsets,
                   lost_offsets=getattr(rep.load, "lost_offsets", float("nan")),
                   unacknowledged_applied=getattr(rep.load, "unacknowledged_applied", float("nan")))
        examples = getattr(rep.load, "mismatch_examples", [])
        if examples:
            log(f"[{kind}] groups: offsets not read back as acknowledged, e.g. {examples}")
            res["mismatch_examples"] = examples  # type: ignore[assignment]
    loads = [float(m.group(1)) for line in rep.load_log
             for m in [re.search(r" in (\d+(?:\.\d+)?) (?:ms|milliseconds)", line)] if m]
    if loads:
        res["offsets_load_max_ms"], res["offsets_load_sum_ms"] = max(loads), sum(loads)
    return res


# ------------------------------------------------------------------------------------------------ report
#: (row group, key, label, target, check(ours, kafka) -> met?)
Check = Optional[Callable[[float, float], bool]]
TABLE: List[Tuple[str, str, str, str, Check]] = [
    ("partitions", "create_s", "create N partitions -> all led s", "<= 10", lambda o, k: o <= 10),
    ("partitions", "metadata_p50_ms", "Metadata all topics p50 ms", "", None),
    ("partitions", "metadata_p99_ms", "Metadata all topics p99 ms", "<= 50, <= kafka",
     lambda o, k: o <= 50 and (k != k or o <= k)),
    ("partitions", "metadata_bytes", "Metadata all topics answer bytes", "", None),
    ("partitions", "fds_per_partition_1seg", "descriptors/partition, 1 segment", "<= 1.2", lambda o, k: o <= 1.2),
    ("partitions", "fds_per_partition_all", "all descriptors added/partition", "", None),
    ("partitions", "fds_per_partition_restarted", "descriptors/partition after kill -9 restart", "<= 1.2",
     lambda o, k: o <= 1.2),
    ("partitions", "fds_per_partition_20seg", "descriptors/partition, 20 segments (K)", "<= 1.2",
     lambda o, k: o <= 1.2),
    ("partitions", "seg_partitions", "K: partitions rolled to 20 segments", "", None),
    ("partitions", "seg_all_partitions", "K = N (1), or stopped at fd limit/time (0)", "", None),
    ("partitions", "rolls_per_s", "segment rolls/s (1 record per segment)", "", None),
    ("partitions", "segments_per_partition", "segments per partition on disk (K)", "", None),
    ("partitions", "fds_per_partition_all_20seg", "descriptors/partition over N, after that", "", None),
    ("partitions", "fds_total_loaded", "descriptors in all, after that", "", None),
    ("partitions", "rss_empty_mb", "RSS before topics MB", "", None),
    ("partitions", "rss_created_mb", "RSS after create MB", "<= 1024", lambda o, k: o <= 1024),
    ("partitions", "rss_produced_mb", "RSS after the produce runs MB", "<= 1024", lambda o, k: o <= 1024),
    ("partitions", "rss_restarted_mb", "RSS after kill -9 restart MB", "<= 1024", lambda o, k: o <= 1024),
    ("partitions", "rss_loaded_mb", "RSS after 20 segments MB", "<= 1024", lambda o, k: o <= 1024),
    ("partitions", "produce_single_first_rps", "produce 100 B, 1 partition, 1st pass rec/s", "", None),
    ("partitions", "produce_spread_first_rps", "produce 100 B, spread, 1st pass rec/s", "", None),
    ("partitions", "produce_single_rps", "produce 100 B, 1 partition records/s", "", None),
    ("partitions", "produce_spread_rps", "produce 100 B, spread records/s", "", None),
    ("partitions", "produce_spread_partitions", "partitions of the spread", "", None),
    ("partitions", "produce_spread_over_single", "spread/single throughput", ">= 0.70", lambda o, k: o >= 0.7),
    ("partitions", "produce_single_client_us", "client CPU us/record, 1 partition", "", None),
    ("partitions", "produce_spread_client_us", "client CPU us/record, spread", "", None),
    ("partitions", "produce_spread_client_ceiling", "spread/single the client's CPU allows", "", None),
    ("partitions", "produce_single_broker_us", "broker CPU us/record, 1 partition", "", None),
    ("partitions", "produce_spread_broker_us", "broker CPU us/record, spread", "", None),
    ("partitions", "java_single_rps", "Java client 100 B, 1 partition records/s", "", None),
    ("partitions", "java_spread_rps", "Java client 100 B, topic of 1,000 records/s", "", None),
    ("partitions", "java_spread_over_single", "Java client spread/single throughput", ">= 0.70",
     lambda o, k: o >= 0.7),
    ("partitions", "java_single_client_us", "Java client CPU us/record, 1 partition", "", None),
    ("partitions", "java_spread_client_us", "Java client CPU us/record, spread", "", None),
    ("partitions", "java_single_broker_us", "broker CPU us/record, Java, 1 partition", "", None),
    ("partitions", "java_spread_broker_us", "broker CPU us/record, Java, spread", "", None),
    ("partitions", "clean_stop_s", "clean shutdown SIGTERM -> exit s", "", None),
    ("partitions", "clean_restart_s", "clean restart: start -> all led s", "<= 10", lambda o, k: o <= 10),
    ("partitions", "kill9_restart_s", "kill -9 restart: start -> all led s", "<= 10", lambda o, k: o <= 10),
    ("partitions", "unflushed_records", "records unflushed at kill -9", "", None),
    ("cluster", "create_s", "create N partitions RF 3 -> all led s", "", None),
    ("cluster", "create_isr_s", "create -> every ISR full s", "", None),
    ("cluster", "rss_mb_max", "RSS, largest broker MB", "", None),
    ("cluster", "fds_max", "descriptors, largest broker", "", None),
    ("cluster", "spread_inflight1_rps", "acks=all 1 rec/partition, 1 in flight rec/s", "", None),
    ("cluster", "spread_inflight5_rps", "acks=all 1 rec/partition, 5 in flight rec/s", "", None),
    ("cluster", "ctrl_shutdown_moved_s", "controlled shutdown -> leaders moved s", "", None),
    ("cluster", "ctrl_shutdown_exit_s", "controlled shutdown -> process exited s", "", None),
    ("cluster", "rejoin_after_stop_s", "restart after shutdown -> ISRs full s", "", None),
    ("cluster", "kill9_led_s", "kill -9 of a leader -> all led s", "", None),
    ("cluster", "rejoin_after_kill_s", "restart after kill -9 -> ISRs full s", "", None),
    ("cluster", "not_preferred_before", "partitions off their preferred leader", "", None),
    ("cluster", "preferred_election_s", "preferred election -> all preferred s", "", None),
    ("cluster", "reassign_moved_s", "reassign partitions -> moved (Metadata) s", "", None),
    ("cluster", "reassign_verified_s", "reassign -> --verify complete s", "", None),
    ("cluster", "reassign_partitions", "partitions reassigned", "", None),
    ("connections", "produce_p50_ms_base", "produce p50 ms, no idle connections", "", None),
    ("connections", "produce_p99_ms_base", "produce p99 ms, no idle connections", "", None),
    ("connections", "produce_p99_ms_idle", "produce p99 ms, with idle connections", "", None),
    ("connections", "produce_p99_ratio", "produce p99 with/without idle", "<= 2", lambda o, k: o <= 2),
    ("connections", "e2e_p50_ms_base", "end-to-end p50 ms, no idle connections", "", None),
    ("connections", "e2e_p99_ms_base", "end-to-end p99 ms, no idle connections", "", None),
    ("connections", "e2e_p99_ms_idle", "end-to-end p99 ms, with idle connections", "", None),
    ("connections", "e2e_p99_ratio", "end-to-end p99 with/without idle", "<= 2", lambda o, k: o <= 2),
    ("connections", "idle_accepted", "idle connections accepted", "", None),
    ("connections", "idle_refused", "idle connections not answered", "", None),
    ("connections", "idle_closed", "  of which accepted, then closed", "", None),
    ("connections", "idle_refused_tcp", "  of which TCP connect refused", "", None),
    ("connections", "idle_timeout", "  of which timed out", "", None),
    ("connections", "idle_answer_p99_ms", "connect -> ApiVersions answer p99 ms", "", None),
    ("connections", "idle_still_open", "idle connections still open at the end", "", None),
    ("connections", "idle_open_s", "opening them s", "", None),
    ("connections", "rss_per_idle_kb", "RSS per idle connection KB", "<= 20", lambda o, k: o <= 20),
    ("connections", "rss_with_idle_mb", "RSS with idle connections MB", "", None),
    ("connections", "broker_fds_with_idle", "broker descriptors with idle connections", "", None),
    ("groups", "groups", "consumer groups", "", None),
    ("groups", "members", "members (each committing every second)", "", None),
    ("groups", "join_s", "start -> every group Stable s", "", None),
    ("groups", "commit_rate", "OffsetCommits/s", "", None),
    ("groups", "commit_p50_ms", "OffsetCommit p50 ms", "", None),
    ("groups", "commit_p99_ms", "OffsetCommit p99 ms", "", None),
    ("groups", "preload_records", "offset records preloaded", "", None),
    ("groups", "preload_s", "preload s", "", None),
    ("groups", "victim_groups", "groups of the killed coordinator", "", None),
    ("groups", "served_all_s", "coordinator SIGKILL -> all its groups served s", "", None),
    ("groups", "served_p50_s", "coordinator SIGKILL -> half of them served s", "", None),
    ("groups", "offsets_load_max_ms", "offsets partition load, longest ms", "", None),
    ("groups", "offsets_load_sum_ms", "offsets partitions load, sum ms", "", None),
    ("groups", "others_commit_p99_ms", "other groups' commit p99 during failover ms", "", None),
    ("groups", "preload_mismatched", "preloaded offsets not read back", "0", lambda o, k: o == 0),
    ("groups", "mismatched_offsets", "offsets not read back as acknowledged", "0", lambda o, k: o == 0),
    ("groups", "lost_offsets", "  of which read back lower (lost)", "0", lambda o, k: o == 0),
    ("groups", "unacknowledged_applied", "commits unanswered at the kill, applied", "", None),
]


def fmt(v: float) -> str:
    if v != v:
        return "-"
    if abs(v) >= 1000 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"


def report(results: Dict[str, Dict[str, Dict[str, Any]]], rows: Sequence[str], sz: Sizes) -> None:
    """A table per row group, then the targets met or missed."""
    nan = float("nan")

    def g(kind: str, row: str, key: str) -> float:
        v = results.get(kind, {}).get(row, {}).get(key)
        return float(v) if isinstance(v, (int, float)) else nan

    print(f"One machine, {os.cpu_count()} cores; Kafka 3.9.1 JVM: {' '.join(KAFKA_JVM_OPTS[:2])} G1 "
          f"(kafka-server-start.sh's); zookeeper.session.timeout.ms={sz.session_timeout_ms}; N={sz.partitions} "
          f"partitions; descriptor limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]} per process")
    summary: List[str] = []
    for row in rows:
        loads = ", ".join(f"{k} {fmt(g(k, row, 'loadavg_1min'))}" for k in ("ours", "kafka") if k in results)
        print(f"\n== {row} (1-min load average at the row's end: {loads}; {os.cpu_count()} cores)")
        print(f"{'metric':46s} {'ours':>11s} {'kafka 3.9.1':>11s} {'ours/kafka':>10s}  target")
        for grp, key, label, target, check in TABLE:
            if grp != row:
                continue
            o, k = g("ours", row, key), g("kafka", row, key)
            ratio = f"{o / k:.2f}x" if o == o and k == k and k else "n/a"
            print(f"{label:46s} {fmt(o):>11s} {fmt(k):>11s} {ratio:>10s}  {target}")
            if check is not None and "ours" in results:
                verdict = "not measured" if o != o else ("met" if check(o, k) else "MISSED")
                summary.append(f"{row}: {label} = {fmt(o)} (kafka {fmt(k)}), target {target}: {verdict}")
        for kind in ("ours", "kafka"):
            err = results.get(kind, {}).get(row, {}).get("error")
            if err:
                print(f"{kind}: {row} did not complete: {err}")
            for example in results.get(kind, {}).get(row, {}).get("mismatch_examples", []):
                print(f"{kind}: offset not read back as acknowledged: {example}")
    print("\n== summary (ours against the targets)")
    for line in summary:
        print(line)


# ------------------------------------------------------------------------------------------------ main
RUNNERS: Dict[str, Callable[[str, Path, str, Sizes], Dict[str, float]]] = {
    "partitions": row_partitions, "cluster": row_cluster, "connections": row_connections, "groups": row_groups}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    ap.add_argument("--quick", action="store_true", help="CI-sized counts (300 partitions, 200 connections, 20 groups)")
    ap.add_argument("--only", choices=["ours", "kafka"])
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}")
    ap.add_argument("--partitions", type=int, help="partitions of the partitions and cluster rows (default 10,000)")
    ap.add_argument("--connections", type=int, help="idle connections (default 10,000)")
    ap.add_argument("--groups", type=int, help="consumer groups (default 1,000)")
    ap.add_argument("--json", action="store_true", help="also print the raw results as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (broker logs and data)")
    a = ap.parse_args(argv)
    rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.error(f"unknown row(s) {bad}; choose from {','.join(ROWS)}")
    sz = Sizes.quick() if a.quick else Sizes()
    if a.partitions:
        sz.partitions = a.partitions
        sz.spread = min(sz.spread, a.partitions)
        sz.reassign = min(sz.reassign, a.partitions)
    if a.connections:
        sz.connections = a.connections
    if a.groups:
        sz.groups = a.groups
    kinds = [k for k in ("ours", "kafka") if not a.only or a.only == k]
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    log(f"work directory {work}")
    zk = ZooKeeperProcess(work, free_port())
    zk.start()
    results: Dict[str, Dict[str, Dict[str, Any]]] = {k: {} for k in kinds}
    failed = False
    try:
        for row in rows:
            for kind in kinds:
                log(f"== {row} on {kind}")
                t0 = time.monotonic()
                try:
                    results[kind][row] = RUNNERS[row](kind, work, zk.connect_string, sz)
                except Exception as exc:
                    failed = True
                    results[kind][row] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
                    log(f"[{kind}] {row} failed: {traceback.format_exc()}")
                results[kind][row]["loadavg_1min"] = os.getloadavg()[0]
                results[kind][row]["row_s"] = time.monotonic() - t0
                log(f"== {row} on {kind} took {time.monotonic() - t0:.0f} s (load average {os.getloadavg()[0]:.1f})")
                for a_ in list(_ADMINS):
                    _ADMINS.pop(a_, None)
    finally:
        zk.stop()
    report(results, rows, sz)
    if a.json:
        print(json.dumps(results, indent=1))
    if a.keep or failed:
        log(f"broker outputs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
