"""Bad input against one real broker process: broken frames, unknown APIs/versions, malformed and invalid requests.

Each case checks Kafka's answer (an error code, or a closed connection for a protocol violation), then that a stock
client (confluent-kafka) is still served and every record acknowledged so far is intact (the `canary`), and, for
protocol violations, that the broker logged a line about it.
"""
from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.api import ApiKey, decode_response, encode_request
from broker.protocol.records.builder import build_batch
from tests.harness.broker_process import BrokerProcess
from tests.integration.broker.conftest import MAX_REQUEST_BYTES, Canary, consume
from tests.integration.broker.wire import RawClient

UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
INVALID_REQUIRED_ACKS = 21
MESSAGE_TOO_LARGE = 10
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
INVALID_TOPIC_EXCEPTION = 17
INVALID_CONFIG = 40
INVALID_REPLICATION_FACTOR = 38
LATEST = -1


def wait_for_log(broker: BrokerProcess, needle: str, since: int, timeout_s: float = 10.0) -> str:
    """The first broker output line after byte `since` containing `needle` (logging is asynchronous to us)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in broker.output()[since:].splitlines():
            if needle in line:
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no broker log line containing {needle!r}; output since the case:\n"
                                 f"{broker.output()[since:][-3000:]}")
        time.sleep(0.05)


def log_mark(broker: BrokerProcess) -> int:
    return len(broker.output())


def create_topic(broker: BrokerProcess, config: dict | None = None, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)[name].result(30)
    return name


def produce(client: RawClient, topic: str, records: bytes, acks: int = 1, version: int = 9,
            partition: int = 0) -> dict:
    """One Produce request for one partition; returns that partition's response (as a dict-like object)."""
    resp = client.request(ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": acks, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    assert len(resp.responses) == 1 and len(resp.responses[0].partition_responses) == 1
    return resp.responses[0].partition_responses[0]


def latest_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    resp = client.request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                   "timestamp": LATEST}]}]})
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, f"ListOffsets error {p.error_code}"
    return int(p.offset)


# --------------------------------------------------------------------------------------------------------------
# Protocol violations: the connection is closed (or, for ApiVersions, a v0 error response), the broker survives.

def test_garbage_bytes_close_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:  # text where a size prefix should be: 'GET ' = 1.2 GB frame
        c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.closed_by_peer()
    wait_for_log(broker, "Closing connection", mark)
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:  # a well-sized frame of random bytes: api key 0xffff is unknown
        c.send_raw(struct.pack(">i", 40) + b"\xff\xff" + os.urandom(38))
        assert c.closed_by_peer()
    wait_for_log(broker, "API key -1", mark)
    canary.check("garbage")


def test_negative_frame_size_closes_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", -5) + b"\x00" * 8)
        assert c.closed_by_peer()
    wait_for_log(broker, "negative frame size", mark)
    canary.check("negative-size")


def test_truncated_frame_then_close(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    frame = encode_request(ApiKey.METADATA, 9, 1, "trunc", {"topics": None, "allow_auto_topic_creation": False,
                                                             "include_topic_authorized_operations": False})
    with RawClient(broker.bootstrap) as c:
        c.send_raw(frame[:len(frame) // 2])
    wait_for_log(broker, "incomplete request", mark)
    canary.check("truncated")


def test_frame_larger_than_socket_request_max_bytes(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 1024)
        assert c.closed_by_peer()
    line = wait_for_log(broker, "Closing connection", mark)
    assert str(MAX_REQUEST_BYTES + 1) in line or str(MAX_REQUEST_BYTES) in line, line
    canary.check("too-large")


def test_unknown_api_key_closes_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">ihhih", 10, 999, 0, 7, -1))
        assert c.closed_by_peer()
    wait_for_log(broker, "API key 999", mark)
    canary.check("unknown-api")


def test_unsupported_metadata_version_closes_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:
        # Metadata v13 does not exist in Kafka 3.9 (0-12); header v2 as a flexible client would send it.
        c.send_raw(struct.pack(">ihhih", 11, ApiKey.METADATA, 13, 8, -1) + b"\x00")
        assert c.closed_by_peer()
    wait_for_log(broker, "unsupported version 13", mark)
    canary.check("metadata-v13")


def test_api_versions_v99_gets_a_v0_error_response(broker: BrokerProcess, canary: Canary) -> None:
    with RawClient(broker.bootstrap) as c:
        body = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 42, 3) + b"abc" + b"\x00" + b"\x00\x00\x00"
        c.send_raw(struct.pack(">i", len(body)) + body)
        frame = c.recv_frame()
        assert struct.unpack_from(">i", frame, 4)[0] == 42
        resp = decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert resp.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        # only ApiVersions' own range, as Kafka 3.9.1 (tests/integration/test_differential_kafka.py)
        assert ranges == {ApiKey.API_VERSIONS: (0, 4)}
        # The connection stays usable: the client retries with a version it now knows.
        again = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert again.error_code == 0
    canary.check("apiversions-v99")


@pytest.mark.parametrize("cut", ["truncated", "bad-array-length"])
def test_malformed_produce_body_closes_the_connection(broker: BrokerProcess, canary: Canary, cut: str) -> None:
    topic = create_topic(broker)
    frame = encode_request(ApiKey.PRODUCE, 7, 5, "bad-produce", {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v")])}]}]})
    body = frame[4:]
    if cut == "truncated":
        body = body[:len(body) - 10]  # records length now points past the end of the frame
    else:
        # header (10 + len("bad-produce")) | transactional_id (-1: 2) | acks (2) | timeout (4) | topics count
        pos = 10 + len("bad-produce") + 2 + 2 + 4
        body = body[:pos] + struct.pack(">i", 0x7FFFFFF0) + body[pos + 4:]
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", len(body)) + body)
        assert c.closed_by_peer()
    wait_for_log(broker, "malformed PRODUCE", mark)
    with RawClient(broker.bootstrap) as c:
        assert latest_offset(c, topic) == 0
    canary.check(f"malformed-produce-{cut}")


# --------------------------------------------------------------------------------------------------------------
# Produce errors answered with Kafka's codes.

def test_corrupt_batch_is_refused_and_nothing_written(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker)
    with RawClient(broker.bootstrap) as c:
        assert produce(c, topic, build_batch([(b"k", b"good", [], None)])).error_code == 0
        assert latest_offset(c, topic) == 1
        batch = bytearray(build_batch([(b"k", b"value-to-corrupt", [], None)]))
        batch[-3] ^= 0xFF  # inside the last record: covered by the CRC (which starts at attributes, byte 21)
        r = produce(c, topic, bytes(batch))
        assert r.error_code == CORRUPT_MESSAGE
        assert latest_offset(c, topic) == 1
    got = consume(broker.bootstrap, topic, 0, 1)
    assert [m.value() for m in got] == [b"good"]
    canary.check("corrupt-batch")


def test_invalid_required_acks(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker)
    with RawClient(broker.bootstrap) as c:
        r = produce(c, topic, build_batch([(None, b"v", [], None)]), acks=2)
        assert r.error_code == INVALID_REQUIRED_ACKS
        assert latest_offset(c, topic) == 0
    canary.check("acks-2")


def test_batch_larger_than_max_message_bytes(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker, {"max.message.bytes": "1000"})
    with RawClient(broker.bootstrap) as c:
        assert produce(c, topic, build_batch([(None, b"x" * 500, [], None)])).error_code == 0
        r = produce(c, topic, build_batch([(None, b"x" * 2000, [], None)]))
        assert r.error_code == MESSAGE_TOO_LARGE
        assert latest_offset(c, topic) == 1
    canary.check("too-large-batch")


def test_produce_to_unknown_topic(broker: BrokerProcess, canary: Canary) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with RawClient(broker.bootstrap) as c:
        r = produce(c, missing, build_batch([(None, b"v", [], None)]))
        assert r.error_code == UNKNOWN_TOPIC_OR_PARTITION
        topic = create_topic(broker)
        r = produce(c, topic, build_batch([(None, b"v", [], None)]), partition=7)  # unknown partition
        assert r.error_code == UNKNOWN_TOPIC_OR_PARTITION
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert missing not in admin.list_topics(timeout=10).topics  # a Produce never creates topics
    canary.check("unknown-topic")


def test_produce_v2_magic1_message_set_is_readable_by_a_v2_consumer(broker: BrokerProcess, canary: Canary) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    topic = create_topic(broker)
    ts = int(time.time() * 1000) - 5000
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=ts + i, key=f"k{i}".encode(), value=f"legacy-{i}".encode())
    message_set = bytes(builder.build())
    with RawClient(broker.bootstrap) as c:
        resp = c.request(ApiKey.PRODUCE, 2, {"acks": 1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": message_set}]}]})
        r = resp.responses[0].partition_responses[0]
        assert r.error_code == 0 and r.base_offset == 0
        assert latest_offset(c, topic) == 3
    got = consume(broker.bootstrap, topic, 0, 3)
    assert [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in got] == [
        (i, f"k{i}".encode(), f"legacy-{i}".encode(), ts + i) for i in range(3)]
    canary.check("legacy-produce")


# --------------------------------------------------------------------------------------------------------------
# Fetch.

def _fetch(c: RawClient, topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> object:
    resp = c.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                     "fetch_offset": offset, "log_start_offset": -1,
                                                     "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    assert resp.error_code == 0
    return resp.responses[0].partitions[0]


def test_fetch_past_the_end_is_offset_out_of_range(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker)
    with RawClient(broker.bootstrap) as c:
        produce(c, topic, build_batch([(None, b"a", [], None), (None, b"b", [], None)]))
        at_end = _fetch(c, topic, 2)
        assert at_end.error_code == 0 and not at_end.records  # the LEO itself is a valid (empty) position
        p = _fetch(c, topic, 3)
        assert p.error_code == OFFSET_OUT_OF_RANGE
        assert _fetch(c, topic, -5).error_code == OFFSET_OUT_OF_RANGE
    canary.check("fetch-out-of-range")


def test_fetch_min_bytes_not_met_returns_after_max_wait(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker)
    with RawClient(broker.bootstrap) as c:
        produce(c, topic, build_batch([(None, b"small", [], None)]))
        t0 = time.monotonic()
        p = _fetch(c, topic, 1, max_wait_ms=600, min_bytes=1 << 20)
        elapsed = time.monotonic() - t0
        assert p.error_code == 0 and not p.records and p.high_watermark == 1
        # It must have waited (a lower bound only: an early answer is the bug this catches).
        assert elapsed >= 0.55, f"answered after {elapsed:.3f}s, before max_wait_ms"
    canary.check("fetch-min-bytes")


# --------------------------------------------------------------------------------------------------------------
# CreateTopics validation.

def test_create_topics_validation_errors(broker: BrokerProcess, canary: Canary) -> None:
    ok = f"ok-{uuid.uuid4().hex[:6]}"
    cases = {
        "bad/name": INVALID_TOPIC_EXCEPTION,
        ".": INVALID_TOPIC_EXCEPTION,
        "..": INVALID_TOPIC_EXCEPTION,
        "x" * 250: INVALID_TOPIC_EXCEPTION,
        "sp ace": INVALID_TOPIC_EXCEPTION,
        f"cfg-{uuid.uuid4().hex[:6]}": INVALID_CONFIG,
        f"rf-{uuid.uuid4().hex[:6]}": INVALID_REPLICATION_FACTOR,
        ok: 0,
    }

    def topic(name: str) -> dict:
        configs = [{"name": "retention.ms", "value": "soon"}] if name.startswith("cfg-") else []
        rf = 3 if name.startswith("rf-") else 1
        return {"name": name, "num_partitions": 1, "replication_factor": rf, "assignments": [], "configs": configs}

    with RawClient(broker.bootstrap) as c:
        resp = c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [topic(n) for n in cases], "timeout_ms": 30000,
                                                   "validate_only": False})
        got = {t.name: t.error_code for t in resp.topics}
        assert got == cases
        md = c.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        names = {t.name for t in md.topics}
        assert ok in names and not (names & (set(cases) - {ok}))
    canary.check("create-topics")


# --------------------------------------------------------------------------------------------------------------
# Smaller protocol corners.

def test_acks0_produce_error_closes_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    """With acks=0 there is no response to carry an error, so Kafka closes the connection instead."""
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with RawClient(broker.bootstrap) as c:
        c.send_raw(encode_request(ApiKey.PRODUCE, 9, 1, "acks0", {
            "transactional_id": None, "acks": 0, "timeout_ms": 1000,
            "topic_data": [{"name": missing, "partition_data": [{"index": 0, "records": build_batch([(None, b"v")])}]}]}))
        assert c.closed_by_peer()
    canary.check("acks0-error")


def test_acks0_produce_success_sends_no_response(broker: BrokerProcess, canary: Canary) -> None:
    topic = create_topic(broker)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(encode_request(ApiKey.PRODUCE, 9, 1, "acks0", {
            "transactional_id": None, "acks": 0, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch([(None, b"v")])}]}]}))
        # The next response on this connection is the ListOffsets one (correlation ids are checked by request()).
        assert latest_offset(c, topic) == 1
    canary.check("acks0-ok")


def test_unreadable_header_of_a_known_api_closes_the_connection(broker: BrokerProcess, canary: Canary) -> None:
    mark = log_mark(broker)
    with RawClient(broker.bootstrap) as c:  # Metadata v1 header whose client_id length runs past the frame
        c.send_raw(struct.pack(">ihhih", 12, ApiKey.METADATA, 1, 3, 500) + b"ab")
        assert c.closed_by_peer()
    wait_for_log(broker, "unreadable request header", mark)
    canary.check("bad-header")


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess, canary: Canary) -> None:
    """Many requests written at once (as librdkafka does): one response each, in request order."""
    topic = create_topic(broker)
    frames = []
    for i in range(50):
        if i % 2:
            frames.append(encode_request(ApiKey.API_VERSIONS, 3, i, "pipe", {"client_software_name": "p",
                                                                             "client_software_version": "1"}))
        else:
            frames.append(encode_request(ApiKey.PRODUCE, 9, i, "pipe", {
                "transactional_id": None, "acks": 1, "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": build_batch([(None, f"p{i}".encode())])}]}]}))
    with RawClient(broker.bootstrap) as c:
        c.send_raw(b"".join(frames))
        offsets = []
        for i in range(50):
            frame = c.recv_frame()
            assert struct.unpack_from(">i", frame, 4)[0] == i
            if i % 2 == 0:
                r = decode_response(ApiKey.PRODUCE, 9, frame).responses[0].partition_responses[0]
                assert r.error_code == 0
                offsets.append(r.base_offset)
        assert offsets == list(range(25))
    canary.check("pipelined")


INVALID_RECORD = 87
INVALID_PARTITIONS = 37


@pytest.mark.parametrize("shape", ["two-batches", "length-too-long", "length-too-short", "short-header",
                                   "magic-3"])
def test_structurally_broken_record_sets(broker: BrokerProcess, canary: Canary, shape: str) -> None:
    """v3+ Produce carries exactly one magic-2 batch per partition; anything else is refused, nothing written."""
    topic = create_topic(broker)
    good = bytearray(build_batch([(None, b"one", [], None), (None, b"two", [], None)]))
    if shape == "two-batches":
        records, expected = bytes(good) + bytes(good), {INVALID_RECORD}
    elif shape == "length-too-long":
        struct.pack_into(">i", good, 8, struct.unpack_from(">i", good, 8)[0] + 50)
        records, expected = bytes(good), {CORRUPT_MESSAGE, INVALID_RECORD}
    elif shape == "length-too-short":
        struct.pack_into(">i", good, 8, struct.unpack_from(">i", good, 8)[0] - 5)
        records, expected = bytes(good), {CORRUPT_MESSAGE, INVALID_RECORD}
    elif shape == "short-header":
        records, expected = bytes(good[:30]), {CORRUPT_MESSAGE, INVALID_RECORD}
    else:
        good[16] = 3
        records, expected = bytes(good), {CORRUPT_MESSAGE, INVALID_RECORD}
    with RawClient(broker.bootstrap) as c:
        r = produce(c, topic, records)
        assert r.error_code in expected, f"{shape}: error {r.error_code}"
        assert latest_offset(c, topic) == 0
        assert produce(c, topic, build_batch([(None, b"fine", [], None)])).error_code == 0
    assert [m.value() for m in consume(broker.bootstrap, topic, 0, 1)] == [b"fine"]
    canary.check(f"broken-{shape}")


def test_create_topics_partition_and_replication_counts(broker: BrokerProcess, canary: Canary) -> None:
    def t(name: str, partitions: int, rf: int) -> dict:
        return {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                "configs": []}

    u = uuid.uuid4().hex[:6]
    with RawClient(broker.bootstrap) as c:
        resp = c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            t(f"p0-{u}", 0, 1), t(f"pneg-{u}", -5, 1), t(f"rf0-{u}", 1, 0), t(f"rfneg-{u}", 1, -7),
            t(f"dflt-{u}", -1, -1)], "timeout_ms": 30000, "validate_only": False})
        got = {r.name: r.error_code for r in resp.topics}
        assert got == {f"p0-{u}": INVALID_PARTITIONS, f"pneg-{u}": INVALID_PARTITIONS,
                       f"rf0-{u}": INVALID_REPLICATION_FACTOR, f"rfneg-{u}": INVALID_REPLICATION_FACTOR,
                       f"dflt-{u}": 0}
        dflt = [r for r in resp.topics if r.name == f"dflt-{u}"][0]
        assert dflt.num_partitions == 1 and dflt.replication_factor == 1  # the broker defaults (-1 = default)
    canary.check("create-topics-counts")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_garbage_compressed_payload_with_a_valid_crc(broker: BrokerProcess, canary: Canary, codec: int) -> None:
    """The CRC only proves transport; a compressed batch that does not decode is still refused, nothing written."""
    from broker.accel import crc32c
    topic = create_topic(broker)
    batch = bytearray(build_batch([(None, b"x" * 100, [], None)], compression=codec))
    for i in range(61, len(batch)):  # the compressed records (after the 61-byte batch header)
        batch[i] = (i * 7) & 0xFF
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with RawClient(broker.bootstrap) as c:
        r = produce(c, topic, bytes(batch))
        assert r.error_code in (CORRUPT_MESSAGE, INVALID_RECORD)
        assert latest_offset(c, topic) == 0
    canary.check("garbage-gzip")


def test_metadata_for_invalid_topic_names_with_auto_create(broker: BrokerProcess, canary: Canary) -> None:
    bad = ["bad/name", "y" * 300, ".."]
    with RawClient(broker.bootstrap) as c:
        md = c.request(ApiKey.METADATA, 9, {"topics": [{"name": n} for n in bad], "allow_auto_topic_creation": True,
                                            "include_topic_authorized_operations": False})
        assert {t.name: t.error_code for t in md.topics} == {n: INVALID_TOPIC_EXCEPTION for n in bad}
        md = c.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        assert not {t.name for t in md.topics} & set(bad)
    canary.check("metadata-invalid-names")


def test_frame_of_exactly_socket_request_max_bytes_is_served(broker: BrokerProcess, canary: Canary) -> None:
    """The limit is inclusive, as in Kafka (only a size above socket.request.max.bytes is refused)."""
    topic = create_topic(broker)

    def frame(value_len: int) -> bytes:
        return encode_request(ApiKey.PRODUCE, 9, 1, "edge", {
            "transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": build_batch([(None, b"v" * value_len, [], 1_700_000_000_000)])}]}]})

    n = MAX_REQUEST_BYTES - len(frame(0))
    while len(frame(n)) - 4 > MAX_REQUEST_BYTES:  # varint lengths grow with the value
        n -= 1
    data = frame(n)
    assert len(data) - 4 == MAX_REQUEST_BYTES
    with RawClient(broker.bootstrap) as c:
        c.send_raw(data)
        resp = decode_response(ApiKey.PRODUCE, 9, c.recv_frame())
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert latest_offset(c, topic) == 1
    canary.check("exact-max-frame")
