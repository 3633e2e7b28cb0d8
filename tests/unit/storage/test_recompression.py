"""A topic whose compression.type differs from the producer's: each rebuilt batch is decompressed once (the walk
that rebuilds it is its record check), batches kept as sent are checked as any other, and a compacted topic's
records without a key are refused on that same walk.

A rebuilt batch keeps its records' bytes: the records section is decompressed, walked natively and compressed again
with the topic's codec, without a record object (``timestamp_deltas`` tells when that gives what rebuilding it record
by record gives: a first timestamp delta of 0, as producers write it; otherwise it is rebuilt record by record).
Both twins run these tests (the unit lane's pure-Python pass)."""
from __future__ import annotations

import random
from typing import Any, Callable, Dict

import pytest

from broker.accel import load, record_batch
from broker.protocol.records.builder import build_batch, encode_batch, encode_record
from broker.protocol.records.compression import compress
from broker.storage import validator
from broker.storage.config import LogConfig
from broker.storage.errors import CorruptRecordError, InvalidRecordError

from .conftest import batch

LZ4, ZSTD = 3, 4


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Dict[str, int]:
    """How often the append decompresses: the record walks of compressed batches, counted."""
    counted: Dict[str, int] = {"compressed_records": 0, "decompress_records": 0, "iter_records": 0}

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
    assert calls == {"compressed_records": 0, "decompress_records": 1, "iter_records": 0}
    (b,) = record_batch.validate_batches(bytearray(log.read(0, 1 << 20).records.read()))
    assert (b.compression, b.record_count, b.producer_id) == (ZSTD, 50, 3)


def test_a_batch_kept_as_sent_is_still_checked(open_log, calls: Dict[str, int]) -> None:
    """Two batches in one append: the lz4 one rebuilt (walked once), the zstd one kept and walked by the check."""
    log = open_log(LogConfig(compression_type="zstd"))
    buf = batch(4, compression=LZ4) + batch(5, compression=ZSTD)
    info = log.append_as_leader(buf, 0)
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert calls == {"compressed_records": 1, "decompress_records": 1, "iter_records": 0}
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


def _record_by_record(buf: bytearray, codec: int) -> bytes:
    """What rebuilding the one batch of ``buf`` record by record gives (the path a first delta other than 0 takes)."""
    (info,) = record_batch.validate_batches(buf)
    recs = record_batch.iter_records(buf)
    return build_batch([(r.key, r.value, r.headers, r.timestamp) for r in recs], compression=codec,
                       producer_id=info.producer_id, producer_epoch=info.producer_epoch,
                       base_sequence=info.base_sequence, is_transactional=info.is_transactional)


@pytest.mark.parametrize("seed", range(40))
def test_a_rebuilt_batch_is_what_rebuilding_it_record_by_record_gives(seed: int) -> None:
    rng = random.Random(seed)
    source, target = rng.sample([0, 1, 2, 3, 4], 2)
    base_ts = rng.choice([1_700_000_000_000, 0, 5])
    records = [(rng.choice([None, bytes(rng.randbytes(rng.randrange(0, 20)))]),
                rng.choice([None, bytes(rng.randbytes(rng.randrange(0, 300)))]),
                [("h%d" % j, rng.choice([None, b"x" * j])) for j in range(rng.randrange(0, 3))],
                base_ts + rng.randrange(-1000, 1000) * (i > 0)) for i in range(rng.randrange(1, 60))]
    transactional = rng.random() < 0.3
    buf = bytearray(build_batch(records, compression=source, producer_id=rng.choice([-1, 7]), producer_epoch=2,
                                base_sequence=rng.choice([-1, 0, 100]), is_transactional=transactional))
    (info,) = record_batch.validate_batches(buf)
    rebuilt = validator.recompress_if_needed(buf, [info], ["uncompressed", "gzip", "snappy", "lz4", "zstd"][target])
    assert rebuilt is not None and rebuilt.rebuilt == frozenset([0])
    assert bytes(rebuilt.buf) == _record_by_record(buf, target)


def test_a_first_timestamp_delta_other_than_0_is_rebuilt_record_by_record(calls: Dict[str, int]) -> None:
    """A batch whose base timestamp is not its first record's (no producer writes that, the format allows it): the
    rebuilt batch takes the first record's timestamp as its base, so every delta changes."""
    body = b"".join(encode_record(i, 10 + i, b"k", b"v%d" % i) for i in range(3))
    buf = bytearray(encode_batch(compress(3, body), record_count=3, last_offset_delta=2, attributes=3,
                                 base_timestamp=1_000, max_timestamp=1_012))
    (info,) = record_batch.validate_batches(buf)
    rebuilt = validator.recompress_if_needed(buf, [info], "zstd")
    assert rebuilt is not None and bytes(rebuilt.buf) == _record_by_record(buf, 4)
    assert calls["iter_records"] >= 1
    (b,) = record_batch.validate_batches(bytearray(rebuilt.buf))
    assert (b.base_timestamp, b.max_timestamp) == (1_010, 1_012)
    assert [r.timestamp for r in record_batch.iter_records(bytearray(rebuilt.buf))] == [1_010, 1_011, 1_012]


def test_broken_records_are_refused_while_rebuilding() -> None:
    body = encode_record(0, 0, b"k", b"v") + encode_record(5, 0, b"k", b"v")  # the second offset delta is not 1
    buf = bytearray(encode_batch(compress(3, body), record_count=2, last_offset_delta=1, attributes=3,
                                 base_timestamp=1, max_timestamp=1))
    (info,) = record_batch.validate_batches(buf)
    with pytest.raises(InvalidRecordError):
        validator.recompress_if_needed(buf, [info], "zstd")
    garbage = bytearray(encode_batch(b"\x04\x22\x4d\x18 not an lz4 frame", record_count=1, last_offset_delta=0,
                                     attributes=3, base_timestamp=1, max_timestamp=1))
    (info,) = record_batch.validate_batches(garbage)
    with pytest.raises(CorruptRecordError):
        validator.recompress_if_needed(garbage, [info], "zstd")


@pytest.mark.parametrize("impl", ["native", "pure"])
def test_timestamp_deltas_of_both_twins(impl: str) -> None:
    twin = load("record_batch", impl)
    body = b"".join(encode_record(i, d, b"k", b"v") for i, d in enumerate([0, 7, -3, 12, 4]))
    assert twin.timestamp_deltas(body, 5) == (0, 12)
    assert twin.timestamp_deltas(encode_record(0, -9, None, None), 1) == (-9, -9)
    assert twin.timestamp_deltas(b"", 0) == (0, 0)
    with pytest.raises(Exception, match="malformed record"):
        twin.timestamp_deltas(body[:-3] + b"\x7f", 6)
