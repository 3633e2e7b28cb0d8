import os

import pytest

from broker.storage.config import LogConfig
from broker.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from broker.storage.log import Log
from broker.storage.producer_state import (BatchMetadata, ProducerStateEntry, decode_snapshot, encode_snapshot,
                                           last_sequence)

from .conftest import batch

PID = 4000


def pbatch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_duplicate_batch_returns_original_offsets_and_is_not_written(open_log) -> None:
    log = open_log()
    first = log.append_as_leader(pbatch(0), 0)
    log.append_as_leader(batch(1), 0)
    size = log.size_bytes
    dup = log.append_as_leader(pbatch(0), 0)
    assert dup.duplicate
    assert (dup.first_offset, dup.last_offset) == (first.first_offset, first.last_offset) == (0, 1)
    assert log.size_bytes == size and log.log_end_offset == 3
    nxt = log.append_as_leader(pbatch(2), 0)
    assert (nxt.first_offset, nxt.duplicate) == (3, False)


def test_only_last_five_batches_are_deduplicated(open_log) -> None:
    log = open_log()
    for i in range(6):
        log.append_as_leader(pbatch(2 * i), 0)
    assert log.append_as_leader(pbatch(2), 0).duplicate  # 2nd batch still cached
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(0), 0)  # 1st fell out of the cache


def test_out_of_order_sequence(open_log) -> None:
    log = open_log()
    log.append_as_leader(pbatch(0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(5), 0)
    assert log.log_end_offset == 2


def test_fenced_epoch_and_new_epoch_rules(open_log) -> None:
    log = open_log()
    log.append_as_leader(pbatch(0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(2, epoch=2), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(7, epoch=4), 0)  # a new epoch must start at sequence 0
    assert log.append_as_leader(pbatch(0, epoch=4), 0).first_offset == 2


def test_unknown_producer_accepts_any_sequence(open_log) -> None:
    log = open_log()
    assert log.append_as_leader(pbatch(42), 0).first_offset == 0
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(45), 0)
    assert log.append_as_leader(pbatch(44), 0).first_offset == 2


def test_sequence_wraps_at_int32_max(open_log) -> None:
    log = open_log()
    log.append_as_leader(pbatch(2147483646, n=2), 0)
    assert last_sequence(2147483646, 1) == 2147483647
    assert log.append_as_leader(pbatch(0), 0).first_offset == 2


def test_two_batches_of_one_producer_in_one_append(open_log) -> None:
    log = open_log()
    buf = pbatch(0) + pbatch(2)
    info = log.append_as_leader(buf, 0)
    assert (info.first_offset, info.last_offset) == (0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(pbatch(4) + pbatch(9), 0)
    assert log.log_end_offset == 4


def test_snapshot_round_trip() -> None:
    e = ProducerStateEntry(7, 2, coordinator_epoch=3, current_txn_first_offset=-1, last_timestamp=99)
    e.batches.append(BatchMetadata(10, 14, 100, 104, 99))
    data = encode_snapshot([e])
    assert data[:2] == b"\x00\x01" and len(data) == 10 + 46  # header + one 46-byte entry
    (back,) = decode_snapshot(data)
    assert (back.producer_id, back.producer_epoch, back.coordinator_epoch, back.last_timestamp) == (7, 2, 3, 99)
    assert list(back.batches) == [BatchMetadata(10, 14, 100, 104, 99)]
    with pytest.raises(ValueError):
        decode_snapshot(data[:-1] + bytes([data[-1] ^ 1]))


def test_state_survives_clean_close_and_reopen(open_log, tmp_path, clock) -> None:
    log = open_log()
    log.append_as_leader(pbatch(0, epoch=1), 0)
    log.close()
    assert os.path.exists(os.path.join(log.dir, "%020d.snapshot" % 2))
    log2 = Log.open(log.dir, LogConfig(), clock=clock, clean_shutdown=True)
    try:
        assert log2.append_as_leader(pbatch(0, epoch=1), 0).duplicate
        with pytest.raises(InvalidProducerEpochError):
            log2.append_as_leader(pbatch(2, epoch=0), 0)
        assert log2.append_as_leader(pbatch(2, epoch=1), 0).first_offset == 2
    finally:
        log2.close()


def test_state_rebuilt_after_crash_without_snapshot(open_log, tmp_path, clock) -> None:
    one = len(pbatch(0))
    log = open_log(LogConfig(segment_bytes=one * 2))
    for i in range(5):
        log.append_as_leader(pbatch(2 * i, epoch=1), 0)
    # crash: no close, so no snapshot at the LEO; the roll snapshots exist
    for seg in log.segments:
        seg.close_handlers()
    log._closed = True
    log2 = Log.open(log.dir, LogConfig(segment_bytes=one * 2), clock=clock)
    try:
        dup = log2.append_as_leader(pbatch(8, epoch=1), 0)
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == (8, 9)
        with pytest.raises(OutOfOrderSequenceError):
            log2.append_as_leader(pbatch(12, epoch=1), 0)
        assert log2.append_as_leader(pbatch(10, epoch=1), 0).first_offset == 10
    finally:
        log2.close()


def test_truncation_rewinds_producer_state(open_log) -> None:
    log = open_log()
    log.append_as_leader(pbatch(0), 0)
    log.append_as_leader(pbatch(2), 0)
    log.truncate_to(2)
    assert log.append_as_leader(pbatch(2), 0).first_offset == 2  # not a duplicate any more


def test_expired_producers_are_forgotten(open_log, clock) -> None:
    log = open_log()
    log.append_as_leader(batch(1, producer_id=PID, producer_epoch=0, base_sequence=0, ts=clock.now_ms), 0)
    log.remove_expired_producers(clock.now_ms + 86400000)
    assert log.producer_state.last_entry(PID) is None


def test_transaction_tracks_last_stable_offset(open_log) -> None:
    import struct

    from broker.protocol.records.builder import build_batch
    log = open_log()
    log.append_as_leader(batch(1), 0)
    log.append_as_leader(batch(2, producer_id=PID, producer_epoch=0, base_sequence=0, is_transactional=True), 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    marker = bytearray(build_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17), [], 0)],
                                   producer_id=PID, producer_epoch=0, is_transactional=True, is_control=True))
    with pytest.raises(Exception):
        log.append_as_leader(bytearray(marker), 0)  # clients may not write control batches
    log.append_as_leader(marker, 0, is_from_client=False)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset == 4
    assert log.producer_state.last_entry(PID).coordinator_epoch == 17
