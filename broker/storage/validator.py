"""LogValidator: checks batches from a producer and assigns offsets in place (per batch, never per record).

Works on the request's own buffer: validate_batches (framing + CRC-32C), per-batch rules (magic 2,
max.message.bytes, record count, control batches, sequence numbers, timestamps), decompression +
record framing for compressed batches and record keys for compacted topics (one decompression and one record walk
per batch, no record objects), then base offset and
partition leader epoch stamped into each batch header (outside the CRC) and, for
LogAppendTime topics, the max timestamp rewritten (CRC recomputed).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, NamedTuple, NoReturn, Optional

from broker.accel import record_batch
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import (COMPRESSION_MASK, CONTROL_MASK, RECORD_BATCH_OVERHEAD,
                                                TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, BatchInfo)

from .config import LogConfig
from .errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError,
                     RecordTooLargeError, UnsupportedForMessageFormatError)

#: message.timestamp.before/after.max.ms at or above this are "no limit" (Kafka's default is Long.MAX_VALUE)
_NO_LIMIT = 1 << 62
# tuple.__new__ builds a NamedTuple without its Python-level __new__ (as the native record_batch does)
_tuple_new = tuple.__new__


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


def parse_batches(buf: "bytes | bytearray | memoryview", check_crc: bool = True,
                  null_keys: Optional[dict[int, list[int]]] = None) -> list[BatchInfo]:
    """validate_batches with the record-layer errors turned into storage errors. ``null_keys`` (a compacted topic):
    filled with the null-key records of the uncompressed data batches, by position, from the same walk."""
    try:
        return record_batch.validate_batches(buf, check_crc, null_keys)
    except record_errors.CorruptRecordError as e:
        raise CorruptRecordError(e.message) from None
    except record_errors.InvalidRecordError as e:
        raise InvalidRecordError(e.message) from None


def _batch_records(buf: "bytearray | memoryview", info: BatchInfo) -> list:
    try:
        return record_batch.iter_records(memoryview(buf)[info.position:info.position + info.size])
    except record_errors.CorruptRecordError as e:
        raise CorruptRecordError(e.message) from None
    except record_errors.InvalidRecordError as e:
        raise InvalidRecordError(e.message) from None


def validate_and_assign_offsets(buf: "bytearray | memoryview", batches: list[BatchInfo], next_offset: int,
                                leader_epoch: int, config: LogConfig, now_ms: int, is_from_client: bool,
                                null_keys: Optional[dict[int, list[int]]] = None,
                                records_checked: frozenset[int] = frozenset()) -> ValidatedBatches:
    """Apply Kafka's per-batch validation rules, then stamp offsets/epoch (and LogAppendTime) in place.

    Every batch passes the rules before any is stamped (one native pass stamps them all): a rejected append leaves
    the offsets it would have had unwritten. This runs once per partition of every Produce, so the rules read each
    header by unpacking it (a ``BatchInfo`` attribute read costs a descriptor call) and the result is built without
    the NamedTuple's Python-level ``__new__``.

    ``null_keys``: what ``parse_batches`` found of a compacted topic's uncompressed batches (None when it was not
    asked, e.g. the topic became compacted since: then they are walked here). ``records_checked``: positions of
    batches whose records were already walked (rebuilt by :func:`recompress_if_needed`): not decompressed again.
    """
    max_bytes = config.max_message_bytes
    segment_bytes = config.segment_bytes
    log_append_time = config.log_append_time
    compact = config.compact
    before_max = after_max = _NO_LIMIT
    if is_from_client and not log_append_time:
        before_max = config.timestamp_before_limit_ms
        after_max = config.timestamp_after_limit_ms
    check_timestamps = before_max < _NO_LIMIT or after_max < _NO_LIMIT
    for info in batches:
        (_, size, _, last_offset_delta, _, magic, _, attributes, base_timestamp, max_timestamp, producer_id, _,
         base_sequence, record_count) = info
        if magic != 2:
            raise UnsupportedForMessageFormatError("magic %d batches must be converted first" % magic)
        if size > segment_bytes:
            raise RecordBatchTooLargeError("batch of %d bytes exceeds segment.bytes %d" % (size, segment_bytes))
        if size > max_bytes:
            raise RecordTooLargeError("batch of %d bytes exceeds max.message.bytes %d" % (size, max_bytes))
        if is_from_client:
            if record_count <= 0 or last_offset_delta + 1 != record_count:
                raise InvalidRecordError("record count %d does not match last offset delta %d"
                                         % (record_count, last_offset_delta))
            if attributes & CONTROL_MASK:
                raise InvalidRecordError("clients are not allowed to write control records")
            if producer_id >= 0 and base_sequence < 0:
                raise InvalidRecordError("invalid sequence %d for producer %d" % (base_sequence, producer_id))
        if records_checked and info[0] in records_checked:
            pass
        elif compact and not attributes & CONTROL_MASK:
            if null_keys is not None and not attributes & COMPRESSION_MASK:
                missing = null_keys.get(info[0])
                if missing:
                    _refuse_null_keys(missing)
            else:
                _check_records(buf, info, attributes & COMPRESSION_MASK, True)
        elif attributes & COMPRESSION_MASK:
            _check_records(buf, info, attributes & COMPRESSION_MASK, False)
        if check_timestamps and not attributes & TIMESTAMP_TYPE_MASK:
            _check_timestamps(base_timestamp, max_timestamp, now_ms, before_max, after_max)
    appended, max_ts, offset_of_max_ts, num_records, valid = record_batch.assign_offsets(
        buf, next_offset, leader_epoch, leader_epoch >= 0 or is_from_client, now_ms if log_append_time else -1)
    last_offset = appended[-1][0] if appended else next_offset - 1
    return _tuple_new(ValidatedBatches, (batches, appended, next_offset, last_offset, max_ts, offset_of_max_ts,
                                         num_records, valid))


def _check_records(buf: "bytearray | memoryview", info: BatchInfo, codec: int, keys_required: bool) -> None:
    """The one pass over a compressed batch's records an append makes after ``parse_batches`` (which checked the CRC
    once and walked the uncompressed batches' records, noting a compacted topic's null keys): the batch is
    decompressed once and its framing walked; for a compacted topic that same walk finds the records without a key,
    which it refuses (each one named in the error, as Kafka's). No record object is made. LZ4, snappy and zstd are
    decoded into a reused buffer and walked in one native call (``compressed_records``)."""
    with _walk_errors():
        data = memoryview(buf)[info.position + RECORD_BATCH_OVERHEAD:info.position + info.size]
        if codec:
            missing = record_batch.compressed_records(codec, data, info.record_count, keys_required)
        elif keys_required:
            missing = record_batch.null_key_records(data, info.record_count)
        else:
            record_batch.validate_records(data, info.record_count)
            return
    if missing:
        _refuse_null_keys(missing)


@contextmanager
def _walk_errors() -> Iterator[None]:
    """The errors of a batch's record walk as storage's: the records package's, or a broken compressed stream's."""
    try:
        yield
    except record_errors.CorruptRecordError as e:
        raise CorruptRecordError(e.message) from None
    except record_errors.InvalidRecordError as e:
        raise InvalidRecordError(e.message) from None
    except Exception as e:  # a broken compressed stream
        raise CorruptRecordError("cannot decompress batch: %s" % e) from None


def _refuse_null_keys(missing: list[int]) -> NoReturn:
    raise InvalidRecordError("One or more records have been rejected due to missing keys",
                             [(i, "Compacted topic cannot accept message without key in topic partition.")
                              for i in missing])


def _check_timestamps(base_timestamp: int, max_timestamp: int, now_ms: int, before_max: int, after_max: int) -> None:
    """CreateTime batches within message.timestamp.before/after.max.ms of now."""
    if (before_max < _NO_LIMIT and base_timestamp >= 0 and now_ms - base_timestamp > before_max) or \
            (after_max < _NO_LIMIT and max_timestamp - now_ms > after_max):
        raise InvalidTimestampError("timestamp of the batch is out of range (message.timestamp.before/after.max.ms)",)


TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def target_codec(compression_type: str) -> int:
    """The codec a topic's compression.type forces, or -1 for 'producer' (keep the producer's)."""
    return TOPIC_CODECS.get(compression_type.strip().lower(), -1)


class Recompressed(NamedTuple):
    """What :func:`recompress_if_needed` built: the new buffer and the positions in it of the batches it rebuilt
    (their records were walked, and a compacted topic's keys checked, while they were rebuilt)."""

    buf: bytearray
    rebuilt: frozenset[int]


def recompress_if_needed(buf: "bytearray | memoryview", batches: list[BatchInfo], compression_type: str,
                         keys_required: bool = False) -> Optional[Recompressed]:
    """Rebuild batches whose codec differs from the topic's compression.type; None when none do.

    This is the only per-record path on append, as in Kafka (which also recompresses then). Each rebuilt batch is
    decompressed once: the walk that builds it is its record check (``keys_required``: a compacted topic's records
    without a key are refused here), so :func:`validate_and_assign_offsets` skips those positions. Producer
    id/epoch/sequence, transactional flag and CreateTime timestamps are kept.
    """
    if compression_type == "producer":  # the default: nothing to look at
        return None
    codec = target_codec(compression_type)
    if codec < 0 or all(b.compression == codec or b.is_control for b in batches):
        return None
    from broker.protocol.records.builder import build_batch

    out = bytearray()
    rebuilt: list[int] = []
    for info in batches:
        raw = memoryview(buf)[info.position:info.position + info.size]
        if info.compression == codec or info.is_control:
            out += raw
            continue
        rebuilt.append(len(out))
        same_records = _recompressed_payload(buf, info, codec, keys_required)
        if same_records is not None:
            out += same_records
            continue
        recs = _batch_records(buf, info)
        if keys_required:
            missing = [i for i, r in enumerate(recs) if r.key is None]
            if missing:
                _refuse_null_keys(missing)
        out += build_batch([(r.key, r.value, r.headers, r.timestamp) for r in recs], compression=codec,
                           producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                           base_sequence=info.base_sequence, is_transactional=info.is_transactional)
    return Recompressed(out, frozenset(rebuilt))


def _recompressed_payload(buf: "bytearray | memoryview", info: BatchInfo, codec: int,
                          keys_required: bool) -> Optional[bytes]:
    """The batch rebuilt with ``codec`` from its records' bytes, without a record object: what rebuilding it record by
    record gives (``build_batch``: offset deltas 0..n-1, the first record's timestamp as the base, CreateTime, the
    producer fields kept) whenever its first record's timestamp delta is 0, as producers write it; otherwise None and
    the caller rebuilds it record by record. The records section is decompressed once, and that one walk checks the
    records (a compacted topic's null keys refused) as ``_check_records`` would."""
    from broker.protocol.records.builder import encode_batch
    from broker.protocol.records.compression import compress

    if info.magic != 2:
        return None
    data = memoryview(buf)[info.position + RECORD_BATCH_OVERHEAD:info.position + info.size]
    missing: list[int] = []
    with _walk_errors():
        payload = record_batch.decompress_records(info.compression, data) if info.compression else bytes(data)
        if keys_required:
            missing = record_batch.null_key_records(payload, info.record_count)
        else:
            record_batch.validate_records(payload, info.record_count)
        first_delta, max_delta = record_batch.timestamp_deltas(payload, info.record_count)
    if missing:
        _refuse_null_keys(missing)
    if first_delta != 0:
        return None
    attributes = codec | (TRANSACTIONAL_MASK if info.is_transactional else 0)
    return encode_batch(compress(codec, payload), record_count=info.record_count,
                        last_offset_delta=info.record_count - 1, attributes=attributes,
                        base_timestamp=info.base_timestamp, max_timestamp=info.base_timestamp + max_delta,
                        producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                        base_sequence=info.base_sequence)
