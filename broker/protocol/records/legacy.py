"""Up-convert legacy (magic 0/1) message sets from Produce v0-v2 into one magic-2 batch.

Message set entry layout (big-endian)::

    offset int64 | messageSize int32 | crc uint32 (zlib CRC-32 of magic..end) | magic int8 |
    attributes int8 (bits 0-2 codec, bit 3 timestamp type on magic 1) | timestamp int64 (magic 1 only) |
    keyLength int32 (-1 = null) | key | valueLength int32 (-1 = null) | value

A compressed "wrapper" message carries an inner message set, compressed, as its value. Magic-0 LZ4 wrappers
use Kafka's old frame header checksum, computed over the frame magic as well (KAFKA-3160), which standard LZ4
decoders reject; they are decoded here without checking that byte.

The result is one uncompressed magic-2 batch at base offset 0 holding every record in order (magic 0 records
get timestamp -1); the caller recompresses if the topic wants it. Any malformed input raises
``CorruptRecordError``.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Optional

import lz4.block

from broker.protocol.records.builder import build_batch
from broker.protocol.records.compression import LZ4, decompress
from broker.protocol.records.errors import CorruptRecordError, RecordError

_ENTRY = struct.Struct(">qiIbb")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}

LegacyRecord = tuple[Optional[bytes], Optional[bytes], list, int]


def _lz4_decode_ignoring_header_checksum(data: bytes) -> bytes:
    """Decode an LZ4 frame without checking its header checksum byte (old Kafka wrote it wrongly)."""
    n = len(data)
    if n < 7 or struct.unpack_from("<I", data, 0)[0] != _LZ4_MAGIC:
        raise CorruptRecordError("bad LZ4 frame magic")
    flg, bd = data[4], data[5]
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise CorruptRecordError("bad LZ4 block size")
    out = []
    while True:
        if pos + 4 > n:
            raise CorruptRecordError("truncated LZ4 frame")
        size = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if size == 0:
            break
        raw = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        if pos + size > n:
            raise CorruptRecordError("truncated LZ4 block")
        block = data[pos:pos + size]
        pos += size + (4 if flg & 0x10 else 0)
        if raw:
            out.append(block)
        else:
            try:
                out.append(lz4.block.decompress(block, uncompressed_size=block_max))
            except Exception as e:  # lz4 raises LZ4BlockError
                raise CorruptRecordError("bad LZ4 block: %s" % e) from None
    return b"".join(out)


def _bytes_field(buf: Any, pos: int, end: int) -> tuple[Optional[bytes], int]:
    if pos + 4 > end:
        raise CorruptRecordError("truncated legacy message")
    length = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if length < 0:
        if length != -1:
            raise CorruptRecordError("bad legacy key/value length %d" % length)
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("truncated legacy message")
    return bytes(buf[pos:pos + length]), pos + length


def _parse(buf: Any, out: list[LegacyRecord], nested: bool) -> None:
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < 12 + 6:
            raise CorruptRecordError("truncated legacy message header")
        _offset, size, crc, magic, attributes = _ENTRY.unpack_from(buf, pos)
        end = pos + 12 + size
        if size < 14 or end > n:
            raise CorruptRecordError("bad or truncated legacy message size %d" % size)
        if magic not in (0, 1):
            raise CorruptRecordError("unexpected magic %d in a legacy message set" % magic)
        if zlib.crc32(memoryview(buf)[pos + 16:end]) != crc:
            raise CorruptRecordError("legacy message CRC mismatch")
        p = pos + 18
        timestamp = -1
        if magic == 1:
            if size < 22:
                raise CorruptRecordError("legacy v1 message too short")
            timestamp = _I64.unpack_from(buf, p)[0]
            p += 8
        key, p = _bytes_field(buf, p, end)
        value, p = _bytes_field(buf, p, end)
        if p != end:
            raise CorruptRecordError("legacy message size does not match its fields")
        codec = attributes & 0x07
        if codec == 0:
            out.append((key, value, [], timestamp))
        else:
            if nested:
                raise CorruptRecordError("nested compressed legacy message")
            if value is None:
                raise CorruptRecordError("compressed legacy message without a value")
            try:
                if codec == LZ4 and magic == 0:
                    inner = _lz4_decode_ignoring_header_checksum(value)
                else:
                    inner = decompress(codec, value)
            except RecordError as e:
                raise CorruptRecordError(e.message) from None
            _parse(inner, out, True)
        pos = end


def convert_legacy_message_set(buf: Any) -> bytes:
    """One uncompressed magic-2 batch (base offset 0) with the records of a magic 0/1 message set."""
    records: list[LegacyRecord] = []
    _parse(buf, records, False)
    if not records:
        return b""
    return build_batch(records)


def build_legacy_message_set(records: "list[Any]", magic: int, timestamp_type: int = 0) -> bytes:
    """Down-convert records (``Record`` tuples with absolute offsets) to an uncompressed magic 0/1 set.

    Used for Fetch v0-v3, whose clients read only message sets. Headers cannot be expressed in
    magic 0/1 and are dropped, as Kafka's down-conversion drops them.
    """
    import zlib
    if magic not in (0, 1):
        raise ValueError(f"magic must be 0 or 1, got {magic}")
    out = bytearray()
    for r in records:
        body = bytearray()
        attributes = (timestamp_type & 1) << 3 if magic == 1 else 0
        body += struct.pack(">bb", magic, attributes)
        if magic == 1:
            body += _I64.pack(r.timestamp)
        for field in (r.key, r.value):
            if field is None:
                body += _I32.pack(-1)
            else:
                body += _I32.pack(len(field))
                body += field
        crc = zlib.crc32(body) & 0xFFFFFFFF
        out += _I64.pack(r.offset)
        out += _I32.pack(len(body) + 4)
        out += struct.pack(">I", crc)
        out += body
    return bytes(out)
