"""A compacted topic's append checks each batch's CRC once and decompresses it once (issue 20), and refuses
keyless records naming each one, compressed or not, as Kafka's LogValidator does."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest

from broker.protocol.records.builder import build_batch
from broker.storage import validator
from broker.storage.config import LogConfig
from broker.storage.errors import CorruptRecordError, InvalidRecordError
from broker.storage.log import Log

TS = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy=("compact",))


class _Counting:
    """The validator's view of record_batch and decompress, counting what a compacted append asks of them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = validator.record_batch
        self.crc_checks = 0
        self.decompressions = 0
        self.record_objects = 0
        #: walks of a batch's records after validate_batches (which walks an uncompressed batch's itself)
        self.later_walks = 0

        def validate_batches(buf: Any, check_crc: bool = True, null_keys: Any = None) -> Any:
            infos = real.validate_batches(buf, check_crc, null_keys)
            self.crc_checks += len(infos) if check_crc else 0
            return infos

        def iter_records(batch: Any) -> Any:
            self.record_objects += 1
            return real.iter_records(batch)

        def compressed_records(codec: int, data: Any, record_count: int, keys_required: bool) -> Any:
            self.decompressions += 1  # a compressed batch is decompressed and walked in this one call
            self.later_walks += 1
            return real.compressed_records(codec, data, record_count, keys_required)

        def null_key_records(data: Any, record_count: int) -> Any:
            self.later_walks += 1
            return real.null_key_records(data, record_count)

        def validate_records(data: Any, record_count: int) -> Any:
            self.later_walks += 1
            return real.validate_records(data, record_count)

        names = {n: getattr(real, n) for n in dir(real) if not n.startswith("__")}
        names.update(validate_batches=validate_batches, iter_records=iter_records,
                     compressed_records=compressed_records, null_key_records=null_key_records,
                     validate_records=validate_records)
        monkeypatch.setattr(validator, "record_batch", SimpleNamespace(**names))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_each_batch_is_crc_checked_and_decompressed_once(open_log: Callable[..., Log], monkeypatch: pytest.MonkeyPatch,
                                                         codec: int) -> None:
    log = open_log(COMPACT)
    counting = _Counting(monkeypatch)
    buf = bytearray(b"".join(build_batch([(b"k%d" % i, b"v", [], TS + i) for i in range(5)], compression=codec)
                             for _ in range(3)))
    info = log.append_as_leader(buf, 0)
    assert (info.first_offset, info.last_offset) == (0, 14)
    assert counting.crc_checks == 3
    assert counting.decompressions == (3 if codec else 0)
    # each batch's records are walked once: an uncompressed one by validate_batches, a compressed one after its
    # decompression
    assert counting.later_walks == (3 if codec else 0)
    assert counting.record_objects == 0


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_keyless_records_are_named(open_log: Callable[..., Log], codec: int) -> None:
    log = open_log(COMPACT)
    buf = bytearray(build_batch([(b"k", b"v", [], TS), (None, b"v", [], TS), (b"k", b"v", [], TS), (None, None, [], TS)],
                                compression=codec))
    with pytest.raises(InvalidRecordError) as e:
        log.append_as_leader(buf, 0)
    assert e.value.record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition."),
        (3, "Compacted topic cannot accept message without key in topic partition.")]
    assert log.log_end_offset == 0


def test_broken_compressed_records_are_corrupt(open_log: Callable[..., Log]) -> None:
    from broker.protocol.records.compression import compress
    from broker.protocol.records.builder import encode_batch, encode_record
    records = encode_record(0, 0, b"k", b"v") + encode_record(5, 0, b"k", b"v")  # offset delta 5: not its index
    bad_deltas = bytearray(encode_batch(compress(1, records), record_count=2, last_offset_delta=1, attributes=1))
    with pytest.raises(InvalidRecordError):
        open_log(COMPACT).append_as_leader(bad_deltas, 0)
    not_gzip = bytearray(encode_batch(b"\x00" * 20, record_count=1, last_offset_delta=0, attributes=1))
    with pytest.raises(CorruptRecordError):
        open_log(COMPACT, name="t-1").append_as_leader(not_gzip, 0)


@pytest.mark.parametrize("config", [COMPACT, LogConfig()], ids=["compact", "delete"])
def test_broken_lz4_frames_are_corrupt(open_log: Callable[..., Log], config: LogConfig) -> None:
    """LZ4 batches are decoded and walked natively (record_batch.lz4_frame_records): a bad block, a truncated frame
    and a record count the frame's records do not fill are refused as Kafka refuses them, nothing appended."""
    import lz4.frame

    from broker.protocol.records.builder import encode_batch, encode_record
    records = encode_record(0, 0, b"k", b"v") + encode_record(1, 0, b"k", b"v")
    frame = lz4.frame.compress(records, block_linked=False, store_size=False)
    bad_block = frame[:7] + b"\x10\x00\x00\x00" + b"\xff" * 16 + b"\x00\x00\x00\x00"
    cases = [(bad_block, 2, CorruptRecordError), (frame[:-3], 2, CorruptRecordError), (frame, 3, InvalidRecordError)]
    for i, (body, count, error) in enumerate(cases):
        log = open_log(config, name="t-%d" % i)
        with pytest.raises(error):
            log.append_as_leader(bytearray(encode_batch(body, record_count=count, last_offset_delta=count - 1,
                                                        attributes=3)), 0)
        assert log.log_end_offset == 0


@pytest.mark.parametrize("config", [COMPACT, LogConfig()], ids=["compact", "delete"])
@pytest.mark.parametrize("codec", [2, 4], ids=["snappy", "zstd"])
def test_broken_snappy_and_zstd_data_is_corrupt(open_log: Callable[..., Log], config: LogConfig, codec: int) -> None:
    """Snappy and zstd batches are decoded and walked natively too: corrupt or truncated data and a record count
    the records do not fill are refused, nothing appended."""
    from broker.protocol.records.builder import encode_batch, encode_record
    from broker.protocol.records.compression import compress
    records = encode_record(0, 0, b"k", b"v" * 50) + encode_record(1, 0, b"k", b"v" * 50)
    body = compress(codec, records)
    flipped = bytearray(body)
    flipped[-6] ^= 0x55
    cases = [(body[:-3], 2, CorruptRecordError), (b"\x00garbage" * 3, 2, CorruptRecordError),
             (body, 3, InvalidRecordError), (body, 1, InvalidRecordError)]
    if codec == 4:  # zstd: a flipped byte in a block (snappy may decode it to other bytes: the walk then judges)
        cases.append((bytes(flipped), 2, CorruptRecordError))
    for i, (data, count, error) in enumerate(cases):
        log = open_log(config, name="t-%d" % i)
        with pytest.raises(error):
            log.append_as_leader(bytearray(encode_batch(data, record_count=count, last_offset_delta=count - 1,
                                                        attributes=codec)), 0)
        assert log.log_end_offset == 0
