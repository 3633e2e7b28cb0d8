"""confluent-kafka (librdkafka) against a real broker process: admin, produce/consume per codec,
idempotent producer, ListOffsets by time."""
from __future__ import annotations

import time
import uuid
from typing import Dict, List, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)

from tests.harness.clients import consume_from_start

N_RECORDS = 10_000


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin: AdminClient, name: str, partitions: int = 3, config: Dict[str, str] | None = None) -> None:
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                       config=config or {})], operation_timeout=30)
    fs[name].result(30)


def _consume_all(broker, topic: str, partitions: int, expected: int, timeout: float = 60.0,
                 extra: Dict[str, object] | None = None) -> List:
    return consume_from_start(broker.bootstrap, [(topic, p) for p in range(partitions)], expected, timeout, extra)


def test_admin_create_describe_partitions_configs_delete(broker) -> None:
    admin = _admin(broker)
    name = f"admin-{uuid.uuid4().hex[:8]}"
    _create(admin, name, 2, {"retention.ms": "3600000", "cleanup.policy": "delete"})

    md = admin.list_topics(timeout=10)
    assert name in md.topics
    assert len(md.topics[name].partitions) == 2
    assert md.topics[name].partitions[0].leader == 0
    assert list(md.brokers) == [0]
    assert md.cluster_id and len(md.cluster_id) == 22

    # Creating it again fails with TOPIC_ALREADY_EXISTS.
    fs = admin.create_topics([NewTopic(name, 2, 1)])
    with pytest.raises(KafkaException) as ei:
        fs[name].result(30)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    # Invalid config is refused with INVALID_CONFIG.
    bad = f"bad-{uuid.uuid4().hex[:6]}"
    fs = admin.create_topics([NewTopic(bad, 1, 1, config={"retention.ms": "soon"})])
    with pytest.raises(KafkaException) as ei:
        fs[bad].result(30)
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG

    # validate_only creates nothing.
    vo = f"vo-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(vo, 1, 1)], validate_only=True)[vo].result(30)
    assert vo not in admin.list_topics(timeout=10).topics

    admin.create_partitions([NewPartitions(name, 4)])[name].result(30)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 4

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigResource.Type.TOPIC.value or configs["retention.ms"].source == 1
    assert configs["segment.bytes"].value == "1073741824"

    res2 = ConfigResource(ConfigResource.Type.TOPIC, name,
                          incremental_configs=[ConfigEntry("retention.ms", "7200000",
                                                           incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res2])[res2].result(30)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "7200000"

    bres = ConfigResource(ConfigResource.Type.BROKER, "0")
    bconf = admin.describe_configs([bres])[bres].result(30)
    assert bconf["log.segment.bytes"].value == "1073741824"

    admin.delete_topics([name], operation_timeout=30)[name].result(30)
    deadline = time.monotonic() + 10
    while name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_per_codec(broker, codec: str) -> None:
    admin = _admin(broker)
    topic = f"codec-{codec}-{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5,
                  "acks": "all"})
    errors: List[object] = []
    base_ts = int(time.time() * 1000) - 100_000
    sent: Dict[Tuple[int, int], Tuple] = {}

    expected_headers: Dict[bytes, object] = {}

    def cb(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), expected_headers[msg.key()],
                                                     msg.timestamp()[1])

    for i in range(N_RECORDS):
        value = None if i % 97 == 0 else (f"value-{i}-" + "x" * (i % 50)).encode()
        headers = [("h1", f"v{i}".encode()), ("empty", b"")] if i % 3 == 0 else None
        expected_headers[f"key-{i}".encode()] = headers
        p.produce(topic, key=f"key-{i}".encode(), value=value, headers=headers, timestamp=base_ts + i,
                  on_delivery=cb)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors
    assert len(sent) == N_RECORDS

    got = _consume_all(broker, topic, 3, N_RECORDS)
    assert len(got) == N_RECORDS
    for m in got:
        key, value, headers, ts = sent[(m.partition(), m.offset())]
        assert m.key() == key
        assert m.value() == value
        assert (m.headers() or None) == (headers or None)
        assert m.timestamp()[1] == ts
    # Offsets per partition are dense and ordered.
    by_p: Dict[int, List[int]] = {}
    for m in got:
        by_p.setdefault(m.partition(), []).append(m.offset())
    for offs in by_p.values():
        assert offs == list(range(len(offs)))


def test_idempotent_producer_and_offsets_for_times(broker) -> None:
    admin = _admin(broker)
    topic = f"idem-{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    base_ts = 1_700_000_000_000
    for i in range(5000):
        p.produce(topic, key=str(i).encode(), value=str(i).encode(), timestamp=base_ts + i * 10)
    assert p.flush(60) == 0
    got = _consume_all(broker, topic, 1, 5000)
    assert [int(m.value()) for m in got] == list(range(5000))

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts-lookup"})
    try:
        found = c.offsets_for_times([TopicPartition(topic, 0, base_ts + 1234 * 10)], timeout=10)
        assert found[0].offset == 1234
        found = c.offsets_for_times([TopicPartition(topic, 0, base_ts + 1234 * 10 + 5)], timeout=10)
        assert found[0].offset == 1235
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (lo, hi) == (0, 5000)
        found = c.offsets_for_times([TopicPartition(topic, 0, base_ts + 10**9)], timeout=10)
        assert found[0].offset == -1
    finally:
        c.close()


def test_long_poll_returns_when_data_arrives(broker) -> None:
    admin = _admin(broker)
    topic = f"poll-{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 1)
    # The fetch parked before the produce waits up to 120 s (librdkafka wants socket.timeout.ms 1 s above it): the
    # record arriving within the 60 s bounded wait below can only come from the append completing that fetch.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lp", "fetch.wait.max.ms": 120000,
                  "socket.timeout.ms": 125000, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        assert c.consume(10, 1.0) == []
        p = Producer({"bootstrap.servers": broker.bootstrap})
        p.produce(topic, b"now")
        assert p.flush(10) == 0
        deadline = time.monotonic() + 60
        msgs = []
        while not msgs and time.monotonic() < deadline:
            msgs = [m for m in c.consume(10, 0.5) if not m.error()]
        assert msgs, "the record did not arrive within 60 s: the append did not complete the parked fetch"
        assert msgs[0].value() == b"now"
    finally:
        c.close()
