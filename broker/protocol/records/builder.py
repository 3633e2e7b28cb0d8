"""Build magic-2 record batches (layout in ``batch_info.py``) for tests, tools and internal topics.

Not a hot path: producers build their own batches. The CRC, lastOffsetDelta, baseTimestamp (first record) and
maxTimestamp are computed here.
"""
from __future__ import annotations

import struct
import time
from typing import Any, Iterable, Optional, Sequence

from broker.accel import crc32c as _crc32c
from broker.accel import varint as _varint
from broker.protocol.records.batch_info import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from broker.protocol.records.compression import compress

_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount: the header fields the CRC covers
_BEFORE_AFTER_CRC = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc

RecordLike = Any  # (key, value, headers, timestamp_ms) tuple or an object with those attributes


def _fields(record: RecordLike) -> tuple[Optional[bytes], Optional[bytes], Sequence[tuple[str, Optional[bytes]]],
                                           Optional[int]]:
    if isinstance(record, tuple) and not hasattr(record, "_fields"):
        key, value, headers, timestamp = (tuple(record) + (None, None, None, None))[:4]
    else:
        key, value = record.key, record.value
        headers = getattr(record, "headers", None)
        timestamp = getattr(record, "timestamp", None)
    return key, value, headers or (), timestamp


def _bytes_field(out: bytearray, data: Optional[bytes]) -> None:
    enc = _varint.encode_varint
    if data is None:
        out += enc(-1)
    else:
        out += enc(len(data))
        out += data


def encode_record(offset_delta: int, timestamp_delta: int, key: Optional[bytes], value: Optional[bytes],
                  headers: Iterable[tuple[str, Optional[bytes]]] = (), attributes: int = 0) -> bytes:
    """One length-prefixed v2 record."""
    enc = _varint.encode_varint
    body = bytearray()
    body.append(attributes & 0xFF)
    body += enc(timestamp_delta)
    body += enc(offset_delta)
    _bytes_field(body, key)
    _bytes_field(body, value)
    headers = list(headers)
    body += enc(len(headers))
    for hkey, hval in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        body += enc(len(hk))
        body += hk
        _bytes_field(body, hval)
    return enc(len(body)) + bytes(body)


def encode_batch(records: bytes, *, record_count: int, last_offset_delta: int, attributes: int = 0,
                 base_timestamp: int = -1, max_timestamp: int = -1, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A magic-2 batch around already encoded (and, as ``attributes`` says, compressed) record bytes: the 61-byte
    header of batch_info.py with its batchLength and CRC computed. The one writer of a batch header (builders, the
    cleaner, the group coordinator); ``record_batch.batch_header`` is its reader."""
    after_crc = _AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                                producer_epoch, base_sequence, record_count) + records
    return _BEFORE_AFTER_CRC.pack(base_offset, 9 + len(after_crc), partition_leader_epoch, 2,
                                  _crc32c.crc32c(after_crc)) + after_crc


def build_batch(records: Sequence[RecordLike], *, base_offset: int = 0, compression: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = -1, timestamp_type: int = 0, is_transactional: bool = False,
                is_control: bool = False) -> bytes:
    """One magic-2 batch holding ``records`` (offset deltas 0..n-1); records without a timestamp get now."""
    fields = [_fields(r) for r in records]
    now_ms = int(time.time() * 1000)
    timestamps = [now_ms if f[3] is None else int(f[3]) for f in fields]
    base_ts = timestamps[0] if timestamps else -1
    max_ts = max(timestamps) if timestamps else -1
    body = b"".join(encode_record(i, ts - base_ts, f[0], f[1], f[2]) for i, (f, ts) in
                    enumerate(zip(fields, timestamps)))
    if compression:
        body = compress(compression, body)
    attributes = compression & 0x07
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return encode_batch(body, record_count=len(fields), last_offset_delta=len(fields) - 1, attributes=attributes,
                        base_timestamp=base_ts, max_timestamp=max_ts, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence, base_offset=base_offset,
                        partition_leader_epoch=partition_leader_epoch)
