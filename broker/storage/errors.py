"""Storage-level exceptions; the api layer maps each to the Kafka error named by ``error_name``.

Storage does not import the broker-wide error table: each class carries Kafka's error name
(e.g. ``OFFSET_OUT_OF_RANGE``) so the mapping to wire codes happens once, in the api layer.
"""
from __future__ import annotations


class StorageError(Exception):
    """Base class; ``error_name`` is the Kafka error (Errors.java name) the api layer reports."""

    error_name = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(StorageError):
    error_name = "OFFSET_OUT_OF_RANGE"


class OffsetMovedToTieredStorageError(OffsetOutOfRangeError):
    """Kafka's OffsetMovedToTieredStorageException: the offset is at or above the log start offset but below the
    local log start offset, so only remote storage holds it. A subclass so that, until a RemoteLogReader serves it,
    every caller answers OFFSET_OUT_OF_RANGE as before."""


class LogBusyError(StorageError):
    """A lock-free read found a change of the segment list under way and was told not to wait (the event loop:
    it reads on a worker instead)."""


class CorruptRecordError(StorageError):
    error_name = "CORRUPT_MESSAGE"


class InvalidRecordError(StorageError):
    """A record or batch broke a validation rule; ``record_errors`` holds (batch_index, message)."""

    error_name = "INVALID_RECORD"

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors: list[tuple[int, str]] = record_errors or []


class RecordTooLargeError(StorageError):
    """A batch is bigger than max.message.bytes."""

    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StorageError):
    """A batch is bigger than segment.bytes, so it could never fit in a segment."""

    error_name = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(StorageError):
    error_name = "INVALID_TIMESTAMP"


class UnsupportedForMessageFormatError(StorageError):
    error_name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class InvalidProducerEpochError(StorageError):
    error_name = "INVALID_PRODUCER_EPOCH"


class OutOfOrderSequenceError(StorageError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(StorageError):
    """Kept for the mapping; Kafka 3.9 answers duplicates with the cached offsets instead."""

    error_name = "DUPLICATE_SEQUENCE_NUMBER"


class UnknownProducerIdError(StorageError):
    error_name = "UNKNOWN_PRODUCER_ID"


class InvalidTxnStateError(StorageError):
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than the one the producer's last marker carried."""

    error_name = "TRANSACTION_COORDINATOR_FENCED"


class KafkaStorageError(StorageError):
    """The log directory is unusable (I/O error, mismatched meta.properties)."""

    error_name = "KAFKA_STORAGE_ERROR"


class InconsistentClusterIdError(KafkaStorageError):
    error_name = "INCONSISTENT_CLUSTER_ID"


class LogSegmentOffsetOverflowError(StorageError):
    """An offset does not fit in a segment's 32-bit relative offsets; the caller must roll."""


class IndexFullError(StorageError):
    """An index has no room for another entry; the log rolls before this happens."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append starts below the LEO (the replica fetcher must truncate first)."""

    error_name = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
