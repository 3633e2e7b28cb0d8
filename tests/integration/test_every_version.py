"""Every API the broker advertises, at every advertised version, against a real broker process.

ApiVersions must promise only what works: for each (API, version) in its answer we send a
meaningful request over a raw socket, decode the response with our codec, and check the
error codes a Kafka broker would give.
"""
from __future__ import annotations

import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess

TOPIC = "versions"


class RawClient:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, key: ApiKey, version: int, body: Dict[str, Any]) -> Any:
        self.correlation += 1
        self.sock.sendall(proto.encode_request(key, version, self.correlation, "versions-test", body))
        size = struct.unpack(">i", self._read(4))[0]
        data = self._read(size)
        cid, msg = proto.decode_response_with_header(key, version, data, has_size_prefix=False)
        assert cid == self.correlation
        return msg

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def running(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("versions")), f"{zookeeper}/v-{uuid.uuid4().hex[:8]}")
    b.start()
    yield b
    assert b.stop() == 0
    assert "Traceback" not in b.output(), b.output()[-5000:]


@pytest.fixture(scope="module")
def client(running: BrokerProcess) -> Iterator[RawClient]:
    c = RawClient(running.bootstrap)
    c.call(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": TOPIC, "num_partitions": 2, "replication_factor": 1}],
                                     "timeout_ms": 10000})
    yield c
    c.close()


def advertised(client: RawClient) -> Dict[int, tuple]:
    resp = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_api_versions_v99_gets_v0_answer(client: RawClient) -> None:
    client.correlation += 1
    client.sock.sendall(_raw_api_versions(99, client.correlation))
    size = struct.unpack(">i", client._read(4))[0]
    data = client._read(size)
    cid, msg = proto.decode_response_with_header(ApiKey.API_VERSIONS, 0, data, has_size_prefix=False)
    assert cid == client.correlation
    assert msg.error_code == 35  # UNSUPPORTED_VERSION
    # as Kafka 3.9.1 (tests/integration/test_differential_kafka.py): only ApiVersions' own range
    assert [(k.api_key, k.min_version, k.max_version) for k in msg.api_keys] == [(ApiKey.API_VERSIONS, 0, 4)]


def _raw_api_versions(version: int, correlation: int) -> bytes:
    body = struct.pack(">hhi", ApiKey.API_VERSIONS, version, correlation) + struct.pack(">h", 1) + b"x" + b"\x00"
    return struct.pack(">i", len(body)) + body


def test_advertised_set_is_exactly_the_served_set(client: RawClient) -> None:
    adv = advertised(client)
    expected = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
                ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DELETE_RECORDS, ApiKey.INIT_PRODUCER_ID,
                ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
                ApiKey.DESCRIBE_LOG_DIRS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CLUSTER,
                ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.DESCRIBE_PRODUCERS}
    assert expected <= set(adv)
    for key, (lo, hi) in adv.items():
        assert (lo, hi) == tuple(proto.API_VERSIONS_RANGE[ApiKey(key)]), ApiKey(key).name
    assert adv[ApiKey.PRODUCE][0] == 0  # librdkafka needs Produce min version 0 advertised
    # every API of a Kafka 3.9 ZooKeeper-mode broker (the zkBroker specs; a real 3.9.1 broker advertises these 62)
    assert set(adv) == set(ApiKey), sorted(ApiKey(k).name for k in set(ApiKey) - set(adv))


def test_kraft_only_apis_are_refused_as_kafka_3_9_in_zookeeper_mode(running: BrokerProcess) -> None:
    """Answers captured from a real Kafka 3.9.1 ZooKeeper-mode broker: KIP-848 APIs UNSUPPORTED_VERSION with empty
    fields, an Envelope closes the connection (forwarding is only on during a KRaft migration)."""
    c = RawClient(running.bootstrap)
    try:
        r = c.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {"group_id": "g", "member_id": "", "member_epoch": 0,
                                                       "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"],
                                                       "topic_partitions": []})
        assert (r.error_code, r.error_message, r.member_id, r.member_epoch, r.assignment) == (35, None, None, 0, None)
        r = c.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g", "h"], "include_authorized_operations": True})
        assert [(g.group_id, g.error_code, g.group_state, g.authorized_operations) for g in r.groups] == [
            ("g", 35, "", -2147483648), ("h", 35, "", -2147483648)]
        with pytest.raises(ConnectionError):
            c.call(ApiKey.ENVELOPE, 0, {"request_data": b"\x00", "request_principal": b"",
                                        "client_host_address": b"\x7f\x00\x00\x01"})
    finally:
        c.close()


def _versions(key: ApiKey) -> range:
    lo, hi = proto.API_VERSIONS_RANGE[key]
    return range(lo, hi + 1)


@pytest.mark.parametrize("version", _versions(ApiKey.METADATA))
def test_metadata(client: RawClient, version: int) -> None:
    topics = [{"name": TOPIC, "topic_id": uuid.UUID(int=0)}]
    r = client.call(ApiKey.METADATA, version, {"topics": topics, "allow_auto_topic_creation": False})
    assert len(r.brokers) == 1
    t = r.topics[0]
    assert t.error_code == 0 and t.name == TOPIC and len(t.partitions) == 2
    assert all(p.leader_id == 0 for p in t.partitions)


@pytest.mark.parametrize("version", [v for v in _versions(ApiKey.PRODUCE)])
def test_produce_then_fetch_and_list_offsets(client: RawClient, version: int) -> None:
    if version < 3:
        from kafka.record.legacy_records import LegacyRecordBatchBuilder
        magic = 0 if version < 2 else 1
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        b.append(0, timestamp=int(time.time() * 1000) if magic else None, key=b"k", value=f"v{version}".encode())
        records = bytes(b.build())
    else:
        records = build_batch([(b"k", f"v{version}".encode(), [], int(time.time() * 1000))])
    r = client.call(ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]})
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    offset = p.base_offset
    assert offset >= 0
    for fv in ([0, 3, 4, 11, 12, 16, 17] if version == 0 else []):
        topic = {"topic": TOPIC, "topic_id": _topic_id(client), "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
        fr = client.call(ApiKey.FETCH, fv, {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
                                             "max_bytes": 1 << 20, "topics": [topic], "session_epoch": -1})
        pd = fr.responses[0].partitions[0]
        assert pd.error_code == 0, (fv, pd)
        assert pd.high_watermark > offset
        assert pd.records is not None and len(pd.records) > 0, fv
        magic = bytes(pd.records)[16] if fv >= 4 else bytes(pd.records)[16]
        assert magic == (2 if fv >= 4 else (0 if fv < 2 else 1)), (fv, magic)


def _topic_id(client: RawClient) -> uuid.UUID:
    r = client.call(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}]})
    return r.topics[0].topic_id


@pytest.mark.parametrize("version", _versions(ApiKey.FETCH))
def test_fetch_every_version(client: RawClient, version: int) -> None:
    records = build_batch([(b"f", b"fetch-me", [], int(time.time() * 1000))])
    client.call(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 1, "records": records}]}]})
    topic = {"topic": TOPIC, "topic_id": _topic_id(client),
             "partitions": [{"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
    fr = client.call(ApiKey.FETCH, version, {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 0,
                                              "max_bytes": 1 << 20, "topics": [topic], "session_epoch": -1})
    pd = fr.responses[0].partitions[0]
    assert pd.error_code == 0
    assert len(pd.records) > 0
    # Past the end: OFFSET_OUT_OF_RANGE.
    topic["partitions"][0]["fetch_offset"] = 10**9
    fr = client.call(ApiKey.FETCH, version, {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 0,
                                              "max_bytes": 1 << 20, "topics": [topic], "session_epoch": -1})
    assert fr.responses[0].partitions[0].error_code == 1


@pytest.mark.parametrize("version", _versions(ApiKey.LIST_OFFSETS))
def test_list_offsets(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -2, "max_num_offsets": 1},
                                       {"partition_index": 1, "timestamp": -1, "max_num_offsets": 1}]}]})
    p0, p1 = r.topics[0].partitions
    assert p0.error_code == 0 and p1.error_code == 0
    if version == 0:
        assert p0.old_style_offsets == [0]
    else:
        assert p0.offset == 0 and p1.offset >= 0


@pytest.mark.parametrize("version", _versions(ApiKey.CREATE_TOPICS))
def test_create_and_delete_topics(client: RawClient, version: int) -> None:
    name = f"ct-{version}-{uuid.uuid4().hex[:6]}"
    r = client.call(ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                    "configs": [{"name": "retention.ms", "value": "1000000"}]}], "timeout_ms": 10000})
    assert r.topics[0].error_code == 0, r.topics[0]
    dv = min(version, proto.API_VERSIONS_RANGE[ApiKey.DELETE_TOPICS][1])
    d = client.call(ApiKey.DELETE_TOPICS, dv, {"topic_names": [name], "topics": [{"name": name}],
                                               "timeout_ms": 10000})
    assert d.responses[0].error_code == 0, d


@pytest.mark.parametrize("version", _versions(ApiKey.DELETE_TOPICS))
def test_delete_unknown_topic(client: RawClient, version: int) -> None:
    d = client.call(ApiKey.DELETE_TOPICS, version, {"topic_names": ["nope-x"], "topics": [{"name": "nope-x"}],
                                                    "timeout_ms": 1000})
    assert d.responses[0].error_code == 3


@pytest.mark.parametrize("version", _versions(ApiKey.DELETE_RECORDS))
def test_delete_records(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.DELETE_RECORDS, version, {"topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0 and p.low_watermark == 0


@pytest.mark.parametrize("version", _versions(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                       "producer_id": -1, "producer_epoch": -1})
    assert r.error_code == 0 and r.producer_id >= 0 and r.producer_epoch == 0


@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0 and p.end_offset >= 0


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.DESCRIBE_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.segment.bytes"]}],
        "include_synonyms": True, "include_documentation": True})
    topic, brk = r.results
    assert topic.error_code == 0 and brk.error_code == 0
    names = {c.name: c.value for c in topic.configs}
    assert names["segment.bytes"] == "1073741824"
    assert [c.name for c in brk.configs] == ["log.segment.bytes"]


@pytest.mark.parametrize("version", _versions(ApiKey.ALTER_CONFIGS))
def test_alter_configs(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.ALTER_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configs": [{"name": "retention.ms", "value": "86400000"}]}],
        "validate_only": False})
    assert r.responses[0].error_code == 0
    bad = client.call(ApiKey.ALTER_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configs": [{"name": "retention.ms", "value": "x"}]}],
        "validate_only": False})
    assert bad.responses[0].error_code == 40


@pytest.mark.parametrize("version", _versions(ApiKey.INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_configs(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC,
         "configs": [{"name": "cleanup.policy", "config_operation": 2, "value": "compact"}]}], "validate_only": False})
    assert r.responses[0].error_code == 0
    d = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": ["cleanup.policy"]}]})
    assert d.results[0].configs[0].value in ("delete,compact", "compact")
    client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC,
         "configs": [{"name": "cleanup.policy", "config_operation": 1, "value": None}]}], "validate_only": False})


@pytest.mark.parametrize("version", _versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions(client: RawClient, version: int) -> None:
    name = f"cp-{version}-{uuid.uuid4().hex[:6]}"
    client.call(ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                                          "timeout_ms": 10000})
    r = client.call(ApiKey.CREATE_PARTITIONS, version, {"topics": [{"name": name, "count": 3, "assignments": None}],
                                                        "timeout_ms": 10000, "validate_only": False})
    assert r.results[0].error_code == 0
    m = client.call(ApiKey.METADATA, 12, {"topics": [{"name": name}]})
    assert len(m.topics[0].partitions) == 3
    shrink = client.call(ApiKey.CREATE_PARTITIONS, version, {"topics": [{"name": name, "count": 2}],
                                                             "timeout_ms": 10000, "validate_only": False})
    assert shrink.results[0].error_code == 37  # INVALID_PARTITIONS


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_LOG_DIRS))
def test_describe_log_dirs(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
    assert r.results and r.results[0].error_code == 0
    names = {t.name for res in r.results for t in res.topics}
    assert TOPIC in names


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster(client: RawClient, version: int) -> None:
    r = client.call(ApiKey.DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": False})
    assert r.error_code == 0 and r.controller_id == 0 and len(r.cluster_id) == 22
    assert [b.broker_id for b in r.brokers] == [0]


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_PRODUCERS))
def test_describe_producers(client: RawClient, version: int) -> None:
    init = client.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000})
    batch = build_batch([(b"k", b"idem", [], int(time.time() * 1000))], producer_id=init.producer_id,
                        producer_epoch=0, base_sequence=0)
    p = client.call(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 1, "records": batch}]}]})
    first = p.responses[0].partition_responses[0]
    assert first.error_code == 0
    # The same batch again is a duplicate: acknowledged with the original offset, not written twice.
    again = client.call(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 1, "records": batch}]}]})
    assert again.responses[0].partition_responses[0].error_code == 0
    assert again.responses[0].partition_responses[0].base_offset == first.base_offset
    r = client.call(ApiKey.DESCRIBE_PRODUCERS, version, {"topics": [{"name": TOPIC, "partition_indexes": [1]}]})
    part = r.topics[0].partitions[0]
    assert part.error_code == 0
    assert any(s.producer_id == init.producer_id and s.last_sequence == 0 for s in part.active_producers)


def test_create_topic_with_explicit_assignment(client: RawClient) -> None:
    name = f"assigned-{uuid.uuid4().hex[:6]}"
    r = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [0]}, {"partition_index": 1, "broker_ids": [0]}]}],
        "timeout_ms": 10000})
    t = r.topics[0]
    assert t.error_code == 0 and t.num_partitions == 2 and t.replication_factor == 1
    bad = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": name + "-bad", "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [7]}]}], "timeout_ms": 10000})
    assert bad.topics[0].error_code == 39  # INVALID_REPLICA_ASSIGNMENT


def test_broker_dynamic_config(client: RawClient) -> None:
    r = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": "0",
         "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "3600000"}]}],
        "validate_only": False})
    assert r.responses[0].error_code == 0, r.responses[0]
    d = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.retention.ms"]}]})
    entry = d.results[0].configs[0]
    assert entry.value == "3600000" and entry.config_source == 2  # DYNAMIC_BROKER_CONFIG
    # New topics inherit the dynamic default.
    d = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": ["retention.ms"]}]})
    assert d.results[0].configs[0].value in ("3600000", "86400000")
    # A read-only key cannot change at run time.
    ro = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 4, "resource_name": "0",
         "configs": [{"name": "broker.id", "config_operation": 0, "value": "5"}]}], "validate_only": False})
    assert ro.responses[0].error_code == 42  # INVALID_REQUEST


# --- consumer-group APIs, every version, against the real coordinator -------------------------------
def _v(key: ApiKey, i: int) -> int:
    lo, hi = proto.API_VERSIONS_RANGE[key]
    return max(lo, min(hi, i))


@pytest.mark.parametrize("version", _versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator(client: RawClient, version: int) -> None:
    body = {"key": "g-find", "key_type": 0, "coordinator_keys": ["g-find", "g-other"]}
    deadline = time.monotonic() + 30
    while True:
        r = client.call(ApiKey.FIND_COORDINATOR, version, body)
        errors = [c.error_code for c in r.coordinators] if version >= 4 else [r.error_code]
        if all(e == 0 for e in errors) or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # COORDINATOR_NOT_AVAILABLE while __consumer_offsets is being created
    assert errors == [0] * len(errors)
    node = r.coordinators[0].node_id if version >= 4 else r.node_id
    assert node == 0


@pytest.mark.parametrize("i", range(proto.API_VERSIONS_RANGE[ApiKey.JOIN_GROUP][1] + 1))
def test_group_lifecycle(client: RawClient, i: int) -> None:
    """JoinGroup v<i> and the matching versions of the other group APIs: join, sync, heartbeat,
    commit, fetch, describe, list, leave, delete offsets, delete group."""
    group = f"grp-{i}-{uuid.uuid4().hex[:4]}"
    jv = _v(ApiKey.JOIN_GROUP, i)
    join = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x01"}]}
    deadline = time.monotonic() + 30
    while True:
        j = client.call(ApiKey.JOIN_GROUP, jv, join)
        if j.error_code == 79:  # MEMBER_ID_REQUIRED (v4+): join again with the given id
            join["member_id"] = j.member_id
            continue
        if j.error_code in (14, 15) and time.monotonic() < deadline:  # coordinator loading / not available
            time.sleep(0.2)
            continue
        break
    assert j.error_code == 0, j
    assert j.leader == j.member_id and len(j.members) == 1 and j.members[0].metadata == b"\x00\x01"
    member, gen = j.member_id, j.generation_id
    s = client.call(ApiKey.SYNC_GROUP, _v(ApiKey.SYNC_GROUP, i), {
        "group_id": group, "generation_id": gen, "member_id": member, "protocol_type": "consumer",
        "protocol_name": "range", "assignments": [{"member_id": member, "assignment": b"assigned"}]})
    assert s.error_code == 0 and s.assignment == b"assigned"
    h = client.call(ApiKey.HEARTBEAT, _v(ApiKey.HEARTBEAT, i), {"group_id": group, "generation_id": gen,
                                                                "member_id": member})
    assert h.error_code == 0
    bad = client.call(ApiKey.HEARTBEAT, _v(ApiKey.HEARTBEAT, i), {"group_id": group, "generation_id": gen + 5,
                                                                  "member_id": member})
    assert bad.error_code == 22  # ILLEGAL_GENERATION
    cv = _v(ApiKey.OFFSET_COMMIT, i)
    if cv >= 1:  # v0 carries no member: Kafka accepts it only for an empty group (after the leave below)
        _commit_and_fetch(client, group, gen, member, i)
    d = client.call(ApiKey.DESCRIBE_GROUPS, _v(ApiKey.DESCRIBE_GROUPS, i), {"groups": [group]})
    assert d.groups[0].error_code == 0 and d.groups[0].group_state == "Stable"
    lg = client.call(ApiKey.LIST_GROUPS, _v(ApiKey.LIST_GROUPS, i), {"states_filter": []})
    assert group in {g.group_id for g in lg.groups}
    lv = _v(ApiKey.LEAVE_GROUP, i)
    leave = client.call(ApiKey.LEAVE_GROUP, lv, {"group_id": group, "member_id": member,
                                                 "members": [{"member_id": member}]})
    assert leave.error_code == 0
    if cv == 0:
        _commit_and_fetch(client, group, -1, "", i)
    od = client.call(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]})
    assert od.error_code == 0 and od.topics[0].partitions[0].error_code == 0
    # the Empty group lost its last offset: it is gone, as Kafka's handleDeleteOffsets removes it through
    # cleanupGroupMetadata (a group tombstone, since it had a generation), so DeleteGroups finds no group
    dg = client.call(ApiKey.DELETE_GROUPS, _v(ApiKey.DELETE_GROUPS, i), {"groups_names": [group]})
    assert dg.results[0].error_code == 69  # GROUP_ID_NOT_FOUND


def _commit_and_fetch(client: RawClient, group: str, gen: int, member: str, i: int) -> None:
    cv = _v(ApiKey.OFFSET_COMMIT, i)
    c = client.call(ApiKey.OFFSET_COMMIT, cv, {
        "group_id": group, "generation_id_or_member_epoch": gen, "member_id": member, "retention_time_ms": -1,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                   "commit_timestamp": -1, "committed_metadata": f"m{i}"}]}]})
    assert c.topics[0].partitions[0].error_code == 0
    fv = _v(ApiKey.OFFSET_FETCH, i)
    f = client.call(ApiKey.OFFSET_FETCH, fv, {
        "group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}],
        "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}]})
    part = (f.groups[0].topics[0].partitions[0] if fv >= 8 else f.topics[0].partitions[0])
    assert part.committed_offset == 1 and part.metadata == f"m{i}"


@pytest.mark.parametrize("version", _versions(ApiKey.ALTER_CLIENT_QUOTAS))
def test_client_quotas_every_version(client: RawClient, version: int) -> None:
    name = f"every-{version}-{uuid.uuid4().hex[:6]}"
    r = client.call(ApiKey.ALTER_CLIENT_QUOTAS, version, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": "user", "entity_name": name}, {"entity_type": "client-id", "entity_name": None}],
        "ops": [{"key": "consumer_byte_rate", "value": 2048.0, "remove": False}]}]})
    assert [e.error_code for e in r.entries] == [0]
    assert [(e.entity_type, e.entity_name) for e in r.entries[0].entity] == [("user", name), ("client-id", None)]
    d = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {"strict": True, "components": [
        {"entity_type": "user", "match_type": 0, "match": name}, {"entity_type": "client-id", "match_type": 1,
                                                                   "match": None}]})
    assert d.error_code == 0
    assert [[(v.key, v.value) for v in e.values] for e in d.entries] == [[("consumer_byte_rate", 2048.0)]]
