"""Kafka varints (protobuf base-128, little-endian groups of 7 bits); pure twin of ``pyx/varint.pyx``.

``varint`` is the zigzag-signed form used in v2 records (sint64 range); ``uvarint`` the unsigned form used by
flexible protocol versions (uint64 range). A uvarint is at most 10 bytes; a 10th byte above 1 would overflow
64 bits. Malformed input (too long, overflowing, truncated) raises ValueError.
"""
from __future__ import annotations

from typing import Union

Buffer = Union[bytes, bytearray, memoryview]

_MIN_INT64 = -(1 << 63)
_MAX_INT64 = (1 << 63) - 1
_MAX_UINT64 = (1 << 64) - 1


def encode_uvarint(v: int) -> bytes:
    """Unsigned varint of ``v`` (0 <= v < 2**64)."""
    if v < 0 or v > _MAX_UINT64:
        raise ValueError("uvarint out of range: %r" % (v,))
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_varint(v: int) -> bytes:
    """Zigzag varint of ``v`` (int64 range)."""
    if v < _MIN_INT64 or v > _MAX_INT64:
        raise ValueError("varint out of range: %r" % (v,))
    return encode_uvarint(((v << 1) ^ (v >> 63)) & _MAX_UINT64)


def decode_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return (value, position after it)."""
    n = len(buf)
    if pos < 0 or pos >= n:
        raise ValueError("truncated varint")
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    i = pos + 1
    while True:
        if i >= n:
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        if shift == 63:
            if b > 1:
                raise ValueError("varint too long")
            return result | (b << 63), i
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; return (value, position after it)."""
    u, pos = decode_uvarint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos
