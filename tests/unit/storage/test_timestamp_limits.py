"""message.timestamp.before/after.max.ms, and Kafka 3.9's fallback to the deprecated
message.timestamp.difference.max.ms when those are left at their default (LogConfig.getMessageTimestamp*MaxMs)."""
from __future__ import annotations

import pytest

from broker.protocol.records.builder import build_batch
from broker.storage.config import LONG_MAX, LogConfig
from broker.storage.errors import InvalidTimestampError
from broker.storage.validator import parse_batches, validate_and_assign_offsets

NOW = 1_700_000_000_000


def _append(config: LogConfig, timestamp: int) -> None:
    buf = bytearray(build_batch([(b"k", b"v", [], timestamp)]))
    validate_and_assign_offsets(buf, parse_batches(buf), 0, 0, config, NOW, True)


def test_limits_default_to_unbounded() -> None:
    c = LogConfig.from_props({})
    assert c.timestamp_before_limit_ms == LONG_MAX and c.timestamp_after_limit_ms == LONG_MAX
    _append(c, 0)


def test_difference_key_is_the_fallback_of_both_limits() -> None:
    c = LogConfig.from_props({"message.timestamp.difference.max.ms": "60000"})
    assert (c.timestamp_before_limit_ms, c.timestamp_after_limit_ms) == (60000, 60000)
    _append(c, NOW - 30_000)
    with pytest.raises(InvalidTimestampError):
        _append(c, NOW - 120_000)
    with pytest.raises(InvalidTimestampError):
        _append(c, NOW + 120_000)


def test_explicit_before_and_after_win_over_the_difference_key() -> None:
    c = LogConfig.from_props({"message.timestamp.difference.max.ms": "60000",
                              "message.timestamp.before.max.ms": "3600000"})
    assert (c.timestamp_before_limit_ms, c.timestamp_after_limit_ms) == (3_600_000, 60000)
    _append(c, NOW - 120_000)
    with pytest.raises(InvalidTimestampError):
        _append(c, NOW + 120_000)
