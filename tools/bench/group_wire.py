"""The load generator's hot requests written by hand: OffsetCommit v8 and Heartbeat v4 (requests and responses).

A member sends one OffsetCommit a second and a Heartbeat every few; with 3,000 members in one process the
schema-walking codec made the generator, not the broker, the bottleneck. These functions produce the same bytes
as ``broker.protocol.api.encode_request`` (a unit test compares them) and read only what the member needs from
the responses: the error codes. Everything else the members send goes through the project's codec.

Layout (flexible versions): request header v2 = api_key int16, api_version int16, correlation_id int32,
client_id int16-length string, empty tagged fields; response header v1 = correlation_id int32, tagged fields.
Compact strings and arrays carry unsigned-varint length + 1 (0 = null); every struct ends with tagged fields.
"""
from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from broker.protocol.api import ApiKey

__all__ = ["encode_offset_commit_v8", "offset_commit_v8_errors", "encode_heartbeat_v4", "heartbeat_v4_error"]

_HEADER = struct.Struct(">hhih")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">iqi")  # partition_index, committed_offset, committed_leader_epoch
_I16_AT = struct.Struct(">h")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(buf: memoryview, pos: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _skip_tags(buf: memoryview, pos: int) -> int:
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def _compact(s: Optional[str]) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return _uvarint(len(b) + 1) + b


def _frame(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    cid = client_id.encode("utf-8")
    head = _HEADER.pack(api_key, version, correlation_id, len(cid)) + cid + b"\x00"
    return _I32.pack(len(head) + len(body)) + head + body


def encode_offset_commit_v8(correlation_id: int, client_id: str, group_id: str, generation_id: int,
                            member_id: str, offsets: Sequence[Tuple[str, Sequence[Tuple[int, int]]]]) -> bytes:
    """An OffsetCommit v8 frame: ``offsets`` = [(topic, [(partition, offset)])], empty metadata, no epoch."""
    parts: List[bytes] = [_compact(group_id), _I32.pack(generation_id), _compact(member_id), b"\x00",
                          _uvarint(len(offsets) + 1)]
    for topic, partitions in offsets:
        parts.append(_compact(topic))
        parts.append(_uvarint(len(partitions) + 1))
        for p, offset in partitions:
            parts.append(_PARTITION.pack(p, offset, -1) + b"\x01\x00")  # metadata "" (length 0 + 1), no tags
        parts.append(b"\x00")
    parts.append(b"\x00")
    return _frame(ApiKey.OFFSET_COMMIT, 8, correlation_id, client_id, b"".join(parts))


def offset_commit_v8_errors(frame: memoryview) -> Dict[int, int]:
    """error code -> count over the partitions of an OffsetCommit v8 response (frame without size prefix)."""
    pos = _skip_tags(frame, 4) + 4  # correlation id, header tags, throttle_time_ms
    n_topics, pos = _read_uvarint(frame, pos)
    counts: Dict[int, int] = {}
    for _ in range(n_topics - 1):
        ln, pos = _read_uvarint(frame, pos)
        pos += ln - 1
        n_parts, pos = _read_uvarint(frame, pos)
        for _ in range(n_parts - 1):
            code = _I16_AT.unpack_from(frame, pos + 4)[0]
            counts[code] = counts.get(code, 0) + 1
            pos = _skip_tags(frame, pos + 6)
        pos = _skip_tags(frame, pos)
    return counts


def encode_heartbeat_v4(correlation_id: int, client_id: str, group_id: str, generation_id: int,
                        member_id: str) -> bytes:
    body = _compact(group_id) + _I32.pack(generation_id) + _compact(member_id) + b"\x00\x00"
    return _frame(ApiKey.HEARTBEAT, 4, correlation_id, client_id, body)


def heartbeat_v4_error(frame: memoryview) -> int:
    """The error code of a Heartbeat v4 response (frame without size prefix)."""
    pos = _skip_tags(frame, 4) + 4
    return int(_I16_AT.unpack_from(frame, pos)[0])
