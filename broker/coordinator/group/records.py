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


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _enc("OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION,
                {"group": group, "topic": topic, "partition": partition})


def group_metadata_key(group: str) -> bytes:
    return _enc("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group})


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: Optional[int]) -> bytes:
    if expire_timestamp is not None:
        return _enc("OffsetCommitValue", OFFSET_COMMIT_VALUE_VERSION_EXPIRE,
                    {"offset": offset, "metadata": metadata, "commit_timestamp": commit_timestamp,
                     "expire_timestamp": expire_timestamp})
    return _enc("OffsetCommitValue", OFFSET_COMMIT_VALUE_VERSION,
                {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
                 "commit_timestamp": commit_timestamp})


def group_metadata_value(value: dict) -> bytes:
    """``value`` holds the GroupMetadataValue fields (snake_case), members as dicts."""
    return _enc("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)


def decode_key(key: bytes) -> Union[OffsetKey, GroupKey]:
    version = _I16.unpack_from(key, 0)[0]
    if version in (0, 1):
        m, _ = data_codec("OffsetCommitKey", version).decode(key, 2)
        return OffsetKey(m.group, m.topic, m.partition)
    if version == 2:
        m, _ = data_codec("GroupMetadataKey", version).decode(key, 2)
        return GroupKey(m.group)
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(value: bytes) -> Any:
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
