"""ConsumeLedger: a read_committed consumer group member that remembers every record it was given.

Each read is kept as (partition, offset, value, monotonic time); each assignment of a partition starts a new
"generation" for it, since after a rebalance the group re-reads from the last committed offset (at-least-once).
Within a generation offsets must strictly increase (the audit checks that).
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from confluent_kafka import Consumer, KafkaError


@dataclass
class Read:
    partition: int
    offset: int
    value: bytes
    t: float
    generation: int


@dataclass
class ReadLedger:
    reads: Dict[int, List[Read]] = field(default_factory=lambda: defaultdict(list))
    errors: List[str] = field(default_factory=list)
    assignments: int = 0


class ConsumeLedger:
    def __init__(self, bootstrap: str, topic: str, group: str, auto_commit: bool = True,
                 logger: Optional[object] = None) -> None:
        self.topic = topic
        extra = {"logger": logger} if logger is not None else {}
        self.consumer = Consumer({**extra,
            "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
            "enable.auto.commit": auto_commit, "auto.commit.interval.ms": 1000, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "enable.partition.eof": False,
            "reconnect.backoff.max.ms": 1000, "error_cb": self._on_error})
        self.auto_commit = auto_commit
        self.ledger = ReadLedger()
        self._generation: Dict[int, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ledger-{topic}", daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.ledger.errors.append(str(err))

    def _on_assign(self, consumer: Consumer, parts: list) -> None:
        with self._lock:
            self.ledger.assignments += 1
            for tp in parts:
                self._generation[tp.partition] += 1

    def start(self) -> "ConsumeLedger":
        self.consumer.subscribe([self.topic], on_assign=self._on_assign)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                msgs = self.consumer.consume(500, 0.2)
            except Exception as exc:  # a KafkaException from a fatal client state: keep the note, keep going
                with self._lock:
                    self.ledger.errors.append(repr(exc))
                time.sleep(0.2)
                continue
            now = time.monotonic()
            with self._lock:
                for m in msgs:
                    if m.error():
                        self.ledger.errors.append(str(m.error()))
                        continue
                    p = m.partition()
                    self.ledger.reads[p].append(Read(p, m.offset(), m.value(), now, self._generation[p]))
            if not self.auto_commit and msgs:
                try:
                    self.consumer.commit(asynchronous=True)
                except Exception:  # nothing to commit, or no coordinator right now: the next one will do
                    pass

    def first_read_since(self, t: float, partitions: Optional[Set[int]] = None) -> Tuple[Optional[float],
                                                                                       Optional[float]]:
        """(first read of any partition at/after ``t``, time by which every partition in ``partitions`` had one)."""
        with self._lock:
            firsts: Dict[int, float] = {}
            for p, rs in self.ledger.reads.items():
                for r in reversed(rs):
                    if r.t < t:
                        break
                    firsts[p] = r.t
        if not firsts:
            return None, None
        any_t = min(firsts.values())
        if partitions is None or not partitions <= set(firsts):
            return any_t, None
        return any_t, max(firsts[p] for p in partitions)

    def read_values(self, partition: int) -> Set[bytes]:
        with self._lock:
            return {r.value for r in self.ledger.reads.get(partition, [])}

    def stop(self) -> ReadLedger:
        self._stop.set()
        self._thread.join(30)
        try:
            self.consumer.close()
        except Exception:  # closing against a cluster that is going away must not hide the audit
            pass
        return self.ledger
