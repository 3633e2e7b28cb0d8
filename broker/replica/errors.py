"""One tested mapping from storage/record exceptions to Kafka error codes.

Storage raises its own exception types (it knows nothing of the wire); the replica layer
turns them into per-partition error codes here, once.
"""
from __future__ import annotations

from broker.errors import ErrorCode

#: exception class name -> Kafka error, for exceptions that carry no code themselves
_BY_NAME = {
    "CorruptRecordError": ErrorCode.CORRUPT_MESSAGE,
    "CorruptRecordException": ErrorCode.CORRUPT_MESSAGE,
    "InvalidRecordError": ErrorCode.INVALID_RECORD,
    "RecordTooLargeError": ErrorCode.MESSAGE_TOO_LARGE,
    "MessageTooLargeError": ErrorCode.MESSAGE_TOO_LARGE,
    "RecordBatchTooLargeError": ErrorCode.RECORD_LIST_TOO_LARGE,
    "OffsetOutOfRangeError": ErrorCode.OFFSET_OUT_OF_RANGE,
    "InvalidProducerEpochError": ErrorCode.INVALID_PRODUCER_EPOCH,
    "ProducerFencedError": ErrorCode.PRODUCER_FENCED,
    "OutOfOrderSequenceError": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    "OutOfOrderSequenceNumberError": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    "DuplicateSequenceError": ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    "DuplicateSequenceNumberError": ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    "UnknownProducerIdError": ErrorCode.UNKNOWN_PRODUCER_ID,
    "InvalidTxnStateError": ErrorCode.INVALID_TXN_STATE,
    "TransactionCoordinatorFencedError": ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    "InvalidTimestampError": ErrorCode.INVALID_TIMESTAMP,
    "UnsupportedCompressionTypeError": ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    "KafkaStorageError": ErrorCode.KAFKA_STORAGE_ERROR,
    "PolicyViolationError": ErrorCode.POLICY_VIOLATION,
}


def error_code_for(exc: BaseException) -> int:
    """The Kafka error code for ``exc``; UNKNOWN_SERVER_ERROR for anything unexpected."""
    code = getattr(exc, "error_code", None)
    if isinstance(code, int):
        return code
    code = getattr(exc, "code", None)
    if isinstance(code, int) and not isinstance(exc, OSError):
        return code
    for cls in type(exc).__mro__:
        mapped = _BY_NAME.get(cls.__name__)
        if mapped is not None:
            return int(mapped)
    if isinstance(exc, OSError):
        return int(ErrorCode.KAFKA_STORAGE_ERROR)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)
