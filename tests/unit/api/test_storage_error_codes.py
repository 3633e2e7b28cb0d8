"""The storage-exception -> error-code mapping (the purgatory's tests: tests/unit/replica/test_purgatory.py)."""

from broker.errors import ErrorCode
from broker.replica.errors import error_code_for
from broker.storage import errors as storage_errors


def test_storage_errors_map_to_kafka_codes() -> None:
    cases = {
        "OffsetOutOfRangeError": ErrorCode.OFFSET_OUT_OF_RANGE,
        "CorruptRecordError": ErrorCode.CORRUPT_MESSAGE,
        "InvalidRecordError": ErrorCode.INVALID_RECORD,
        "RecordTooLargeError": ErrorCode.MESSAGE_TOO_LARGE,
        "InvalidProducerEpochError": ErrorCode.INVALID_PRODUCER_EPOCH,
        "OutOfOrderSequenceError": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "UnknownProducerIdError": ErrorCode.UNKNOWN_PRODUCER_ID,
        "InvalidTimestampError": ErrorCode.INVALID_TIMESTAMP,
        "KafkaStorageError": ErrorCode.KAFKA_STORAGE_ERROR,
    }
    for name, code in cases.items():
        cls = getattr(storage_errors, name)
        try:
            exc = cls("x")
        except TypeError:
            exc = cls.__new__(cls)
        assert error_code_for(exc) == code, name
    assert error_code_for(RuntimeError("boom")) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_code_for(OSError(5, "EIO")) == ErrorCode.KAFKA_STORAGE_ERROR
