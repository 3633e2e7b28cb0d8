"""Fixtures for broker robustness tests: one real broker process (bin/kafka-server-start.sh) per module on a real
ZooKeeper, and a canary check that a stock client (confluent-kafka) is still served and acknowledged data is intact.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.clients import consume_from_start

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
    return consume_from_start(bootstrap, [(topic, partition)], expected, timeout_s, extra)


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, with a small socket.request.max.bytes; checked for a clean exit at the end."""
    with running_broker(Path(tmp_path_factory.mktemp("robust")), f"{zookeeper}/r-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides={"socket.request.max.bytes": str(MAX_REQUEST_BYTES)}) as b:
        yield b


@pytest.fixture(scope="module")
def canary(broker: BrokerProcess) -> Canary:
    c = Canary(broker)
    c.check("initial")
    return c
