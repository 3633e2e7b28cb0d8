"""RemoteIndexCache (Kafka's): a remote segment's offset/time/transaction indexes fetched once into
``<log dir>/remote-log-index-cache``, bounded by remote.log.index.file.cache.total.size.bytes (least recently used out,
files deleted), removed with a deleted segment, reloaded at start-up; and the remote reads that use it: ranged
segment reads from the index position up to the fetch's max bytes, and the timestamp lookup through the time
index."""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, BinaryIO, List, Optional, Tuple

import pytest

from broker.protocol.records.builder import build_batch
from broker.remote_log.remote_index_cache import CLEANER_THREAD_NAME, DIR_NAME, Entry, RemoteIndexCache, file_name_prefix
from broker.remote_log.remote_log_reader import RangedSegmentReader, RemoteLogReader, read_batches_from
from broker.storage.config import LogConfig
from broker.storage.remote.local_tiered_storage import LocalTieredStorage
from broker.storage.remote.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState
from broker.storage.remote.storage_manager import IndexType

from .test_remote_log_manager import ONE, TIP, TS, Env, batch


class CountingStorage(LocalTieredStorage):
    """LocalTieredStorage recording every index fetch and every segment range asked for."""

    def __init__(self, inner: LocalTieredStorage) -> None:
        super().__init__()
        self.storage_directory = inner.storage_directory
        self.broker_id = inner.broker_id
        self.index_fetches: List[Tuple[int, IndexType]] = []
        self.ranges: List[Tuple[int, int, Optional[int]]] = []

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        self.index_fetches.append((metadata.start_offset, index_type))
        return super().fetch_index(metadata, index_type)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: Optional[int] = None) -> BinaryIO:
        self.ranges.append((metadata.start_offset, start_position, end_position))
        return super().fetch_log_segment(metadata, start_position, end_position)


BIG = len(build_batch([(b"k", b"v" * 8000, [], TS)]))


def _tiered(tmp_path: Path, n: int, segment_batches: int, ts: Any = None, index_interval: int = 4096,
            value_size: int = 20) -> Tuple[Env, List[RemoteLogSegmentMetadata]]:
    """``n`` one-record batches in segments of ``segment_batches``, copied, local copies deleted."""
    one = len(build_batch([(b"k", b"v" * value_size, [], TS)]))
    e = Env(tmp_path, LogConfig(segment_bytes=one * segment_batches, retention_ms=-1, local_retention_ms=0,
                                index_interval_bytes=index_interval))
    for i in range(n):
        e.log.append_as_leader(bytearray(build_batch([(b"k", b"v" * value_size, [], ts(i) if ts else TS)])), 3)
    e.log.update_high_watermark(e.log.log_end_offset)
    rlm = e.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    rlm.run_once()
    e.clock.advance(10)
    e.log.delete_old_segments()
    segs = sorted((m for m in rlm.rlmm.list_remote_log_segments(TIP)
                   if m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED), key=lambda m: m.start_offset)
    return e, segs


def test_indexes_fetched_once_into_the_log_dir_under_kafka_names(tmp_path: Path) -> None:
    e, segs = _tiered(tmp_path, 5, 2)
    try:
        rsm = CountingStorage(e.rsm)
        cache = RemoteIndexCache(1 << 20, rsm, str(tmp_path / "logs"))
        md = segs[0]
        assert cache.lookup_offset(md, 1) == 0 and cache.lookup_offset(md, 1) == 0
        assert [t for _, t in rsm.index_fetches] == [IndexType.OFFSET, IndexType.TIMESTAMP, IndexType.TRANSACTION]
        prefix = file_name_prefix(md)
        assert prefix == f"0_{prefix.split('_', 1)[1]}" and len(prefix.split("_", 1)[1]) == 22
        names = sorted(os.listdir(tmp_path / "logs" / DIR_NAME))
        assert names == sorted([prefix + ".index", prefix + ".timeindex", prefix + ".txnindex"])
        assert os.path.getsize(tmp_path / "logs" / DIR_NAME / (prefix + ".txnindex")) == 0  # no transactions
        assert cache.aborted_txns(md) == []
        assert len(rsm.index_fetches) == 3  # nothing fetched again
        # a new cache over the same directory (a restart) takes the files back without fetching
        cache2 = RemoteIndexCache(1 << 20, rsm, str(tmp_path / "logs"))
        assert md.remote_log_segment_id.id in cache2 and cache2.size_bytes() == cache.size_bytes()
        cache2.lookup_offset(md, 0)
        assert len(rsm.index_fetches) == 3
    finally:
        e.log.close()


def test_start_up_drops_tmp_deleted_and_incomplete_files(tmp_path: Path) -> None:
    e, segs = _tiered(tmp_path, 5, 2)
    try:
        d = tmp_path / "logs" / DIR_NAME
        cache = RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs"))
        cache.lookup_offset(segs[0], 0)
        cache.lookup_offset(segs[1], 2)
        p1 = file_name_prefix(segs[1])
        (d / (p1 + ".timeindex")).unlink()  # incomplete triple
        (d / "5_x.index.tmp").write_bytes(b"x")
        (d / ("0_y.index" + ".deleted")).write_bytes(b"x")
        cache2 = RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs"))
        assert len(cache2) == 1 and segs[0].remote_log_segment_id.id in cache2
        assert sorted(os.listdir(d)) == sorted(file_name_prefix(segs[0]) + s
                                               for s in (".index", ".timeindex", ".txnindex"))
    finally:
        e.log.close()


def test_bounded_by_size_least_recently_used_out_and_resized(tmp_path: Path) -> None:
    e, segs = _tiered(tmp_path, 7, 2, index_interval=1)  # every batch indexed: non-empty index files
    try:
        rsm = CountingStorage(e.rsm)
        cache = RemoteIndexCache(1 << 20, rsm, str(tmp_path / "logs"))
        cache.lookup_offset(segs[0], 0)
        one = cache.size_bytes()
        assert one > 0
        cache.resize(2 * one)
        cache.lookup_offset(segs[1], 2)
        cache.lookup_offset(segs[0], 0)  # 0 is now the most recently used
        cache.lookup_offset(segs[2], 4)  # over the bound: 1 goes
        ids = [m.remote_log_segment_id.id for m in segs]
        assert ids[0] in cache and ids[1] not in cache and ids[2] in cache
        assert cache.size_bytes() <= 2 * one
        assert cache.wait_for_cleanups()  # the cleaner thread deletes the evicted entry's files
        files = os.listdir(tmp_path / "logs" / DIR_NAME)
        assert not any(f.startswith(file_name_prefix(segs[1])) for f in files) and len(files) == 6
        cache.resize(one)  # dynamic shrink: evicts at once
        assert cache.wait_for_cleanups()
        assert len(cache) == 1 and ids[2] in cache and len(os.listdir(tmp_path / "logs" / DIR_NAME)) == 3
        # an entry larger than the whole cache still answers the lookup that fetched it, then goes
        cache.resize(1)
        fetched = len(rsm.index_fetches)
        assert cache.lookup_offset(segs[1], 3) > 0
        assert len(rsm.index_fetches) == fetched + 3 and len(cache) == 0
        assert cache.wait_for_cleanups()
        assert os.listdir(tmp_path / "logs" / DIR_NAME) == []
    finally:
        e.log.close()


def test_deleted_remote_segment_leaves_the_cache(tmp_path: Path) -> None:
    """The RemoteLogManager's expiration removes the deleted segment's entry and files (Kafka's indexCache.remove)."""
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=1000, local_retention_ms=0))
    try:
        for _ in range(5):
            e.log.append_as_leader(batch(TS), 3)
        e.log.update_high_watermark(e.log.log_end_offset)
        rlm = e.rlm()
        cache = RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs"))
        rlm.index_cache = cache
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        segs = [m for m in rlm.rlmm.list_remote_log_segments(TIP)]
        for m in segs:
            cache.lookup_offset(m, m.start_offset)
        assert len(cache) == 2 and len(os.listdir(tmp_path / "logs" / DIR_NAME)) == 6
        e.clock.advance(5000)  # past retention.ms: both remote segments expire
        rlm.run_once()
        assert cache.wait_for_cleanups()
        assert len(cache) == 0 and os.listdir(tmp_path / "logs" / DIR_NAME) == []
    finally:
        e.log.close()


def test_remote_read_fetches_only_the_range_it_needs(tmp_path: Path) -> None:
    """Kafka's RemoteLogManager.read: the position from the offset index, then a ranged read from there up to the
    fetch's max bytes, not the segment."""
    e, segs = _tiered(tmp_path, 41, 40, value_size=8000)  # one remote segment of 40 batches of 8 KB
    ONE = BIG
    try:
        rsm = CountingStorage(e.rsm)
        md = segs[0]
        assert md.segment_size_in_bytes == 40 * ONE
        whole = rsm.fetch_log_segment(md, 0).read()
        rsm.ranges.clear()
        reader = RemoteLogReader(rsm, e.rlms[0].rlmm, RemoteIndexCache(1 << 20, rsm, str(tmp_path / "c")))
        res = reader.read(TIP, e.log.leader_epoch_cache, 30, 3 * ONE)
        assert res.records == whole[30 * ONE:33 * ONE]
        assert len(rsm.ranges) == 1
        _, start, end = rsm.ranges[0]
        assert 29 * ONE <= start <= 30 * ONE  # the offset index's position for offset 30 (an entry per 4096 bytes)
        assert end is not None and end - start + 1 < 7 * ONE  # max bytes, one index interval and the slack: not the segment
        # a first batch larger than max bytes: returned whole (minOneMessage), nothing after it
        rsm.ranges.clear()
        assert reader.read(TIP, e.log.leader_epoch_cache, 10, 1).records == whole[10 * ONE:11 * ONE]
        assert reader.read(TIP, e.log.leader_epoch_cache, 10, 1, min_one_message=False).records == b""
        assert all(end is not None and end < 14 * ONE for _, _, end in rsm.ranges)
    finally:
        e.log.close()


def test_ranged_reader_fetches_more_only_when_needed(tmp_path: Path) -> None:
    e, segs = _tiered(tmp_path, 11, 10)
    try:
        rsm = CountingStorage(e.rsm)
        md = segs[0]
        whole = rsm.fetch_log_segment(md, 0).read()
        rsm.ranges.clear()
        # a window ending inside the second batch: the rest of that batch is fetched in a second range
        with RangedSegmentReader(rsm, md, 0, ONE + 5) as r:
            assert read_batches_from(r, 0, 2 * ONE, True) == whole[:2 * ONE]
            assert r.requests == 2 and r.requested_bytes == 2 * ONE
        assert [(s, e_) for _, s, e_ in rsm.ranges] == [(0, ONE + 4), (ONE + 5, 2 * ONE - 1)]
        # skipped batches past the fetched range are not fetched
        rsm.ranges.clear()
        with RangedSegmentReader(rsm, md, 0, 27, chunk=27) as r:
            assert read_batches_from(r, 9, ONE, True) == whole[9 * ONE:]
        assert [s for _, s, _ in rsm.ranges] == [i * ONE for i in range(9)] + [9 * ONE, 9 * ONE + 27]
        assert all(e_ - s + 1 == 27 for _, s, e_ in rsm.ranges[:10])  # the headers only, until offset 9's batch
        # by default a range after the first asks for 64 KiB at least (one range, not one per header and body)
        rsm.ranges.clear()
        with RangedSegmentReader(rsm, md, 0, 27) as r:
            assert read_batches_from(r, 9, ONE, True) == whole[9 * ONE:]
        assert [(s, e_) for _, s, e_ in rsm.ranges] == [(0, 26), (ONE, 10 * ONE - 1)]
        # nothing past the segment's end is asked for
        with RangedSegmentReader(rsm, md, 9 * ONE, 1 << 30) as r:
            assert r.read(1 << 20) == whole[9 * ONE:]
        assert rsm.ranges[-1][2] == md.segment_size_in_bytes - 1
    finally:
        e.log.close()


def test_timestamp_lookup_uses_the_time_index(tmp_path: Path) -> None:
    """Kafka's lookupTimestamp: the time index then the offset index give the position the scan starts at."""
    e, segs = _tiered(tmp_path, 41, 40, ts=lambda i: TS + i * 10, index_interval=1)
    try:
        rsm = CountingStorage(e.rsm)
        reader = RemoteLogReader(rsm, e.rlms[0].rlmm, RemoteIndexCache(1 << 20, rsm, str(tmp_path / "c")))
        assert reader.find_offset_by_timestamp(TIP, TS + 255, 0) == (26, TS + 260, 3)
        assert rsm.ranges[-1][1] == 25 * ONE  # started at the time index entry below the timestamp, not at 0
        assert reader.find_offset_by_timestamp(TIP, TS, 0) == (0, TS, 3)
        assert reader.find_offset_by_timestamp(TIP, TS + 100, 30) == (30, TS + 300, 3)  # the log start bound
        assert reader.find_offset_by_timestamp(TIP, TS + 400, 0) is None  # past every remote record
        fetched = len(rsm.index_fetches)
        reader.find_offset_by_timestamp(TIP, TS + 55, 0)
        assert len(rsm.index_fetches) == fetched  # the cached indexes, not fetched again
    finally:
        e.log.close()


def test_closed_cache_refuses_lookups(tmp_path: Path) -> None:
    e, segs = _tiered(tmp_path, 3, 2)
    try:
        cache = RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs"))
        cache.close()
        with pytest.raises(RuntimeError, match="closed"):
            cache.lookup_offset(segs[0], 0)
    finally:
        e.log.close()


def test_files_are_renamed_at_once_and_deleted_by_the_cleaner_thread(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's markForCleanup on the caller's thread (``.deleted``), cleanup on ``remote-log-index-cleaner``;
    close drains the cleaner's queue and joins it."""
    e, segs = _tiered(tmp_path, 5, 2)
    try:
        cache = RemoteIndexCache(1 << 20, e.rsm, str(tmp_path / "logs"))
        d = tmp_path / "logs" / DIR_NAME
        for m in segs:
            cache.lookup_offset(m, m.start_offset)
        gate = threading.Event()
        threads: List[str] = []
        cleanup = Entry.cleanup

        def held(entry: Entry) -> None:
            threads.append(threading.current_thread().name)
            gate.wait(5)
            cleanup(entry)
        monkeypatch.setattr(Entry, "cleanup", held)
        cache.remove(segs[0].remote_log_segment_id.id)  # returns at once: the deletion is the cleaner's
        p0 = file_name_prefix(segs[0])
        names = set(os.listdir(d))
        assert {p0 + s + ".deleted" for s in (".index", ".timeindex", ".txnindex")} <= names
        assert not {p0 + s for s in (".index", ".timeindex", ".txnindex")} & names
        assert cache.pending_cleanups() == 1
        gate.set()
        assert cache.wait_for_cleanups()
        assert threads == [CLEANER_THREAD_NAME]
        assert not any(n.startswith(p0) for n in os.listdir(d))
        # a lookup after the removal fetches the indexes again
        assert cache.lookup_offset(segs[0], segs[0].start_offset) == 0
        # close: what is queued is deleted, then the cleaner ends
        gate.clear()
        cache.remove_all([m.remote_log_segment_id.id for m in segs])
        gate.set()
        cache.close()
        assert not cache._cleaner.is_alive() and cache.pending_cleanups() == 0
        assert os.listdir(d) == []
    finally:
        e.log.close()
