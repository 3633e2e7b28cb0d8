"""``__remote_log_metadata`` record values, byte-exact as Kafka 3.9's RemoteLogMetadataSerde, and the metadata
partition of a user partition (RemoteLogMetadataTopicPartitioner).

A value is Kafka's AbstractApiMessageSerde frame: unsigned varint frame version (1: Kafka writes
``DEFAULT_FRAME_VERSION = 1`` and refuses 0 as "the preview release of KRaft"), unsigned varint apiKey, unsigned
varint message version (0), then the flexible message (schemas/remote_log_metadata.schema, Kafka's JSON specs in the
project's schema format, encoded by broker.protocol's generated codecs). The record key is null. The values
themselves (RemoteLogSegmentMetadata, ...) are broker.storage.remote.metadata's.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Union

from broker.protocol.codec import MessageCodec, codec_for, read_uvarint, uvarint_bytes
from broker.protocol.exceptions import MalformedMessageError
from broker.protocol.schema import parse_schema_text
from broker.storage.remote.metadata import (
    RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
)

SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "remote_log_metadata.schema"
#: AbstractApiMessageSerde.DEFAULT_FRAME_VERSION
FRAME_VERSION = 1
#: MetadataRecordType ids of the storage module's messages.
SEGMENT_API_KEY, SEGMENT_UPDATE_API_KEY, PARTITION_DELETE_API_KEY, SNAPSHOT_API_KEY = 0, 1, 2, 3
_NAMES = {SEGMENT_API_KEY: "RemoteLogSegmentMetadataRecord", SEGMENT_UPDATE_API_KEY: "RemoteLogSegmentMetadataUpdateRecord",
          PARTITION_DELETE_API_KEY: "RemotePartitionDeleteMetadataRecord",
          SNAPSHOT_API_KEY: "RemoteLogSegmentMetadataSnapshotRecord"}
METADATA_TOPIC = "__remote_log_metadata"

RemoteLogMetadata = Union[RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata,
                          RemoteLogSegmentMetadataSnapshot]


class RemoteLogMetadataParseError(ValueError):
    """A value that is not a Kafka 3.9 remote log metadata record (Kafka's MetadataParseException)."""


@lru_cache(maxsize=None)
def _codec(api_key: int) -> MessageCodec:
    messages = {m.name: m for m in parse_schema_text(SCHEMA_FILE.read_text())[2]}
    return codec_for(messages[_NAMES[api_key]], 0)


def _tip_entry(tip: TopicIdPartition) -> Dict[str, Any]:
    return {"name": tip.topic, "id": tip.topic_id, "partition": tip.partition}


def _segment_id_entry(sid: RemoteLogSegmentId) -> Dict[str, Any]:
    return {"topic_id_partition": _tip_entry(sid.topic_id_partition), "id": sid.id}


def _epochs(epochs: Any) -> list:
    return [{"leader_epoch": e, "offset": o} for e, o in sorted(epochs.items())]


def _message(md: RemoteLogMetadata) -> tuple[int, Dict[str, Any]]:
    if isinstance(md, RemoteLogSegmentMetadata):
        return SEGMENT_API_KEY, {
            "remote_log_segment_id": _segment_id_entry(md.remote_log_segment_id), "start_offset": md.start_offset,
            "end_offset": md.end_offset, "broker_id": md.broker_id, "max_timestamp_ms": md.max_timestamp_ms,
            "event_timestamp_ms": md.event_timestamp_ms, "segment_leader_epochs": _epochs(md.segment_leader_epochs),
            "segment_size_in_bytes": md.segment_size_in_bytes, "custom_metadata": md.custom_metadata,
            "remote_log_segment_state": int(md.state)}
    if isinstance(md, RemoteLogSegmentMetadataUpdate):
        return SEGMENT_UPDATE_API_KEY, {
            "remote_log_segment_id": _segment_id_entry(md.remote_log_segment_id), "broker_id": md.broker_id,
            "event_timestamp_ms": md.event_timestamp_ms, "custom_metadata": md.custom_metadata,
            "remote_log_segment_state": int(md.state)}
    if isinstance(md, RemotePartitionDeleteMetadata):
        return PARTITION_DELETE_API_KEY, {
            "topic_id_partition": _tip_entry(md.topic_id_partition), "broker_id": md.broker_id,
            "event_timestamp_ms": md.event_timestamp_ms, "remote_partition_delete_state": int(md.state)}
    if isinstance(md, RemoteLogSegmentMetadataSnapshot):
        return SNAPSHOT_API_KEY, {
            "segment_id": md.segment_id, "start_offset": md.start_offset, "end_offset": md.end_offset,
            "broker_id": md.broker_id, "max_timestamp_ms": md.max_timestamp_ms,
            "event_timestamp_ms": md.event_timestamp_ms, "segment_leader_epochs": _epochs(md.segment_leader_epochs),
            "segment_size_in_bytes": md.segment_size_in_bytes, "custom_metadata": md.custom_metadata,
            "remote_log_segment_state": int(md.state)}
    raise TypeError(f"RemoteLogMetadataTransform for given RemoteStorageMetadata class: {type(md)} does not exist.")


def serialize(md: RemoteLogMetadata) -> bytes:
    """RemoteLogMetadataSerde.serialize: the ``__remote_log_metadata`` record value of ``md``."""
    api_key, message = _message(md)
    return (uvarint_bytes(FRAME_VERSION) + uvarint_bytes(api_key) + uvarint_bytes(0)
            + _codec(api_key).encode(message))


def _tip(entry: Any) -> TopicIdPartition:
    return TopicIdPartition(entry.id, entry.name, entry.partition)


def _opt_bytes(value: Any) -> Any:
    return None if value is None else bytes(value)


def _frame_short(buf: memoryview, pos: int, entity: str) -> tuple[int, int]:
    """AbstractApiMessageSerde.unsignedIntToShort."""
    try:
        value, pos = read_uvarint(buf, pos)
    except (MalformedMessageError, IndexError, struct.error) as exc:
        raise RemoteLogMetadataParseError(f"Error while reading {entity}") from exc
    if value > 0x7FFF:
        raise RemoteLogMetadataParseError(f"Value for {entity} was too large.")
    return value, pos


def deserialize(data: bytes) -> RemoteLogMetadata:
    """RemoteLogMetadataSerde.deserialize. Raises RemoteLogMetadataParseError whose text is the message of Kafka's
    MetadataParseException (what kafka-dump-log prints); the reason, where Kafka chains one, is its ``__cause__``."""
    buf = memoryview(data)
    frame, pos = _frame_short(buf, 0, "frame version")
    if frame == 0:
        raise RemoteLogMetadataParseError("Could not deserialize metadata record with frame version 0. Note that "
                                          "upgrades from the preview release of KRaft in 2.8 to newer versions "
                                          "are not supported.")
    if frame != FRAME_VERSION:
        raise RemoteLogMetadataParseError(f"Could not deserialize metadata record due to unknown frame version "
                                          f"{frame}(only frame version {FRAME_VERSION} is supported)")
    api_key, pos = _frame_short(buf, pos, "type")
    version, pos = _frame_short(buf, pos, "version")
    if api_key not in _NAMES:  # MetadataParseException(cause): its message is the cause's toString()
        raise RemoteLogMetadataParseError(
            f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}")
    try:
        if version != 0:
            raise MalformedMessageError(f"version {version} of {_NAMES[api_key]} does not exist")
        m, end = _codec(api_key).decode(buf, pos)
    except (MalformedMessageError, IndexError, struct.error, ValueError) as exc:
        raise RemoteLogMetadataParseError(f"Failed to deserialize record with type {api_key}") from exc
    if end != len(buf):
        raise RemoteLogMetadataParseError(f"Found {len(buf) - end} byte(s) of garbage after {api_key}")
    if api_key == SEGMENT_API_KEY:
        sid = RemoteLogSegmentId(_tip(m.remote_log_segment_id.topic_id_partition), m.remote_log_segment_id.id)
        return RemoteLogSegmentMetadata(
            sid, m.start_offset, m.end_offset, m.max_timestamp_ms, m.broker_id, m.event_timestamp_ms,
            m.segment_size_in_bytes, {e.leader_epoch: e.offset for e in m.segment_leader_epochs},
            _opt_bytes(m.custom_metadata), RemoteLogSegmentState(m.remote_log_segment_state))
    if api_key == SEGMENT_UPDATE_API_KEY:
        sid = RemoteLogSegmentId(_tip(m.remote_log_segment_id.topic_id_partition), m.remote_log_segment_id.id)
        return RemoteLogSegmentMetadataUpdate(sid, m.event_timestamp_ms, _opt_bytes(m.custom_metadata),
                                              RemoteLogSegmentState(m.remote_log_segment_state), m.broker_id)
    if api_key == PARTITION_DELETE_API_KEY:
        return RemotePartitionDeleteMetadata(_tip(m.topic_id_partition),
                                             RemotePartitionDeleteState(m.remote_partition_delete_state),
                                             m.event_timestamp_ms, m.broker_id)
    return RemoteLogSegmentMetadataSnapshot(
        m.segment_id, m.start_offset, m.end_offset, m.max_timestamp_ms, m.broker_id, m.event_timestamp_ms,
        m.segment_size_in_bytes, {e.leader_epoch: e.offset for e in m.segment_leader_epochs},
        _opt_bytes(m.custom_metadata), RemoteLogSegmentState(m.remote_log_segment_state))


# ------------------------------------------------------------------------------------------- partitioner
def _i32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the signed 32-bit result)."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4:i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _i32(h)


def _long_hash(v: int) -> int:
    """Java's Long.hashCode of a signed 64-bit value."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return _i32(u ^ (u >> 32))


def metadata_partition(tip: TopicIdPartition, num_partitions: int) -> int:
    """RemoteLogMetadataTopicPartitioner.metadataPartition: murmur2 of the 4 big-endian bytes of
    Objects.hash(topicId least significant bits, most significant bits, partition), made positive, modulo the
    metadata topic's partition count."""
    bits = tip.topic_id.int
    msb, lsb = bits >> 64, bits & 0xFFFFFFFFFFFFFFFF
    h = 1
    for part in (_long_hash(lsb), _long_hash(msb), tip.partition):
        h = _i32(31 * h + part)
    return (murmur2(struct.pack(">i", h)) & 0x7FFFFFFF) % num_partitions


__all__ = ["serialize", "deserialize", "metadata_partition", "murmur2", "RemoteLogMetadataParseError",
           "METADATA_TOPIC", "FRAME_VERSION", "RemoteLogMetadata"]
