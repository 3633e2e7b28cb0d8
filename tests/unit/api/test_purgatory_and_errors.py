"""Fetch purgatory wake-ups and the storage-exception -> error-code mapping."""
import asyncio

from broker.errors import ErrorCode
from broker.replica.errors import error_code_for
from broker.replica.purgatory import FetchPurgatory
from broker.storage import errors as storage_errors


def test_append_wakes_waiters_and_cleans_up() -> None:
    async def run() -> None:
        p = FetchPurgatory()
        fut = p.watch([("t", 0), ("t", 1)])
        assert len(p) == 2
        assert p.check_and_complete(("t", 1)) == 1
        await fut
        await asyncio.sleep(0)
        assert len(p) == 0
        assert p.check_and_complete(("t", 0)) == 0
    asyncio.run(run())


def test_cancelled_waiter_is_removed() -> None:
    async def run() -> None:
        p = FetchPurgatory()
        fut = p.watch([("t", 0)])
        fut.cancel()
        await asyncio.sleep(0)
        assert len(p) == 0
    asyncio.run(run())


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
