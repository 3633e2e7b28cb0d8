"""Descriptors held by partition logs: one per partition (its active segment's .log), whatever its segment count.

Counted from /proc/self/fd, only the files under the test's directory, so other tests' files do not count.
"""
from __future__ import annotations

import errno
import os
from typing import Iterator

import pytest

from broker.storage import checkpoints, file_cache, files
from broker.storage.config import LogConfig
from broker.storage.file_cache import INDEXES, SEGMENT_FILES, OpenFileCache
from broker.storage.log import Log
from broker.storage.log_manager import LogManager
from broker.storage.scheduler import Scheduler

from .conftest import batch


def open_files_under(root: str) -> list[str]:
    """Paths of this process's open descriptors that lie under ``root``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(str(root)):
            out.append(target)
    return out


def maps_under(root: str) -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if str(root) in line)


@pytest.fixture
def small_cache() -> Iterator[OpenFileCache]:
    before = SEGMENT_FILES.capacity
    SEGMENT_FILES.set_capacity(4)
    yield SEGMENT_FILES
    SEGMENT_FILES.set_capacity(before)


def fill(log: Log, segments: int) -> None:
    while len(log.segments) < segments:
        log.append_as_leader(batch(2), 0)


def test_a_log_of_20_segments_holds_one_descriptor_and_no_mapping(tmp_path, clock, small_cache) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 3, index_interval_bytes=1)
    log = Log.open(str(tmp_path / "t-0"), cfg, clock=clock)
    try:
        fill(log, 20)
        log.flush()
        SEGMENT_FILES.release_idle()
        held = open_files_under(tmp_path)
        assert held == [log.active_segment.path]
        assert maps_under(tmp_path) == 0
        # every closed segment reads back through the bounded cache: never more than its capacity open
        for off in range(0, log.log_end_offset, 2):
            r = log.read(off, 1 << 20, min_one_message=True)
            assert r.records is not None and r.records.length > 0
            assert len(open_files_under(tmp_path)) <= 1 + small_cache.capacity + 1  # + the slice just read
        del r
    finally:
        log.close()
    assert open_files_under(tmp_path) == []


def test_restart_loads_closed_segments_without_opening_them(tmp_path, clock, small_cache) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 3, index_interval_bytes=1)
    path = str(tmp_path / "t-0")
    log = Log.open(path, cfg, clock=clock)
    fill(log, 20)
    leo = log.log_end_offset
    log.close()
    reads = INDEXES.reads
    log = Log.open(path, cfg, clock=clock, clean_shutdown=True, recovery_point=leo)
    try:
        assert INDEXES.reads == reads  # no closed segment's index was read at load
        assert open_files_under(tmp_path) == [log.active_segment.path]
        assert all(not s.active for s in log.segments[:-1]) and log.active_segment.active
        assert log.log_end_offset == leo
        # a lookup in a closed segment reads its index on demand
        assert log.read(3, 1 << 20).records is not None
        assert INDEXES.reads > reads
    finally:
        log.close()


def test_a_slice_outlives_cache_eviction_and_segment_deletion(tmp_path, clock, small_cache) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 3, index_interval_bytes=1, retention_bytes=one * 3, file_delete_delay_ms=0)
    log = Log.open(str(tmp_path / "t-0"), cfg, clock=clock)
    try:
        fill(log, 8)
        first = log.read(0, 1 << 20).records
        assert first is not None
        expected = first.read()
        for off in range(0, log.log_end_offset, 2):  # evict the first segment's handle from the cache
            log.read(off, 1 << 20)
        log.update_high_watermark(log.log_end_offset)
        assert log.delete_old_segments() > 0
        assert not os.path.exists(files.file_path(log.dir, 0, files.LOG_SUFFIX))
        assert first.read() == expected  # the descriptor the slice holds still reads the unlinked file
        del first
    finally:
        log.close()


def test_out_of_descriptors_releases_idle_cached_files_and_retries(tmp_path, clock, monkeypatch) -> None:
    cache = OpenFileCache(capacity=8)
    paths = []
    for i in range(8):
        p = tmp_path / ("f%d" % i)
        p.write_bytes(b"x")
        paths.append(str(p))
    held = cache.get("held", lambda: paths[0])
    for i, p in enumerate(paths[1:], 1):
        cache.get(i, lambda p=p: p)
    assert len(cache) == 8
    real_open = os.open
    calls = {"n": 0}

    def failing_once(path, flags, mode=0o777):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode)

    monkeypatch.setattr(file_cache.os, "open", failing_once)
    h = file_cache.open_handle(paths[1], os.O_RDONLY, cache=cache)
    assert h.fd >= 0 and calls["n"] == 2
    assert len(cache) == 1  # only the handle someone still holds stays
    assert not held.closed


def test_new_partitions_cost_one_descriptor_each_and_no_fsync(tmp_path, monkeypatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink("/proc/self/fd/%d" % fd)) or
                        real_fsync(fd))
    lm = LogManager([str(tmp_path / "d")], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=Scheduler(threaded=False))
    synced.clear()  # meta.properties, written once per log dir
    try:
        for p in range(50):
            log = lm.get_or_create_log("t", p, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
            log.assign_epoch_start_offset(3, 0)
        assert synced == []  # creating partitions and becoming their leader fsyncs nothing
        assert len(open_files_under(tmp_path / "d")) == 50 + 1  # one .log each, plus the dir's .lock
        # the periodic checkpoint makes the small files durable: partition.metadata and leader epochs, each once
        lm.checkpoint_all()
        names = [os.path.basename(p) for p in synced]
        assert names.count("partition.metadata") == 50
        assert names.count(files.LEADER_EPOCH_CHECKPOINT) == 50
    finally:
        lm.shutdown()


def test_flush_makes_leader_epochs_durable_before_the_recovery_point_moves(tmp_path, clock, monkeypatch) -> None:
    log = Log.open(str(tmp_path / "t-0"), LogConfig(), clock=clock)
    events: list[str] = []
    real = checkpoints.fsync_file

    def record(path: str) -> bool:
        events.append("sync %s at rp=%d" % (os.path.basename(path), log.recovery_point))
        return real(path)

    monkeypatch.setattr("broker.storage.log.fsync_file", record)
    try:
        log.append_as_leader(batch(2), 7)
        log.flush()
        assert events == ["sync %s at rp=0" % files.LEADER_EPOCH_CHECKPOINT]
        assert log.recovery_point == 2
    finally:
        log.close()


def test_clean_shutdown_makes_everything_durable_with_one_syncfs(tmp_path, monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr("broker.storage.log_manager.sync_filesystem", lambda d: calls.append(d))
    d = str(tmp_path / "d")
    lm = LogManager([d], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=Scheduler(threaded=False))
    for p in range(5):
        lm.get_or_create_log("t", p).append_as_leader(batch(3), 0)
    lm.shutdown()
    assert calls == [d]
    recovery = checkpoints.OffsetCheckpointFile(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT)).read()
    assert recovery == {("t", p): 3 for p in range(5)}


def test_a_roll_that_cannot_open_its_new_file_leaves_the_log_whole(tmp_path, clock, monkeypatch) -> None:
    one = len(batch(2))
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=one * 2), clock=clock)
    try:
        log.append_as_leader(batch(2), 0)
        log.append_as_leader(batch(2), 0)
        real = file_cache.open_handle

        def no_descriptors(path, flags, mode=0o644, cache=None):
            if path.endswith(".log") and flags & os.O_CREAT:
                raise OSError(errno.EMFILE, "Too many open files")
            return real(path, flags, mode, cache)

        monkeypatch.setattr("broker.storage.segment.open_handle", no_descriptors)
        with pytest.raises(OSError):
            log.append_as_leader(batch(2), 0)  # needs a roll
        assert log.log_end_offset == 4 and log.active_segment.active and len(log.segments) == 1
        monkeypatch.undo()
        assert log.append_as_leader(batch(2), 0).first_offset == 4  # descriptors back: the roll happens
        assert [s.base_offset for s in log.segments] == [0, 4]
        assert [r for r in range(6) if log.read(r, 1 << 20).records is None] == []
    finally:
        log.close()


def test_thousands_of_unsynced_partition_files_are_made_durable_with_one_syncfs(tmp_path, monkeypatch) -> None:
    d = str(tmp_path / "d")
    lm = LogManager([d], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=Scheduler(threaded=False))
    try:
        for p in range(200):
            lm.get_or_create_log("t", p, topic_id="AAAAAAAAAAAAAAAAAAAAAA").assign_epoch_start_offset(1, 0)
        calls: list[str] = []
        fsynced: list[str] = []
        monkeypatch.setattr("broker.storage.log_manager.sync_filesystem", lambda path: calls.append(path))
        monkeypatch.setattr("broker.storage.log_manager.fsync_file", lambda path: fsynced.append(path))
        lm.sync_metadata_files()  # 400 files: above SYNCFS_ABOVE_FILES
        assert calls == [d] and fsynced == []
        lm.sync_metadata_files()  # nothing left to sync
        assert calls == [d]
    finally:
        lm.shutdown()
