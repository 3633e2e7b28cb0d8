"""__remote_log_metadata values: bytes built field by field from Kafka 3.9's JSON schemas (independently of the
codec), round trips, Kafka's invariants and parse errors, and RemoteLogMetadataTopicPartitioner. Kafka 3.9.1's own
serde decodes these values in tests/integration/storage/test_remote_log_metadata_kafka.py."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.remote_log import metadata_serde as serde
from broker.storage.remote.metadata import (
    RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
    random_uuid, uuid_from_string, uuid_to_string,
)

TOPIC_ID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
SEGMENT_ID = uuid.UUID(int=0x11121314151617181920212223242526)
TIP = TopicIdPartition(TOPIC_ID, "foo", 3)
SID = RemoteLogSegmentId(TIP, SEGMENT_ID)


def _tip_bytes(name: bytes = b"foo", partition: int = 3) -> bytes:
    # TopicIdPartitionEntry: compact string Name, uuid Id, int32 Partition, empty tagged fields
    return bytes([len(name) + 1]) + name + TOPIC_ID.bytes + struct.pack(">i", partition) + b"\x00"


def _segment_id_bytes() -> bytes:
    return _tip_bytes() + SEGMENT_ID.bytes + b"\x00"


def test_segment_metadata_bytes() -> None:
    md = RemoteLogSegmentMetadata(SID, 0, 99, 1_700_000_000_000, 1, 1_700_000_001_000, 1024, {2: 50, 0: 0})
    want = (b"\x01\x00\x00"  # frame version 1, apiKey 0, version 0
            + _segment_id_bytes()
            + struct.pack(">qqiqq", 0, 99, 1, 1_700_000_000_000, 1_700_000_001_000)
            + b"\x03"  # compact array of 2 SegmentLeaderEpochEntry, ascending epochs
            + struct.pack(">iq", 0, 0) + b"\x00" + struct.pack(">iq", 2, 50) + b"\x00"
            + struct.pack(">i", 1024)
            + b"\x00"  # CustomMetadata null
            + b"\x00"  # state COPY_SEGMENT_STARTED
            + b"\x00")  # tagged fields
    assert serde.serialize(md) == want
    assert serde.deserialize(want) == md


def test_segment_metadata_with_custom_metadata_and_state() -> None:
    md = RemoteLogSegmentMetadata(SID, 10, 20, 5, 2, 6, 7, {1: 10}, b"\xAA\xBB", RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    b = serde.serialize(md)
    assert b.endswith(b"\x03\xAA\xBB" + b"\x01" + b"\x00")  # compact bytes len+1, state 1, tagged fields
    assert serde.deserialize(b) == md


def test_update_bytes() -> None:
    upd = RemoteLogSegmentMetadataUpdate(SID, 1_700_000_002_000, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 4)
    want = (b"\x01\x01\x00" + _segment_id_bytes() + struct.pack(">iq", 4, 1_700_000_002_000)
            + b"\x00" + b"\x01" + b"\x00")
    assert serde.serialize(upd) == want
    assert serde.deserialize(want) == upd


def test_partition_delete_bytes() -> None:
    d = RemotePartitionDeleteMetadata(TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 123, 9)
    want = b"\x01\x02\x00" + _tip_bytes() + struct.pack(">iq", 9, 123) + b"\x01" + b"\x00"
    assert serde.serialize(d) == want
    assert serde.deserialize(want) == d


def test_snapshot_bytes() -> None:
    s = RemoteLogSegmentMetadataSnapshot(SEGMENT_ID, 0, 9, 8, 1, 7, 100, {0: 0})
    want = (b"\x01\x03\x00" + SEGMENT_ID.bytes + struct.pack(">qqiqq", 0, 9, 1, 8, 7) + b"\x02"
            + struct.pack(">iq", 0, 0) + b"\x00" + struct.pack(">i", 100) + b"\x00\x00\x00")
    assert serde.serialize(s) == want
    assert serde.deserialize(want) == s


def test_create_with_updates() -> None:
    md = RemoteLogSegmentMetadata(SID, 0, 99, 1, 1, 1, 1024, {0: 0})
    upd = RemoteLogSegmentMetadataUpdate(SID, 50, b"x", RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2)
    done = md.create_with_updates(upd)
    assert (done.state, done.broker_id, done.event_timestamp_ms, done.custom_metadata) == (
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2, 50, b"x")
    other = RemoteLogSegmentMetadataUpdate(RemoteLogSegmentId(TIP, random_uuid()), 50, None,
                                           RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2)
    with pytest.raises(ValueError):
        md.create_with_updates(other)


@pytest.mark.parametrize("start,end,epochs,message", [
    (-1, 5, {0: 0}, "StartOffset for a remote segment cannot be negative"),
    (5, 4, {0: 0}, "EndOffset for a remote segment cannot be less than startOffset = 5"),
    (0, 4, {}, "segmentLeaderEpochs can not be null or empty"),
])
def test_kafkas_invariants(start: int, end: int, epochs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RemoteLogSegmentMetadata(SID, start, end, 0, 0, 0, 0, epochs)


def test_state_transitions() -> None:
    S = RemoteLogSegmentState
    assert S.is_valid_transition(None, S.COPY_SEGMENT_STARTED)
    assert not S.is_valid_transition(None, S.COPY_SEGMENT_FINISHED)
    assert S.is_valid_transition(S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED)
    assert S.is_valid_transition(S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_FINISHED)
    assert not S.is_valid_transition(S.COPY_SEGMENT_FINISHED, S.COPY_SEGMENT_STARTED)
    assert not S.is_valid_transition(S.DELETE_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED)
    P = RemotePartitionDeleteState
    assert P.is_valid_transition(None, P.DELETE_PARTITION_MARKED)
    assert P.is_valid_transition(P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED)
    assert not P.is_valid_transition(P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_FINISHED)


@pytest.mark.parametrize("data,message", [
    (b"\x00\x00\x00", "frame version 0"),
    (b"\x02\x00\x00", "unknown frame version 2"),
    (b"\x01\x07\x00", "Unknown metadata id 7"),
    (b"\x01\x02\x00" + _tip_bytes(), "Failed to deserialize record with type 2"),
    (b"\x01\x02\x00" + _tip_bytes() + struct.pack(">iq", 9, 123) + b"\x01\x00" + b"zz", r"Found 2 byte\(s\) of garbage after 2"),
])
def test_parse_errors(data: bytes, message: str) -> None:
    with pytest.raises(serde.RemoteLogMetadataParseError, match=message):
        serde.deserialize(data)


ids = st.builds(lambda n: uuid.UUID(int=n), st.integers(0, 2**128 - 1))
segments = st.builds(
    lambda tid, name, p, sid, start, length, epochs, custom, state, ts: RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TopicIdPartition(tid, name, p), sid), start, start + length, ts, p % 5, ts + 1,
        length, {e: start + i for i, e in enumerate(sorted(epochs))}, custom, state),
    ids, st.text(min_size=1, max_size=30), st.integers(0, 2**31 - 1), ids, st.integers(0, 2**62),
    st.integers(0, 2**30), st.sets(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
    st.none() | st.binary(max_size=40), st.sampled_from(list(RemoteLogSegmentState)), st.integers(0, 2**62))


@settings(max_examples=150, deadline=None)
@given(segments)
def test_round_trip(md: RemoteLogSegmentMetadata) -> None:
    assert serde.deserialize(serde.serialize(md)) == md


def test_uuid_text() -> None:
    assert uuid_to_string(TOPIC_ID) == "AQIDBAUGBwgJCgsMDQ4PEA"
    assert uuid_from_string("AQIDBAUGBwgJCgsMDQ4PEA") == TOPIC_ID
    assert not uuid_to_string(random_uuid()).startswith("-")


def test_murmur2_vectors() -> None:
    """Kafka's UtilsTest.testMurmur2 cases."""
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    for data, want in cases.items():
        assert serde.murmur2(data) == want


def test_metadata_partition() -> None:
    # checked against Kafka 3.9.1's RemoteLogMetadataTopicPartitioner (the integration test checks many more)
    assert serde.metadata_partition(TIP, 50) == 37
    for p in range(20):
        assert 0 <= serde.metadata_partition(TopicIdPartition(random_uuid(), "t", p), 7) < 7
