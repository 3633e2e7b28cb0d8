"""A topic whose compression.type differs from the producer's: each rebuilt batch is decompressed once (the walk
that rebuilds it is its record check), batches kept as sent are checked as any other, and a compacted topic's
records without a key are refused on that same walk."""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest

from broker.accel import record_batch
from broker.storage import validator
from broker.storage.config import LogConfig
from broker.storage.errors import InvalidRecordError

from .conftest import batch

LZ4, ZSTD = 3, 4


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Dict[str, int]:
    """How often the append decompresses: the record walks of compressed batches, counted."""
    counted: Dict[str, int] = {"compressed_records": 0, "iter_records": 0}

    def counting(name: str) -> Callable[..., Any]:
        real = getattr(record_batch, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return real(*args, **kwargs)
        return wrapper
    for name in counted:
        monkeypatch.setattr(validator.record_batch, name, counting(name))
    return counted


def test_a_rebuilt_batch_is_decompressed_once(open_log, calls: Dict[str, int]) -> None:
    log = open_log(LogConfig(compression_type="zstd"))
    info = log.append_as_leader(batch(50, compression=LZ4, producer_id=3, producer_epoch=0, base_sequence=0), 1)
    assert (info.first_offset, info.last_offset) == (0, 49)
    assert calls == {"compressed_records": 0, "iter_records": 1}
    (b,) = record_batch.validate_batches(bytearray(log.read(0, 1 << 20).records.read()))
    assert (b.compression, b.record_count, b.producer_id) == (ZSTD, 50, 3)


def test_a_batch_kept_as_sent_is_still_checked(open_log, calls: Dict[str, int]) -> None:
    """Two batches in one append: the lz4 one rebuilt (walked once), the zstd one kept and walked by the check."""
    log = open_log(LogConfig(compression_type="zstd"))
    buf = batch(4, compression=LZ4) + batch(5, compression=ZSTD)
    info = log.append_as_leader(buf, 0)
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert calls == {"compressed_records": 1, "iter_records": 1}
    codecs = [b.compression for b in record_batch.validate_batches(bytearray(log.read(0, 1 << 20).records.read()))]
    assert codecs == [ZSTD, ZSTD]


def test_a_compacted_topic_refuses_null_keys_found_while_rebuilding(open_log) -> None:
    log = open_log(LogConfig(compression_type="zstd", cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError) as refused:
        log.append_as_leader(batch(3, compression=LZ4, key=None), 0)
    assert refused.value.record_errors == [(i, "Compacted topic cannot accept message without key in topic "
                                               "partition.") for i in range(3)]
    assert log.log_end_offset == 0
    assert log.append_as_leader(batch(3, compression=LZ4), 0).last_offset == 2
