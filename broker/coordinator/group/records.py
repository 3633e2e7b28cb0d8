"""Keys and values of ``__consumer_offsets`` records, exactly as Kafka 3.9 writes them.

Byte layout (all integers big-endian; strings are int16 length + UTF-8, nullable = -1 length;
bytes are int32 length + data):

  key   = int16 key version, then the key schema of that version
          0 or 1 -> OffsetCommitKey:   group string, topic string, partition int32
          2      -> GroupMetadataKey:  group string
  value = int16 value version, then the value schema of that version (null value = tombstone)
          OffsetCommitValue v3 (written normally): offset int64, leader_epoch int32,
              metadata string, commit_timestamp int64
          OffsetCommitValue v1 (written when the commit carries an expire timestamp):
              offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
          GroupMetadataValue v3: protocol_type string, generation int32, protocol nullable string,
              leader nullable string, current_state_timestamp int64, members array of
              (member_id, group_instance_id nullable, client_id, client_host string,
               rebalance_timeout int32, session_timeout int32, subscription bytes, assignment bytes)
Readers accept every version 0-4 (v4 is flexible: compact strings and tagged fields).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union

from broker.protocol.api import data_codec

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def _enc(name: str, version: int, message: Any) -> bytes:
    return _I16.pack(version) + data_codec(name, version).encode(message)


# The offset-commit key and value are written and read for every commit and every loaded record, so the
# versions Kafka 3.9 writes (key v1, value v3 and v1) are packed by hand; the codec stays the reference (a unit
# test compares both) and reads every other version.
_HH = struct.Struct(">hh")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_I64 = struct.Struct(">qq")
_VALUE_V3_HEAD = struct.Struct(">hqih")   # version, offset, leader_epoch, metadata length
_VALUE_V1_HEAD = struct.Struct(">hqh")    # version, offset, metadata length (v0-v2)
_MAX_STRING = 32767


def _utf8(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > _MAX_STRING:
        raise ValueError(f"string of {len(b)} bytes is longer than the int16 length allows")
    return b


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    g, t = _utf8(group), _utf8(topic)
    return b"".join((_HH.pack(OFFSET_COMMIT_KEY_VERSION, len(g)), g, _I16.pack(len(t)), t, _I32.pack(partition)))


def group_metadata_key(group: str) -> bytes:
    return _enc("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group})


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: Optional[int]) -> bytes:
    m = _utf8(metadata)
    if expire_timestamp is not None:
        return b"".join((_VALUE_V1_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION_EXPIRE, offset, len(m)), m,
                         _I64_I64.pack(commit_timestamp, expire_timestamp)))
    return b"".join((_VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, len(m)), m,
                     _I64.pack(commit_timestamp)))


def group_metadata_value(value: dict) -> bytes:
    """``value`` holds the GroupMetadataValue fields (snake_case), members as dicts."""
    return _enc("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)


def _string_at(data: bytes, pos: int) -> Tuple[str, int]:
    """A non-null int16-length UTF-8 string at ``pos``; (string, position after it)."""
    (n,) = _I16.unpack_from(data, pos)
    end = pos + 2 + n
    if n < 0 or end > len(data):
        raise ValueError(f"bad string length {n} at {pos}")
    return bytes(data[pos + 2:end]).decode(), end


def decode_offset_key(key: bytes) -> Optional[Tuple[str, str, int]]:
    """(group, topic, partition) of an OffsetCommitKey (key version 0 or 1), None for a GroupMetadataKey.

    Raises ValueError (or struct.error) for an unknown version or a malformed key."""
    version, n = _HH.unpack_from(key, 0)
    if version == 2:
        return None
    if version not in (0, 1):
        raise ValueError(f"unknown __consumer_offsets key version {version}")
    end = 4 + n
    (m,) = _I16.unpack_from(key, end)
    end2 = end + 2 + m
    if n < 0 or m < 0 or end2 + 4 > len(key):
        raise ValueError("malformed OffsetCommitKey")
    return key[4:end].decode(), key[end + 2:end2].decode(), _I32.unpack_from(key, end2)[0]


def decode_key(key: bytes) -> Union[OffsetKey, GroupKey]:
    k = decode_offset_key(key)
    if k is not None:
        return OffsetKey(*k)
    return GroupKey(_string_at(key, 2)[0])


def decode_offset_commit_value(value: bytes) -> Tuple[int, int, str, int, Optional[int]]:
    """(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp or None) of any value version."""
    (version,) = _I16.unpack_from(value, 0)
    if version == 3:
        _v, offset, leader_epoch, n = _VALUE_V3_HEAD.unpack_from(value, 0)
        pos = _VALUE_V3_HEAD.size
        if n < 0 or pos + n + 8 > len(value):
            raise ValueError("malformed OffsetCommitValue v3")
        return offset, leader_epoch, value[pos:pos + n].decode(), _I64.unpack_from(value, pos + n)[0], None
    if version in (0, 1, 2):
        _v, offset, n = _VALUE_V1_HEAD.unpack_from(value, 0)
        pos = _VALUE_V1_HEAD.size
        if n < 0 or pos + n + (16 if version == 1 else 8) > len(value):
            raise ValueError(f"malformed OffsetCommitValue v{version}")
        metadata = value[pos:pos + n].decode()
        if version == 1:
            commit_ts, expire_ts = _I64_I64.unpack_from(value, pos + n)
            return offset, -1, metadata, commit_ts, (None if expire_ts == -1 else expire_ts)
        return offset, -1, metadata, _I64.unpack_from(value, pos + n)[0], None
    v = decode_offset_value(value)
    expire = getattr(v, "expire_timestamp", -1)
    return v.offset, getattr(v, "leader_epoch", -1), v.metadata or "", v.commit_timestamp, \
        (None if expire == -1 else expire)


def decode_offset_value(value: bytes) -> Any:
    """The codec's OffsetCommitValue message (any version; the reference for the fast path above)."""
    version = _I16.unpack_from(value, 0)[0]
    return data_codec("OffsetCommitValue", version).decode(value, 2)[0]


def decode_group_value(value: bytes) -> Any:
    version = _I16.unpack_from(value, 0)[0]
    return data_codec("GroupMetadataValue", version).decode(value, 2)[0]


def parse_subscribed_topics(metadata: bytes) -> Optional[List[str]]:
    """Topics of a ConsumerProtocolSubscription (any version), or None when it does not parse.

    Layout: int16 version, then int32 count + int16-length topic names (non-flexible; every
    version starts this way).
    """
    try:
        mv = memoryview(metadata)
        pos = 2
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or n > len(mv):
            return None
        out: List[str] = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", mv, pos)
            pos += 2
            if ln < 0 or pos + ln > len(mv):
                return None
            out.append(bytes(mv[pos:pos + ln]).decode("utf-8"))
            pos += ln
        return out
    except (struct.error, UnicodeDecodeError):
        return None


Record = Tuple[bytes, Optional[bytes]]
