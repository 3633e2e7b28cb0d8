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
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Set

from broker.stats import RemoteStorageStats
from broker.remote_log.metadata_manager import RemoteLogMetadataManager
from broker.remote_log.quota import LONG_MAX, RLMQuotaManager
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
    from broker.storage.scheduler import Scheduler

logger = logging.getLogger(__name__)

def on_owner(log: "Log", fn: Callable[[], None]) -> None:
    """A change to ``log`` from a RemoteLogManager task: a command to the partition's owner (storage/log_owner.py)."""
    log.owners.call(log.owner_key, fn)


#: (topic, partition) -> the local Log, or None when this broker has none
LogLookup = Callable[[str, int], Optional["Log"]]
S = RemoteLogSegmentState


class RLMTask:
    """One partition's periodic work; ``run`` is called by the RemoteLogManager's sweep (or a test) and never
    raises: a failure is logged and the next run retries."""

    def __init__(self, rlm: "RemoteLogManager", tip: TopicIdPartition) -> None:
        self.rlm = rlm
        self.tip = tip
        self.cancelled = False

    def log(self) -> Optional["Log"]:
        log = self.rlm.log_of(self.tip.topic, self.tip.partition)
        return log if log is not None and log.remote_log_enabled else None

    def run(self) -> None:
        if self.cancelled:
            return
        log = self.log()
        if log is None:
            return
        try:
            self.execute(log)
        except RemoteStorageException as exc:
            logger.warning("%s for %s failed, retried at the next run: %s", type(self).__name__, self.tip, exc)

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
        rlm.rlmm.add_remote_log_segment_metadata(md)
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
        rlm.copied_bytes += seg.size
        rlm.copy_quota.record(seg.size)
        logger.info("Copied %s to remote storage with segment-id: %s", os.path.basename(seg.path), sid.id)
        return end


class RLMExpirationTask(RLMTask):
    """The leader's total retention over local and remote data (Kafka's cleanupExpiredRemoteLogSegments)."""

    def execute(self, log: "Log") -> None:
        rlm = self.rlm
        cfg = log.config
        now = rlm.now_ms()
        listed = list(rlm.rlmm.list_remote_log_segments(self.tip))
        if not self.cancelled:  # RemoteLogMetadataCount / RemoteLogSizeBytes: every segment listed, any state
            rlm.stats.set_gauge("metadata_count", self.tip.topic, self.tip.partition, len(listed))
            rlm.stats.set_gauge("log_size_bytes", self.tip.topic, self.tip.partition,
                                sum(m.segment_size_in_bytes for m in listed))
        finished = [m for m in listed if m.state == S.COPY_SEGMENT_FINISHED]
        highest = max((m.end_offset for m in finished), default=-1)
        only_local = sum(s.size for s in log.view.segments if s.base_offset > highest)
        total = only_local + sum(m.segment_size_in_bytes for m in finished)
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
        # below the log start go too, as Kafka's cleanup considers every segment not DELETE_SEGMENT_FINISHED
        leftovers = [m for m in listed if m.state == S.DELETE_SEGMENT_STARTED or
                     (m.state == S.COPY_SEGMENT_STARTED and m.end_offset < log.log_start_offset)]
        for m in leftovers:
            if self.cancelled:
                return
            rlm.delete_remote_log_segment(m)
        for m in doomed:
            if self.cancelled:
                return
            rlm.delete_remote_log_segment(m)
            on_owner(log, functools.partial(log.maybe_increment_log_start_offset, m.end_offset + 1))


class RemoteLogManager:
    """Kafka's RemoteLogManager (write side): the tasks of the partitions this broker leads or follows, run by one
    periodic sweep every remote.log.manager.task.interval.ms (``run_once`` runs them inline)."""

    def __init__(self, broker_id: int, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager,
                 log_of: LogLookup, *, task_interval_ms: int = 30000,
                 copy_max_bytes_per_second: int = LONG_MAX, copy_quota_window_num: int = 11,
                 copy_quota_window_size_seconds: int = 1, clock: Clock = SYSTEM_CLOCK,
                 stats: Optional[RemoteStorageStats] = None) -> None:
        self.broker_id = broker_id
        self.rsm = rsm
        self.rlmm = rlmm
        self.log_of = log_of
        self.task_interval_ms = task_interval_ms
        #: wall time for the metadata event timestamps and remote retention; the copy quota's windows on mono_ms
        self.clock = clock
        self._lock = threading.Lock()
        self.leader_copy_tasks: Dict[TopicIdPartition, RLMCopyTask] = {}
        self.leader_expiration_tasks: Dict[TopicIdPartition, RLMExpirationTask] = {}
        self.follower_tasks: Dict[TopicIdPartition, RLMFollowerTask] = {}
        #: bytes copied so far
        self.copied_bytes = 0
        #: Kafka's RemoteStorageMetrics (BrokerTopicMetrics), read by the Prometheus collector
        self.stats = stats if stats is not None else RemoteStorageStats()
        self.copy_quota = RLMQuotaManager(copy_max_bytes_per_second, clock.mono_ms, copy_quota_window_num,
                                          copy_quota_window_size_seconds * 1000)
        #: the RemoteIndexCache of the reads (TieredStorage sets it): a deleted segment's cached indexes go with it
        self.index_cache: Optional["RemoteIndexCache"] = None
        self._closed = False

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
        """Partitions (of tiered topics only) this broker now leads (with their leader epochs) or follows."""
        self.rlmm.on_partition_leadership_changes(set(leaders), set(followers))
        with self._lock:
            for tip in followers:
                self._cancel_leader_tasks(tip)
                self.follower_tasks.setdefault(tip, RLMFollowerTask(self, tip))
            for tip, epoch in leaders.items():
                old = self.follower_tasks.pop(tip, None)
                if old is not None:
                    old.cancelled = True
                task = self.leader_copy_tasks.get(tip)
                if task is None or task.leader_epoch != epoch:
                    if task is not None:
                        task.cancelled = True
                    self.leader_copy_tasks[tip] = RLMCopyTask(self, tip, epoch)
                self.leader_expiration_tasks.setdefault(tip, RLMExpirationTask(self, tip))

    def _cancel_leader_tasks(self, tip: TopicIdPartition) -> None:
        self.stats.remove_partition(tip.topic, tip.partition)
        for tasks in (self.leader_copy_tasks, self.leader_expiration_tasks):
            task = tasks.pop(tip, None)
            if task is not None:
                task.cancelled = True

    def stop_partitions(self, tips: Set[TopicIdPartition], delete_remote_log: bool) -> None:
        """StopReplica: the partitions' tasks end; with ``delete_remote_log`` (the topic is deleted) every remote
        segment is deleted, bracketed by RemotePartitionDeleteMetadata records."""
        with self._lock:
            for tip in tips:
                self._cancel_leader_tasks(tip)
                task = self.follower_tasks.pop(tip, None)
                if task is not None:
                    task.cancelled = True
        if delete_remote_log:
            for tip in tips:
                self.delete_remote_log_partition(tip)
        self.rlmm.on_stop_partitions(set(tips))

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
        """One sweep: every copy task, then every expiration task, then the followers'."""
        if self._closed:
            return
        with self._lock:
            tasks: List[RLMTask] = [*self.leader_copy_tasks.values(), *self.leader_expiration_tasks.values(),
                                    *self.follower_tasks.values()]
        for task in tasks:
            task.run()

    def start(self, scheduler: "Scheduler") -> None:
        interval = self.task_interval_ms / 1000.0
        scheduler.schedule("remote-log-manager", self.run_once, interval, interval)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for tip in list(self.leader_copy_tasks):
                self._cancel_leader_tasks(tip)
            for task in self.follower_tasks.values():
                task.cancelled = True
            self.follower_tasks.clear()
        self.rsm.close()
        self.rlmm.close()


__all__ = ["RemoteLogManager", "RLMTask", "RLMCopyTask", "RLMExpirationTask", "RLMFollowerTask", "LogLookup"]
