"""Rewriting one magic-2 record batch for the log cleaner (Kafka's MemoryRecords.filterTo role).

A cleaned batch keeps the original batch's identity so offsets, producer state and leader epochs
stay valid (layout in broker/protocol/records/batch_info.py):

    baseOffset, partitionLeaderEpoch, magic    unchanged
    attributes        codec, timestamp type, transactional, control unchanged; bit 6 (delete
                      horizon) set when the batch keeps tombstones and had no horizon yet
    lastOffsetDelta   unchanged (keeps the batch's last offset, hence the producer's last sequence)
    baseTimestamp     the first retained record's timestamp, or the delete horizon (ms) when bit 6
                      is set (record timestamp deltas are then relative to it and may be negative)
    maxTimestamp      max retained record timestamp (CreateTime) or unchanged (LogAppendTime)
    producerId, producerEpoch, baseSequence      unchanged
    recordCount       retained records; 0 for an empty batch kept only for producer state
    crc               recomputed over attributes..end
    records           the retained records, original offset deltas, re-compressed with the codec

Pure functions; no I/O. Used from the cleaner thread.
"""
from __future__ import annotations

from typing import Optional, Sequence

from broker.accel import record_batch
from broker.accel import varint as _varint
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import (DELETE_HORIZON_MASK, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK,
                                                BatchInfo, Record)
from broker.protocol.records.builder import encode_batch, encode_record
from broker.protocol.records.compression import compress, decompress



def iter_stored_records(batch: "bytes | bytearray") -> list[Record]:
    """Records of one stored batch (CRC checked), cleaned ones included.

    ``record_batch.iter_records`` applies the producer-side rules (lastOffsetDelta == recordCount - 1,
    offset delta == index) that compacted batches break by design; it is used when they hold, and
    a plain decoder here otherwise (only already-cleaned batches, which are small, take that path).
    """
    try:
        return record_batch.iter_records(batch)
    except record_errors.InvalidRecordError:
        pass
    view = memoryview(batch)
    infos, end = record_batch.scan_batches(view, 0, -1, True)
    if len(infos) != 1 or end != len(view):
        raise record_errors.CorruptRecordError("expected exactly one whole batch with a valid CRC")
    info = infos[0]
    data: "bytes | memoryview" = view[RECORD_BATCH_OVERHEAD:info.size]
    if info.compression:
        data = decompress(info.compression, data)
    return _decode_records(data, info)


def _decode_records(data: "bytes | memoryview", info: BatchInfo) -> list[Record]:
    dec = _varint.decode_varint
    log_append = bool(info.attributes & TIMESTAMP_TYPE_MASK)
    out: list[Record] = []
    pos = 0
    for _ in range(info.record_count):
        length, pos = dec(data, pos)
        rend = pos + length
        attributes = data[pos]
        ts_delta, p = dec(data, pos + 1)
        offset_delta, p = dec(data, p)
        key_len, p = dec(data, p)
        key = None
        if key_len >= 0:
            key, p = bytes(data[p:p + key_len]), p + key_len
        value_len, p = dec(data, p)
        value = None
        if value_len >= 0:
            value, p = bytes(data[p:p + value_len]), p + value_len
        header_count, p = dec(data, p)
        headers = []
        for _h in range(header_count):
            hk_len, p = dec(data, p)
            hkey = bytes(data[p:p + hk_len]).decode("utf-8")
            p += hk_len
            hv_len, p = dec(data, p)
            hval = None
            if hv_len >= 0:
                hval, p = bytes(data[p:p + hv_len]), p + hv_len
            headers.append((hkey, hval))
        if p > rend or rend > len(data):
            raise record_errors.CorruptRecordError("malformed record in a stored batch")
        seq = (info.base_sequence + offset_delta) & 0x7FFFFFFF if info.base_sequence >= 0 else -1
        timestamp = info.max_timestamp if log_append else info.base_timestamp + ts_delta
        out.append(Record(info.base_offset + offset_delta, timestamp, key, value, headers, attributes, seq))
        pos = rend
    return out


def delete_horizon_ms(info: BatchInfo) -> Optional[int]:
    """The batch's delete horizon (KIP-534: its base timestamp when attribute bit 6 is set), else None."""
    return info.base_timestamp if info.has_delete_horizon else None


def _assemble(info: BatchInfo, attributes: int, base_ts: int, max_ts: int, count: int, body: bytes) -> bytes:
    return encode_batch(body, record_count=count, last_offset_delta=info.last_offset_delta, attributes=attributes,
                        base_timestamp=base_ts, max_timestamp=max_ts, producer_id=info.producer_id,
                        producer_epoch=info.producer_epoch, base_sequence=info.base_sequence,
                        base_offset=info.base_offset, partition_leader_epoch=info.partition_leader_epoch)


def build_retained_batch(info: BatchInfo, records: Sequence[Record], horizon_ms: Optional[int]) -> bytes:
    """A batch like ``info`` holding only ``records`` (non-empty), with ``horizon_ms`` as delete horizon."""
    log_append = bool(info.attributes & TIMESTAMP_TYPE_MASK)
    attributes = info.attributes & ~DELETE_HORIZON_MASK
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_ts = horizon_ms
    else:
        base_ts = info.base_timestamp if log_append else records[0].timestamp
    if log_append:
        max_ts = info.max_timestamp
        parts = [encode_record(r.offset - info.base_offset, 0, r.key, r.value, r.headers, r.attributes)
                 for r in records]
    else:
        max_ts = max(r.timestamp for r in records)
        parts = [encode_record(r.offset - info.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers,
                               r.attributes) for r in records]
    body = b"".join(parts)
    if info.compression:
        body = compress(info.compression, body)
    return _assemble(info, attributes, base_ts, max_ts, len(records), body)


def build_empty_batch(info: BatchInfo) -> bytes:
    """A record-less batch keeping ``info``'s producer fields and last offset (Kafka's writeEmptyHeader).

    The cleaner keeps one for a producer whose last batch lost all its records, so the
    producer's epoch and last sequence survive a rebuild of the producer state.
    """
    attributes = info.attributes & ~(DELETE_HORIZON_MASK | 0x07)
    return _assemble(info, attributes, info.max_timestamp, info.max_timestamp, 0, b"")
