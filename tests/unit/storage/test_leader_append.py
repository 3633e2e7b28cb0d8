"""Log.append_as_leader's per-append shortcuts keep Kafka's rules: the HW left to the loop and raised only upward
(``maybe_increment_high_watermark``), every rule checked before any batch is stamped, LogAppendTime stamped,
segment rolls and index entries kept."""
from __future__ import annotations

import pytest

from broker.accel import record_batch
from broker.protocol.records.builder import build_batch
from broker.storage.config import LogConfig
from broker.storage.errors import RecordTooLargeError

from .conftest import batch


def test_an_append_leaves_the_hw_to_the_loop(open_log) -> None:
    """A leader's HW is raised after the append, on the loop, without the lock (Partition.maybe_increment_leader_hw):
    the append itself never moves it, a duplicate neither."""
    log = open_log()
    log.append_as_leader(batch(3), 0)
    assert (log.high_watermark, log.log_end_offset) == (0, 3)
    assert log.maybe_increment_high_watermark(None) and log.high_watermark == 3
    idem = dict(producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_as_leader(batch(2, **idem), 0)
    dup = log.append_as_leader(batch(2, **idem), 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 4)
    assert (log.high_watermark, log.log_end_offset) == (3, 5)
    assert log.maybe_increment_high_watermark(None) and log.high_watermark == 5


def test_maybe_increment_high_watermark_only_raises_and_clamps(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(4), 0)
    assert log.maybe_increment_high_watermark(2) and log.high_watermark == 2
    assert not log.maybe_increment_high_watermark(1) and log.high_watermark == 2
    assert log.maybe_increment_high_watermark(100) and log.high_watermark == 4  # never above the LEO
    assert not log.maybe_increment_high_watermark(None)
    log.append_as_leader(batch(1), 0)
    assert log.maybe_increment_high_watermark(None) and log.high_watermark == 5  # None: the LEO


def test_a_rejected_batch_leaves_the_log_unchanged(open_log) -> None:
    log = open_log(LogConfig(max_message_bytes=300))
    log.append_as_leader(batch(1), 0)
    buf = batch(1) + batch(20)  # the second batch is too large
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(buf, 0)
    assert log.log_end_offset == 1
    assert [i.base_offset for i in record_batch.validate_batches(log.read(0, 1 << 20).records.read())] == [0]


def test_log_append_time_is_stamped_on_every_batch(open_log, clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(2) + batch(3), 4)
    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 4, clock.now_ms)
    stored = record_batch.validate_batches(log.read(0, 1 << 20).records.read())  # CRCs recomputed
    assert [(i.base_offset, i.partition_leader_epoch, i.timestamp_type, i.max_timestamp) for i in stored] == \
        [(0, 4, 1, clock.now_ms), (2, 4, 1, clock.now_ms)]


def test_rolls_and_index_entries_as_before(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=2000, index_interval_bytes=200))
    for _ in range(30):
        log.append_as_leader(bytearray(build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)])), 0)
    assert len(log.segments) > 1
    for seg in log.segments:
        assert seg.size <= 2000
    for offset in range(30):  # every offset is found through the indexes
        found = record_batch.validate_batches(log.read(offset, 1).records.read())
        assert found[0].base_offset == offset
