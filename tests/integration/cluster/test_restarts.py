"""Whole-cluster and rolling restarts of a real 3-broker cluster (processes from ``bin/``), stock clients only:

* SIGTERM every broker at once, start them all again: every committed record and committed group offset is there;
* restart the brokers one by one (SIGTERM = controlled shutdown, start, wait until it is back in every ISR) while
  an acks=all idempotent producer and a consumer group run the whole time: neither sees an error, nothing
  acknowledged is lost or duplicated, the group never rebalances.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Dict, List, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.harness.faults import ProduceLoad, check_exactly_once, read_partitions
from tests.integration.cluster.conftest import ClusterView, wait_for

pytestmark = pytest.mark.slow

OFFSETS = "__consumer_offsets"
#: Errors librdkafka reports through error_cb while it reconnects on its own (a broker going away and coming
#: back); they never reach a delivery report or a consumed message.
TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}


def all_in_sync(view: ClusterView, topics: List[str], n: int = 3) -> bool:
    for t in topics:
        parts = view.partitions(t)
        if not parts or not all(leader >= 0 and len(isr) == n for leader, _, isr in parts.values()):
            return False
    return True


# ------------------------------------------------------------------------------------------------ 5
def test_full_cluster_restart_keeps_everything_committed(new_cluster) -> None:
    c = new_cluster(3)
    view = ClusterView(c.bootstrap)
    topic, nparts = "full-restart", 3
    view.create_topic(topic, nparts, 3, {"min.insync.replicas": "2"})
    load = ProduceLoad(c.bootstrap, topic, nparts, interval_s=0.002).start()
    load.wait_acks(3000, 60)
    stats = load.stop()
    assert not stats.errors, stats.errors[:5]

    group = f"g-{uuid.uuid4().hex[:6]}"
    committed = [TopicPartition(topic, p, len(stats.acked[p]) // (p + 2)) for p in range(nparts)]
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        cons.commit(offsets=committed, asynchronous=False)
    finally:
        cons.close()
    wait_for(lambda: all_in_sync(view, [topic, OFFSETS]), 60, "every replica in sync before the restart")
    before = read_partitions(c.bootstrap, topic, range(nparts))
    check_exactly_once(stats, before)

    t0 = time.monotonic()
    codes = c.stop()
    stopped = time.monotonic() - t0
    assert codes == {0: 0, 1: 0, 2: 0}, f"exit statuses {codes}"
    for b in c.brokers:
        assert "Traceback" not in b.output()
    t0 = time.monotonic()
    c.start()
    view = ClusterView(c.bootstrap)
    wait_for(lambda: all_in_sync(view, [topic, OFFSETS]), 60, "every partition online with full ISRs after the restart")
    back = time.monotonic() - t0

    after = read_partitions(c.bootstrap, topic, range(nparts))
    assert after == before, "the log changed across the restart"
    check_exactly_once(stats, after)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = cons.committed([TopicPartition(topic, p) for p in range(nparts)], timeout=30)
    finally:
        cons.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(tp.partition, tp.offset) for tp in committed]

    # and the cluster takes new writes
    more = ProduceLoad(c.bootstrap, topic, nparts, prefix="after-").start()
    more.wait_acks(300, 60)
    more_stats = more.stop()
    assert not more_stats.errors, more_stats.errors[:5]
    print(f"\nfull restart: stopped in {stopped:.2f}s, every ISR full {back:.2f}s after starting; "
          f"{sum(len(v) for v in after.values())} records and the group's offsets intact")


# ------------------------------------------------------------------------------------------------ 6
class GroupConsumer:
    """A consumer group member polling from a thread until stopped; records everything it sees."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.errors: List[KafkaError] = []
        self.client_errors: List[KafkaError] = []
        self.assignments: List[List[Tuple[str, int]]] = []
        self.revocations = 0
        self.seen: List[Tuple[int, int, bytes]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                           "error_cb": self._on_error})
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, name="group-consumer", daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.client_errors.append(err)

    def _on_assign(self, _c: Consumer, parts: List[TopicPartition]) -> None:
        self.assignments.append([(p.topic, p.partition) for p in parts])

    def _on_revoke(self, _c: Consumer, _parts: List[TopicPartition]) -> None:
        if not self._stop.is_set():  # close() at the end revokes too
            self.revocations += 1

    def start(self) -> "GroupConsumer":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self.c.consume(500, 0.2):
                with self._lock:
                    if m.error():
                        self.errors.append(m.error())
                    else:
                        self.seen.append((m.partition(), m.offset(), m.value()))
        self.c.close()

    def values(self) -> List[bytes]:
        with self._lock:
            return [v for _, _, v in self.seen]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def test_rolling_restart_under_load_no_client_error(new_cluster) -> None:
    c = new_cluster(3)
    view = ClusterView(c.bootstrap)
    topic, nparts = "rolling", 3
    view.create_topic(topic, nparts, 3, {"min.insync.replicas": "2"})
    load = ProduceLoad(c.bootstrap, topic, nparts).start()
    consumer = GroupConsumer(c.bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}").start()
    restarts: Dict[int, float] = {}
    stats = None
    try:
        load.wait_acks(200, 60)
        wait_for(lambda: len(consumer.values()) >= 100, 60, "the group consuming")
        for b in c.brokers:
            wait_for(lambda: all_in_sync(view, [topic, OFFSETS]), 60, "every replica in sync")
            t0 = time.monotonic()
            rc = b.stop()
            assert rc == 0, f"broker {b.broker_id} exited with {rc}:\n{b.output()[-3000:]}"
            b.start()
            wait_for(lambda: all_in_sync(view, [topic, OFFSETS]), 60, f"broker {b.broker_id} back in every ISR")
            restarts[b.broker_id] = time.monotonic() - t0
            since = time.monotonic()
            load.wait_acks(100, 60, since=since)
            wait_for(lambda: len(consumer.values()) >= load.ack_count() - 600, 60, "the group keeping up")
        stats = load.stop()
        acked = {a.value for acks in stats.acked.values() for a in acks}
        wait_for(lambda: acked <= set(consumer.values()), 60, "the group reading every acknowledged record")
    finally:
        if stats is None:
            load.stop()
        consumer.stop()
    assert not stats.errors, f"delivery errors: {stats.errors[:5]}"
    bad_producer = [e for e in stats.client_errors if e.code() not in TRANSIENT or e.fatal()]
    assert not bad_producer, f"producer errors: {bad_producer}"
    assert not consumer.errors, f"consumer errors: {consumer.errors[:5]}"
    bad_consumer = [e for e in consumer.client_errors if e.code() not in TRANSIENT or e.fatal()]
    assert not bad_consumer, f"consumer errors: {bad_consumer}"
    dups = [v for v, n in Counter(consumer.values()).items() if n > 1]
    assert not dups, f"the group saw {len(dups)} records twice, e.g. {dups[:5]}"
    assert len(consumer.assignments) == 1 and consumer.revocations == 0, (
        f"the group rebalanced: assignments {consumer.assignments}, revocations {consumer.revocations}")
    checked = check_exactly_once(stats, read_partitions(c.bootstrap, topic, range(nparts)))
    print(f"\nrolling restart: {restarts} (s per broker, SIGTERM -> back in every ISR); {checked} records, "
          f"transient client errors: producer {Counter(str(e.code()) for e in stats.client_errors)}, "
          f"consumer {Counter(str(e.code()) for e in consumer.client_errors)}")
