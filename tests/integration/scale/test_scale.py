"""Scale, CI-sized: 2,000 partitions on one real broker process (bin/kafka-server-start.sh) on a real ZooKeeper.

Functions only, never timings (the waits below are generous bounds, not figures; tools/bench/scale_bench.py
measures): every partition is led (as Metadata shows it) after creation, after a clean restart and after a
kill -9 restart; the broker's descriptors pointing into partition directories (``/proc/<pid>/fd``) stay within
``FD_PER_PARTITION`` per partition (each partition keeps its active segment's ``.log`` open, the rest on demand:
docs/sizing.md); and every record an idempotent acks=all producer had acknowledged, spread over all partitions,
the last of them written just before the kill -9 (unflushed), is read back afterwards with its value.

The tests share one broker and run in file order (create, descriptors, restarts, descriptors again).
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tools.cluster import BrokerProcess

TOPICS = 20
PER_TOPIC = 100
PARTITIONS = TOPICS * PER_TOPIC
FD_PER_PARTITION = 1.2
RECORDS_PER_PARTITION = 5
#: a bound for each wait (creation, restart), far above what it takes; never a measured figure
WAIT_S = 180.0

Acked = Dict[Tuple[str, int, int], bytes]


class ScaleBroker:
    """The shared broker, its topics, and the records acknowledged so far."""

    def __init__(self, broker: BrokerProcess, zk: str) -> None:
        self.broker = broker
        self.zk = zk
        self.topics = [f"scale-{i:02d}" for i in range(TOPICS)]
        self.acked: Acked = {}

    @property
    def tps(self) -> List[Tuple[str, int]]:
        return [(t, p) for t in self.topics for p in range(PER_TOPIC)]


def _leaders(bootstrap: str) -> Dict[Tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    md = admin.list_topics(timeout=20)
    return {(t.topic, p.id): p.leader for t in md.topics.values() if t.error is None
            for p in t.partitions.values()}


def _wait_all_led(sb: ScaleBroker, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    missing: List[Tuple[str, int]] = sb.tps
    while time.monotonic() < deadline:
        try:
            leaders = _leaders(sb.broker.bootstrap)
        except KafkaException:
            leaders = {}
        missing = [tp for tp in sb.tps if leaders.get(tp, -1) != sb.broker.broker_id]
        if not missing:
            return
        time.sleep(0.5)
    pytest.fail(f"{len(missing)} of {PARTITIONS} partitions not led {what} within {WAIT_S:.0f} s, "
                f"e.g. {missing[:5]}\n{sb.broker.output()[-3000:]}")


def _partition_fds(sb: ScaleBroker) -> Tuple[int, int]:
    """(descriptors of the broker process pointing into a partition directory, all its descriptors)."""
    assert sb.broker.pid is not None
    root = os.path.realpath(sb.broker.log_dir) + "/"
    fd_dir = f"/proc/{sb.broker.pid}/fd"
    into = total = 0
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        total += 1
        if target.startswith(root) and "/" in target[len(root):]:
            into += 1
    return into, total


def _produce(sb: ScaleBroker, tag: str) -> None:
    """RECORDS_PER_PARTITION records to every partition, idempotent, acks=all; remember the acknowledged ones."""
    p = Producer({"bootstrap.servers": sb.broker.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 120000, "log_level": 2})
    errors: List[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            sb.acked[(msg.topic(), msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    for i in range(RECORDS_PER_PARTITION):
        for t, part in sb.tps:
            while True:
                try:
                    p.produce(t, f"{tag}:{t}:{part}:{i}".encode(), partition=part, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0, "records still unacknowledged after 120 s"
    assert not errors, errors[:5]


def _read_back(sb: ScaleBroker) -> Acked:
    c = Consumer({"bootstrap.servers": sb.broker.bootstrap, "group.id": f"scale-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "log_level": 2})
    c.assign([TopicPartition(t, p, 0) for t, p in sb.tps])
    got: Acked = {}
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not all(k in got for k in sb.acked):
            for m in c.consume(10000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                got[(m.topic(), m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    return got


def _wait_registration_gone(sb: ScaleBroker) -> None:
    """A killed broker may start again only once ZooKeeper expired its session (Kafka refuses to start before)."""
    zk = KazooClient(hosts=sb.zk)
    zk.start(timeout=15)
    try:
        deadline = time.monotonic() + 60
        while zk.exists(f"/brokers/ids/{sb.broker.broker_id}") is not None:
            assert time.monotonic() < deadline, "the killed broker's registration did not expire"
            time.sleep(0.1)
    finally:
        zk.stop()
        zk.close()


@pytest.fixture(scope="module")
def scale_broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaleBroker]:
    workdir: Path = tmp_path_factory.mktemp("scale")
    zk = f"{zookeeper}/scale-{uuid.uuid4().hex[:8]}"
    b = BrokerProcess(workdir, zk, overrides={"zookeeper.session.timeout.ms": "3000"})
    b.start(timeout=120)
    sb = ScaleBroker(b, zk)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 2})
        futures = admin.create_topics([NewTopic(t, PER_TOPIC, 1) for t in sb.topics], operation_timeout=0,
                                      request_timeout=120)
        for f in futures.values():
            f.result(150)
        yield sb
    finally:
        b.kill()
    out = b.output()
    assert "Traceback" not in out, f"the broker logged a traceback:\n{out[-6000:]}"


def test_every_partition_led_after_create(scale_broker: ScaleBroker) -> None:
    _wait_all_led(scale_broker, "after creation")


def test_descriptors_per_partition_within_bound(scale_broker: ScaleBroker) -> None:
    _wait_all_led(scale_broker, "after creation")
    into, total = _partition_fds(scale_broker)
    assert into <= FD_PER_PARTITION * PARTITIONS, (
        f"{into} descriptors into partition directories for {PARTITIONS} partitions "
        f"({into / PARTITIONS:.2f} per partition, bound {FD_PER_PARTITION}); {total} descriptors in all")


def test_acknowledged_records_survive_clean_restart_and_kill9(scale_broker: ScaleBroker) -> None:
    sb = scale_broker
    _wait_all_led(sb, "after creation")
    _produce(sb, "before-stop")
    assert sb.broker.stop(timeout=120) == 0, "a clean shutdown exits 0"
    sb.broker.start(timeout=120)
    _wait_all_led(sb, "after a clean restart")

    _produce(sb, "before-kill")  # acknowledged, in the page cache, not flushed: recovery must keep them
    sb.broker.kill()
    _wait_registration_gone(sb)
    sb.broker.start(timeout=120)
    _wait_all_led(sb, "after a kill -9 restart")

    got = _read_back(sb)
    lost = [k for k in sb.acked if k not in got]
    changed = [k for k in sb.acked if k in got and got[k] != sb.acked[k]]
    assert len(sb.acked) == 2 * RECORDS_PER_PARTITION * PARTITIONS
    assert not lost, f"{len(lost)} of {len(sb.acked)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
    assert not changed, f"{len(changed)} records read back with other values, e.g. {sorted(changed)[:5]}"


def test_descriptors_per_partition_within_bound_after_restarts(scale_broker: ScaleBroker) -> None:
    into, total = _partition_fds(scale_broker)
    assert into <= FD_PER_PARTITION * PARTITIONS, (
        f"after the restarts: {into} descriptors into partition directories for {PARTITIONS} partitions "
        f"({into / PARTITIONS:.2f} per partition, bound {FD_PER_PARTITION}); {total} descriptors in all")
