"""Log compaction seen by confluent-kafka: 1,000,000 updates over 10,000 keys shrink to ~10,000 records.

The broker gets a short log.cleaner.backoff.ms; the topic is compacted with small segments, a tiny
min.cleanable.dirty.ratio and a short segment.ms so that one late record rolls the last big
segment and everything before it becomes cleanable.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.storage.checkpoints import OffsetCheckpointFile
from tests.conftest import zookeeper  # noqa: F401  (fixture)
from tests.harness.broker_process import BrokerProcess, running_broker

N_UPDATES = 1_000_000
N_KEYS = 10_000
TOPIC = "compacted-updates"


@pytest.fixture(scope="module")
def cleaner_broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:  # noqa: F811
    with running_broker(Path(tmp_path_factory.mktemp("compaction")), f"{zookeeper}/cmp-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides={"log.cleaner.backoff.ms": "200"}) as b:
        yield b


def _cleaner_checkpoint(b: BrokerProcess) -> int:
    try:
        return OffsetCheckpointFile(str(b.log_dir / "cleaner-offset-checkpoint")).read().get((TOPIC, 0), -1)
    except (ValueError, OSError):
        return -1  # being replaced right now


def test_compaction_keeps_latest_value_per_key(cleaner_broker: BrokerProcess) -> None:
    b = cleaner_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01",
        "segment.ms": "1000", "delete.retention.ms": "60000"})], operation_timeout=30)
    fs[TOPIC].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "lz4", "queue.buffering.max.messages": 500_000})
    latest = {}
    for i in range(N_UPDATES):
        key = b"key-%05d" % (i % N_KEYS)
        value = b"value-%07d" % i
        latest[key] = value
        while True:
            try:
                p.produce(TOPIC, value, key, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    time.sleep(1.2)  # past segment.ms: the next append rolls the big segment
    p.produce(TOPIC, b"last", b"roll-trigger", partition=0)
    latest[b"roll-trigger"] = b"last"
    assert p.flush(30) == 0

    deadline = time.monotonic() + 60
    while _cleaner_checkpoint(b) < N_UPDATES and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _cleaner_checkpoint(b) >= N_UPDATES, b.output()[-3000:]

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cmp-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    seen = {}
    count = 0
    last_offset = -1
    try:
        end = time.monotonic() + 30
        while last_offset < N_UPDATES and time.monotonic() < end:
            for m in c.consume(5000, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                assert m.offset() > last_offset
                last_offset = m.offset()
                seen[m.key()] = m.value()
                count += 1
    finally:
        c.close()
    assert last_offset == N_UPDATES
    assert seen == latest
    assert count == N_KEYS + 1  # every key once (the roll trigger included), nothing stale
