"""kafka-python (3.x, pure Python) against a real broker process: admin, produce per codec with acks=all,
assign + seek_to_beginning consumption without a consumer group, offsets_for_times / beginning / end offsets."""
from __future__ import annotations

import time
import uuid
from typing import Dict, List, Tuple

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource
from kafka.errors import TopicAlreadyExistsError

N_RECORDS = 3000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        yield a
    finally:
        a.close()


def _create(admin: KafkaAdminClient, name: str, partitions: int = 3, configs: Dict[str, str] | None = None) -> dict:
    return admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1,
                                       "configs": configs or {}}}, wait_for_metadata=True)


def _consumer(broker, **extra) -> KafkaConsumer:
    conf = dict(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest", request_timeout_ms=30000)
    conf.update(extra)
    return KafkaConsumer(**conf)


def test_admin_create_describe_configs_delete(broker, admin: KafkaAdminClient) -> None:
    name = f"kp-admin-{uuid.uuid4().hex[:8]}"
    created = _create(admin, name, 3, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    (t,) = created["topics"]
    assert (t["name"], t["error_code"], t["num_partitions"], t["replication_factor"]) == (name, 0, 3, 1)
    assert t["configs"]["retention.ms"]["value"] == "3600000"
    assert t["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert t["configs"]["segment.bytes"]["value"] == "1073741824"

    (d,) = admin.describe_topics([name])
    assert (d["name"], d["error_code"], d["is_internal"]) == (name, 0, False)
    assert d["topic_id"] == t["topic_id"]
    assert [p["partition_index"] for p in d["partitions"]] == [0, 1, 2]
    for p in d["partitions"]:
        assert (p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (0, 0, [0], [0])
    assert name in admin.list_topics()

    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 0
    assert len(cluster["cluster_id"]) == 22
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, "127.0.0.1", broker.port)]

    cfg = admin.describe_configs([ConfigResource("topic", name), ConfigResource("broker", "0")],
                                 config_filter="all")
    topic_cfg = cfg["topic"][name]
    assert topic_cfg["retention.ms"]["value"] == "3600000"
    assert topic_cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic_cfg["cleanup.policy"]["value"] == "delete"
    assert topic_cfg["segment.bytes"] == {**topic_cfg["segment.bytes"], "value": "1073741824",
                                          "config_source": "DEFAULT_CONFIG"}
    broker_cfg = cfg["broker"]["0"]
    assert broker_cfg["num.partitions"]["value"] == "3"
    assert broker_cfg["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker_cfg["log.segment.bytes"]["value"] == "1073741824"
    # The default filter ("modified") shows only the topic's own overrides.
    modified = admin.describe_configs([ConfigResource("topic", name)])["topic"][name]
    assert sorted(modified) == ["cleanup.policy", "retention.ms"]

    deleted = admin.delete_topics([name])
    assert [(r["name"], r["error_code"]) for r in deleted["topics"]] == [(name, 0)]
    deadline = time.monotonic() + 15
    while name in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in admin.list_topics()


def test_create_existing_topic_is_refused(admin: KafkaAdminClient) -> None:
    name = f"kp-dup-{uuid.uuid4().hex[:8]}"
    _create(admin, name, 1)
    with pytest.raises(TopicAlreadyExistsError):
        _create(admin, name, 1)
    admin.delete_topics([name])


def _record(i: int, base_ts: int) -> Tuple[bytes, bytes | None, List[Tuple[str, bytes]], int]:
    value = None if i % 97 == 0 else (f"value-{i}-" + "x" * (i % 50)).encode()
    headers = [("h1", f"v{i}".encode()), ("empty", b"")] if i % 3 == 0 else []
    return f"key-{i}".encode(), value, headers, base_ts + i


@pytest.mark.parametrize("codec", CODECS)
def test_produce_acks_all_then_assign_seek_consume(broker, admin: KafkaAdminClient, codec: str) -> None:
    topic = f"kp-{codec}-{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    base_ts = int(time.time() * 1000) - 100_000
    try:
        futures = []
        for i in range(N_RECORDS):
            key, value, headers, ts = _record(i, base_ts)
            futures.append(producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts))
        producer.flush(60)
        sent: Dict[Tuple[int, int], int] = {}
        for i, f in enumerate(futures):
            md = f.get(timeout=30)
            sent[(md.partition, md.offset)] = i
    finally:
        producer.close(10)
    assert len(sent) == N_RECORDS
    per_partition = {p: sum(1 for (pp, _) in sent if pp == p) for p in range(3)}
    assert all(per_partition.values()), per_partition

    tps = [TopicPartition(topic, p) for p in range(3)]
    c = _consumer(broker)
    try:
        c.assign(tps)
        c.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 60
        while len(got) < N_RECORDS and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(recs)
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tp: per_partition[tp.partition] for tp in tps}
    finally:
        c.close()

    assert len(got) == N_RECORDS
    seen = set()
    for r in got:
        i = sent[(r.partition, r.offset)]
        assert i not in seen
        seen.add(i)
        key, value, headers, ts = _record(i, base_ts)
        assert (r.key, r.value, list(r.headers), r.timestamp, r.timestamp_type) == (key, value, headers, ts, 0)
    for p in range(3):
        offs = [r.offset for r in got if r.partition == p]
        assert offs == list(range(per_partition[p]))


def test_offsets_for_times_beginning_end(broker, admin: KafkaAdminClient) -> None:
    topic = f"kp-times-{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 2)
    base_ts = 1_700_000_000_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=2)
    try:
        futures = [producer.send(topic, partition=0, value=str(i).encode(), timestamp_ms=base_ts + i * 10)
                   for i in range(500)]
        producer.flush(30)
        assert [f.get(timeout=30).offset for f in futures] == list(range(500))
    finally:
        producer.close(10)

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = _consumer(broker)
    try:
        found = c.offsets_for_times({tp0: base_ts + 123 * 10, tp1: base_ts})
        assert (found[tp0].offset, found[tp0].timestamp) == (123, base_ts + 1230)
        assert found[tp1] is None  # empty partition: nothing at or after the timestamp
        found = c.offsets_for_times({tp0: base_ts + 123 * 10 + 5})
        assert (found[tp0].offset, found[tp0].timestamp) == (124, base_ts + 1240)
        found = c.offsets_for_times({tp0: base_ts - 1})
        assert (found[tp0].offset, found[tp0].timestamp) == (0, base_ts)
        assert c.offsets_for_times({tp0: base_ts + 10 ** 9})[tp0] is None
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 500, tp1: 0}

        # Seek to the looked-up offset and read from there, as a time-based replay does.
        c.assign([tp0])
        c.seek(tp0, 400)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(recs)
        assert [int(r.value) for r in got] == list(range(400, 500))
    finally:
        c.close()
