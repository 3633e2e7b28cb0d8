"""The error table and what derives from it; compared with kafka-python's kafka.errors."""
from __future__ import annotations

import inspect

import kafka.errors as kp
import pytest

from broker import errors
from broker.errors import ERROR_TABLE, ErrorCode, KafkaError, error_for_code

# Where Kafka 3.9 renamed a code that kafka-python still spells the old way.
KP_NAMES = {"UNKNOWN_SERVER_ERROR": "UNKNOWN", "NONE": "NO_ERROR", "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
            "MESSAGE_TOO_LARGE": "MESSAGE_SIZE_TOO_LARGE", "INVALID_TOPIC_EXCEPTION": "INVALID_TOPIC",
            "INVALID_REPLICA_ASSIGNMENT": "INVALID_REPLICATION_ASSIGNMENT"}
# Java's CorruptRecordException is a RetriableException; kafka-python marks it non-retriable.
KP_RETRIABLE_DIFFERS = {2}


def _kafka_python_table():
    out = {}
    for _, cls in inspect.getmembers(kp, inspect.isclass):
        if issubclass(cls, kp.BrokerResponseError) and getattr(cls, "errno", None) is not None:
            out[cls.errno] = cls
    return out


def test_table_matches_kafka_python():
    kpt = _kafka_python_table()
    ours = {code: (name, retriable) for code, name, retriable, _ in ERROR_TABLE}
    common = set(kpt) & set(ours)
    assert len(common) >= 125
    for code in sorted(common):
        name, retriable = ours[code]
        assert KP_NAMES.get(name, name) == kpt[code].message, code
        if code not in KP_RETRIABLE_DIFFERS:
            assert retriable == kpt[code].retriable, (code, name)


def test_table_is_complete_and_ordered():
    codes = [row[0] for row in ERROR_TABLE]
    assert codes == list(range(-1, 128))
    assert len({row[1] for row in ERROR_TABLE}) == len(ERROR_TABLE)


def test_derived_classes():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.NONE == 0
    assert error_for_code(6) is errors.NotLeaderOrFollowerError
    assert errors.CorruptRecordError is errors.CorruptMessageError and errors.CorruptRecordError.code == 2
    assert errors.RecordTooLargeError is errors.MessageTooLargeError
    assert errors.OffsetOutOfRangeError.code == 1 and not errors.OffsetOutOfRangeError.retriable
    assert errors.UnknownTopicOrPartitionError.retriable
    exc = errors.UnknownTopicOrPartitionError("t-0")
    assert isinstance(exc, KafkaError) and str(exc) == "t-0" and exc.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert str(errors.InvalidRequestError()) == errors.InvalidRequestError.message
    assert error_for_code(9999) is errors.UnknownServerError
    with pytest.raises(ValueError):
        error_for_code(0)
    for code, name, _, _ in ERROR_TABLE:
        if code:
            assert error_for_code(code).name == name
