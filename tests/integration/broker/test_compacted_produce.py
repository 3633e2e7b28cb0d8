"""A compacted topic seen by confluent-kafka: keyed records are appended (plain and compressed batches), a keyless
one is refused with INVALID_RECORD as Kafka 3.9 refuses it, and what was acknowledged reads back unchanged."""
from __future__ import annotations

import uuid
from typing import List, Tuple

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness.broker_process import BrokerProcess

from .conftest import consume


def _produce(broker: BrokerProcess, topic: str, codec: str, records: List[Tuple[bytes | None, bytes]]) -> List:
    """Produce ``records`` in one batch; the delivery reports, in order."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "compression.type": codec, "linger.ms": 50,
                  "enable.idempotence": False, "retries": 0, "message.timeout.ms": 20000})
    reports: List = []
    for key, value in records:
        p.produce(topic, value=value, key=key, partition=0, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert p.flush(25) == 0, "confluent-kafka could not finish its deliveries"
    return reports


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyed_records_appended_keyless_refused(broker: BrokerProcess, codec: str) -> None:
    topic = f"compacted-{codec}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})],
                        operation_timeout=30)[topic].result(30)
    keyed = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
    reports = _produce(broker, topic, codec, keyed)
    assert [err for err, _ in reports] == [None] * 20
    refused = _produce(broker, topic, codec, [(None, b"no key"), (None, b"no key either")])
    assert [err.code() if err else None for err, _ in refused] == [KafkaError.INVALID_RECORD] * 2
    got = consume(broker.bootstrap, topic, 0, 20)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(i, k, v) for i, (k, v) in enumerate(keyed)]
