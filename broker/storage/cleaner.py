"""LogCleaner: compaction of logs whose cleanup.policy includes ``compact`` (Kafka's LogCleaner role).

One cleaner thread (started by LogManager.startup, stopped by LogManager.shutdown) repeatedly picks
the filthiest compacted log and cleans it, sleeping log.cleaner.backoff.ms when nothing qualifies.

A log splits into three sections: clean [log start, first dirty offset) (already compacted),
dirty [first dirty offset, first uncleanable offset) and uncleanable (the active segment, anything
at or above the LSO or the HW, and segments younger than min.compaction.lag.ms). The first dirty
offset of each partition lives in the log dir's ``cleaner-offset-checkpoint`` (format in
checkpoints.py). A log qualifies when dirty bytes / (clean + dirty bytes) exceeds
min.cleanable.dirty.ratio, when max.compaction.lag.ms forces it, or when a tombstone it kept
reached its delete horizon.

One clean (``Cleaner.clean``): build an offset map (key -> latest offset) over whole dirty segments,
then rewrite every segment from the log start up to the mapped end, in groups no larger than
segment.bytes / segment.index.bytes (Kafka's groupSegmentsBySize). A record is kept when it is the
latest for its key; a tombstone also needs its batch's delete horizon (set to now +
delete.retention.ms the first time the batch is cleaned) not to have passed. Offsets, order and
batch producer fields are kept (cleaner_batch.py); a producer's last batch is kept even when empty.
Control batches and transactional batches are copied unchanged and transactional records do not
enter the offset map (a simplification: aborted data is not removed). Each group is written to
``<base>.log.cleaned`` (+ indexes) without holding the Log lock and swapped in by
``Log.replace_segments``.

Thread-safety: the cleaner thread reads only inactive segments; the Log lock is taken for the
snapshot of the segment list and for the swap. ``abort_cleaning`` (partition deletion) waits for
an in-progress clean of that partition to stop.
"""
from __future__ import annotations

import logging
import os
import threading
import time as _time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from broker.protocol.records.batch_info import BatchInfo, Record

from . import files
from .checkpoints import OffsetCheckpointFile
from .cleaner_batch import build_empty_batch, build_retained_batch, delete_horizon_ms, iter_stored_records
from .config import LogConfig
from .log import Log, SwapHook, discard_cleaned_files
from .segment import LogSegment

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
INT32_MAX = 2147483647
_BYTES_PER_MAP_ENTRY = 24  # Kafka's SkinnyOffsetMap: 16-byte MD5 of the key + 8-byte offset
_WRITE_CHUNK = 1 << 20


class LogCleaningAbortedError(Exception):
    """The partition was deleted or is being deleted while it was cleaned."""


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level log.cleaner.* settings."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15000

    @classmethod
    def from_broker_config(cls, get: Callable[[str], Any]) -> "CleanerConfig":
        """Build from a broker config getter (``cfg.get``) with Kafka's key names."""
        return cls(enable=bool(get("log.cleaner.enable")), threads=int(get("log.cleaner.threads")),
                   dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size")),
                   io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor")),
                   backoff_ms=int(get("log.cleaner.backoff.ms")))

    @property
    def max_map_entries(self) -> int:
        return max(1, int(self.dedupe_buffer_size // _BYTES_PER_MAP_ENTRY * self.io_buffer_load_factor))


class OffsetMap:
    """key -> offset of its latest record in the dirty section, bounded to ``capacity`` keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.capacity

    def is_full(self) -> bool:
        return len(self._map) >= self.capacity


@dataclass
class CleanerStats:
    """What one clean did (logged like Kafka's LogCleaner stats)."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    start_s: float = field(default_factory=_time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0
    buffer_utilization: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_s - self.start_s, 1e-9)

    def summary(self, name: str, first_dirty: int, end_offset: int) -> str:
        mb = 1024.0 * 1024.0
        total = self.elapsed_s
        map_s = max(self.map_done_s - self.start_s, 0.0)
        clean_s = max(self.end_s - self.map_done_s, 0.0)
        reduction = 100.0 * (1.0 - self.bytes_written / self.bytes_read) if self.bytes_read else 0.0
        fewer = 100.0 * (1.0 - self.messages_written / self.messages_read) if self.messages_read else 0.0
        return ("Log cleaner cleaned log %s (dirty section = [%d, %d])\n"
                "\t%.1f MB of log processed in %.3f seconds (%.1f MB/sec).\n"
                "\tIndexed %.1f MB in %.3f seconds (%.1f Mb/sec, %.1f%% of total time)\n"
                "\tBuffer utilization: %.1f%%\n"
                "\tCleaned %.1f MB in %.3f seconds (%.1f Mb/sec, %.1f%% of total time)\n"
                "\tStart size: %.1f MB (%d messages)\n"
                "\tEnd size: %.1f MB (%d messages)\n"
                "\t%.1f%% size reduction (%.1f%% fewer messages)"
                % (name, first_dirty, end_offset,
                   (self.map_bytes_read + self.bytes_read) / mb, total,
                   (self.map_bytes_read + self.bytes_read) / mb / total,
                   self.map_bytes_read / mb, map_s, self.map_bytes_read / mb / max(map_s, 1e-9),
                   100.0 * map_s / total, 100.0 * self.buffer_utilization,
                   self.bytes_read / mb, clean_s, self.bytes_read / mb / max(clean_s, 1e-9), 100.0 * clean_s / total,
                   self.bytes_read / mb, self.messages_read, self.bytes_written / mb, self.messages_written,
                   reduction, fewer))


@dataclass
class CleanResult:
    """Outcome of Cleaner.clean: the new first dirty offset and the earliest delete horizon kept."""

    end_offset: int
    stats: CleanerStats
    min_delete_horizon_ms: Optional[int]
    groups_swapped: int


def _records(seg: LogSegment, info: BatchInfo) -> list[Record]:
    return iter_stored_records(seg.read_batch(info))


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           end_offset: int) -> list[list[LogSegment]]:
    """Consecutive segments merged while their total log and index sizes fit (Kafka's groupSegmentsBySize).

    ``end_offset`` is the base offset of the first segment not being cleaned; offsets in a group
    must stay within int32 of the group's base offset.
    """
    groups: list[list[LogSegment]] = []
    i = 0
    n = len(segments)
    while i < n:
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_bytes
        time_size = segments[i].time_index.size_bytes
        i += 1
        while i < n:
            seg = segments[i]
            nxt_base = segments[i + 1].base_offset if i + 1 < n else end_offset
            if (log_size + seg.size > max_size or index_size + seg.offset_index.size_bytes > max_index_size
                    or time_size + seg.time_index.size_bytes > max_index_size
                    or nxt_base - 1 - group[0].base_offset > INT32_MAX):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_bytes
            time_size += seg.time_index.size_bytes
            i += 1
        groups.append(group)
    return groups


class Cleaner:
    """Compacts one log at a time; no thread of its own (LogCleaner runs it)."""

    def __init__(self, config: CleanerConfig = CleanerConfig(), *, time: Callable[[], float] = _time.time,
                 swap_hook: Optional[SwapHook] = None) -> None:
        self.config = config
        self._time = time
        self.swap_hook = swap_hook

    def clean(self, log: Log, first_dirty_offset: int, *, uncleanable_offset: Optional[int] = None,
              now_ms: Optional[int] = None, check_abort: Callable[[], None] = lambda: None) -> CleanResult:
        """Clean ``log`` from its start using an offset map over [first_dirty_offset, uncleanable bound).

        ``uncleanable_offset`` further caps the dirty section (min.compaction.lag.ms). Raises
        LogCleaningAbortedError when ``check_abort`` does.
        """
        now = int(self._time() * 1000) if now_ms is None else now_ms
        cfg: LogConfig = log.config
        stats = CleanerStats()
        segments, log_start, bound, producers = log.cleaner_view()
        if uncleanable_offset is not None:
            bound = min(bound, uncleanable_offset)
        first_dirty = max(first_dirty_offset, log_start)
        # whole segments strictly below the bound (never the active one)
        cleanable = [s for i, s in enumerate(segments[:-1]) if segments[i + 1].base_offset <= bound]
        dirty = [s for i, s in enumerate(cleanable)
                 if (segments[i + 1].base_offset > first_dirty)]
        offset_map = OffsetMap(self.config.max_map_entries)
        end_offset = max(first_dirty, cleanable[0].base_offset) if cleanable else first_dirty
        for seg in dirty:
            check_abort()
            if offset_map.size and offset_map.is_full():
                break
            self._build_offset_map(seg, first_dirty, offset_map, stats)
            end_offset = segments[segments.index(seg) + 1].base_offset
        stats.buffer_utilization = offset_map.utilization
        stats.map_done_s = _time.monotonic()
        to_clean = [s for i, s in enumerate(segments[:-1]) if segments[i + 1].base_offset <= end_offset]
        horizon_ms = now + cfg.delete_retention_ms
        min_horizon: list[Optional[int]] = [None]
        swapped = 0
        for group in group_segments_by_size(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, end_offset):
            check_abort()
            if self._clean_segments(log, group, offset_map, now, horizon_ms, producers, stats, min_horizon,
                                    check_abort):
                swapped += 1
        stats.end_s = _time.monotonic()
        if logger.isEnabledFor(logging.INFO) and to_clean:
            logger.info(stats.summary("%s-%d" % log.topic_partition, first_dirty, end_offset))
        return CleanResult(end_offset, stats, min_horizon[0], swapped)

    @staticmethod
    def _build_offset_map(seg: LogSegment, start: int, offset_map: OffsetMap, stats: CleanerStats) -> None:
        for info in seg.iter_headers(0):
            stats.map_bytes_read += info.size
            if info.is_control or info.is_transactional or info.last_offset < start or info.record_count == 0:
                continue
            for rec in _records(seg, info):
                stats.map_messages_read += 1
                if rec.key is not None and rec.offset >= start:
                    offset_map.put(rec.key, rec.offset)

    def _clean_segments(self, log: Log, group: list[LogSegment], offset_map: OffsetMap, now: int, horizon_ms: int,
                        producers: dict[int, tuple[int, int]], stats: CleanerStats,
                        min_horizon: list[Optional[int]], check_abort: Callable[[], None]) -> bool:
        """Write the group's retained batches to ``<base>.log.cleaned`` and swap it in."""
        cfg = log.config
        base = group[0].base_offset
        sizes = [s.size for s in group]
        mtime = group[-1].last_modified_ms()
        discard_cleaned_files(log.dir, base)
        cleaned = LogSegment(log.dir, base, index_interval_bytes=cfg.index_interval_bytes,
                             max_index_size=cfg.segment_index_bytes, now_ms=now, file_suffix=files.CLEANED_SUFFIX)
        try:
            buf = bytearray()
            entries: list[tuple[int, int, int]] = []
            for seg in group:
                check_abort()
                for info in seg.iter_headers(0, sizes[group.index(seg)]):
                    out = self._filter_batch(seg, info, offset_map, now, horizon_ms, producers, stats, min_horizon)
                    if out is None:
                        continue
                    buf += out
                    entries.append((info.last_offset, info.max_timestamp, len(out)))
                    if len(buf) >= _WRITE_CHUNK:
                        cleaned.append(buf, entries)
                        stats.bytes_written += len(buf)
                        buf, entries = bytearray(), []
            if buf:
                cleaned.append(buf, entries)
                stats.bytes_written += len(buf)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.close()
            os.utime(files.file_path(log.dir, base, files.LOG_SUFFIX) + files.CLEANED_SUFFIX,
                     ns=(mtime * 1_000_000, mtime * 1_000_000))
        except BaseException:
            if not cleaned.log_file.closed:
                cleaned.close()
            discard_cleaned_files(log.dir, base)
            raise
        end = group[-1].next_offset if group[-1].next_offset > group[-1].base_offset else group[-1].base_offset
        ok = log.replace_segments(group, sizes, base, end, self.swap_hook)
        if not ok:
            logger.info("Skipped swapping cleaned segment %d of %s: the log changed meanwhile", base, log.dir)
        return ok

    @staticmethod
    def _filter_batch(seg: LogSegment, info: BatchInfo, offset_map: OffsetMap, now: int, horizon_ms: int,
                      producers: dict[int, tuple[int, int]], stats: CleanerStats,
                      min_horizon: list[Optional[int]]) -> Optional[bytes]:
        """The bytes to keep for one batch: the original, a rewritten batch, an empty batch, or None."""
        stats.bytes_read += info.size
        if info.is_control or info.is_transactional:
            stats.messages_read += info.record_count
            stats.messages_written += info.record_count
            return seg.read_batch(info)
        last_of_producer = False
        if info.producer_id >= 0:
            last = producers.get(info.producer_id)
            last_of_producer = last is not None and last[0] == info.last_offset
        if info.record_count == 0:
            return seg.read_batch(info) if last_of_producer else None
        data = seg.read_batch(info)
        records = iter_stored_records(data)
        stats.messages_read += len(records)
        existing = delete_horizon_ms(info)
        keep_tombstones = existing is None or now < existing
        retained: list[Record] = []
        tombstones = False
        for rec in records:
            key = rec.key
            if key is None:
                stats.invalid_messages += 1
                continue
            if offset_map.get(key) > rec.offset:
                continue
            if rec.value is None:
                if not keep_tombstones:
                    continue
                tombstones = True
            retained.append(rec)
        stats.messages_written += len(retained)
        if not retained:
            return build_empty_batch(info) if last_of_producer else None
        new_horizon = existing if existing is not None else (horizon_ms if tombstones else None)
        if tombstones and new_horizon is not None:
            if min_horizon[0] is None or new_horizon < min_horizon[0]:
                min_horizon[0] = new_horizon
        if len(retained) == len(records) and new_horizon == existing:
            return data
        return build_retained_batch(info, retained, new_horizon)


@dataclass
class LogToClean:
    """A compacted log's sections and how dirty it is (Kafka's LogToClean)."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    tombstones_due: bool

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def log_to_clean(tp: TopicPartition, log: Log, checkpoint_offset: Optional[int], now_ms: int,
                 tombstone_horizon_ms: Optional[int] = None) -> LogToClean:
    """Measure ``log``: first dirty offset (checkpoint, reset to the log start when out of range),
    first uncleanable offset (active segment, LSO/HW, min.compaction.lag.ms), section sizes, and
    whether max.compaction.lag.ms or a due tombstone horizon forces a clean."""
    cfg = log.config
    segments, log_start, bound, _ = log.cleaner_view()
    first_dirty = checkpoint_offset if checkpoint_offset is not None else log_start
    if first_dirty < log_start or first_dirty > log.log_end_offset:
        first_dirty = log_start
    inactive = segments[:-1]
    uncleanable = bound
    if cfg.min_compaction_lag_ms > 0:
        for i, seg in enumerate(inactive):
            if segments[i + 1].base_offset > first_dirty and seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    clean_bytes = cleanable_bytes = 0
    need_now = False
    for i, seg in enumerate(inactive):
        nxt = segments[i + 1].base_offset
        if nxt <= first_dirty:
            clean_bytes += seg.size
        elif nxt <= uncleanable:
            cleanable_bytes += seg.size
            if cfg.max_compaction_lag_ms < (1 << 62) and seg.size:
                first_ts = seg.first_batch_timestamp()
                if first_ts >= 0 and now_ms - first_ts > cfg.max_compaction_lag_ms:
                    need_now = True
    due = tombstone_horizon_ms is not None and now_ms >= tombstone_horizon_ms
    return LogToClean(tp, log, first_dirty, uncleanable, clean_bytes, cleanable_bytes, need_now, due)


class LogCleaner:
    """The cleaner thread plus the cleaner-offset-checkpoint of every log dir (Kafka's LogCleaner +
    LogCleanerManager)."""

    def __init__(self, config: CleanerConfig, log_dirs: list[str], logs: Callable[[], dict[TopicPartition, Log]],
                 log_dir_of: Callable[[TopicPartition], Optional[str]], *,
                 time: Callable[[], float] = _time.time) -> None:
        self.config = config
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._log_dir_of = log_dir_of
        self._time = time
        self.cleaner = Cleaner(config, time=time)
        self._lock = threading.Condition()
        self._in_progress: Optional[TopicPartition] = None
        self._aborting: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        for d in self.log_dirs:
            try:
                self._checkpoints[d] = OffsetCheckpointFile(os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT)).read()
            except ValueError:
                logger.warning("Ignoring a malformed %s in %s", files.CLEANER_OFFSET_CHECKPOINT, d)
                self._checkpoints[d] = {}
        self._stop = threading.Event()
        self._wakeup = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.last_stats: Optional[CleanerStats] = None

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        if self._thread is not None or not self.config.enable or self.config.threads <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="kafka-log-cleaner-thread-0", daemon=True)
        self._thread.start()
        logger.info("Starting the log cleaner")

    def shutdown(self) -> None:
        """Stop the thread; a clean in progress is aborted (its cleaned files are discarded)."""
        self._stop.set()
        self._wakeup.set()
        with self._lock:
            if self._in_progress is not None:
                self._aborting.add(self._in_progress)
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        logger.info("Shutting down the log cleaner")

    def wake(self) -> None:
        """Look for work now instead of after the backoff."""
        self._wakeup.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest_log()
            except Exception:
                logger.exception("Log cleaner iteration failed")
                cleaned = False
            if not cleaned:
                self._wakeup.wait(self.config.backoff_ms / 1000.0)
                self._wakeup.clear()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_offset(self, tp: TopicPartition) -> Optional[int]:
        d = self._log_dir_of(tp)
        with self._lock:
            return None if d is None else self._checkpoints.get(d, {}).get(tp)

    def _update_checkpoint(self, tp: TopicPartition, offset: Optional[int]) -> None:
        d = self._log_dir_of(tp)
        if d is None:
            return
        with self._lock:
            cps = self._checkpoints.setdefault(d, {})
            if offset is None:
                if cps.pop(tp, None) is None:
                    return
            else:
                cps[tp] = offset
            snapshot = dict(cps)
        OffsetCheckpointFile(os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT)).write(snapshot)

    # ------------------------------------------------------------------ pause / abort
    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` (its log is being deleted) and forget its checkpoint and horizon."""
        self.abort_and_pause_cleaning(tp)
        self._update_checkpoint(tp, None)
        with self._lock:
            self._paused.pop(tp, None)
            self._horizons.pop(tp, None)
            self._uncleanable.discard(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Wait until no clean of ``tp`` runs; it is not picked again until ``resume_cleaning``."""
        with self._lock:
            self._paused[tp] = self._paused.get(tp, 0) + 1
            if self._in_progress == tp:
                self._aborting.add(tp)
            while self._in_progress == tp and threading.current_thread() is not self._thread:
                self._lock.wait(0.1)
            self._aborting.discard(tp)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            n = self._paused.get(tp, 0) - 1
            if n <= 0:
                self._paused.pop(tp, None)
            else:
                self._paused[tp] = n

    def _check_abort(self, tp: TopicPartition) -> Callable[[], None]:
        def check() -> None:
            if tp in self._aborting or self._stop.is_set():
                raise LogCleaningAbortedError("cleaning of %s-%d aborted" % tp)
        return check

    # ------------------------------------------------------------------ selection and cleaning
    def cleanable_logs(self, now_ms: int) -> list[LogToClean]:
        """Compacted logs that qualify for cleaning now, filthiest first."""
        out = []
        for tp, log in self._logs().items():
            if not log.config.compact:
                continue
            with self._lock:
                if tp in self._paused or tp in self._uncleanable:
                    continue
                horizon = self._horizons.get(tp)
            try:
                ltc = log_to_clean(tp, log, self.checkpoint_offset(tp), now_ms, horizon)
            except Exception:  # closed or deleted meanwhile
                continue
            if ((ltc.need_compaction_now and ltc.cleanable_bytes > 0) or ltc.tombstones_due
                    or (ltc.cleanable_bytes > 0 and ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio)):
                out.append(ltc)
        out.sort(key=lambda x: x.cleanable_ratio, reverse=True)
        return out

    def clean_filthiest_log(self) -> bool:
        """Clean the filthiest qualifying log; False when none qualifies."""
        now = int(self._time() * 1000)
        candidates = self.cleanable_logs(now)
        if not candidates:
            return False
        ltc = candidates[0]
        with self._lock:
            if ltc.tp in self._paused:
                return False
            self._in_progress = ltc.tp
        try:
            result = self.cleaner.clean(ltc.log, ltc.first_dirty_offset, uncleanable_offset=ltc.uncleanable_offset,
                                        now_ms=now, check_abort=self._check_abort(ltc.tp))
        except LogCleaningAbortedError:
            logger.info("Cleaning of %s-%d aborted", *ltc.tp)
            return False
        except Exception:
            if self._logs().get(ltc.tp) is not ltc.log or self._stop.is_set():
                logger.info("Cleaning of %s-%d stopped: the log was closed or deleted", *ltc.tp)
                return False
            logger.exception("Unexpected exception while cleaning %s-%d; marking it uncleanable", *ltc.tp)
            with self._lock:
                self._uncleanable.add(ltc.tp)
            return False
        finally:
            with self._lock:
                self._in_progress = None
                self._lock.notify_all()
        self.last_stats = result.stats
        with self._lock:
            if result.min_delete_horizon_ms is not None:
                self._horizons[ltc.tp] = result.min_delete_horizon_ms
            else:
                self._horizons.pop(ltc.tp, None)
        self._update_checkpoint(ltc.tp, result.end_offset)
        return True

    def forget_logs(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.abort_cleaning(tp)
