"""kill -9 the broker mid-produce (twice), restart it, and check nothing acknowledged is lost.

An idempotent confluent-kafka producer keeps sending while the broker is killed and
restarted. Afterwards every acknowledged record must be readable exactly once and in order,
and no record may appear twice (the producer's retries are deduplicated by the recovered
producer state).
"""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import List

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess


def _read_all(bootstrap: str, topic: str, expected_min: int, timeout: float = 60.0) -> List[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    values: List[int] = []
    deadline = time.monotonic() + timeout
    eof = False
    try:
        while time.monotonic() < deadline and not (eof and len(values) >= expected_min):
            for m in c.consume(1000, 1.0):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof = True
                        continue
                    raise KafkaException(m.error())
                eof = False
                values.append(int(m.value()))
    finally:
        c.close()
    return values


def test_kill_minus_9_mid_produce_loses_nothing_acknowledged(zk_chroot: str, tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, zk_chroot, overrides={"zookeeper.session.timeout.ms": "2000",
                                                      "log.segment.bytes": "262144"})
    b.start()
    topic = f"crash-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    acked: List[int] = []
    errors: List[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 1,
                         "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 200})

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(int(msg.value()))

    def produce_loop() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, str(i).encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.0005 if i % 50 else 0.005)
        producer.flush(120)

    t = threading.Thread(target=produce_loop)
    t.start()
    try:
        for _ in range(2):
            deadline = time.monotonic() + 30
            start_count = len(acked)
            while len(acked) < start_count + 3000 and time.monotonic() < deadline:
                time.sleep(0.05)
            b.kill()
            time.sleep(0.3)
            b.start(timeout=60)
        deadline = time.monotonic() + 30
        start_count = len(acked)
        while len(acked) < start_count + 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(180)
    assert not errors, errors[:5]
    assert len(acked) > 8000
    values = _read_all(b.bootstrap, topic, len(acked))
    # Exactly once and in order: the log holds 0..n-1 with no gap and no duplicate.
    assert values == list(range(len(values))), "log is not the dense sequence the producer sent"
    assert set(acked) <= set(values)
    assert "after an unclean shutdown" in b.output()
    assert b.stop() == 0
