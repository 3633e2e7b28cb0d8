"""Batches and records of a segment file, as Kafka 3.9's DumpLogSegments iterates and prints them.

Magic 2 batches are read with the broker's own code (``broker.accel.record_batch`` for headers, the cleaner's
stored-batch reader for records, which also reads compacted batches and those whose CRC no longer matches, as
Kafka's tool does); pre-0.11 (magic 0/1) entries are read as Kafka's AbstractLegacyRecordBatch reads them.
Batches are found one at a time as Kafka's FileLogInputStream finds them: a tail shorter than a batch header
ends them, a size below the smallest message is the CorruptRecordException Kafka's tool dies of.
"""
from __future__ import annotations

import mmap
import os
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, List, Optional

from broker.accel import crc32c, record_batch
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import BatchInfo
from broker.protocol.records.compression import CODEC_NAMES
from broker.protocol.records.control import control_type

from . import dump_log_decoders as decoders

INT_MAX = 2 ** 31 - 1
_LOG_OVERHEAD = 12
_HEADER_UP_TO_MAGIC = 17
_LEGACY_MIN_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0
_BATCH_OVERHEAD = 61
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

class Batch:
    """One batch of a file (any magic), as Kafka's FileChannelRecordBatch shows it."""

    def __init__(self, data: memoryview, position: int, size: int) -> None:
        self.data = data
        self.position = position
        self.size = size
        self.magic = data[position + 16]
        self.info: Optional[BatchInfo] = None
        if self.magic >= 2:
            infos, _ = record_batch.scan_batches(data, position, position + size, False)
            self.info = infos[0] if infos else None

    def bytes(self) -> bytes:
        return bytes(self.data[self.position:self.position + self.size])

    @property
    def base_offset(self) -> int:
        return int(struct.unpack_from(">q", self.data, self.position)[0])

    @property
    def last_offset(self) -> int:
        if self.info is not None:
            return self.info.last_offset
        return self.base_offset  # a legacy entry (a compressed wrapper carries its last inner offset)

    def _legacy_attributes(self) -> int:
        return self.data[self.position + 17]

    @property
    def timestamp_type(self) -> str:
        if self.info is not None:
            return _TIMESTAMP_TYPES[self.info.timestamp_type]
        if self.magic == 0:
            return _TIMESTAMP_TYPES[-1]
        return _TIMESTAMP_TYPES[1 if self._legacy_attributes() & 0x08 else 0]

    @property
    def max_timestamp(self) -> int:
        if self.info is not None:
            return self.info.max_timestamp
        if self.magic == 0:
            return -1
        return int(struct.unpack_from(">q", self.data, self.position + 18)[0])

    @property
    def checksum(self) -> int:
        return int(struct.unpack_from(">I", self.data, self.position + (17 if self.magic >= 2 else 12))[0])

    @property
    def is_valid(self) -> bool:
        end = self.position + self.size
        if self.magic >= 2:
            return self.size >= _BATCH_OVERHEAD and crc32c.crc32c(self.data[self.position + 21:end]) == self.checksum
        return zlib.crc32(self.data[self.position + 16:end]) == self.checksum

    @property
    def compression(self) -> str:
        codec = self.info.compression if self.info is not None else self._legacy_attributes() & 0x07
        return CODEC_NAMES.get(codec, str(codec))

    def records(self) -> List[Any]:
        if self.info is None:
            return _legacy_records(self)
        from broker.storage.cleaner_batch import _decode_records, iter_stored_records
        try:
            return iter_stored_records(self.bytes())
        except record_errors.CorruptRecordError:  # an invalid CRC: Kafka still reads the records
            body: Any = self.data[self.position + _BATCH_OVERHEAD:self.position + self.size]
            if self.info.compression:
                from broker.protocol.records.compression import decompress
                body = decompress(self.info.compression, body)
            return _decode_records(body, self.info)


def _legacy_entry(buf: Any, pos: int, end: int) -> Any:
    """One magic 0/1 message at ``pos`` (``end`` past it): its fields, CRC and validity."""
    offset, _size, crc, magic, attributes = struct.unpack_from(">qiIbb", buf, pos)
    p = pos + 18
    timestamp = -1
    if magic == 1:
        timestamp = int(struct.unpack_from(">q", buf, p)[0])
        p += 8
    fields: List[Optional[bytes]] = []
    for _ in range(2):
        n = struct.unpack_from(">i", buf, p)[0]
        p += 4
        fields.append(None if n < 0 else bytes(buf[p:p + n]))
        p += max(n, 0)
    return SimpleNamespace(offset=int(offset), timestamp=timestamp, key=fields[0], value=fields[1], headers=[],
                           sequence=-1, magic=magic, attributes=attributes, crc=int(crc),
                           valid=zlib.crc32(buf[pos + 16:end]) == crc)


def _legacy_records(b: Batch) -> List[Any]:
    """The records of a magic 0/1 entry, as Kafka's AbstractLegacyRecordBatch iterates them: an uncompressed
    entry is its own record; a compressed wrapper's inner messages get absolute offsets (magic 1 stores them
    relative to the wrapper's, which is the last one's) and, under LogAppendTime, the wrapper's timestamp."""
    wrapper = _legacy_entry(b.data, b.position, b.position + b.size)
    codec = wrapper.attributes & 0x07
    if not codec:
        return [wrapper]
    if wrapper.value is None:
        raise decoders.java_crash("org.apache.kafka.common.InvalidRecordException: Found invalid compressed record "
                                  f"set with null value (magic = {wrapper.magic})")
    from broker.protocol.records.compression import LZ4, decompress
    from broker.protocol.records.legacy import _lz4_decode_ignoring_header_checksum
    inner_bytes = _lz4_decode_ignoring_header_checksum(wrapper.value) if codec == LZ4 and wrapper.magic == 0 \
        else decompress(codec, wrapper.value)
    inner = []
    pos = 0
    while pos + _LOG_OVERHEAD < len(inner_bytes):
        size = struct.unpack_from(">i", inner_bytes, pos + 8)[0]
        if pos + _LOG_OVERHEAD + size > len(inner_bytes):
            break
        inner.append(_legacy_entry(inner_bytes, pos, pos + _LOG_OVERHEAD + size))
        pos += _LOG_OVERHEAD + size
    if not inner:
        raise decoders.java_crash("org.apache.kafka.common.InvalidRecordException: Found invalid compressed record "
                                  "set with no inner records")
    log_append = wrapper.magic == 1 and bool(wrapper.attributes & 0x08)
    base = 0 if wrapper.offset == 0 else wrapper.offset - inner[-1].offset
    for r in inner:
        if r.magic == 1 and log_append:
            r.timestamp = wrapper.timestamp
        if wrapper.magic == 1:
            r.offset = base + r.offset
    return inner


def batches(data: memoryview, start: int = 0, end: Optional[int] = None, name: str = "") -> Iterator[Batch]:
    """The batches in data[start:end] as Kafka's FileLogInputStream finds them, one at a time (a batch is printed
    before a corrupt one after it fails the dump); a torn tail ends them."""
    end = len(data) if end is None else end
    pos = start
    while pos + _HEADER_UP_TO_MAGIC < end:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if size < _LEGACY_MIN_SIZE:
            raise decoders.java_crash("org.apache.kafka.common.errors.CorruptRecordException: Found record size "
                                      f"{size} smaller than minimum record overhead ({_LEGACY_MIN_SIZE}) in file "
                                      f"{name}.")
        if pos + _LOG_OVERHEAD + size > end:
            return
        yield Batch(data, pos, _LOG_OVERHEAD + size)
        pos += _LOG_OVERHEAD + size


def _last_sequence(info: BatchInfo) -> int:
    if info.base_sequence == -1:
        return -1
    return (info.base_sequence + info.last_offset_delta) & 0x7FFFFFFF


def batch_line(b: Batch, position: int) -> str:
    if b.info is not None:
        i = b.info
        horizon = f"OptionalLong[{i.base_timestamp}]" if i.has_delete_horizon else "OptionalLong.empty"
        head = (f"baseOffset: {i.base_offset} lastOffset: {i.last_offset} count: {i.record_count} "
                f"baseSequence: {i.base_sequence} lastSequence: {_last_sequence(i)} producerId: {i.producer_id} "
                f"producerEpoch: {i.producer_epoch} partitionLeaderEpoch: {i.partition_leader_epoch} "
                f"isTransactional: {java_bool(i.is_transactional)} isControl: {java_bool(i.is_control)} "
                f"deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {b.last_offset}"
    return (f"{head} position: {position} {b.timestamp_type}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
            f"compresscodec: {b.compression} crc: {b.checksum} isvalid: {java_bool(b.is_valid)}")


def java_bool(v: bool) -> str:
    return "true" if v else "false"


def control_text(record: Any) -> str:
    key = None if record.key is None else bytes(record.key)
    if key is None or len(key) < 4:
        raise decoders.java_crash("org.apache.kafka.common.InvalidRecordException: Invalid value size found for "
                                  "end control record key. Expected 4 bytes")
    type_id = control_type(key)
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if name in ("ABORT", "COMMIT"):
        value = bytes(record.value or b"")
        epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else -1
        return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"
    return f" controlType: {name}({type_id})"


def read_file(path: Path) -> memoryview:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def base_offset(path: Path) -> int:
    return int(path.name.split(".")[0])
