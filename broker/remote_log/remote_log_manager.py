"""RemoteLogManager: the write side of tiered storage (KIP-405). For each partition this broker leads it runs an
RLMCopyTask (rolled segments below the LSO go to the RemoteStorageManager with their indexes, producer snapshot and
leader-epoch slice, recorded COPY_SEGMENT_STARTED then COPY_SEGMENT_FINISHED in the RemoteLogMetadataManager) and an
RLMExpirationTask (remote segments past retention.ms / retention.bytes or below the log start offset are recorded
DELETE_SEGMENT_STARTED, deleted, recorded DELETE_SEGMENT_FINISHED, and the log start offset moves past them); for
each follower an RLMFollowerTask that only learns the highest copied offset, which local retention needs.

What was copied is known only from the metadata manager: a new leader resumes after its highest finished offset
and never copies a segment again. A failed copy leaves its COPY_SEGMENT_STARTED record (Kafka does the same; the
segment is copied again with a new id at the next run), deleted with whatever it left in the store once it is below
the log start offset; a failed delete leaves DELETE_SEGMENT_STARTED, retried at the next run.

Threads, as Kafka 3.9's: once started, each copy task runs on the copier pool (remote.log.manager.copier.thread.pool
.size threads, ``kafka-rlm-copy-thread-pool-N``), each expiration task on the expiration pool
(remote.log.manager.expiration.thread.pool.size, ``kafka-rlm-expiration-thread-pool-N``), each follower task on the
follower pool (remote.log.manager.thread.pool.size, ``kafka-rlm-follower-thread-pool-N``), every
remote.log.manager.task.interval.ms after its previous run ended (fixed delay). A partition's task of one kind never
runs concurrently with itself, even across a cancel and a new task for the same partition (one lock per kind and
partition, a run that finds it taken is skipped). A copy and an expiration of one partition may run at once: the
expiration leaves alone the segments being copied (Kafka's segmentIdsBeingCopied). Leadership changes and
StopReplica come from one thread (TieredStorage's); a cancelled task stops between segments. Before ``start`` (unit
tests) nothing is scheduled and ``run_once`` runs every task on the caller's thread.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Set, Tuple

from broker.stats import RemoteStorageStats
from broker.remote_log.metadata_manager import RemoteLogMetadataManager
from broker.remote_log.quota import LONG_MAX, RLMQuotaManager
from broker.remote_log.rlm_thread_pool import RLMScheduledThreadPool, ScheduledTask
from broker.storage import files
from broker.storage.remote.metadata import (
    RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
    RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
)
from broker.storage.remote.storage_manager import LogSegmentData, RemoteStorageException, RemoteStorageManager
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.storage.tiered_log import (CopyableSegment, copyable_segments, leader_epoch_checkpoint_slice,
                                       segment_leader_epochs)

if TYPE_CHECKING:
    from broker.remote_log.remote_index_cache import RemoteIndexCache
    from broker.storage.log import Log

logger = logging.getLogger(__name__)

def on_owner(log: "Log", fn: Callable[[], None]) -> None:
    """A change to ``log`` from a RemoteLogManager task: a command to the partition's owner (storage/log_owner.py)."""
    log.owners.call(log.owner_key, fn)


#: (topic, partition) -> the local Log, or None when this broker has none
LogLookup = Callable[[str, int], Optional["Log"]]
S = RemoteLogSegmentState


class RLMTask:
    """One partition's periodic work; ``run`` is called by its pool (or a test's ``run_once``) and never raises: a
    failure is logged and the next run retries."""

    def __init__(self, rlm: "RemoteLogManager", tip: TopicIdPartition) -> None:
        self.rlm = rlm
        self.tip = tip
        self.cancelled = False
        #: its schedule on the pool, once the RemoteLogManager is started
        self.handle: Optional[ScheduledTask] = None
        #: shared by every task of this kind for this partition (see the module docstring)
        self._run_lock = rlm._run_lock(type(self), tip)

    def cancel(self) -> None:
        """No run after the one under way, which stops at its next check (Kafka's RLMTaskWithFuture.cancel)."""
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()

    def log(self) -> Optional["Log"]:
        log = self.rlm.log_of(self.tip.topic, self.tip.partition)
        return log if log is not None and log.remote_log_enabled else None

    def run(self) -> None:
        if self.cancelled:
            return
        if not self._run_lock.acquire(blocking=False):
            logger.debug("%s for %s is still running (an earlier task): this run is skipped",
                         type(self).__name__, self.tip)
            return
        try:
            if self.cancelled:
                return
            log = self.log()
            if log is None:
                return
            self.execute(log)
        except RemoteStorageException as exc:
            logger.warning("%s for %s failed, retried at the next run: %s", type(self).__name__, self.tip, exc)
        except Exception:  # noqa: BLE001 - as Kafka's RLMTask.run: logged, scheduled again
            if not self.cancelled:
                logger.exception("%s for %s failed, retried at the next run", type(self).__name__, self.tip)
        finally:
            self._run_lock.release()

    def execute(self, log: "Log") -> None:
        raise NotImplementedError


class RLMFollowerTask(RLMTask):
    """A follower's: the highest copied offset from the metadata, so its local retention may delete those."""

    def execute(self, log: "Log") -> None:
        highest = self.rlm.rlmm_highest_offset(self.tip)
        if highest > log.highest_offset_in_remote_storage:
            on_owner(log, lambda: log.note_highest_offset_in_remote_storage(highest))


class RLMCopyTask(RLMTask):
    """The leader's copy of rolled segments, in offset order, each once."""

    def __init__(self, rlm: "RemoteLogManager", tip: TopicIdPartition, leader_epoch: int) -> None:
        super().__init__(rlm, tip)
        self.leader_epoch = leader_epoch
        #: highest offset known copied; None until read from the metadata (a new leader's first run)
        self.copied_offset: Optional[int] = None

    def execute(self, log: "Log") -> None:
        """Copies what it can; a failure counts in RemoteCopyErrorsPerSec (unless the task was cancelled), and the
        copy lag is recorded after every run, failed or not (Kafka records it after each copy only: here it also
        grows while the remote storage is unreachable)."""
        try:
            self._copy_segments(log)
        except Exception:
            if not self.cancelled:
                self.rlm.stats.record_copy_error(self.tip.topic)
            raise
        finally:
            self.record_lag(log)

    def record_lag(self, log: "Log") -> None:
        """RemoteCopyLagBytes / RemoteCopyLagSegments: the rolled segments not yet copied (Kafka's
        onlyLocalLogSegmentsSize minus the active segment)."""
        if self.cancelled:
            return
        highest = log.highest_offset_in_remote_storage
        segments = list(log.view.segments)
        local_only = [seg for seg in segments[:-1] if seg.base_offset > highest]
        stats = self.rlm.stats
        stats.set_gauge("copy_lag_bytes", self.tip.topic, self.tip.partition, sum(seg.size for seg in local_only))
        stats.set_gauge("copy_lag_segments", self.tip.topic, self.tip.partition, len(local_only))

    def _copy_segments(self, log: "Log") -> None:
        if self.copied_offset is None:
            self.copied_offset = self.rlm.rlmm_highest_offset(self.tip)
            copied = self.copied_offset
            if copied > log.highest_offset_in_remote_storage:
                on_owner(log, lambda: log.note_highest_offset_in_remote_storage(copied))
        for candidate in copyable_segments(log, self.copied_offset + 1):
            if self.cancelled:
                return
            if self.rlm.copy_quota.is_quota_exceeded():
                logger.debug("Copy quota exceeded: %s resumes at the next run", self.tip)
                return
            end = self.copy_log_segment(log, candidate)
            self.copied_offset = end
            if end > log.highest_offset_in_remote_storage:
                on_owner(log, functools.partial(log.note_highest_offset_in_remote_storage, end))

    def copy_log_segment(self, log: "Log", candidate: CopyableSegment) -> int:
        """Copy one segment; returns its end offset once COPY_SEGMENT_FINISHED is recorded."""
        rlm = self.rlm
        seg, next_base = candidate
        end = next_base - 1
        epochs = segment_leader_epochs(log.leader_epoch_cache, seg.base_offset, next_base)
        if not epochs:
            raise RemoteStorageException(f"No leader epoch for the offsets {seg.base_offset}..{end} of {self.tip}")
        sid = RemoteLogSegmentId.generate(self.tip)
        md = RemoteLogSegmentMetadata(sid, seg.base_offset, end, seg.largest_timestamp, rlm.broker_id, rlm.now_ms(),
                                      seg.size, epochs)
        rlm.segment_ids_being_copied.add(sid)
        try:
            rlm.rlmm.add_remote_log_segment_metadata(md)
            self._copy(log, candidate, md)
        finally:
            rlm.segment_ids_being_copied.discard(sid)
        logger.info("Copied %s to remote storage with segment-id: %s", os.path.basename(seg.path), sid.id)
        return end

    def _copy(self, log: "Log", candidate: CopyableSegment, md: RemoteLogSegmentMetadata) -> None:
        """The segment's files to the RemoteStorageManager, then COPY_SEGMENT_FINISHED."""
        rlm = self.rlm
        seg, next_base = candidate
        sid = md.remote_log_segment_id
        txn = seg.txn_index.path
        snapshot = files.file_path(log.dir, next_base, files.PRODUCER_SNAPSHOT_SUFFIX)
        if not os.path.exists(snapshot):  # every roll writes one
            raise RemoteStorageException(f"No producer snapshot at {next_base} for {self.tip}")
        data = LogSegmentData(Path(seg.path), Path(seg.offset_index.path), Path(seg.time_index.path),
                              Path(txn) if os.path.exists(txn) else None, Path(snapshot),
                              leader_epoch_checkpoint_slice(log, next_base))
        rlm.stats.record_copy_request(self.tip.topic)
        custom = rlm.rsm.copy_log_segment_data(md, data)
        rlm.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            sid, rlm.now_ms(), custom, S.COPY_SEGMENT_FINISHED, rlm.broker_id))
        rlm.stats.record_copy_bytes(self.tip.topic, seg.size)
        rlm.add_copied_bytes(seg.size)
        rlm.copy_quota.record(seg.size)


class RLMExpirationTask(RLMTask):
    """The leader's total retention over local and remote data (Kafka's cleanupExpiredRemoteLogSegments)."""

    def execute(self, log: "Log") -> None:
        rlm = self.rlm
        cfg = log.config
        now = rlm.now_ms()
        started = rlm.clock.mono_ms()
        listed = list(rlm.rlmm.list_remote_log_segments(self.tip))
        finished = [m for m in listed if m.state == S.COPY_SEGMENT_FINISHED]
        remote_size = sum(m.segment_size_in_bytes for m in finished)
        took = rlm.clock.mono_ms() - started
        stats = rlm.stats
        if not self.cancelled:  # RemoteLogMetadataCount / RemoteLogSizeBytes: every segment listed, any state
            stats.set_gauge("metadata_count", self.tip.topic, self.tip.partition, len(listed))
            stats.set_gauge("log_size_bytes", self.tip.topic, self.tip.partition,
                            sum(m.segment_size_in_bytes for m in listed))
            if cfg.delete and cfg.retention_bytes >= 0:  # Kafka times the size only where retention.bytes needs it
                stats.set_gauge("log_size_computation_time", self.tip.topic, self.tip.partition, took)
        highest = max((m.end_offset for m in finished), default=-1)
        only_local = sum(s.size for s in log.view.segments if s.base_offset > highest)
        total = only_local + remote_size
        being_copied = rlm.segment_ids_being_copied
        doomed: List[RemoteLogSegmentMetadata] = []
        for m in finished:
            if m.end_offset < log.log_start_offset:
                pass
            elif cfg.delete and cfg.retention_ms >= 0 and now - m.max_timestamp_ms > cfg.retention_ms:
                pass
            elif cfg.delete and cfg.retention_bytes >= 0 and total - m.segment_size_in_bytes >= cfg.retention_bytes:
                pass
            else:
                break
            total -= m.segment_size_in_bytes
            doomed.append(m)
        # deletions a failure interrupted (the store unreachable) are retried, and the entries of failed copies
        # below the log start go too, as Kafka's cleanup considers every segment not DELETE_SEGMENT_FINISHED; a
        # copy under way on the copier pool is left alone (Kafka's segmentIdsBeingCopied)
        leftovers = [m for m in listed if m.state == S.DELETE_SEGMENT_STARTED or
                     (m.state == S.COPY_SEGMENT_STARTED and m.end_offset < log.log_start_offset and
                      m.remote_log_segment_id not in being_copied)]
        # RemoteDeleteLagSegments / RemoteDeleteLagBytes: what this run has left to delete (Kafka's
        # updateRemoteDeleteLagWith, set before the deletions and lowered after each)
        lag_segments = len(leftovers) + len(doomed)
        lag_bytes = sum(m.segment_size_in_bytes for m in leftovers) + sum(m.segment_size_in_bytes for m in doomed)
        self._record_delete_lag(lag_segments, lag_bytes)
        for m in leftovers + doomed:
            if self.cancelled:
                return
            rlm.delete_remote_log_segment(m)
            if m.state == S.COPY_SEGMENT_FINISHED:
                on_owner(log, functools.partial(log.maybe_increment_log_start_offset, m.end_offset + 1))
            lag_segments -= 1
            lag_bytes -= m.segment_size_in_bytes
            self._record_delete_lag(lag_segments, lag_bytes)

    def _record_delete_lag(self, segments: int, size: int) -> None:
        if not self.cancelled:
            self.rlm.stats.set_gauge("delete_lag_segments", self.tip.topic, self.tip.partition, segments)
            self.rlm.stats.set_gauge("delete_lag_bytes", self.tip.topic, self.tip.partition, size)


class RemoteLogManager:
    """Kafka's RemoteLogManager (write side): the tasks of the partitions this broker leads or follows, each on its
    kind's pool every remote.log.manager.task.interval.ms once ``start`` ran (``run_once`` runs them inline)."""

    def __init__(self, broker_id: int, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager,
                 log_of: LogLookup, *, task_interval_ms: int = 30000,
                 copy_max_bytes_per_second: int = LONG_MAX, copy_quota_window_num: int = 11,
                 copy_quota_window_size_seconds: int = 1, clock: Clock = SYSTEM_CLOCK,
                 stats: Optional[RemoteStorageStats] = None, copier_pool_size: int = 10,
                 expiration_pool_size: int = 10, follower_pool_size: int = 10) -> None:
        """The pool sizes: Kafka's remoteLogManagerCopierThreadPoolSize, remoteLogManagerExpirationThreadPoolSize
        and remoteLogManagerThreadPoolSize (rlm_thread_pool.pool_sizes resolves the -1 fallbacks)."""
        self.broker_id = broker_id
        self.rsm = rsm
        self.rlmm = rlmm
        self.log_of = log_of
        self.task_interval_ms = task_interval_ms
        #: wall time for the metadata event timestamps and remote retention; the copy quota's windows and the
        #: pools' schedules on mono_ms
        self.clock = clock
        self._lock = threading.Lock()
        self.leader_copy_tasks: Dict[TopicIdPartition, RLMCopyTask] = {}
        self.leader_expiration_tasks: Dict[TopicIdPartition, RLMExpirationTask] = {}
        self.follower_tasks: Dict[TopicIdPartition, RLMFollowerTask] = {}
        #: (task kind, partition) -> the lock a run of that kind holds (never two runs of one kind at once)
        self._run_locks: Dict[Tuple[type, TopicIdPartition], threading.Lock] = {}
        self._run_locks_lock = threading.Lock()
        #: segments whose copy is under way (the expiration task leaves them alone)
        self.segment_ids_being_copied: Set[RemoteLogSegmentId] = set()
        #: bytes copied so far
        self.copied_bytes = 0
        #: Kafka's RemoteStorageMetrics (BrokerTopicMetrics), read by the Prometheus collector
        self.stats = stats if stats is not None else RemoteStorageStats()
        self.copy_quota = RLMQuotaManager(copy_max_bytes_per_second, clock.mono_ms, copy_quota_window_num,
                                          copy_quota_window_size_seconds * 1000)
        #: the RemoteIndexCache of the reads (TieredStorage sets it): a deleted segment's cached indexes go with it
        self.index_cache: Optional["RemoteIndexCache"] = None
        self.copy_pool = RLMScheduledThreadPool(copier_pool_size, "RLMCopyThreadPool", "kafka-rlm-copy-thread-pool-",
                                                clock)
        self.expiration_pool = RLMScheduledThreadPool(expiration_pool_size, "RLMExpirationThreadPool",
                                                      "kafka-rlm-expiration-thread-pool-", clock)
        self.follower_pool = RLMScheduledThreadPool(follower_pool_size, "RLMFollowerScheduledThreadPool",
                                                    "kafka-rlm-follower-thread-pool-", clock)
        self._started = False
        self._closed = False

    def _run_lock(self, kind: type, tip: TopicIdPartition) -> threading.Lock:
        with self._run_locks_lock:
            return self._run_locks.setdefault((kind, tip), threading.Lock())

    def add_copied_bytes(self, n: int) -> None:
        with self._lock:
            self.copied_bytes += n

    def tasks_avg_idle_percent(self) -> float:
        """RemoteLogManagerTasksAvgIdlePercent: the copier pool's idle fraction (Kafka's gauge reads that pool's
        getIdlePercent)."""
        return self.copy_pool.idle_percent()

    def now_ms(self) -> int:
        """Wall-clock milliseconds (stored in the remote log metadata, compared with segment timestamps)."""
        return self.clock.wall_ms()

    def rlmm_highest_offset(self, tip: TopicIdPartition) -> int:
        """The highest offset of a finished copy of ``tip``, -1 when none."""
        finished = [m.end_offset for m in self.rlmm.list_remote_log_segments(tip)
                    if m.state == S.COPY_SEGMENT_FINISHED]
        return max(finished, default=-1)

    # ------------------------------------------------------------------ leadership
    def on_leadership_change(self, leaders: Mapping[TopicIdPartition, int], followers: Set[TopicIdPartition]) -> None:
        """Partitions (of tiered topics only) this broker now leads (with their leader epochs) or follows. A partition
        led already keeps its tasks (Kafka's computeIfAbsent): a new epoch changes nothing they do."""
        self.rlmm.on_partition_leadership_changes(set(leaders), set(followers))
        with self._lock:
            if self._closed:
                return
            for tip in followers:
                self._cancel_leader_tasks(tip)
                if tip not in self.follower_tasks:
                    self._schedule(self.follower_pool, self.follower_tasks.setdefault(tip, RLMFollowerTask(self, tip)))
            for tip, epoch in leaders.items():
                old = self.follower_tasks.pop(tip, None)
                if old is not None:
                    old.cancel()
                task = self.leader_copy_tasks.get(tip)
                if task is None:
                    task = self.leader_copy_tasks[tip] = RLMCopyTask(self, tip, epoch)
                    self._schedule(self.copy_pool, task)
                task.leader_epoch = epoch
                if tip not in self.leader_expiration_tasks:
                    self._schedule(self.expiration_pool,
                                   self.leader_expiration_tasks.setdefault(tip, RLMExpirationTask(self, tip)))

    def _schedule(self, pool: RLMScheduledThreadPool, task: RLMTask) -> None:
        """Under the lock: on its pool, first run now, then every task interval after each run (once started)."""
        if self._started:
            task.handle = pool.schedule_with_fixed_delay(task.run, 0, self.task_interval_ms,
                                                         f"{type(task).__name__}[{task.tip}]")

    def _cancel_leader_tasks(self, tip: TopicIdPartition) -> None:
        self.stats.remove_partition(tip.topic, tip.partition)
        for tasks in (self.leader_copy_tasks, self.leader_expiration_tasks):
            task = tasks.pop(tip, None)
            if task is not None:
                task.cancel()

    def stop_partitions(self, tips: Set[TopicIdPartition], delete_remote_log: bool) -> None:
        """StopReplica: the partitions' tasks end; with ``delete_remote_log`` (the topic is deleted) every remote
        segment is deleted, bracketed by RemotePartitionDeleteMetadata records, once the partition's runs under way
        have stopped (so they delete nothing twice)."""
        with self._lock:
            for tip in tips:
                self._cancel_leader_tasks(tip)
                task = self.follower_tasks.pop(tip, None)
                if task is not None:
                    task.cancel()
        if delete_remote_log:
            for tip in tips:
                self._await_runs(tip)
                self.delete_remote_log_partition(tip)
        with self._run_locks_lock:
            for tip in tips:
                for kind in (RLMCopyTask, RLMExpirationTask, RLMFollowerTask):
                    lock = self._run_locks.get((kind, tip))
                    if lock is not None and not lock.locked():
                        del self._run_locks[(kind, tip)]
        self.rlmm.on_stop_partitions(set(tips))

    def _await_runs(self, tip: TopicIdPartition, timeout_s: float = 30.0) -> None:
        """Wait for the (cancelled) copy and expiration runs of ``tip`` under way to end."""
        for kind in (RLMCopyTask, RLMExpirationTask):
            lock = self._run_lock(kind, tip)
            if lock.acquire(timeout=timeout_s):
                lock.release()
            else:
                logger.warning("A %s run for %s did not stop within %.0f s", kind.__name__, tip, timeout_s)

    def delete_remote_log_partition(self, tip: TopicIdPartition) -> None:
        P = RemotePartitionDeleteState
        self.rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(
            tip, P.DELETE_PARTITION_MARKED, self.now_ms(), self.broker_id))
        self.rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(
            tip, P.DELETE_PARTITION_STARTED, self.now_ms(), self.broker_id))
        for m in list(self.rlmm.list_remote_log_segments(tip)):
            self.delete_remote_log_segment(m)
        self.rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(
            tip, P.DELETE_PARTITION_FINISHED, self.now_ms(), self.broker_id))

    def delete_remote_log_segment(self, m: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED, the RSM's delete, DELETE_SEGMENT_FINISHED."""
        sid = m.remote_log_segment_id
        self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            sid, self.now_ms(), m.custom_metadata, S.DELETE_SEGMENT_STARTED, self.broker_id))
        topic = m.remote_log_segment_id.topic_id_partition.topic
        self.stats.record_delete_request(topic)
        try:
            self.rsm.delete_log_segment_data(m)
        except RemoteStorageException:
            self.stats.record_delete_error(topic)
            raise
        if self.index_cache is not None:
            self.index_cache.remove(sid.id)
        self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            sid, self.now_ms(), m.custom_metadata, S.DELETE_SEGMENT_FINISHED, self.broker_id))
        logger.info("Deleted remote log segment %s (offsets %d..%d)", sid.id, m.start_offset, m.end_offset)

    # ------------------------------------------------------------------ running
    def run_once(self) -> None:
        """Every copy task, then every expiration task, then the followers', on the caller's thread (tests; a
        run of a task its pool is running is skipped)."""
        if self._closed:
            return
        with self._lock:
            tasks: List[RLMTask] = [*self.leader_copy_tasks.values(), *self.leader_expiration_tasks.values(),
                                    *self.follower_tasks.values()]
        for task in tasks:
            task.run()

    def start(self) -> None:
        """Every task on its pool from now on (those already known first run at once)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
            for pool, tasks in ((self.copy_pool, self.leader_copy_tasks),
                                (self.expiration_pool, self.leader_expiration_tasks),
                                (self.follower_pool, self.follower_tasks)):
                for task in tasks.values():
                    self._schedule(pool, task)
        logger.info("RemoteLogManager started: copier %d, expiration %d, follower %d threads at most; tasks every "
                    "%d ms", self.copy_pool.size, self.expiration_pool.size, self.follower_pool.size,
                    self.task_interval_ms)

    def close(self) -> None:
        """Kafka's close: every task cancelled, the pools shut down (runs under way end first), the plug-ins
        closed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for tip in list(self.leader_copy_tasks) + list(self.leader_expiration_tasks):
                self._cancel_leader_tasks(tip)
            for task in self.follower_tasks.values():
                task.cancel()
            self.follower_tasks.clear()
        for pool in (self.copy_pool, self.expiration_pool, self.follower_pool):
            pool.close()
        self.rsm.close()
        self.rlmm.close()


__all__ = ["RemoteLogManager", "RLMTask", "RLMCopyTask", "RLMExpirationTask", "RLMFollowerTask", "LogLookup"]
