import os

from broker.accel import record_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log

from .conftest import batch

TS = 1_700_000_000_000


def _fill(log: Log, n: int) -> list[int]:
    sizes = []
    for i in range(n):
        b = batch(2, ts=TS + i)
        sizes.append(len(b))
        log.append_as_leader(b, 1)
    return sizes


def _crash(log: Log) -> None:
    """Drop the log without a clean close: no snapshot at LEO, indexes left preallocated."""
    for seg in log.segments:
        seg.close_handlers()
    log._closed = True


def _reopen(tmp_path, clock, cfg, **kw) -> Log:
    return Log.open(os.path.join(str(tmp_path), "topic-0"), cfg, clock=clock, **kw)


def _all_offsets(log: Log) -> list[int]:
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).records.read()
        infos = record_batch.validate_batches(data)
        out += [o for b in infos for o in range(b.base_offset, b.last_offset + 1)]
        off = infos[-1].last_offset + 1
    return out


def test_torn_tail_is_truncated_and_indexes_rebuilt(open_log, tmp_path, clock) -> None:
    cfg = LogConfig(index_interval_bytes=1)
    log = open_log(cfg)
    _fill(log, 10)
    path = log.active_segment.path
    _crash(log)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # chop the last batch
    # the active segment's index entries were in memory only (never flushed): the crash left no .index file
    assert not os.path.exists(path.replace(".log", ".index"))
    log2 = _reopen(tmp_path, clock, cfg)
    try:
        assert log2.log_end_offset == 18
        assert _all_offsets(log2) == list(range(18))
        assert log2.active_segment.offset_index.entries == 8
        assert log2.fetch_offset_by_timestamp(TS + 4)[0] == 7  # batch i: offsets 2i, 2i+1 at TS+i, TS+i+1
        assert log2.append_as_leader(batch(1), 1).first_offset == 18
    finally:
        log2.close()


def test_garbage_tail_is_truncated(open_log, tmp_path, clock) -> None:
    cfg = LogConfig()
    log = open_log(cfg)
    _fill(log, 5)
    path = log.active_segment.path
    _crash(log)
    with open(path, "ab") as f:
        f.write(b"\x00" * 5 + b"\xff" * 100)
    log2 = _reopen(tmp_path, clock, cfg)
    try:
        assert log2.log_end_offset == 10
        assert log2.active_segment.size == os.path.getsize(path)
        assert _all_offsets(log2) == list(range(10))
    finally:
        log2.close()


def test_corrupt_crc_in_middle_truncates_there_and_drops_later_segments(open_log, tmp_path, clock) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 4)
    log = open_log(cfg)
    _fill(log, 10)  # segments at 0, 8, 16
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    first = log.segments[0].path
    _crash(log)
    with open(first, "r+b") as f:  # flip a byte inside the third batch's records
        f.seek(one * 2 + 70)
        b = f.read(1)
        f.seek(one * 2 + 70)
        f.write(bytes([b[0] ^ 0x55]))
    log2 = _reopen(tmp_path, clock, cfg)
    try:
        assert log2.log_end_offset == 4
        assert [s.base_offset for s in log2.segments] == [0]
        assert _all_offsets(log2) == list(range(4))
        assert not os.path.exists(os.path.join(log2.dir, "%020d.log" % 8))
    finally:
        log2.close()


def test_recovery_point_skips_flushed_segments(open_log, tmp_path, clock) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 4)
    log = open_log(cfg)
    _fill(log, 10)
    log.flush()
    _crash(log)
    log2 = _reopen(tmp_path, clock, cfg, recovery_point=20)
    try:
        assert log2.log_end_offset == 20
        assert log2.recovery_point == 20
        assert _all_offsets(log2) == list(range(20))
    finally:
        log2.close()


def test_stray_files_are_removed(open_log, tmp_path, clock) -> None:
    log = open_log()
    _fill(log, 2)
    log.close()
    for name in ("00000000000000000000.log.deleted", "00000000000000000000.log.cleaned",
                 "00000000000000000000.log.swap", "00000000000000000099.index"):
        with open(os.path.join(log.dir, name), "wb") as f:
            f.write(b"x")
    log2 = _reopen(tmp_path, clock, LogConfig(), clean_shutdown=True)
    try:
        assert sorted(n for n in os.listdir(log2.dir) if n.startswith("000")) == [
            "00000000000000000000.index", "00000000000000000000.log",
            "00000000000000000000.timeindex", "00000000000000000004.snapshot"]
        assert log2.log_end_offset == 4
    finally:
        log2.close()
