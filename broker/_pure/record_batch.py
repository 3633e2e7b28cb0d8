"""Record batch header view, scan, validation and in-place edits; pure twin of ``pyx/record_batch.pyx``.

The header view (``batch_header`` and the single-field accessors ``batch_size``, ``batch_magic``,
``is_transactional``, ``producer_id``, ``producer_epoch``) is the one reader of a batch header in the broker:
nothing else unpacks those 61 bytes. ``null_key_records`` is the record walk of a compacted topic's append.

The byte layouts (magic 2 batches and legacy magic 0/1 entries) are documented in
``broker/protocol/records/batch_info.py``. Magic-2 record layout (inside ``records``; varints are zigzag)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | headers: (keyLength varint | key utf-8 | valueLength varint (-1 = null) | value)*

Error policy (both twins must raise the same class for the same input):
``CorruptRecordError`` for lengths, truncation, magic, CRC, codec and malformed record framing;
``InvalidRecordError`` for a negative record count, a record count that does not match the records,
offset deltas that are not 0..n-1 and a lastOffsetDelta that is not n-1.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

from broker._pure.crc32c import crc32c
from broker._pure.varint import decode_varint
from broker.protocol.records.batch_info import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchInfo,
    Record,
)
from broker.protocol.records.compression import LZ4
from broker.protocol.records.compression import decompress as _decompress
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

BATCH_LENGTH_MIN = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
RECORD_COUNT_OFFSET = 57
MAGIC_OFFSET = 16
LEGACY_V0_MESSAGE_MIN = 14  # crc 4 + magic 1 + attributes 1 + key len 4 + value len 4
LEGACY_V1_MESSAGE_MIN = 22  # + timestamp 8
MAX_CODEC = 4

_HEADER = struct.Struct(">qiiBIhiqqqhii")
# tuple.__new__ builds a NamedTuple without its Python-level __new__ (as the native twin builds it in place)
_tuple_new = tuple.__new__
_LEGACY = struct.Struct(">qiIBb")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


def _batch_crc(buf: Any, position: int, end: int) -> int:
    return crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET:end])


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    try:
        value, new_pos = decode_varint(buf, pos)
    except ValueError as e:
        raise CorruptRecordError("malformed record: %s" % e) from None
    if new_pos > end:
        raise CorruptRecordError("malformed record: varint crosses the record end")
    return value, new_pos


def _walk_records(buf: Any, pos: int, end: int, record_count: int, null_keys: list[int] | None = None) -> None:
    """Check the framing of ``record_count`` records filling exactly buf[pos:end]; the indexes of records with a
    null key go to ``null_keys`` when given."""
    for i in range(record_count):
        if pos >= end:
            raise InvalidRecordError("batch holds fewer records than its record count %d" % record_count)
        length, pos = _varint(buf, pos, end)
        if length < 0 or length > end - pos:
            raise CorruptRecordError("malformed record: bad record length %d" % length)
        rend = pos + length
        if pos >= rend:
            raise CorruptRecordError("malformed record: missing attributes")
        pos += 1  # attributes (unused)
        _, pos = _varint(buf, pos, rend)  # timestampDelta
        offset_delta, pos = _varint(buf, pos, rend)
        key_len, pos = _varint(buf, pos, rend)
        if key_len < -1 or key_len > rend - pos:
            raise CorruptRecordError("malformed record: bad key length %d" % key_len)
        if key_len > 0:
            pos += key_len
        elif key_len < 0 and null_keys is not None:
            null_keys.append(i)
        value_len, pos = _varint(buf, pos, rend)
        if value_len < -1 or value_len > rend - pos:
            raise CorruptRecordError("malformed record: bad value length %d" % value_len)
        if value_len > 0:
            pos += value_len
        header_count, pos = _varint(buf, pos, rend)
        if header_count < 0 or header_count > rend - pos:
            raise CorruptRecordError("malformed record: bad header count %d" % header_count)
        for _ in range(header_count):
            hk_len, pos = _varint(buf, pos, rend)
            if hk_len < 0 or hk_len > rend - pos:
                raise CorruptRecordError("malformed record: bad header key length %d" % hk_len)
            pos += hk_len
            hv_len, pos = _varint(buf, pos, rend)
            if hv_len < -1 or hv_len > rend - pos:
                raise CorruptRecordError("malformed record: bad header value length %d" % hv_len)
            if hv_len > 0:
                pos += hv_len
        if pos != rend:
            raise CorruptRecordError("malformed record: record length does not match its fields")
        if offset_delta != i:
            raise InvalidRecordError("record offset delta %d, expected %d" % (offset_delta, i))
    if pos != end:
        raise InvalidRecordError("batch holds more data than its record count %d" % record_count)


def validate_records(records_bytes: Any, record_count: int) -> None:
    """Check the framing of decompressed record bytes holding exactly ``record_count`` records."""
    if record_count < 0:
        raise InvalidRecordError("negative record count %d" % record_count)
    _walk_records(records_bytes, 0, len(records_bytes), record_count)


def null_key_records(records_bytes: Any, record_count: int) -> list[int]:
    """``validate_records``, also giving the indexes of the records whose key is null: a compacted topic refuses
    them, and this one walk is all its append needs of a batch's records (decompressed once by the caller)."""
    if record_count < 0:
        raise InvalidRecordError("negative record count %d" % record_count)
    null_keys: list[int] = []
    _walk_records(records_bytes, 0, len(records_bytes), record_count, null_keys)
    return null_keys


def timestamp_deltas(records_bytes: Any, record_count: int) -> tuple[int, int]:
    """(first, max) timestampDelta of ``record_count`` records that ``validate_records`` accepted: a recompression
    keeps the records' bytes when the first delta is 0 (its rebuilt batch's base timestamp is the first record's,
    so every delta stays), and the rebuilt batch's max timestamp is the base plus the max delta."""
    if record_count <= 0:
        return (0, 0)
    end = len(records_bytes)
    pos = 0
    first = top = 0
    for i in range(record_count):
        length, pos = _varint(records_bytes, pos, end)
        if length < 1 or length > end - pos:
            raise CorruptRecordError("malformed record: bad record length (record count %d)" % record_count)
        rend = pos + length
        delta, _ = _varint(records_bytes, pos + 1, rend)
        if i == 0:
            first = top = delta
        elif delta > top:
            top = delta
        pos = rend
    return (first, top)


#: whether LZ4 frames, snappy data and zstd frames are decoded natively (never in the pure twin:
#: ``compression.decompress`` decodes them), and where the native twin found libzstd
LZ4_NATIVE = False
SNAPPY_NATIVE = False
ZSTD_NATIVE = False
ZSTD_LIBRARY: "str | None" = None


def compressed_records(codec: int, data: "bytes | bytearray | memoryview", record_count: int,
                       keys_required: bool) -> list[int]:
    """Decompress a batch's records section ``data`` compressed with ``codec`` and walk its records as
    ``null_key_records`` (keys required) or ``validate_records`` do; the indexes of the null-key records when keys
    are required, else []. The native twin decodes LZ4, snappy and zstd into a reused buffer and walks the records
    in the same call."""
    if record_count < 0:
        raise InvalidRecordError("negative record count %d" % record_count)
    raw = _decompress(codec, data)
    if keys_required:
        return null_key_records(raw, record_count)
    validate_records(raw, record_count)
    return []


def lz4_frame_records(data: "bytes | bytearray | memoryview", record_count: int, keys_required: bool) -> list[int]:
    """``compressed_records`` of an LZ4 frame."""
    return compressed_records(LZ4, data, record_count, keys_required)


def lz4_decompress(data: "bytes | bytearray | memoryview") -> bytes:
    """The content of the LZ4 frame ``data`` (``compression.decompress(LZ4, data)``; the native twin decodes it
    into a reused buffer without the GIL)."""
    return _decompress(LZ4, data)


def decompress_records(codec: int, data: "bytes | bytearray | memoryview") -> bytes:
    """A compressed batch's records section decompressed (``compression.decompress``; LZ4, snappy and zstd
    natively in the native twin)."""
    return _decompress(codec, data)


def _info(buf: Any, position: int, reported: int = -1) -> BatchInfo:
    (base_offset, length, ple, magic, crc, attributes, lod, base_ts, max_ts, pid, pepoch, bseq,
     count) = _HEADER.unpack_from(buf, position)
    return _tuple_new(BatchInfo, (position if reported < 0 else reported, length + LOG_OVERHEAD, base_offset, lod,
                                  ple, magic, crc, attributes, base_ts, max_ts, pid, pepoch, bseq, count))


# ---- the header view: every reader of a batch header outside the twins goes through these -----------------

def batch_header(buf: Any, position: int = 0, file_position: int = -1) -> BatchInfo:
    """The header of the batch (or legacy magic 0/1 entry, as a one-record batch) starting at ``position``.

    Only the header must be in ``buf``, not the whole batch, and nothing is checked beyond its presence and its
    magic (CorruptRecordError otherwise): callers that need a valid batch use ``validate_batches`` or
    ``scan_batches``. The result's ``position`` is ``file_position`` when given (``buf`` being a chunk read from
    there), else ``position``.
    """
    if position < 0:
        raise ValueError("negative position")
    avail = len(buf) - position
    if avail <= MAGIC_OFFSET:
        raise CorruptRecordError("truncated batch header at %d" % position)
    magic = buf[position + MAGIC_OFFSET]
    if magic == 2:
        if avail < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError("truncated batch header at %d" % position)
        return _info(buf, position, file_position)
    if magic > 2:
        raise CorruptRecordError("unsupported magic %d" % magic)
    if avail < (LOG_OVERHEAD + 14 if magic == 1 else LOG_OVERHEAD + 6):  # through timestamp / attributes
        raise CorruptRecordError("truncated legacy entry header at %d" % position)
    return _legacy_header(buf, position, position if file_position < 0 else file_position)


def _legacy_header(buf: Any, position: int, reported: int) -> BatchInfo:
    """A magic 0/1 entry's header (its 18 or 26 bytes known to be there) as a one-record batch at ``reported``."""
    offset, length, crc, magic, attributes = _LEGACY.unpack_from(buf, position)
    ts = _I64.unpack_from(buf, position + 18)[0] if magic == 1 else -1
    return _tuple_new(BatchInfo, (reported, length + LOG_OVERHEAD, offset, 0, -1, magic, crc, attributes, ts, ts,
                                  -1, -1, -1, 1))


def batch_size(buf: Any, position: int = 0) -> int:
    """Bytes the batch (or legacy entry) at ``position`` takes, its 12-byte prefix included (Kafka's sizeInBytes);
    -1 when ``buf`` holds fewer than those 12 bytes there."""
    if position < 0:
        raise ValueError("negative position")
    if len(buf) - position < LOG_OVERHEAD:
        return -1
    return _I32.unpack_from(buf, position + 8)[0] + LOG_OVERHEAD


def batch_magic(buf: Any, position: int = 0) -> int:
    """Magic of the batch or entry at ``position``; -1 when ``buf`` ends before it."""
    if position < 0:
        raise ValueError("negative position")
    if len(buf) - position <= MAGIC_OFFSET:
        return -1
    return buf[position + MAGIC_OFFSET]


def _has_v2_header(buf: Any, position: int) -> bool:
    if position < 0:
        raise ValueError("negative position")
    return len(buf) - position >= RECORD_BATCH_OVERHEAD and buf[position + MAGIC_OFFSET] == 2


def is_transactional(buf: Any, position: int = 0) -> bool:
    """The magic-2 batch at ``position`` is transactional (False without a whole magic-2 header there)."""
    return _has_v2_header(buf, position) and bool(buf[position + ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)


def producer_id(buf: Any, position: int = 0) -> int:
    """producerId of the magic-2 batch at ``position``; -1 (no producer) without a whole magic-2 header there."""
    if not _has_v2_header(buf, position):
        return -1
    return _I64.unpack_from(buf, position + PRODUCER_ID_OFFSET)[0]


def producer_epoch(buf: Any, position: int = 0) -> int:
    """producerEpoch of the magic-2 batch at ``position``; -1 without a whole magic-2 header there."""
    if not _has_v2_header(buf, position):
        return -1
    return _I16.unpack_from(buf, position + PRODUCER_EPOCH_OFFSET)[0]


def validate_batches(buf: Any, check_crc: bool = True, null_keys: dict[int, list[int]] | None = None
                     ) -> list[BatchInfo]:
    """Check that ``buf`` is a sequence of complete, valid magic-2 batches and describe them.

    ``null_keys`` (a compacted topic's append): the same walk of each uncompressed data batch's records notes the
    indexes of those without a key, under the batch's position, so that batch is walked once in all."""
    n = len(buf)
    pos = 0
    infos: list[BatchInfo] = []
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise CorruptRecordError("truncated batch header at %d" % pos)
        length = _I32.unpack_from(buf, pos + 8)[0]
        if length < BATCH_LENGTH_MIN:
            raise CorruptRecordError("batch length %d below the minimum %d" % (length, BATCH_LENGTH_MIN))
        end = pos + LOG_OVERHEAD + length
        if end > n:
            raise CorruptRecordError("truncated batch at %d" % pos)
        info = _info(buf, pos)
        if info.magic != 2:
            raise CorruptRecordError("unsupported magic %d" % info.magic)
        if check_crc and _batch_crc(buf, pos, end) != info.crc:
            raise CorruptRecordError("batch CRC mismatch at %d" % pos)
        if info.record_count < 0:
            raise InvalidRecordError("negative record count %d" % info.record_count)
        codec = info.attributes & COMPRESSION_MASK
        if codec > MAX_CODEC:
            raise CorruptRecordError("unknown compression codec %d" % codec)
        if codec == 0:
            if null_keys is not None and not info.attributes & CONTROL_MASK:
                missing: list[int] = []
                _walk_records(buf, pos + RECORD_BATCH_OVERHEAD, end, info.record_count, missing)
                if missing:
                    null_keys[pos] = missing
            else:
                _walk_records(buf, pos + RECORD_BATCH_OVERHEAD, end, info.record_count)
        if info.record_count > 0 and info.last_offset_delta != info.record_count - 1:
            raise InvalidRecordError("lastOffsetDelta %d does not match record count %d"
                                     % (info.last_offset_delta, info.record_count))
        infos.append(info)
        pos = end
    return infos


def _legacy_info(buf: Any, pos: int, size: int, check_crc: bool) -> BatchInfo | None:
    """Describe the magic 0/1 entry at ``pos`` (its size already checked to fit), or None if invalid."""
    magic = buf[pos + MAGIC_OFFSET]
    if size - LOG_OVERHEAD < (LEGACY_V1_MESSAGE_MIN if magic == 1 else LEGACY_V0_MESSAGE_MIN):
        return None
    info = _legacy_header(buf, pos, pos)
    if check_crc and zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:pos + size]) != info.crc:
        return None
    return info


def scan_batches(buf: Any, pos: int = 0, end: int = -1,
                 check_crc: bool = False) -> tuple[list[BatchInfo], int]:
    """Read headers of consecutive batches in buf[pos:end] until the first incomplete or invalid one.

    Returns the infos and the position where the valid prefix ends (the torn tail, if any, starts there).
    Magic 0/1 entries are reported as one-record batches.
    """
    n = len(buf)
    if end < 0 or end > n:
        end = n
    if pos < 0:
        raise ValueError("negative position")
    infos: list[BatchInfo] = []
    while end - pos >= MAGIC_OFFSET + 1:
        length = _I32.unpack_from(buf, pos + 8)[0]
        magic = buf[pos + MAGIC_OFFSET]
        if length < 0:
            break
        size = LOG_OVERHEAD + length
        if size > end - pos:
            break
        if magic == 2:
            if length < BATCH_LENGTH_MIN:
                break
            info = _info(buf, pos)
            if check_crc and _batch_crc(buf, pos, pos + size) != info.crc:
                break
        elif magic < 2:
            legacy = _legacy_info(buf, pos, size, check_crc)
            if legacy is None:
                break
            info = legacy
        else:
            break
        infos.append(info)
        pos += size
    return infos, pos


def _check_header(buf: Any, position: int) -> int:
    """Bounds and magic check before an in-place edit; returns the batch end."""
    if position < 0 or position + RECORD_BATCH_OVERHEAD > len(buf):
        raise ValueError("no batch header at position %d" % position)
    if buf[position + MAGIC_OFFSET] != 2:
        raise ValueError("not a magic 2 batch at position %d" % position)
    end = position + LOG_OVERHEAD + _I32.unpack_from(buf, position + 8)[0]
    if end < position + RECORD_BATCH_OVERHEAD or end > len(buf):
        raise ValueError("batch at position %d exceeds the buffer" % position)
    return end


def stamp_base_offset(buf: Any, position: int, base_offset: int) -> None:
    """Write baseOffset of the batch at ``position`` (outside the CRC)."""
    _check_header(buf, position)
    _I64.pack_into(buf, position, base_offset)


def stamp_partition_leader_epoch(buf: Any, position: int, epoch: int) -> None:
    """Write partitionLeaderEpoch of the batch at ``position`` (outside the CRC)."""
    _check_header(buf, position)
    _I32.pack_into(buf, position + 12, epoch)


def set_log_append_time(buf: Any, position: int, timestamp_ms: int) -> None:
    """Make the batch LogAppendTime with maxTimestamp = ``timestamp_ms`` and recompute its CRC."""
    end = _check_header(buf, position)
    _I64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    attributes = _I16.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    _I16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes)
    _U32.pack_into(buf, position + CRC_OFFSET, _batch_crc(buf, position, end))


def assign_offsets(buf: Any, base_offset: int, leader_epoch: int, stamp_epoch: bool,
                   log_append_time_ms: int) -> tuple[list[tuple[int, int, int]], int, int, int, int]:
    """Stamp every batch of ``buf`` in one pass, as a leader's append does once the batches passed its rules.

    ``buf`` holds whole magic-2 batches (as ``validate_batches`` accepted them). Each batch gets the next
    offsets from ``base_offset`` on (its baseOffset; its records follow by offset delta), partitionLeaderEpoch =
    ``leader_epoch`` when ``stamp_epoch``, and, when ``log_append_time_ms >= 0``, LogAppendTime with that
    maxTimestamp (CRC recomputed). Returns ``(appended, max_timestamp, offset_of_max_timestamp, num_records,
    valid_bytes)``: ``appended`` holds ``(last_offset, max_timestamp, size)`` per batch (what the segment and its
    indexes take), the max timestamp is -1 and its offset -1 when no batch has a timestamp above -1.
    """
    n = len(buf)
    pos = 0
    offset = base_offset
    appended: list[tuple[int, int, int]] = []
    max_ts = -1
    offset_of_max_ts = -1
    num_records = 0
    while pos < n:
        end = _check_header(buf, pos)
        _I64.pack_into(buf, pos, offset)
        if stamp_epoch:
            _I32.pack_into(buf, pos + 12, leader_epoch)
        last = offset + _I32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
        if log_append_time_ms >= 0:
            set_log_append_time(buf, pos, log_append_time_ms)
            ts = log_append_time_ms
        else:
            ts = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
        if ts > max_ts:
            max_ts = ts
            offset_of_max_ts = last
        size = end - pos
        appended.append((last, ts, size))
        num_records += _I32.unpack_from(buf, pos + RECORD_COUNT_OFFSET)[0]
        offset = last + 1
        pos = end
    return appended, max_ts, offset_of_max_ts, num_records, pos


def _read_records(data: Any, count: int, info: BatchInfo) -> list[Record]:
    records: list[Record] = []
    pos = 0
    end = len(data)
    log_append = bool(info.attributes & TIMESTAMP_TYPE_MASK)
    for _ in range(count):
        length, pos = _varint(data, pos, end)
        rend = pos + length
        attributes = data[pos]
        pos += 1
        ts_delta, pos = _varint(data, pos, rend)
        offset_delta, pos = _varint(data, pos, rend)
        key_len, pos = _varint(data, pos, rend)
        key = None
        if key_len >= 0:
            key = bytes(data[pos:pos + key_len])
            pos += key_len
        value_len, pos = _varint(data, pos, rend)
        value = None
        if value_len >= 0:
            value = bytes(data[pos:pos + value_len])
            pos += value_len
        header_count, pos = _varint(data, pos, rend)
        headers = []
        for _h in range(header_count):
            hk_len, pos = _varint(data, pos, rend)
            try:
                hkey = bytes(data[pos:pos + hk_len]).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError("malformed record: header key is not UTF-8") from None
            pos += hk_len
            hv_len, pos = _varint(data, pos, rend)
            hval = None
            if hv_len >= 0:
                hval = bytes(data[pos:pos + hv_len])
                pos += hv_len
            headers.append((hkey, hval))
        seq = -1
        if info.base_sequence >= 0:
            seq = (info.base_sequence + offset_delta) & 0x7FFFFFFF
        timestamp = info.max_timestamp if log_append else info.base_timestamp + ts_delta
        records.append(Record(info.base_offset + offset_delta, timestamp, key, value, headers, attributes, seq))
        pos = rend
    return records


def iter_records(batch: Any) -> list[Record]:
    """All records of ONE whole magic-2 batch (validated first; decompressed as needed)."""
    infos = validate_batches(batch, check_crc=True)
    if len(infos) != 1:
        raise CorruptRecordError("expected exactly one batch, found %d" % len(infos))
    info = infos[0]
    data: Any = memoryview(batch)[RECORD_BATCH_OVERHEAD:info.size]
    codec = info.attributes & COMPRESSION_MASK
    if codec:
        data = decompress_records(codec, data)
        validate_records(data, info.record_count)
    return _read_records(data, info.record_count, info)


def whole_batches_end(buf: Any, pos: int = 0, end: int = -1) -> tuple[int, int]:
    """How far the whole batches laid one after another from ``pos`` go in buf[pos:end], and the size of the
    batch starting there (-1 when its 12-byte prefix is not in buf[pos:end] or its length is not positive).

    Fetch answers whole batches only (a partial one is bytes the client throws away), so it needs where they end
    within its byte budget: one call over a chunk read from the log. Only the length fields are read, no magic or
    CRC (the log validated the batches on append); the size lets the reader step over a batch longer than its
    chunk without reading it.
    """
    n = len(buf)
    if end < 0 or end > n:
        end = n
    if pos < 0:
        raise ValueError("negative position")
    unpack = _I32.unpack_from
    while end - pos >= LOG_OVERHEAD:
        length = unpack(buf, pos + 8)[0]
        if length <= 0:
            return pos, -1
        size = LOG_OVERHEAD + length
        if size > end - pos:
            return pos, size
        pos += size
    return pos, -1
