"""Fixtures for broker robustness tests: one real broker process (bin/kafka-server-start.sh) per module on a real
ZooKeeper, and a canary check that a stock client (confluent-kafka) is still served and acknowledged data is intact.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess

#: socket.request.max.bytes of the shared broker: small, so an oversized frame is cheap to send
MAX_REQUEST_BYTES = 65536


class Canary:
    """Produces one record per check with confluent-kafka and reads the whole topic back."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.topic = f"canary-{uuid.uuid4().hex[:8]}"
        self.acked: List[Tuple[int, bytes]] = []  # (offset, value) acknowledged by the broker
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(self.topic, 1, 1)], operation_timeout=30)[self.topic].result(30)

    def check(self, label: str) -> None:
        """Produce one record (acks=all), then consume from 0 and compare with everything acknowledged so far."""
        value = f"{label}-{len(self.acked)}".encode()
        p = Producer({"bootstrap.servers": self.broker.bootstrap, "acks": "all", "message.timeout.ms": 20000})
        delivered: List[object] = []
        p.produce(self.topic, value=value, on_delivery=lambda err, msg: delivered.append((err, msg)))
        assert p.flush(25) == 0, f"[{label}] confluent-kafka could not deliver a record"
        err, msg = delivered[0]  # type: ignore[misc]
        assert err is None, f"[{label}] delivery failed: {err}"
        self.acked.append((msg.offset(), value))
        got = consume(self.broker.bootstrap, self.topic, 0, len(self.acked))
        assert [(m.offset(), m.value()) for m in got] == self.acked, f"[{label}] acknowledged data changed"


def consume(bootstrap: str, topic: str, partition: int, expected: int, timeout_s: float = 30.0,
            extra: Optional[Dict[str, object]] = None) -> List:
    """Read `expected` records from offset 0 of one partition with confluent-kafka (no group commits)."""
    import time
    conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                               "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(extra or {})
    c = Consumer(conf)
    c.assign([TopicPartition(topic, partition, 0)])
    got: List = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                got.append(m)
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, with a small socket.request.max.bytes; checked for a clean exit at the end."""
    workdir = Path(tmp_path_factory.mktemp("robust"))
    b = BrokerProcess(workdir, f"{zookeeper}/r-{uuid.uuid4().hex[:10]}", broker_id=0,
                      overrides={"socket.request.max.bytes": str(MAX_REQUEST_BYTES)})
    try:
        b.start()
    except BaseException:
        b.kill()
        raise
    try:
        yield b
    finally:
        rc = b.stop()
        out = b.output()
        assert "Traceback" not in out, f"broker logged a traceback:\n{out[-6000:]}"
        assert rc == 0, f"broker exited with {rc}"


@pytest.fixture(scope="module")
def canary(broker: BrokerProcess) -> Canary:
    c = Canary(broker)
    c.check("initial")
    return c
