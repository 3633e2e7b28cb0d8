"""Helpers for the cluster fault tests: a background idempotent producer that remembers every acknowledgement,
the exactly-once/in-order check of a topic against those acknowledgements, and the "replicas are byte-identical"
check of the partition logs on disk.

Records are ``b"<partition>:<seq>"`` with a per-partition sequence in production order, produced to an explicit
partition, so the read-back can check order and duplicates without any bookkeeping in the broker.
"""
from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


#: how many of librdkafka's last idempotence log lines a load keeps
EOS_LOG_LINES = 400


class _LineLog:
    """A ``logging.Logger`` stand-in for confluent-kafka's ``logger=``: keeps each line, stamped, in a bounded deque."""

    def __init__(self, lines: "Deque[str]") -> None:
        self.lines = lines

    def log(self, level: int, fmt: str, *args: object) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} " + (fmt % args))


@dataclass
class Ack:
    partition: int
    offset: int
    value: bytes
    t: float


@dataclass
class LoadStats:
    acked: Dict[int, List[Ack]] = field(default_factory=lambda: defaultdict(list))
    errors: List[Tuple[int, bytes, str]] = field(default_factory=list)
    client_errors: List[KafkaError] = field(default_factory=list)
    produced: int = 0
    #: librdkafka's idempotence log (debug=eos: PID and epoch changes, drains, sequence errors), its last lines,
    #: printed by check_exactly_once when it fails: why the client re-sent a record under a new epoch
    eos_log: List[str] = field(default_factory=list)


class ProduceLoad:
    """Produces ``<p>:<seq>`` to every partition of ``topic`` from a thread until :meth:`stop`.

    acks=all and enable.idempotence=true; ``message.timeout.ms`` is long enough to outlive a failover, so a
    record fails only if something is really wrong. Every delivery report is kept (:attr:`stats`).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval_s: float = 0.01,
                 extra: Optional[Dict[str, object]] = None, prefix: str = "") -> None:
        self.topic = topic
        self.partitions = partitions
        self.interval_s = interval_s
        self.prefix = prefix.encode()
        conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "message.timeout.ms": 120000, "request.timeout.ms": 10000,
                                   "linger.ms": 5, "error_cb": self._on_error,
                                   # a restarted broker is retried within a second (librdkafka's default backoff
                                   # grows to 10 s while it is down, which would time the client, not the cluster)
                                   "reconnect.backoff.max.ms": 1000}
        conf.update(extra or {})
        self._eos_log: Deque[str] = deque(maxlen=EOS_LOG_LINES)
        conf.setdefault("debug", "eos")
        self.producer = Producer(conf, logger=_LineLog(self._eos_log))
        self.stats = LoadStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._seq = [0] * partitions
        self.flush_left = -1
        self._thread = threading.Thread(target=self._run, name=f"load-{topic}", daemon=True)

    def start(self) -> "ProduceLoad":
        self._thread.start()
        return self

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.stats.client_errors.append(err)

    def _on_delivery(self, err: Optional[KafkaError], msg: object) -> None:
        now = time.monotonic()
        with self._lock:
            if err is not None:
                self.stats.errors.append((msg.partition(), msg.value(), str(err)))  # type: ignore[attr-defined]
            else:
                self.stats.acked[msg.partition()].append(  # type: ignore[attr-defined]
                    Ack(msg.partition(), msg.offset(), msg.value(), now))  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in range(self.partitions):
                value = self.prefix + f"{p}:{self._seq[p]:09d}".encode()
                while not self._stop.is_set():
                    try:
                        self.producer.produce(self.topic, value=value, partition=p, on_delivery=self._on_delivery)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                else:
                    break
                self._seq[p] += 1
                with self._lock:
                    self.stats.produced += 1
            self.producer.poll(0)
            self._stop.wait(self.interval_s)
        self.flush_left = self.producer.flush(180)

    def ack_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.stats.acked.values())

    def acks_since(self, t: float, partition: Optional[int] = None) -> List[Ack]:
        with self._lock:
            parts = [partition] if partition is not None else list(self.stats.acked)
            return [a for p in parts for a in self.stats.acked.get(p, []) if a.t >= t]

    def wait_acks(self, n: int, timeout_s: float = 60.0, partition: Optional[int] = None,
                  since: float = float("-inf")) -> None:
        """Wait until at least ``n`` acknowledgements arrived (after ``since``, on ``partition`` if given)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.acks_since(since, partition)) >= n:
                return
            time.sleep(0.05)
        raise AssertionError(f"only {len(self.acks_since(since, partition))} of {n} acknowledgements within "
                             f"{timeout_s}s; errors: {self.stats.errors[:5]}")

    def stop(self, timeout_s: float = 200.0) -> LoadStats:
        """Stop producing, wait for every outstanding delivery report, return the stats."""
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "producer thread did not finish flushing"
        self.stats.eos_log = list(self._eos_log)
        assert self.flush_left == 0, f"{self.flush_left} records still undelivered after flush"
        return self.stats


def partitions_seen_by(bootstrap: str, topic: str,
                       timeout_s: float = 5.0) -> Dict[int, Tuple[int, List[int], List[int]]]:
    """partition -> (leader, replicas, isr) from a *new* client whose first Metadata request goes to a broker of
    ``bootstrap``. A long-lived client may ask any broker it has learnt of, including a stopped or isolated one
    (whose answer is stale or never comes)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=timeout_s)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(str(t.error))
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


# --------------------------------------------------------------------------------------------- read-back
def read_partitions(bootstrap: str, topic: str, partitions: Iterable[int], timeout_s: float = 60.0
                    ) -> Dict[int, List[Tuple[int, bytes]]]:
    """Every record of ``partitions`` from offset 0 up to the high watermark: partition -> [(offset, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False})
    parts = list(partitions)
    try:
        deadline = time.monotonic() + timeout_s
        high: Dict[int, int] = {}
        for p in parts:
            while True:
                try:
                    high[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        out: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in parts}
        todo = {p for p in parts if high[p] > 0}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        while todo and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                out[m.partition()].append((m.offset(), m.value()))
                if m.offset() >= high[m.partition()] - 1:
                    todo.discard(m.partition())
        assert not todo, f"could not read up to the high watermark {high} of {sorted(todo)} in {timeout_s}s"
        return out
    finally:
        c.close()


def check_exactly_once(stats: LoadStats, log: Dict[int, List[Tuple[int, bytes]]]) -> int:
    """Every acknowledged record is in the log exactly once, at the offset it was acknowledged with, and every
    partition holds its records in production order. Returns the number of acknowledged records checked."""
    checked = 0
    for p, records in log.items():
        values = [v for _, v in records]
        dups = {v for v in values if values.count(v) > 1} if len(set(values)) != len(values) else set()
        if dups:
            where = {v: [off for off, x in records if x == v] for v in sorted(dups)[:10]}
            told = {v: [a.offset for a in stats.acked.get(p, []) if a.value == v] for v in where}
            _fail(stats, f"partition {p}: duplicated records (value: offsets) {where}; acknowledged at {told}")
        seqs = [int(v.rsplit(b":", 1)[1]) for v in values]
        bad = [(a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
        if bad:
            _fail(stats, f"partition {p}: records out of production order at {bad[:5]}")
        at = {v: off for off, v in records}
        for a in stats.acked.get(p, []):
            if a.value not in at:
                _fail(stats, f"partition {p}: acknowledged record {a.value!r} (offset {a.offset}) is lost")
            # librdkafka acknowledges some records without an offset ("implicitly acked by subsequent batch
            # success" after a retry): those are only required to be there
            assert a.offset is None or a.offset < 0 or at[a.value] == a.offset, (
                f"partition {p}: {a.value!r} acknowledged at offset {a.offset} but found at {at[a.value]}")
            checked += 1
    for p in stats.acked:
        assert p in log, f"acknowledged records on partition {p} were not read back"
    return checked


def _fail(stats: LoadStats, what: str) -> None:
    """Fail with the client's last idempotence log lines (a duplicate means it re-sent a written record as new)."""
    tail = "\n".join(stats.eos_log[-120:]) or "(none kept)"
    raise AssertionError(f"{what}\nlibrdkafka's idempotence log (debug=eos), last lines:\n{tail}")


# --------------------------------------------------------------------------------------------- replica logs
def replica_dir(log_dir: Path, topic: str, partition: int) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def segment_files(log_dir: Path, topic: str, partition: int) -> Dict[str, bytes]:
    d = replica_dir(log_dir, topic, partition)
    return {f.name: f.read_bytes() for f in sorted(d.glob("*.log"))}


def log_size(log_dir: Path, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in replica_dir(log_dir, topic, partition).glob("*.log"))


def wait_replicas_identical(log_dirs: Dict[int, Path], replicas: Callable[[], Dict[int, Sequence[int]]],
                            topic: str, timeout_s: float = 60.0) -> Dict[int, str]:
    """Wait until, for every partition, each replica's ``.log`` segments have the same total size, then require
    them byte-identical (same segment names, same bytes). ``replicas()`` gives partition -> replica ids (called
    while waiting, so the caller can also require a full ISR there). Returns partition -> sha256 of the log."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            reps = replicas()
            sizes = {p: {b: log_size(log_dirs[b], topic, p) for b in rs} for p, rs in reps.items()}
            if reps and all(len(set(s.values())) == 1 for s in sizes.values()):
                break
            last = sizes
        except Exception as exc:  # a broker may still be starting
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"replica logs of {topic} did not converge within {timeout_s}s: {last!r}")
        time.sleep(0.2)
    digests: Dict[int, str] = {}
    for p, rs in reps.items():
        files = {b: segment_files(log_dirs[b], topic, p) for b in rs}
        first = rs[0]
        for b in rs[1:]:
            assert sorted(files[b]) == sorted(files[first]), (
                f"{topic}-{p}: segment files differ: broker {first} {sorted(files[first])}, broker {b} "
                f"{sorted(files[b])}")
            for name, data in files[first].items():
                if files[b][name] != data:
                    at = next((i for i, (x, y) in enumerate(zip(data, files[b][name])) if x != y),
                              min(len(data), len(files[b][name])))
                    raise AssertionError(f"{topic}-{p}/{name}: broker {b} differs from broker {first} at byte "
                                         f"{at} (sizes {len(files[b][name])} / {len(data)})")
        digests[p] = hashlib.sha256(b"".join(files[first][n] for n in sorted(files[first]))).hexdigest()
    return digests
