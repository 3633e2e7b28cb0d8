"""Our brokers and real Apache Kafka 3.9.1 brokers in ONE ZooKeeper-mode cluster, driven by stock clients.

The project must be able to replace a Kafka cluster's brokers one at a time, so every inter-broker path has to
work between the two kinds: our controller driving Kafka brokers (LeaderAndIsr/UpdateMetadata/StopReplica,
ControlledShutdown and AlterPartition from Kafka) and Kafka's controller driving ours; replication both ways
(Fetch with diverging epochs, ListOffsets); the znodes each kind's controller writes read by the other after a
controller move; ``__consumer_offsets`` written by one kind's coordinator loaded by the other's.

Each scenario starts one cluster in its own chroot, forces which kind holds ``/controller`` by start order,
runs an idempotent ``acks=all`` producer in the background through SIGSTOP/SIGTERM/SIGKILL of each kind, and
ends with: no delivery error, every acknowledged record read back exactly once in order, every replica's log
byte-identical (our storage is Kafka's on-disk format), each broker's Metadata agreeing with the state znodes,
and no protocol error in any broker's log. The scenarios:

- 2 ours + 1 Kafka under Kafka's controller, then ours (role moved by stopping Kafka's);
- 2 ours + 1 Kafka under our controller (AlterPartition, ControlledShutdown, AllocateProducerIds from Kafka,
  Kafka's own kafka-reassign-partitions and kafka-topics against it, config changes across kinds);
- 1 ours + 2 Kafka, the role moving from our controller to Kafka's;
- 3 Kafka replaced one at a time by ours on the same ids, ports and log directories (and one rolled back);
- catch-up with large batches, DeleteRecords/out-of-range restarts and KIP-101 divergence across kinds;
- 3 Kafka + a new broker of ours receiving a Kafka broker's replicas through a reassignment.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, ElectionType, KafkaError, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.harness import waiting
from tests.harness.mixed_cluster import MixedCluster, kafka_dump_log_segments, kafka_tool

TOPIC_PARTITIONS = 6
OFFSETS_PARTITIONS = 6
#: ZooKeeper sessions outlive a short SIGSTOP (so an ISR shrink is the leader's doing, not a session expiry);
#: followers leave the ISR quickly.
FAST = {"zookeeper.session.timeout.ms": "9000", "replica.lag.time.max.ms": "2000",
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
#: The JSON keys Kafka's TopicPartitionStateZNode.encode writes for a RECOVERED partition.
STATE_KEYS = {"version", "leader", "leader_epoch", "controller_epoch", "isr"}
#: Lines in a Kafka broker's log that mean it could not understand, or refused, what one of ours sent.
KAFKA_BAD = re.compile(r"SchemaException|Error parsing|UnsupportedVersion|InvalidRequestException|"
                       r"due to invalid request|Unexpected error|unexpected error|IllegalStateException|"
                       r"IllegalArgumentException|BufferUnderflow|CorruptRecord|InvalidRecordException|"
                       r"NullPointerException|Fatal error|Halting|Uncaught exception")


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture
def mixed(tmp_path: Path, zookeeper: str) -> Iterator[Callable[..., MixedCluster]]:
    made: List[MixedCluster] = []

    def make(ours: List[int], kafka: List[int], overrides: Optional[Dict[str, str]] = None) -> MixedCluster:
        props = dict(FAST)
        props.update(overrides or {})
        c = MixedCluster(tmp_path / f"mixed-{len(made)}", f"{zookeeper}/mx-{uuid.uuid4().hex[:10]}", ours, kafka,
                         props)
        made.append(c)
        return c

    yield make
    while LOADS:
        LOADS.pop().abort()
    for c in made:
        c.kill_all()
    for c in made:
        for n in list(c.nodes.values()) + c.retired:
            out = n.output()
            if n.kind == "ours":
                assert "Traceback" not in out, f"our broker {n.broker_id} logged a traceback:\n{out[-6000:]}"
            else:
                bad = [ln for ln in out.splitlines() if KAFKA_BAD.search(ln)]
                assert not bad, f"Kafka broker {n.broker_id} logged protocol errors:\n" + "\n".join(bad[:20])


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str, c: Optional[MixedCluster] = None,
             interval_s: float = 0.2) -> object:
    return waiting.wait_for(predicate, timeout_s, what, interval_s, detail=c.outputs if c is not None else None)


# ------------------------------------------------------------------------------------------------ helpers
def java_string_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def offsets_partition(group: str) -> int:
    h = java_string_hash(group)
    return 0 if h == -(1 << 31) else abs(h) % OFFSETS_PARTITIONS


LOADS: List["Load"] = []


class Load:
    """An idempotent acks=all producer writing to every partition of ``topic`` from a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.acked: Dict[int, List[bytes]] = {p: [] for p in range(partitions)}
        self.errors: List[str] = []
        self._stop = threading.Event()
        # One request in flight: librdkafka answers an out-of-order sequence that follows a retriable error (a
        # restarted broker answers UNKNOWN_TOPIC_OR_PARTITION before it leads) with an epoch bump that re-sends
        # possibly persisted records as new ones, duplicating them against Kafka too (confluentinc/librdkafka#4953,
        # compat-tests/FINDINGS.md); a clean-clone CI run met it here once (one duplicate in 772).
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5, "message.timeout.ms": 120000,
                                   "max.in.flight.requests.per.connection": 1})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()
        self._abort = False
        self.sent = 0
        LOADS.append(self)

    def _cb(self, err: Optional[KafkaError], msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            with self._lock:
                self.acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=b"r%07d" % i, partition=i % self.partitions,
                                   on_delivery=self._cb)
            i += 1
            self.sent = i
            self._producer.poll(0.01)
        if self._abort:
            self._producer.purge()
            self._producer.poll(0)
        else:
            self._producer.flush(120)

    def abort(self) -> None:
        """Stop at once, dropping what is unsent (a failed test's cluster is gone)."""
        self._abort = True
        self._stop.set()
        self._thread.join(10)

    def total(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def start(self) -> "Load":
        self._thread.start()
        return self

    def progress(self, more: int, timeout_s: float, c: MixedCluster) -> None:
        """Wait until ``more`` further records are acknowledged (producing goes on across the scenario)."""
        target = self.total() + more
        wait_for(lambda: self.total() >= target or self.errors, timeout_s, f"{more} more acks", c)
        assert not self.errors, self.errors[:5]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "producer did not flush"
        assert self.sent == self.total(), f"{self.sent - self.total()} records never acknowledged"


def states(c: MixedCluster, topic: str, partitions: int) -> Dict[int, dict]:
    return {p: c.partition_state(topic, p) or {} for p in range(partitions)}


def full_isr(c: MixedCluster, topic: str, partitions: int, members: Set[int]) -> bool:
    return all(set(s.get("isr", ())) == members and s.get("leader", -1) in members
               for s in states(c, topic, partitions).values())


def metadata(bootstrap: str, topic: str) -> Tuple[int, Dict[int, Tuple[int, List[int], List[int]]]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(str(t.error))
    return md.controller_id, {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}


def assert_views_agree(c: MixedCluster, topic: str, partitions: int) -> None:
    """Every live broker's Metadata (learnt from the controller's UpdateMetadata) equals the state znodes."""
    def agree() -> bool:
        zk = states(c, topic, partitions)
        ctrl = c.controller_id()
        assignment = c.zk_json(f"/brokers/topics/{topic}")[0]["partitions"]  # type: ignore[index]
        want = {p: (s["leader"], sorted(assignment[str(p)]), sorted(s["isr"])) for p, s in zk.items()}
        for i, n in c.nodes.items():
            if not n.is_alive():
                continue
            cid, md = metadata(n.bootstrap, topic)
            got = {p: (v[0], v[1], v[2]) for p, v in md.items()}
            if cid != ctrl or got != want:
                return False
        return True
    wait_for(agree, 30, f"every broker's Metadata for {topic} to agree with ZooKeeper", c)
    for p, s in states(c, topic, partitions).items():
        assert set(s) == STATE_KEYS, f"{topic}-{p} state znode is not Kafka's JSON: {s}"


def batches(data: bytes) -> List[Tuple[int, int, int]]:
    """(base offset, last offset, byte position) of each record batch in a segment."""
    out, pos = [], 0
    while pos + 27 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        out.append((base, base + int.from_bytes(data[pos + 23:pos + 27], "big"), pos))
        pos += 12 + length
    return out


def log_end_offset(segments: Dict[str, bytes]) -> int:
    """The next offset after the last batch of the last segment (v2 batch header: baseOffset, length, ...,
    lastOffsetDelta at byte 23)."""
    if not segments:
        return 0
    name = max(segments)
    data, pos, end = segments[name], 0, int(name.split(".")[0])
    while pos + 27 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        end = base + int.from_bytes(data[pos + 23:pos + 27], "big") + 1
        pos += 12 + length
    return end


def epoch_entries(checkpoint: str, leo: int) -> List[Tuple[int, int]]:
    """Leader-epoch checkpoint entries that cover records. A leader records its epoch's start offset when it
    takes over; followers learn an epoch only from its batches, so an epoch without records is on the leader
    alone (in a Kafka-only cluster too)."""
    lines = checkpoint.split("\n")
    if len(lines) < 2 or not lines[1].strip():
        return []
    entries = [tuple(int(x) for x in ln.split()) for ln in lines[2:2 + int(lines[1])]]
    return [(e, o) for e, o in entries if o < leo]  # type: ignore[misc]


def assert_replicas_identical(c: MixedCluster, topic: str, partitions: int) -> None:
    """Once quiet, every replica's segment files are byte-identical and their leader-epoch caches agree."""
    def identical() -> object:
        for p in range(partitions):
            replicas = sorted(c.zk_json(f"/brokers/topics/{topic}")[0]["partitions"][str(p)])  # type: ignore[index]
            segs = [c.segment_files(b, topic, p) for b in replicas]
            if not segs[0]:
                return False
            if any(set(s) != set(segs[0]) for s in segs):
                # a replica that restarted beyond the others' log start has its own first segment: compare
                # the bytes from the first batch every replica holds
                datas = [b"".join(v for _, v in sorted(s.items())) for s in segs]
                start = max(batches(d)[0][0] for d in datas if d)
                tails = [d[[pos for base, last, pos in batches(d) if last >= start][0]:] for d in datas]
                if any(t != tails[0] for t in tails):
                    return False
            elif any(s != segs[0] for s in segs):
                return False
            leo = log_end_offset(segs[0])
            epochs = [epoch_entries(c.checkpoint(b, topic, p), leo) for b in replicas]
            if any(e != epochs[0] for e in epochs):
                return False
        return True
    wait_for(identical, 30, f"byte-identical replicas of {topic}", c)


def consume_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> Dict[int, List[bytes]]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: cons.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
        cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: Dict[int, List[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(len(got[p]) < ends[p] for p in got) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.offset() == len(got[m.partition()]), "gap or duplicate offset"
            got[m.partition()].append(m.value())
        assert all(len(got[p]) == ends[p] for p in got), ({p: len(v) for p, v in got.items()}, ends)
        return got
    finally:
        cons.close()


def assert_acked_exactly_once(c: MixedCluster, load: Load) -> None:
    got = consume_all(c.bootstrap, load.topic, load.partitions)
    for p in range(load.partitions):
        got[p] = [v for v in got[p] if v.startswith(b"r")]  # the load's records (not configs_apply's probes)
        seen: Set[bytes] = set()
        twice = [v for v in got[p] if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
        assert not twice, f"partition {p}: {len(twice)} duplicates, e.g. {twice[:3]}"
        acked = load.acked[p]
        pos = {v: i for i, v in enumerate(got[p])}
        missing = [v for v in acked if v not in pos]
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        idx = [pos[v] for v in acked]
        assert idx == sorted(idx), f"partition {p}: acknowledged records out of order"


def assert_kafka_reads_our_files(log_dir: Path, topic: str) -> None:
    """Kafka's DumpLogSegments checks the segments, offset/time indexes and producer snapshots one of ours
    left after a clean shutdown (index files trimmed, every batch's CRC valid)."""
    files = sorted(f for p in range(TOPIC_PARTITIONS) for f in (log_dir / f"{topic}-{p}").iterdir()
                   if f.suffix in (".log", ".index", ".timeindex", ".snapshot"))
    out = kafka_dump_log_segments(files, "--index-sanity-check")
    for f in files:
        if f.suffix in (".index", ".timeindex"):
            assert f"{f} passed sanity check" in out, out[-3000:]
    out = kafka_dump_log_segments([f for f in files if f.suffix in (".log", ".snapshot")], "--deep-iteration")
    assert "Exception" not in out and "isValid: false" not in out and "baseOffset: 0" in out, out[-3000:]


def configs_apply_across_kinds(c: MixedCluster, topic: str) -> None:
    """A topic config changed through a broker of one kind (``/config/topics`` + ``/config/changes``
    notification) is applied by the leaders of both kinds: first ours writes max.message.bytes=2000 and every
    leader refuses a 3 kB record, then Kafka raises it and every leader takes the record."""
    probe = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "enable.idempotence": False,
                      "message.max.bytes": 1000000, "retries": 0})
    for via, limit, refused in ((c.ids("ours")[0], 2000, True), (c.ids("kafka")[0], 100000, False)):
        admin = AdminClient({"bootstrap.servers": c[via].bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)

        def applied() -> bool:
            outcome: Dict[int, Optional[KafkaError]] = {}
            for p in range(TOPIC_PARTITIONS):
                probe.produce(topic, value=b"z" * 3000, partition=p,
                              on_delivery=lambda e, m: outcome.__setitem__(m.partition(), e))
            probe.flush(30)
            return all((e is not None and e.code() == KafkaError.MSG_SIZE_TOO_LARGE) if refused else e is None
                       for e in outcome.values()) and len(outcome) == TOPIC_PARTITIONS
        wait_for(applied, 30, f"max.message.bytes={limit} (set through broker {via}) applied by every leader", c)


def kafka_topics_describe(bootstrap: str, topic: str) -> Dict[int, Tuple[int, List[int], List[int]]]:
    """Kafka's own ``kafka-topics --describe`` (TopicCommand, the Java AdminClient): partition -> (leader,
    replicas, isr)."""
    rc, out = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--describe",
                         "--topic", topic)
    assert rc == 0, out
    got = {}
    for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", out):
        got[int(m[1])] = (int(m[2]), [int(x) for x in m[3].split(",")], [int(x) for x in m[4].split(",") if x])
    assert got, out
    return got


def reassign(c: MixedCluster, bootstrap: str, topic: str, target: Dict[int, List[int]], tmp: Path) -> None:
    """Kafka's own kafka-reassign-partitions (--execute, then --verify until done) through ``bootstrap``:
    AlterPartitionReassignments/ListPartitionReassignments answered by the controller, of whichever kind."""
    plan = tmp / f"reassign-{topic}-{uuid.uuid4().hex[:6]}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in target.items()]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    rc, out = kafka_tool(tool, "--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan), "--execute")
    assert rc == 0 and "Successfully started partition reassignment" in out, out

    def done() -> bool:
        rc, out = kafka_tool(tool, "--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan),
                             "--verify")
        assert rc == 0 or "still in progress" in out, out
        return all(f"Reassignment of partition {topic}-{p} is completed" in out for p in target)
    wait_for(done, 90, f"reassignment of {topic} to {target}", c, interval_s=1.0)
    assignment = c.zk_json(f"/brokers/topics/{topic}")[0]  # type: ignore[index]
    assert {int(p): r for p, r in assignment["partitions"].items() if int(p) in target} == target
    assert not assignment["adding_replicas"] and not assignment["removing_replicas"], assignment
    assert not c.zk().exists("/admin/reassign_partitions")


def create_topic(c: MixedCluster, bootstrap: str, name: str, partitions: int, config: Dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=config)], operation_timeout=30)[name].result(45)
    wait_for(lambda: full_isr(c, name, partitions, set(c.ids())), 30, f"{name} online with full ISRs", c)


def ensure_offsets_topic(c: MixedCluster) -> Dict[int, List[int]]:
    """Create __consumer_offsets (FindCoordinator auto-creates it); partition -> replicas."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def ready() -> Optional[Dict[int, List[int]]]:
        admin.describe_consumer_groups(["warm-up"])["warm-up"].result(15)
        data, _ = c.zk_json("/brokers/topics/__consumer_offsets")
        if data is None or not full_isr(c, "__consumer_offsets", OFFSETS_PARTITIONS, set(c.ids())):
            return None
        return {int(p): r for p, r in data["partitions"].items()}
    return wait_for(ready, 60, "__consumer_offsets with full ISRs", c)  # type: ignore[return-value]


def group_on(c: MixedCluster, pred: Callable[[int, List[int]], bool], tag: str) -> str:
    """A group id whose __consumer_offsets partition's leader and replicas satisfy ``pred(leader, replicas)``."""
    for i in range(10_000):
        g = f"{tag}-{i}"
        p = offsets_partition(g)
        s = c.partition_state("__consumer_offsets", p)
        replicas = c.zk_json("/brokers/topics/__consumer_offsets")[0]["partitions"][str(p)]  # type: ignore[index]
        if s is not None and pred(s["leader"], replicas):
            return g
    raise AssertionError(f"no group id for {tag}")


def coordinator(c: MixedCluster, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    return int(admin.describe_consumer_groups([group])[group].result(20).coordinator.id)


def consume_and_commit(c: MixedCluster, group: str, topic: str, partitions: int, n: int) -> Dict[int, int]:
    """A group member reads ``n`` records, commits synchronously, leaves; returns the committed offsets."""
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    try:
        cons.subscribe([topic])
        pos: Dict[int, int] = {}
        seen = 0
        deadline = time.monotonic() + 60
        while seen < n and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.offset() == pos.get(m.partition(), m.offset()), "group consumer skipped or repeated"
            pos[m.partition()] = m.offset() + 1
            seen += 1
        assert seen >= n, f"group {group} read only {seen}"
        committed = cons.commit(offsets=[TopicPartition(topic, p, o) for p, o in pos.items()], asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
        return pos
    finally:
        cons.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> Dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(20)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def assert_group_resumes(c: MixedCluster, group: str, topic: str, partitions: int, want: Dict[int, int]) -> None:
    """The committed offsets survive coordinator moves: read from every broker, and a new member starts there."""
    for i, n in c.nodes.items():
        if n.is_alive():
            wait_for(lambda: committed_offsets(n.bootstrap, group, topic, partitions) == want, 30,
                     f"offsets of {group} via broker {i}", c)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    try:
        cons.subscribe([topic])
        first: Dict[int, int] = {}
        deadline = time.monotonic() + 60
        while set(first) != set(want) and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error() is not None:
                continue
            first.setdefault(m.partition(), m.offset())
        assert {p: first.get(p) for p in want} == want, f"{group} resumed at {first}, committed {want}"
    finally:
        cons.close()


def leaders_by_kind(c: MixedCluster, topic: str, partitions: int) -> Set[str]:
    return {c.kind(s["leader"]) for s in states(c, topic, partitions).values()}


def broker_czxid(c: MixedCluster, broker_id: int) -> int:
    return int(c.zk().get(f"/brokers/ids/{broker_id}")[1].czxid)


# ------------------------------------------------------------------------------------------------ steps
def isr_shrink_and_expand(c: MixedCluster, topic: str, victim: int, load: Load) -> None:
    """SIGSTOP ``victim``: the leaders (of both kinds) of the partitions it follows drop it from the ISR through
    the controller (AlterPartition) within replica.lag.time.max.ms, well before its ZooKeeper session expires;
    after SIGCONT it catches up and is added back. (Partitions it leads stall meanwhile, as with Kafka.)"""
    epoch = broker_czxid(c, victim)
    members = set(c.ids())
    followers_only = all(s["leader"] != victim for s in states(c, topic, TOPIC_PARTITIONS).values())
    c[victim].pause()
    try:
        def shrunk() -> bool:
            return all(victim not in s["isr"] for s in states(c, topic, TOPIC_PARTITIONS).values()
                       if s["leader"] != victim)
        wait_for(shrunk, 20, f"ISRs without paused broker {victim}", c)
        if followers_only:
            load.progress(20, 30, c)  # acks=all goes on with the smaller ISR
    finally:
        c[victim].resume()
    assert broker_czxid(c, victim) == epoch, "the pause outlived the ZooKeeper session: not an ISR shrink"
    wait_for(lambda: full_isr(c, topic, TOPIC_PARTITIONS, members), 40, f"broker {victim} back in every ISR", c)


def controlled_shutdown(c: MixedCluster, victim: int, load: Load, topic: str) -> None:
    """SIGTERM: the broker asks the controller to move its leaderships away before it exits."""
    led_before = [p for p, s in states(c, topic, TOPIC_PARTITIONS).items() if s["leader"] == victim]
    was_controller = c.controller_id() == victim
    rc = c[victim].stop(120)
    if c.kind(victim) == "ours":
        assert rc == 0, f"our broker {victim} exited with {rc}"
    after = states(c, topic, TOPIC_PARTITIONS)
    assert all(s["leader"] != victim for s in after.values()), f"leaderships left on {victim}: {after}"
    assert led_before == [] or all(after[p]["leader_epoch"] > 0 for p in led_before)
    wait_for(lambda: all(victim not in s["isr"] for s in states(c, topic, TOPIC_PARTITIONS).values()), 20,
             f"stopped broker {victim} out of every ISR", c)
    if was_controller:
        c.wait_controller(lambda x: x != victim, 30, f"a new controller after {victim} stopped")
    load.progress(30, 60, c)


def restart(c: MixedCluster, broker_id: int, topic: str) -> None:
    c[broker_id].start()
    c.wait_metadata_ready(60)
    wait_for(lambda: full_isr(c, topic, TOPIC_PARTITIONS, set(c.ids())), 60, f"broker {broker_id} rejoined", c)


def preferred_election(c: MixedCluster, topic: str, partitions: int = TOPIC_PARTITIONS) -> None:
    """ElectLeaders (PREFERRED) through the admin client, answered by the controller of whichever kind."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    res = admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
    errs = {tp: e for tp, e in res.items() if e is not None and e.code() != KafkaError.ELECTION_NOT_NEEDED}
    assert not errs, errs
    assignment = c.zk_json(f"/brokers/topics/{topic}")[0]["partitions"]  # type: ignore[index]
    wait_for(lambda: all(s["leader"] == assignment[str(p)][0] for p, s in states(c, topic, partitions).items()),
             30, "preferred leaders", c)


def hard_kill(c: MixedCluster, victim: int, load: Load, topic: str) -> None:
    """kill -9 a broker that leads (after a preferred election): once its ZooKeeper session expires the
    controller elects new leaders from the ISR; the broker restarts only after that, as Kafka requires."""
    preferred_election(c, topic)
    assert any(s["leader"] == victim for s in states(c, topic, TOPIC_PARTITIONS).values())
    c[victim].kill()
    wait_for(lambda: victim not in c.registered() and c.controller_id() not in (None, victim)
             and all(s["leader"] != victim for s in states(c, topic, TOPIC_PARTITIONS).values()),
             40, f"failover away from killed broker {victim}", c)
    load.progress(30, 60, c)


def create_and_delete_topic(c: MixedCluster, via: int) -> None:
    """DeleteTopics through broker ``via``: the controller's StopReplica(delete) reaches every replica, of
    either kind (a deleted log directory is renamed ``*-delete`` first, as Kafka does)."""
    name = f"doomed-{via}"
    create_topic(c, c[via].bootstrap, name, 2, {})
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(name, value=b"x%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": c[via].bootstrap})
    admin.delete_topics([name], operation_timeout=30)[name].result(45)

    def gone() -> bool:
        if c.zk().exists(f"/brokers/topics/{name}") or c.zk().exists(f"/admin/delete_topics/{name}"):
            return False
        for i, n in c.nodes.items():
            if any((n.log_dir / f"{name}-{q}").exists() for q in range(2)):
                return False
            if name in AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=10).topics:
                return False
        return True
    wait_for(gone, 45, f"{name} deleted on every broker", c)


# ------------------------------------------------------------------------------------------------ tests
def test_kafka_controller_drives_our_brokers(mixed: Callable[..., MixedCluster]) -> None:
    """Kafka holds /controller; ours follow its LeaderAndIsr, lead, shrink ISRs through it; then the role moves
    to ours, which reads the state znodes Kafka's controller wrote and drives the Kafka broker's return."""
    c = mixed(ours=[0, 1], kafka=[2])
    c.start([2, 0, 1])
    assert c.controller_id() == 2
    topic = "mixed-k"
    create_topic(c, c[0].bootstrap, topic, TOPIC_PARTITIONS, {"min.insync.replicas": "2"})
    assert leaders_by_kind(c, topic, TOPIC_PARTITIONS) == {"ours", "kafka"}
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    offsets = ensure_offsets_topic(c)
    assert offsets and all(len(r) == 3 for r in offsets.values())

    load = Load(c.bootstrap, topic, TOPIC_PARTITIONS).start()
    load.progress(200, 60, c)

    # groups whose coordinator is each kind; the Kafka one's offsets partition has ours next in line
    g_kafka = group_on(c, lambda leader, reps: leader == 2, "gk")
    g_ours = group_on(c, lambda leader, reps: leader == 0 and reps[1] == 2, "go") if any(
        r[0] == 0 and r[1] == 2 for r in offsets.values()) else group_on(c, lambda leader, reps: leader == 0, "go")
    assert coordinator(c, g_kafka) == 2 and coordinator(c, g_ours) == 0
    committed = {g: consume_and_commit(c, g, topic, TOPIC_PARTITIONS, 100) for g in (g_kafka, g_ours)}

    # ISR shrink/expand: Kafka's leaders and ours drop our paused broker 1, Kafka's controller writes it
    isr_shrink_and_expand(c, topic, 1, load)
    create_and_delete_topic(c, 0)  # Kafka's controller deletes our replicas

    # controlled shutdown of one of ours: Kafka's controller handles our ControlledShutdown
    controlled_shutdown(c, 0, load, topic)
    restart(c, 0, topic)

    # the Kafka controller stops (controlled): the role moves to ours, which reads Kafka's znodes
    epochs = {p: s["leader_epoch"] for p, s in states(c, topic, TOPIC_PARTITIONS).items()}
    ctrl_epoch = c.controller_epoch()
    controlled_shutdown(c, 2, load, topic)
    assert c.kind(c.controller_id()) == "ours" and c.controller_epoch() == ctrl_epoch + 1  # type: ignore[arg-type]
    assert all(s["leader_epoch"] >= epochs[p] for p, s in states(c, topic, TOPIC_PARTITIONS).items())
    assert coordinator(c, g_kafka) in (0, 1)  # its offsets partition moved to ours, which loaded Kafka's records
    restart(c, 2, topic)  # our controller brings the Kafka broker back: LeaderAndIsr, catch-up, AlterPartition
    assert_views_agree(c, topic, TOPIC_PARTITIONS)

    # kill -9 our controller: the next controller (either kind) fails its leaderships over
    hard_kill(c, c.controller_id(), load, topic)  # type: ignore[arg-type]
    restart(c, [i for i in c.ids() if not c[i].is_alive()][0], topic)

    load.stop()
    assert not load.errors, load.errors[:5]
    assert_acked_exactly_once(c, load)
    assert_replicas_identical(c, topic, TOPIC_PARTITIONS)
    assert_replicas_identical(c, "__consumer_offsets", OFFSETS_PARTITIONS)
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    for g, want in committed.items():
        assert_group_resumes(c, g, topic, TOPIC_PARTITIONS, want)


def test_our_controller_drives_a_kafka_broker(mixed: Callable[..., MixedCluster], tmp_path: Path) -> None:
    """Ours holds /controller: the Kafka broker follows its LeaderAndIsr, replicates from our leaders and leads
    ours, asks it for ISR changes (AlterPartition), producer ids (AllocateProducerIds) and a controlled
    shutdown (ControlledShutdown v3); topic deletion reaches it as StopReplica."""
    c = mixed(ours=[0, 1], kafka=[2])
    c.start([0, 1, 2])
    assert c.controller_id() == 0
    topic = "mixed-o"
    create_topic(c, c[2].bootstrap, topic, TOPIC_PARTITIONS, {"min.insync.replicas": "2"})  # via Kafka's admin
    assert leaders_by_kind(c, topic, TOPIC_PARTITIONS) == {"ours", "kafka"}
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    offsets = ensure_offsets_topic(c)
    assert offsets

    load = Load(c[2].bootstrap, topic, TOPIC_PARTITIONS).start()  # InitProducerId answered by Kafka
    load.progress(200, 60, c)
    g_kafka = group_on(c, lambda leader, reps: leader == 2, "gk")
    g_ours = group_on(c, lambda leader, reps: leader == 1, "go")
    assert coordinator(c, g_kafka) == 2 and coordinator(c, g_ours) == 1
    committed = {g: consume_and_commit(c, g, topic, TOPIC_PARTITIONS, 100) for g in (g_kafka, g_ours)}

    configs_apply_across_kinds(c, topic)
    isr_shrink_and_expand(c, topic, 1, load)  # the Kafka leader shrinks through our controller
    isr_shrink_and_expand(c, topic, 2, load)  # our leaders drop the paused Kafka follower; it catches up
    create_and_delete_topic(c, 2)

    # Kafka's kafka-reassign-partitions against our controller: drop one of our replicas (StopReplica with
    # delete), make the Kafka broker the first replica, then restore the assignment (ours catches up again)
    original = {int(p): r for p, r in c.zk_json(f"/brokers/topics/{topic}")[0]["partitions"].items()}  # type: ignore
    reassign(c, c[2].bootstrap, topic, {p: [2, [b for b in r if b != 2][0]] for p, r in original.items()}, tmp_path)
    preferred_election(c, topic)
    assert leaders_by_kind(c, topic, TOPIC_PARTITIONS) == {"kafka"}
    load.progress(50, 60, c)
    reassign(c, c[0].bootstrap, topic, original, tmp_path)
    wait_for(lambda: full_isr(c, topic, TOPIC_PARTITIONS, set(c.ids())), 30, "full ISRs after reassignment", c)
    preferred_election(c, topic)

    controlled_shutdown(c, 2, load, topic)  # Kafka's ControlledShutdown v3 to our controller
    assert coordinator(c, g_kafka) in (0, 1)
    restart(c, 2, topic)
    hard_kill(c, 2, load, topic)
    restart(c, 2, topic)
    assert_views_agree(c, topic, TOPIC_PARTITIONS)

    # kill -9 our controller: the role moves; whoever wins reads the znodes our controller wrote
    hard_kill(c, 0, load, topic)
    restart(c, 0, topic)

    load.stop()
    assert not load.errors, load.errors[:5]
    assert_acked_exactly_once(c, load)
    assert_replicas_identical(c, topic, TOPIC_PARTITIONS)
    assert_replicas_identical(c, "__consumer_offsets", OFFSETS_PARTITIONS)
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    # Kafka's own kafka-topics, through the Kafka broker whose metadata came from our controller
    view = kafka_topics_describe(c[2].bootstrap, topic)
    assert {p: (v[0], sorted(v[2])) for p, v in view.items()} == {
        p: (s["leader"], sorted(s["isr"])) for p, s in states(c, topic, TOPIC_PARTITIONS).items()}
    for g, want in committed.items():
        assert_group_resumes(c, g, topic, TOPIC_PARTITIONS, want)


def test_one_of_ours_among_kafka_brokers_controller_moves_to_kafka(mixed: Callable[..., MixedCluster]) -> None:
    """1 ours + 2 Kafka: our controller drives two Kafka brokers (Kafka following Kafka); when it stops, a Kafka
    controller takes over from the znodes ours wrote and drives our broker's return."""
    c = mixed(ours=[0], kafka=[1, 2])
    c.start([0, 1, 2])
    assert c.controller_id() == 0
    topic = "mixed-1o2k"
    create_topic(c, c[0].bootstrap, topic, TOPIC_PARTITIONS, {"min.insync.replicas": "2"})
    assert leaders_by_kind(c, topic, TOPIC_PARTITIONS) == {"ours", "kafka"}
    ensure_offsets_topic(c)
    load = Load(c.bootstrap, topic, TOPIC_PARTITIONS).start()
    load.progress(200, 60, c)
    g = group_on(c, lambda leader, reps: leader == 0, "g")
    committed = consume_and_commit(c, g, topic, TOPIC_PARTITIONS, 100)

    epochs = {p: s["leader_epoch"] for p, s in states(c, topic, TOPIC_PARTITIONS).items()}
    ctrl_epoch = c.controller_epoch()
    controlled_shutdown(c, 0, load, topic)
    assert c.kind(c.controller_id()) == "kafka" and c.controller_epoch() == ctrl_epoch + 1  # type: ignore[arg-type]
    assert all(s["leader_epoch"] >= epochs[p] for p, s in states(c, topic, TOPIC_PARTITIONS).items())
    restart(c, 0, topic)  # Kafka's controller: LeaderAndIsr to ours, our catch-up, our AlterPartition to Kafka
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    isr_shrink_and_expand(c, topic, 0, load)

    # kill -9 our broker while it leads: Kafka's controller fails over; it truncates and rejoins
    hard_kill(c, 0, load, topic)
    restart(c, 0, topic)

    load.stop()
    assert not load.errors, load.errors[:5]
    assert_acked_exactly_once(c, load)
    assert_replicas_identical(c, topic, TOPIC_PARTITIONS)
    assert_replicas_identical(c, "__consumer_offsets", OFFSETS_PARTITIONS)
    assert_views_agree(c, topic, TOPIC_PARTITIONS)
    assert_group_resumes(c, g, topic, TOPIC_PARTITIONS, committed)


def test_replace_kafka_brokers_one_at_a_time(mixed: Callable[..., MixedCluster]) -> None:
    """A Kafka 3.9 cluster under load has each broker replaced by ours, same id, port and log directory: ours
    opens Kafka's data as it is, rejoins the ISRs, and clients notice nothing. The controller role passes from
    Kafka to ours on the way."""
    c = mixed(ours=[], kafka=[0, 1, 2])
    c.start([0, 1, 2])
    topic = "replaced"
    create_topic(c, c[1].bootstrap, topic, TOPIC_PARTITIONS, {"min.insync.replicas": "2"})
    ensure_offsets_topic(c)
    load = Load(c.bootstrap, topic, TOPIC_PARTITIONS).start()
    load.progress(300, 60, c)
    g = group_on(c, lambda leader, reps: True, "g")
    committed = consume_and_commit(c, g, topic, TOPIC_PARTITIONS, 150)

    for broker_id in (2, 1, 0):  # the controller (0, started first) last
        controlled_shutdown(c, broker_id, load, topic)
        c.replace(broker_id, "ours")
        restart(c, broker_id, topic)
        assert_views_agree(c, topic, TOPIC_PARTITIONS)
        load.progress(100, 60, c)
    assert c.kind(c.controller_id()) == "ours"  # type: ignore[arg-type]

    # and back (a rollback): Kafka opens the log directory ours wrote, after our clean shutdown
    controlled_shutdown(c, 2, load, topic)
    assert_kafka_reads_our_files(c[2].log_dir, topic)
    c.replace(2, "kafka")
    restart(c, 2, topic)
    assert "Recovering unflushed segment" not in c[2].output_since_start(), "Kafka did not see a clean shutdown"
    assert_views_agree(c, topic, TOPIC_PARTITIONS)

    load.stop()
    assert not load.errors, load.errors[:5]
    assert_acked_exactly_once(c, load)
    assert_replicas_identical(c, topic, TOPIC_PARTITIONS)
    assert_replicas_identical(c, "__consumer_offsets", OFFSETS_PARTITIONS)
    assert_group_resumes(c, g, topic, TOPIC_PARTITIONS, committed)


def test_catch_up_across_kinds_with_large_batches(mixed: Callable[..., MixedCluster]) -> None:
    """A follower of each kind that was down catches up megabytes of large batches from a leader of the other
    kind: fetch responses cut at replica.fetch.max.bytes end in a partial batch, which the follower must drop
    and fetch again; the caught-up logs are byte-identical. DeleteRecords moves every replica's log start;
    a follower left below it restarts at the leader's log start (OFFSET_OUT_OF_RANGE, then ListOffsets); a
    dead leader's unreplicated suffix is truncated against a new leader of the other kind."""
    c = mixed(ours=[0, 1], kafka=[2], overrides={"replica.fetch.max.bytes": "300000",
                                                 "message.max.bytes": "2000000",
                                                 "replica.lag.time.max.ms": "6000"})
    c.start([2, 0, 1])
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    cases = {"big-k": ([2, 0, 1], 1), "big-o": ([0, 2, 1], 2)}  # topic: (replicas, the follower taken down)
    fs = admin.create_topics([NewTopic(t, 1, replica_assignment=[r], config={"min.insync.replicas": "2"})
                              for t, (r, _) in cases.items()], operation_timeout=30)
    for f in fs.values():
        f.result(45)
    for topic, (replicas, down) in cases.items():
        wait_for(lambda: full_isr(c, topic, 1, set(replicas)), 30, f"{topic} online", c)
        assert c.partition_state(topic, 0)["leader"] == replicas[0]  # type: ignore[index]
        c[down].stop(120)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 50, "batch.size": 160000, "message.max.bytes": 2000000})
        payload = bytes(range(256)) * 200  # 51,200 bytes, incompressible enough
        for i in range(160):  # ~8 MB in batches of ~150 kB: a 300 kB fetch response ends mid-batch
            p.produce(topic, value=payload + b"%d" % i, partition=0)
            p.poll(0)
        assert p.flush(120) == 0
        c[down].start()
        c.wait_metadata_ready(60)
        wait_for(lambda: full_isr(c, topic, 1, set(replicas)), 90, f"{topic}: broker {down} caught up", c)
        wait_for(lambda: c.segment_files(down, topic, 0) == c.segment_files(replicas[0], topic, 0), 30,
                 f"{topic}: broker {down}'s log equal to the leader's", c)
        assert_replicas_identical(c, topic, 1)
        got = consume_all(c[down].bootstrap, topic, 1)
        assert len(got[0]) == 160 and got[0][-1] == payload + b"159"

        # DeleteRecords is answered once every live follower, of either kind, has adopted the new log start
        tp = TopicPartition(topic, 0, 100)
        assert admin.delete_records([tp])[tp].result(45).low_watermark == 100
        # a follower that comes back below the leader's log start is out of range: ListOffsets, start over there
        c[down].stop(120)
        for i in range(160, 200):
            p.produce(topic, value=payload + b"%d" % i, partition=0)
        assert p.flush(120) == 0
        tp = TopicPartition(topic, 0, 181)  # beyond the stopped follower's log end, most likely inside a batch
        assert admin.delete_records([tp])[tp].result(45).low_watermark == 181
        c[down].start()
        c.wait_metadata_ready(60)
        wait_for(lambda: full_isr(c, topic, 1, set(replicas)), 90, f"{topic}: broker {down} back from 181", c)

        def suffix_equal() -> bool:
            mine = c.segment_files(down, topic, 0)
            (name, data), = mine.items()  # one new segment, started at the log start offset
            lead = b"".join(c.segment_files(replicas[0], topic, 0).values())
            start = [pos for base, last, pos in batches(lead) if base <= 181 <= last][0]
            return int(name.split(".")[0]) == 181 and data == lead[start:]
        wait_for(suffix_equal, 30, f"{topic}: broker {down} holds the leader's batches from offset 181 on", c)

    for topic, (old_leader, new_leader) in {"big-k": (2, 0), "big-o": (0, 2)}.items():
        diverge_and_truncate(c, topic, old_leader, new_leader)


def test_move_replicas_from_kafka_onto_a_new_broker_of_ours(mixed: Callable[..., MixedCluster],
                                                           tmp_path: Path) -> None:
    """The other way to replace a broker: add one of ours with a new id, move every replica of a Kafka broker
    onto it with Kafka's own kafka-reassign-partitions (Kafka's controller drives the reassignment: our new
    replicas catch up from Kafka leaders, join the ISRs, and the old ones are deleted by StopReplica), then stop
    the Kafka broker. kafka-topics --describe through our broker agrees with ZooKeeper throughout."""
    c = mixed(ours=[3], kafka=[0, 1, 2])
    c.start([0, 1, 2, 3])
    topic = "moved"  # on the Kafka brokers only, as before the new broker joined
    rotations = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    admin = AdminClient({"bootstrap.servers": c[0].bootstrap})
    admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, replica_assignment=[rotations[p % 3] for p in range(
        TOPIC_PARTITIONS)], config={"min.insync.replicas": "2"})], operation_timeout=30)[topic].result(45)
    wait_for(lambda: full_isr(c, topic, TOPIC_PARTITIONS, {0, 1, 2}), 30, f"{topic} online", c)
    load = Load(c.bootstrap, topic, TOPIC_PARTITIONS).start()
    load.progress(200, 60, c)

    before = c.zk_json(f"/brokers/topics/{topic}")[0]["partitions"]  # type: ignore[index]
    target = {int(p): [3 if b == 2 else b for b in r] for p, r in before.items()}
    reassign(c, c[3].bootstrap, topic, target, tmp_path)
    wait_for(lambda: full_isr(c, topic, TOPIC_PARTITIONS, {0, 1, 3}), 30, "ISRs of 0, 1 and ours", c)
    wait_for(lambda: not any((c[2].log_dir / f"{topic}-{p}").exists() for p in range(TOPIC_PARTITIONS)), 30,
             "the old replicas deleted from Kafka broker 2", c)
    preferred_election(c, topic)  # ours leads the partitions it is now first replica of
    assert "ours" in leaders_by_kind(c, topic, TOPIC_PARTITIONS)
    view = kafka_topics_describe(c[3].bootstrap, topic)
    zk = states(c, topic, TOPIC_PARTITIONS)
    assert {p: (v[0], v[1], sorted(v[2])) for p, v in view.items()} == {
        p: (s["leader"], target[p], sorted(s["isr"])) for p, s in zk.items()}

    controlled_shutdown(c, 2, load, topic)  # broker 2 holds no replica of the topic any more
    load.stop()
    assert not load.errors, load.errors[:5]
    assert_acked_exactly_once(c, load)
    assert_replicas_identical(c, topic, TOPIC_PARTITIONS)


def diverge_and_truncate(c: MixedCluster, topic: str, old_leader: int, new_leader: int) -> None:
    """KIP-101/279 across kinds: the leader appends records (acks=1) its paused followers never fetch, dies;
    a follower of the other kind becomes leader and writes at the same offsets in a new epoch; the old leader
    comes back, learns the diverging epoch from the new leader, truncates its suffix and catches up."""
    preferred_election(c, topic, 1)
    assert c.partition_state(topic, 0)["leader"] == old_leader  # type: ignore[index]
    followers = [b for b in c.ids() if b != old_leader]
    before = log_end_offset(c.segment_files(old_leader, topic, 0))
    p1 = Producer({"bootstrap.servers": c[old_leader].bootstrap, "acks": "1", "enable.idempotence": False,
                   "linger.ms": 0})
    p1.produce(topic, value=b"warm-up", partition=0)  # connected, metadata known: the pause below stays short
    assert p1.flush(20) == 0
    wait_for(lambda: log_end_offset(c.segment_files(followers[0], topic, 0)) == before + 1 and log_end_offset(
        c.segment_files(followers[1], topic, 0)) == before + 1, 20, "followers caught up", c)
    before += 1
    for b in followers:
        c[b].pause()
    try:
        time.sleep(0.8)  # a fetch parked at the leader (replica.fetch.wait.max.ms 500) has been answered
        for i in range(10):
            p1.produce(topic, value=b"lost-%d" % i, partition=0)
        assert p1.flush(20) == 0
        c[old_leader].kill()
    finally:
        for b in followers:
            c[b].resume()
    diverged = log_end_offset(c.segment_files(old_leader, topic, 0))
    assert diverged == before + 10, (before, diverged)
    wait_for(lambda: c.partition_state(topic, 0)["leader"] == new_leader  # type: ignore[index]
             and old_leader not in c.registered(), 30, f"{topic}: broker {new_leader} leads", c)
    p2 = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(20):
        p2.produce(topic, value=b"kept-%d" % i, partition=0)
    assert p2.flush(30) == 0
    c[old_leader].start()
    c.wait_metadata_ready(60)
    wait_for(lambda: full_isr(c, topic, 1, set(c.ids())), 60, f"{topic}: broker {old_leader} truncated and back", c)
    assert_replicas_identical(c, topic, 1)
    tp = TopicPartition(topic, 0)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"div-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    try:
        lo, hi = cons.get_watermark_offsets(tp, timeout=20)
        cons.assign([TopicPartition(topic, 0, lo)])
        values: List[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < hi - lo and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
    finally:
        cons.close()
    assert not any(v.startswith(b"lost-") for v in values) and values[-20:] == [b"kept-%d" % i for i in range(20)]
