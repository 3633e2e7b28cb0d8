import os

import pytest

from broker.accel import record_batch
from broker.protocol.records.builder import build_batch
from broker.storage import files
from broker.storage.config import LogConfig
from broker.storage.errors import (CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError,
                                   RecordTooLargeError)

from .conftest import batch

TS = 1_700_000_000_000


def offsets_of(slice_) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in record_batch.validate_batches(slice_.read())]


def test_append_assigns_offsets_and_reads_back(open_log) -> None:
    log = open_log()
    a = log.append_as_leader(batch(3), 5)
    b = log.append_as_leader(batch(2), 5)
    assert (a.first_offset, a.last_offset, a.num_records) == (0, 2, 3)
    assert (b.first_offset, b.last_offset) == (3, 4)
    assert a.log_append_time == -1 and not a.duplicate
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20).records
    infos = record_batch.validate_batches(data.read())
    assert [(i.base_offset, i.last_offset, i.partition_leader_epoch) for i in infos] == [(0, 2, 5), (3, 4, 5)]
    recs = record_batch.iter_records(bytearray(data.read()[infos[1].position:]))
    assert [r.offset for r in recs] == [3, 4]
    assert log.leader_epoch_cache.entries == [(5, 0)]


def test_read_any_offset_returns_containing_batch(open_log) -> None:
    log = open_log(LogConfig(index_interval_bytes=100))
    for _ in range(50):
        log.append_as_leader(batch(3), 0)
    for off in range(0, 150):
        r = log.read(off, 1)
        first = offsets_of(r.records)[0]
        assert first[0] <= off <= first[1]


def test_min_one_message_and_max_bytes(open_log) -> None:
    log = open_log()
    big = batch(1, value=b"x" * 5000)
    log.append_as_leader(big, 0)
    log.append_as_leader(batch(1), 0)
    assert log.read(0, 100, min_one_message=False).records is None
    r = log.read(0, 100)
    assert offsets_of(r.records) == [(0, 0)]
    assert r.records.length == len(big)
    r = log.read(0, 1 << 20)
    assert offsets_of(r.records) == [(0, 0), (1, 1)]
    # the slice ends at a batch boundary, never mid-batch
    r = log.read(0, len(big) + 10)
    assert r.records.length == len(big)


def test_read_bounds_and_high_watermark(open_log) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    assert log.read(6, 100).records is None  # == LEO
    log.update_high_watermark(4)
    assert log.high_watermark == 4
    assert offsets_of(log.read(0, 1 << 20, max_offset_exclusive=log.high_watermark).records) == [(0, 1), (2, 3)]
    assert log.read(4, 1 << 20, max_offset_exclusive=4).records is None
    assert log.update_high_watermark(100) == 6  # never above LEO


def test_roll_by_size_and_reads_across_segments(open_log, tmp_path) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(segment_bytes=one * 3))
    for _ in range(10):
        log.append_as_leader(batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names == ["%020d.log" % o for o in (0, 3, 6, 9)]
    assert os.path.exists(os.path.join(log.dir, "00000000000000000003.snapshot"))
    for off in range(10):
        assert offsets_of(log.read(off, 1).records)[0] == (off, off)
    # a read returns data from one segment only
    assert offsets_of(log.read(0, 1 << 20).records) == [(0, 0), (1, 1), (2, 2)]


def test_roll_by_time_uses_batch_timestamps(open_log) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(batch(1, ts=TS), 0)
    log.append_as_leader(batch(1, ts=TS + 1000), 0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=TS + 1001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_time_without_timestamps_uses_clock(open_log, clock) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(batch(1, ts=-1), 0)
    clock.advance(500)
    log.append_as_leader(batch(1, ts=-1), 0)
    assert len(log.segments) == 1
    clock.advance(600)
    log.append_as_leader(batch(1, ts=-1), 0)
    assert len(log.segments) == 2


def test_roll_when_index_full(open_log) -> None:
    # 3 offset-index entries (24 bytes); 36 bytes = 3 time-index slots, one kept for the roll
    log = open_log(LogConfig(segment_index_bytes=36, index_interval_bytes=1))
    for i in range(12):
        log.append_as_leader(batch(1, ts=TS + i), 0)
    assert len(log.segments) > 1
    for seg in log.segments[:-1]:
        assert seg.offset_index.entries <= 4
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8
    for off in range(12):
        assert offsets_of(log.read(off, 1).records)[0] == (off, off)


def test_sparse_index_spacing(open_log) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(index_interval_bytes=one * 4))
    for _ in range(40):
        log.append_as_leader(batch(1), 0)
    idx = log.active_segment.offset_index
    entries = [idx.entry(i) for i in range(idx.entries)]
    assert len(entries) == 7
    positions = [p for _, p in entries]
    assert all(b - a == one * 5 for a, b in zip(positions, positions[1:]))
    # each entry maps a batch's (last) offset to that batch's start
    assert all(pos == off * one for off, pos in entries)
    # the active segment's entries are in memory; its index file is written, exactly as long as its entries, by a
    # flush (or a roll or close), and holds no descriptor in between
    assert not os.path.exists(idx.path)
    log.flush()
    assert os.path.getsize(idx.path) == 7 * 8


def test_timestamp_lookups(open_log) -> None:
    log = open_log(LogConfig(index_interval_bytes=1))
    for i in range(10):
        log.append_as_leader(batch(2, ts=TS + 10 * i), 7)
    # batch i holds offsets 2i, 2i+1 with timestamps TS+10i, TS+10i+1
    assert log.fetch_offset_by_timestamp(TS + 31) == (7, TS + 31, 7)
    assert log.fetch_offset_by_timestamp(TS + 32) == (8, TS + 40, 7)
    assert log.fetch_offset_by_timestamp(TS - 5) == (0, TS, 7)
    assert log.fetch_offset_by_timestamp(TS + 1000) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 7)
    assert log.fetch_offset_by_timestamp(-4) == (0, -1, 7)
    assert log.fetch_offset_by_timestamp(-1) == (20, -1, 7)
    assert log.fetch_offset_by_timestamp(-3) == (19, TS + 91, 7)


def test_max_timestamp_is_the_record_not_the_batch_end(open_log) -> None:
    log = open_log()
    log.append_as_leader(bytearray(build_batch([(b"a", b"1", [], TS + 50), (b"b", b"2", [], TS)])), 0)
    log.append_as_leader(batch(1, ts=TS + 10), 0)
    assert log.fetch_offset_by_timestamp(-3) == (0, TS + 50, 0)


def test_log_append_time(open_log, clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(2, ts=5), 0)
    assert info.log_append_time == clock.now_ms
    (b,) = record_batch.validate_batches(log.read(0, 1 << 20).records.read())  # CRC still valid
    assert b.timestamp_type == 1 and b.max_timestamp == clock.now_ms


def test_validation_errors(open_log) -> None:
    log = open_log(LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(1, value=b"x" * 300), 0)
    bad = batch(1)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(1, is_control=True), 0)
    assert log.log_end_offset == 0


def test_compacted_topic_requires_keys(open_log) -> None:
    log = open_log(LogConfig(cleanup_policy=("compact",)))
    buf = bytearray(build_batch([(b"k", b"v", [], TS), (None, b"v", [], TS), (None, b"v", [], TS)]))
    with pytest.raises(InvalidRecordError) as e:
        log.append_as_leader(buf, 0)
    assert [i for i, _ in e.value.record_errors] == [1, 2]
    assert log.append_as_leader(batch(1), 0).last_offset == 0


def test_compressed_batches(open_log) -> None:
    log = open_log()
    for codec in (1, 2, 3, 4):
        log.append_as_leader(batch(5, compression=codec), 0)
    assert log.log_end_offset == 20
    recs = [r for b in record_batch.validate_batches(log.read(0, 1 << 20).records.read())
            for r in [b]]
    assert [b.compression for b in recs] == [1, 2, 3, 4]


def test_retention_by_time(open_log, clock) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(segment_bytes=one * 2, retention_ms=1000))
    for i in range(6):
        log.append_as_leader(batch(1, ts=clock.now_ms - 5000 + i), 0)
    log.append_as_leader(batch(1, ts=clock.now_ms), 0)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert log.delete_old_segments() == 0  # HW still 0: nothing is deletable
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert log.log_start_offset == 6
    assert [s.base_offset for s in log.segments] == [6]
    assert not any(n.startswith("00000000000000000000") for n in os.listdir(log.dir))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.fetch_offset_by_timestamp(-2)[0] == 6


def test_retention_by_size_never_deletes_active(open_log) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(segment_bytes=one * 2, retention_bytes=one * 3))
    for _ in range(9):
        log.append_as_leader(batch(1), 0)
    log.update_high_watermark(9)
    assert log.delete_old_segments() == 3
    assert log.log_start_offset == 6
    assert log.size_bytes == one * 3
    log2_cfg = LogConfig(segment_bytes=one * 2, retention_bytes=0)
    log.update_config(log2_cfg)
    log.delete_old_segments()
    assert len(log.segments) == 1


def test_delete_records_advances_log_start(open_log) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(segment_bytes=one * 2))
    for _ in range(6):
        log.append_as_leader(batch(1), 0)
    log.update_high_watermark(6)
    assert log.delete_records_before(3) == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert offsets_of(log.read(3, 1).records) == [(3, 3)]
    assert log.delete_old_segments() == 1  # segment [0, 2) is now wholly below the log start offset
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(7)


def test_truncate_to_and_fully(open_log) -> None:
    one = len(batch(1))
    log = open_log(LogConfig(segment_bytes=one * 2))
    for e in range(6):
        log.append_as_leader(batch(1), e)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 1), (2, 2)]
    assert log.append_as_leader(batch(1), 9).first_offset == 3
    assert not log.truncate_to(10)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(batch(1), 9).first_offset == 100
    assert os.listdir(log.dir).count("%020d.log" % 100) == 1


def test_follower_append_keeps_offsets(open_log) -> None:
    log = open_log()
    buf = bytearray(build_batch([(b"k", b"v", [], TS)] * 3, base_offset=0, partition_leader_epoch=4))
    buf += build_batch([(b"k", b"v", [], TS)], base_offset=10, partition_leader_epoch=6)
    info = log.append_as_follower(buf)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 10, 11)
    assert log.leader_epoch_cache.entries == [(4, 0), (6, 10)]
    with pytest.raises(Exception):
        log.append_as_follower(bytearray(build_batch([(b"k", b"v", [], TS)], base_offset=5)))


def test_flush_advances_recovery_point(open_log) -> None:
    log = open_log(LogConfig(flush_messages=3))
    log.append_as_leader(batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 3
    log.append_as_leader(batch(1), 0)
    log.flush()
    assert log.recovery_point == 4


def test_clean_reopen(open_log, tmp_path) -> None:
    one = len(batch(1))
    cfg = LogConfig(segment_bytes=one * 4, index_interval_bytes=1)
    log = open_log(cfg)
    for i in range(10):
        log.append_as_leader(batch(1, ts=TS + i), i // 3)
    log.close()
    for seg_file in os.listdir(log.dir):
        if seg_file.endswith(files.INDEX_SUFFIX):
            assert os.path.getsize(os.path.join(log.dir, seg_file)) % 8 == 0
    log2 = open_log(cfg, clean_shutdown=True, recovery_point=10)
    assert log2.log_end_offset == 10
    assert log2.leader_epoch_cache.entries == [(0, 0), (1, 3), (2, 6), (3, 9)]
    assert log2.fetch_offset_by_timestamp(TS + 5)[0] == 5
    assert log2.append_as_leader(batch(1), 3).first_offset == 10


@pytest.mark.parametrize("ctype,codec", [("gzip", 1), ("uncompressed", 0), ("zstd", 4)])
def test_topic_compression_type_recompresses(open_log, ctype, codec) -> None:
    log = open_log(LogConfig(compression_type=ctype))
    src = batch(3, compression=3 if codec != 3 else 1, producer_id=9, producer_epoch=1, base_sequence=0)
    info = log.append_as_leader(src, 2)
    assert (info.first_offset, info.last_offset) == (0, 2)
    data = bytearray(log.read(0, 1 << 20).records.read())
    (b,) = record_batch.validate_batches(data)
    assert (b.compression, b.producer_id, b.base_sequence, b.partition_leader_epoch) == (codec, 9, 0, 2)
    assert [r.offset for r in record_batch.iter_records(data)] == [0, 1, 2]
    assert log.append_as_leader(batch(3, producer_id=9, producer_epoch=1, base_sequence=0), 2).duplicate


def test_index_emptied_by_truncation_is_not_read_back_after_a_clean_restart(tmp_path, clock) -> None:
    """A truncation that empties the offset index, then appends below index.interval.bytes: closing trims the
    index to no entries (an empty file, as Kafka), so the entry written before the truncation is not reloaded
    and the segment's next offset is found again."""
    from broker.storage.log import Log
    cfg = LogConfig(index_interval_bytes=150)
    path = os.path.join(str(tmp_path), "t-0")
    log = Log.open(path, cfg, clock=clock)
    for _ in range(3):
        log.append_as_leader(batch(1), 0)  # 89 bytes each: one index entry, for the 3rd batch
    log.truncate_to(0)
    for _ in range(2):
        log.append_as_leader(batch(1), 0)  # no index entry
    log.close()
    assert os.path.getsize(files.file_path(path, 0, files.INDEX_SUFFIX)) == 0
    log = Log.open(path, cfg, clock=clock, clean_shutdown=True, recovery_point=2)
    try:
        assert log.log_end_offset == 2
        assert log.append_as_leader(batch(1), 0).first_offset == 2
    finally:
        log.close()


def test_duplicate_batch_answers_the_original_offsets_and_timestamp(open_log) -> None:
    """As Kafka's UnifiedLog.append (checked against Kafka 3.9.1 by tests/integration/test_differential_kafka.py):
    a retried idempotent batch gets the original batch's offsets and, as log append time, its max timestamp."""
    log = open_log()
    log.append_as_leader(batch(1), 0)
    first = log.append_as_leader(batch(2, ts=TS + 40, producer_id=4, producer_epoch=0, base_sequence=0), 0)
    assert first.log_append_time == -1 and not first.duplicate
    again = log.append_as_leader(batch(2, ts=TS + 40, producer_id=4, producer_epoch=0, base_sequence=0), 0)
    assert (again.duplicate, again.first_offset, again.last_offset, again.log_append_time) == (True, 1, 2, TS + 41)
    assert log.log_end_offset == 3


def test_close_snapshots_producer_state_only_for_a_log_with_records(open_log) -> None:
    """As Kafka's takeSnapshot: an empty log gets no snapshot at close (a 10,000-partition shutdown wrote 10,000
    empty ones); a log with records gets one at its log end."""
    empty, full = open_log(name="empty-0"), open_log(name="full-0")
    full.append_as_leader(batch(2), 0)
    empty.close()
    full.close()
    assert not [f for f in os.listdir(empty.dir) if f.endswith(".snapshot")]
    assert [f for f in os.listdir(full.dir) if f.endswith(".snapshot")] == ["%020d.snapshot" % 2]
