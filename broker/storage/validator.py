"""LogValidator: checks batches from a producer and assigns offsets in place (per batch, never per record).

Works on the request's own buffer: validate_batches (framing + CRC-32C), per-batch rules (magic 2,
max.message.bytes, record count, control batches, sequence numbers, timestamps), decompression +
record framing for compressed batches, record keys for compacted topics, then base offset and
partition leader epoch stamped into each batch header (outside the CRC) and, for
LogAppendTime topics, the max timestamp rewritten (CRC recomputed).
"""
from __future__ import annotations

from typing import NamedTuple

from broker.accel import record_batch
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import BatchInfo
from broker.protocol.records.compression import decompress

from .config import LogConfig
from .errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError,
                     RecordTooLargeError, UnsupportedForMessageFormatError)

RECORD_BATCH_OVERHEAD = 61


class ValidatedBatches(NamedTuple):
    """Result of validation: the batches (pre-stamp header values) and per-batch append tuples."""

    batches: list[BatchInfo]
    appended: list[tuple[int, int, int]]  # (last_offset, max_timestamp, size) after stamping
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int
    valid_bytes: int


def parse_batches(buf: "bytes | bytearray | memoryview", check_crc: bool = True) -> list[BatchInfo]:
    """validate_batches with the record-layer errors turned into storage errors."""
    try:
        return record_batch.validate_batches(buf, check_crc)
    except record_errors.CorruptRecordError as e:
        raise CorruptRecordError(e.message) from None
    except record_errors.InvalidRecordError as e:
        raise InvalidRecordError(e.message) from None


def _batch_records(buf: "bytearray", info: BatchInfo) -> list:
    try:
        return record_batch.iter_records(memoryview(buf)[info.position:info.position + info.size])
    except record_errors.CorruptRecordError as e:
        raise CorruptRecordError(e.message) from None
    except record_errors.InvalidRecordError as e:
        raise InvalidRecordError(e.message) from None


def validate_and_assign_offsets(buf: bytearray, batches: list[BatchInfo], next_offset: int, leader_epoch: int,
                                config: LogConfig, now_ms: int, is_from_client: bool) -> ValidatedBatches:
    """Apply Kafka's per-batch validation rules, then stamp offsets/epoch (and LogAppendTime) in place."""
    max_bytes = config.max_message_bytes
    log_append_time = config.log_append_time
    offset = next_offset
    appended: list[tuple[int, int, int]] = []
    max_ts = -1
    offset_of_max_ts = -1
    num_records = 0
    before_max = config.timestamp_before_limit_ms
    after_max = config.timestamp_after_limit_ms
    for info in batches:
        if info.magic != 2:
            raise UnsupportedForMessageFormatError("magic %d batches must be converted first" % info.magic)
        if info.size > config.segment_bytes:
            raise RecordBatchTooLargeError("batch of %d bytes exceeds segment.bytes %d" % (info.size, config.segment_bytes))
        if info.size > max_bytes:
            raise RecordTooLargeError("batch of %d bytes exceeds max.message.bytes %d" % (info.size, max_bytes))
        count = info.record_count
        if is_from_client:
            if count <= 0 or info.last_offset_delta + 1 != count:
                raise InvalidRecordError("record count %d does not match last offset delta %d"
                                         % (count, info.last_offset_delta))
            if info.is_control:
                raise InvalidRecordError("clients are not allowed to write control records")
            if info.producer_id >= 0 and info.base_sequence < 0:
                raise InvalidRecordError("invalid sequence %d for producer %d"
                                         % (info.base_sequence, info.producer_id))
        if info.compression:
            try:
                data = decompress(info.compression, memoryview(buf)[info.position + RECORD_BATCH_OVERHEAD:
                                                                    info.position + info.size])
                record_batch.validate_records(data, count)
            except record_errors.CorruptRecordError as e:
                raise CorruptRecordError(e.message) from None
            except record_errors.InvalidRecordError as e:
                raise InvalidRecordError(e.message) from None
            except Exception as e:  # a broken compressed stream
                raise CorruptRecordError("cannot decompress batch: %s" % e) from None
        if config.compact and not info.is_control:
            missing = [(i, "Compacted topic cannot accept message without key in topic partition.")
                       for i, rec in enumerate(_batch_records(buf, info)) if rec.key is None]
            if missing:
                raise InvalidRecordError("One or more records have been rejected due to missing keys", missing)
        if not log_append_time and info.timestamp_type == 0 and is_from_client:
            if (before_max < (1 << 62) and info.base_timestamp >= 0 and now_ms - info.base_timestamp > before_max) or \
                    (after_max < (1 << 62) and info.max_timestamp - now_ms > after_max):
                raise InvalidTimestampError(
                    "timestamp of the batch is out of range (message.timestamp.before/after.max.ms)",)
        pos = info.position
        record_batch.stamp_base_offset(buf, pos, offset)
        if leader_epoch >= 0 or is_from_client:
            record_batch.stamp_partition_leader_epoch(buf, pos, leader_epoch)
        last = offset + info.last_offset_delta
        if log_append_time:
            record_batch.set_log_append_time(buf, pos, now_ms)
            batch_ts = now_ms
        else:
            batch_ts = info.max_timestamp
        if batch_ts > max_ts:
            max_ts = batch_ts
            offset_of_max_ts = last
        appended.append((last, batch_ts, info.size))
        num_records += count
        offset = last + 1
    valid = sum(a[2] for a in appended)
    return ValidatedBatches(batches, appended, next_offset, offset - 1, max_ts, offset_of_max_ts, num_records, valid)


TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def target_codec(compression_type: str) -> int:
    """The codec a topic's compression.type forces, or -1 for 'producer' (keep the producer's)."""
    return TOPIC_CODECS.get(compression_type.strip().lower(), -1)


def recompress_if_needed(buf: bytearray, batches: list[BatchInfo], compression_type: str) -> bytearray | None:
    """Rebuild batches whose codec differs from the topic's compression.type; None when none do.

    This is the only per-record path on append, as in Kafka (which also recompresses then).
    Producer id/epoch/sequence, transactional flag and CreateTime timestamps are kept.
    """
    from broker.protocol.records.builder import build_batch

    codec = target_codec(compression_type)
    if codec < 0 or all(b.compression == codec or b.is_control for b in batches):
        return None
    out = bytearray()
    for info in batches:
        raw = memoryview(buf)[info.position:info.position + info.size]
        if info.compression == codec or info.is_control:
            out += raw
            continue
        recs = _batch_records(buf, info)
        out += build_batch([(r.key, r.value, r.headers, r.timestamp) for r in recs], compression=codec,
                           producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                           base_sequence=info.base_sequence, is_transactional=info.is_transactional)
    return out
