"""Plain value types describing record batches; defined once and returned by both twins of ``record_batch``.

Magic v2 batch layout (all big-endian; offsets from the batch start)::

     0 baseOffset            int64   \\ the 12-byte "log overhead", outside the CRC
     8 batchLength           int32   /  (bytes after this field)
    12 partitionLeaderEpoch  int32   outside the CRC
    16 magic                 int8    (2)
    17 crc                   uint32  CRC-32C of bytes 21..end
    21 attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                     6 delete horizon
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records...

Legacy (magic 0/1) entries share the first 17 bytes' positions: offset int64, messageSize int32, crc uint32
(zlib CRC-32 of magic..end), magic int8, attributes int8, [timestamp int64 if magic 1], key, value (int32 length
prefixed, -1 = null). ``BatchInfo`` describes one such entry as a one-record batch.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

#: baseOffset and batchLength: the bytes before what batchLength counts (Kafka's Records.LOG_OVERHEAD)
LOG_OVERHEAD = 12
#: the whole magic-2 header above; a batch's records start here (Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD)
RECORD_BATCH_OVERHEAD = 61

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class BatchInfo(NamedTuple):
    """Header fields of one batch found at ``position``; ``size`` includes the 12-byte offset+length prefix."""

    position: int
    size: int
    base_offset: int
    last_offset_delta: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK) and self.magic >= 2

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK) and self.magic >= 2

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK) and self.magic >= 2

    @property
    def end(self) -> int:
        """Byte position just past this batch."""
        return self.position + self.size


Header = tuple[str, Optional[bytes]]


class Record(NamedTuple):
    """One record with its absolute offset and timestamp (LogAppendTime batches report maxTimestamp)."""

    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list[Header]
    attributes: int = 0
    sequence: int = -1
