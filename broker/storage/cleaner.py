"""LogCleaner: compaction of logs whose cleanup.policy includes ``compact`` (Kafka's LogCleaner role).

One cleaner thread (started by LogManager.startup, stopped by LogManager.shutdown) repeatedly picks
the filthiest compacted log and cleans it, sleeping log.cleaner.backoff.ms when nothing qualifies.

A log splits into three sections: clean [log start, first dirty offset) (already compacted),
dirty [first dirty offset, first uncleanable offset) and uncleanable (the active segment, anything
at or above the LSO (itself capped by the HW), and segments younger than min.compaction.lag.ms).
Aborted transactions and transaction markers are removed as cleaner_pass.py describes. The first dirty
offset of each partition lives in the log dir's ``cleaner-offset-checkpoint`` (format in
checkpoints.py). A log qualifies when dirty bytes / (clean + dirty bytes) exceeds
min.cleanable.dirty.ratio, when max.compaction.lag.ms forces it, or when a tombstone it kept
reached its delete horizon.

One clean (``Cleaner.clean``): the segment list is read under the Log lock into a CleanPlan; the
pass (cleaner_pass.py: offset map, then ``<base>.log.cleaned`` files) runs without any lock, in a
worker process by default (CleanerConfig.use_worker_process) or on the cleaner thread; each
cleaned group is then swapped in by ``Log.replace_segments`` (the lock is held for renames only).

Thread-safety: the cleaner thread reads only inactive segments; the Log lock is taken for the
snapshot of the segment list and for the swap. ``abort_cleaning`` (partition deletion) waits for
an in-progress clean of that partition to stop.
"""
from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import threading
import time as _time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from broker.util.clock import SYSTEM_CLOCK, Clock

from . import files
from .checkpoints import OffsetCheckpointFile
from .cleaner_pass import (CleanerStats, CleanPlan, LogCleaningAbortedError, PassResult, SegmentRef,
                           run_clean_pass)
from .config import LogConfig
from .errors import KafkaStorageError
from .log import NOT_DIR_FAILURES, Log, SwapHook, discard_cleaned_files
from .log_owner import LogCommandCancelled
from .segment import LogSegment

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_BYTES_PER_MAP_ENTRY = 24  # Kafka's SkinnyOffsetMap: 16-byte MD5 of the key + 8-byte offset


@dataclass(frozen=True)
class CleanerConfig:
    """Broker-level log.cleaner.* settings, plus where the pass runs.

    ``use_worker_process``: run the CPU-heavy pass (cleaner_pass.py) in one spawned worker
    process, so the broker process keeps its GIL for produce and fetch; False runs it on the
    cleaner thread (tests, tools).
    """

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15000
    use_worker_process: bool = True

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


@dataclass
class CleanResult:
    """Outcome of Cleaner.clean: the new first dirty offset and the earliest delete horizon kept."""

    end_offset: int
    stats: CleanerStats
    min_delete_horizon_ms: Optional[int]
    groups_swapped: int


# --- the worker process side: one pass at a time, aborted through a shared Event
_worker_abort: Any = None


def _init_worker(abort_event: Any) -> None:
    global _worker_abort
    _worker_abort = abort_event


def _worker_check_abort() -> None:
    if _worker_abort is not None and _worker_abort.is_set():
        raise LogCleaningAbortedError("aborted")


def _worker_run(plan: CleanPlan) -> PassResult:
    return run_clean_pass(plan, _worker_check_abort)


class Cleaner:
    """Compacts one log at a time (Kafka's Cleaner); LogCleaner's thread calls ``clean``."""

    def __init__(self, config: CleanerConfig = CleanerConfig(use_worker_process=False), *,
                 clock: Clock = SYSTEM_CLOCK, swap_hook: Optional[SwapHook] = None) -> None:
        self.config = config
        #: wall time: the clean's ``now`` (tombstone and transaction-marker horizons, compaction lags)
        self.clock = clock
        self.swap_hook = swap_hook
        self._pool: Optional[ProcessPoolExecutor] = None
        self._abort_event: Any = None

    def plan(self, log: Log, first_dirty_offset: int, uncleanable_offset: Optional[int], now_ms: int) -> tuple[
            CleanPlan, dict[int, LogSegment]]:
        """The pass input for ``log`` (segment list read under its lock) and its segments by base offset."""
        cfg: LogConfig = log.config
        segments, log_start, bound, producers = log.owners.call(log.owner_key, log.cleaner_view)
        if uncleanable_offset is not None:
            bound = min(bound, uncleanable_offset)
        refs = []
        for seg, nxt in zip(segments, segments[1:]):
            if nxt.base_offset > bound:
                break
            refs.append(SegmentRef(seg.base_offset, seg.size, nxt.base_offset, seg.offset_index.size_bytes,
                                   seg.time_index.size_bytes, seg.last_modified_ms()))
        plan = CleanPlan(log.dir, tuple(refs), max(first_dirty_offset, log_start), now_ms, cfg.delete_retention_ms,
                         cfg.segment_bytes, cfg.segment_index_bytes, cfg.index_interval_bytes,
                         self.config.max_map_entries, producers, tuple(s.base_offset for s in segments))
        return plan, {s.base_offset: s for s in segments}

    def clean(self, log: Log, first_dirty_offset: int, *, uncleanable_offset: Optional[int] = None,
              now_ms: Optional[int] = None, check_abort: Callable[[], None] = lambda: None) -> CleanResult:
        """Clean ``log`` from its start with an offset map from ``first_dirty_offset`` (see cleaner_pass.py).

        ``uncleanable_offset`` further caps the dirty section (min.compaction.lag.ms). Raises
        LogCleaningAbortedError when ``check_abort`` does; cleaned files are then discarded.
        """
        now = self.clock.wall_ms() if now_ms is None else now_ms
        plan, by_base = self.plan(log, first_dirty_offset, uncleanable_offset, now)
        result = self._run(plan, check_abort)
        swapped = i = 0

        def aborted() -> bool:
            try:
                check_abort()
                return False
            except LogCleaningAbortedError:
                return True

        try:
            for i, g in enumerate(result.groups):
                check_abort()
                old = [by_base[b] for b in g.old_bases]
                # a command to the partition's owner, withdrawn if the clean is aborted before the owner takes it (the
                # owner may itself be waiting for this abort: a partition deletion, a truncation)
                try:
                    done = log.owners.call(log.owner_key, functools.partial(
                        log.replace_segments, old, list(g.old_sizes), g.base_offset, g.end_offset, self.swap_hook),
                        cancelled=aborted)
                except LogCommandCancelled:
                    raise LogCleaningAbortedError("cleaning of %s-%d aborted" % log.owner_key) from None
                if done:
                    swapped += 1
                else:
                    logger.info("Skipped swapping cleaned segment %d of %s: the log changed meanwhile",
                                g.base_offset, log.dir)
        except BaseException:
            for g in result.groups[i:]:
                discard_cleaned_files(log.dir, g.base_offset)
            raise
        stats = result.stats
        stats.end_s = _time.monotonic()
        if plan.segments and logger.isEnabledFor(logging.INFO):
            logger.info(stats.summary("%s-%d" % log.topic_partition, plan.first_dirty_offset, result.end_offset))
        return CleanResult(result.end_offset, stats, result.min_delete_horizon_ms, swapped)

    def _run(self, plan: CleanPlan, check_abort: Callable[[], None]) -> PassResult:
        if not self.config.use_worker_process:
            return run_clean_pass(plan, check_abort)
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._abort_event = ctx.Event()
            self._pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker,
                                             initargs=(self._abort_event,))
        self._abort_event.clear()
        future = self._pool.submit(_worker_run, plan)
        while True:
            try:
                return future.result(timeout=0.1)
            except FutureTimeout:
                try:
                    check_abort()
                except BaseException:
                    self._abort_event.set()
                    result = future.result()  # raises LogCleaningAbortedError if the worker saw the abort
                    for g in result.groups:
                        discard_cleaned_files(plan.dir, g.base_offset)
                    raise

    def close(self) -> None:
        """Stop the worker process (an in-progress pass is aborted)."""
        if self._abort_event is not None:
            self._abort_event.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


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
    segments, log_start, bound = log.cleaner_bounds()
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
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._log_dir_of = log_dir_of
        self.clock = clock
        self.cleaner = Cleaner(config, clock=clock)
        self._lock = threading.Condition()
        self._in_progress: Optional[TopicPartition] = None
        self._aborting: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        #: where I/O errors are reported (the LogManager's LogDirFailureChannel), and the dirs that failed
        self.failure_channel: Optional[Any] = None
        self._failed_dirs: set[str] = set()
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
        self.cleaner.close()
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
        if d is None or d in self._failed_dirs:
            return
        with self._lock:
            cps = self._checkpoints.setdefault(d, {})
            if offset is None:
                if cps.pop(tp, None) is None:
                    return
            else:
                cps[tp] = offset
            snapshot = dict(cps)
        path = os.path.join(d, files.CLEANER_OFFSET_CHECKPOINT)
        try:
            OffsetCheckpointFile(path).write(snapshot)
        except OSError as exc:
            self._report(d, "Error while writing to checkpoint file %s" % path, exc)

    def _report(self, log_dir: str, msg: str, exc: OSError) -> None:
        if self.failure_channel is not None and exc.errno not in NOT_DIR_FAILURES:
            self.failure_channel.maybe_add_offline_log_dir(log_dir, msg, exc)
        else:
            logger.error("%s: %s", msg, exc)

    def handle_log_dir_failure(self, log_dir: str, tps: Iterable[TopicPartition]) -> None:
        """Stop cleaning in ``log_dir`` (Kafka's LogCleanerManager.handleLogDirFailure): its checkpoints are
        forgotten and never written again; a clean in progress there is aborted."""
        logger.info("Stopping cleaning logs in dir %s", log_dir)
        with self._lock:
            self._failed_dirs.add(log_dir)
            self._checkpoints.pop(log_dir, None)
            for tp in tps:
                if self._in_progress == tp:
                    self._aborting.add(tp)
                self._horizons.pop(tp, None)
                self._uncleanable.discard(tp)

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
        now = self.clock.wall_ms()
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
        except Exception as exc:
            if isinstance(exc, OSError):
                self._report(ltc.log.parent_dir, "Failed to clean up log for %s-%d in dir %s due to IOException"
                             % (*ltc.tp, ltc.log.parent_dir), exc)
                return False
            if isinstance(exc, KafkaStorageError) or ltc.log.dir_offline:
                return False  # the log dir failed: reported to the LogDirFailureChannel
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
