"""Tiered storage in the running broker (KIP-405): the RemoteLogManager, its metadata manager and storage plug-in,
the thread they run on, and the remote reader pool, wired to the ReplicaManager's leadership changes.

Threads: the RemoteLogManager's control steps (the metadata manager's start-up, which creates
``__remote_log_metadata``, leadership changes, StopReplica, index-cache resizes) run on one thread of its own
(``remote-log-manager``), in order; the copy, expiration and follower tasks run on the RemoteLogManager's three pools
(``kafka-rlm-copy-thread-pool-N`` ..., remote_log_manager.py) every ``remote.log.manager.task.interval.ms``. Changes
to a Log are commands to the log's owner. The metadata manager talks to ``__remote_log_metadata`` through the loop
(remote_log_metadata_topic.py), so nothing here runs on the loop except the hand-offs. Remote reads for consumers
run on ``remote-log-reader-N`` (``remote.log.reader.threads``, at most ``remote.log.reader.max.pending.tasks``
queued).
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from broker.config import tiered_storage as tiered_config
from broker.remote_log.metadata_manager import MetadataTopicPort, TopicBasedRemoteLogMetadataManager
from broker.remote_log.quota import LONG_MAX, RLMQuotaManager
from broker.remote_log.remote_index_cache import RemoteIndexCache
from broker.remote_log.remote_log_manager import LogLookup, RemoteLogManager
from broker.remote_log.remote_log_reader import RemoteFetchResult, RemoteLogReader
from broker.remote_log.rlm_thread_pool import pool_sizes
from broker.storage.remote.metadata import TopicIdPartition
from broker.storage.remote.storage_manager import RemoteStorageManager
from broker.storage.scheduler import Scheduler

if TYPE_CHECKING:
    import uuid

    from broker.config.kafka_config import KafkaConfig

logger = logging.getLogger(__name__)


class RemoteReadQueueFullError(Exception):
    """remote.log.reader.max.pending.tasks reads are already waiting (Kafka's RejectedExecutionException)."""


def load_remote_storage_manager(cfg: "KafkaConfig", broker_id: int) -> RemoteStorageManager:
    """The built-in implementation remote.log.storage.manager.class.name names, configured with the keys under
    remote.log.storage.manager.impl.prefix plus broker.id (as Kafka's RemoteLogManager.configureRSM)."""
    target = tiered_config.REMOTE_STORAGE_MANAGERS[str(cfg.get(tiered_config.RSM_CLASS_NAME))]
    module, _, name = target.partition(":")
    rsm: RemoteStorageManager = getattr(importlib.import_module(module), name)()
    configs: Dict[str, object] = dict(tiered_config.prefixed_configs(cfg, tiered_config.RSM_PREFIX))
    configs["broker.id"] = broker_id
    rsm.configure(configs)
    return rsm


class TieredStorage:
    """The broker's RemoteLogManager and what it runs on (see the module docstring)."""

    def __init__(self, broker_id: int, rsm: RemoteStorageManager, port: MetadataTopicPort,
                 rlmm_configs: Mapping[str, object], log_of: LogLookup, *, task_interval_ms: int = 30000,
                 copy_max_bytes_per_second: int = LONG_MAX,
                 copy_quota_window_num: int = 11, copy_quota_window_size_seconds: int = 1,
                 fetch_max_bytes_per_second: int = LONG_MAX, fetch_quota_window_num: int = 11,
                 fetch_quota_window_size_seconds: int = 1, reader_threads: int = 10, reader_max_pending: int = 100,
                 remote_fetch_max_wait_ms: int = 500, scheduler: Optional[Scheduler] = None,
                 log_dir: str, index_cache_bytes: int = 1073741824, thread_pool_size: int = 10,
                 copier_thread_pool_size: int = -1, expiration_thread_pool_size: int = -1) -> None:
        """``log_dir``: where the RemoteIndexCache keeps its ``remote-log-index-cache`` directory (Kafka: the first
        log dir); ``index_cache_bytes``: remote.log.index.file.cache.total.size.bytes; the pool sizes:
        remote.log.manager.thread.pool.size and remote.log.manager.copier/expiration.thread.pool.size (-1: the
        first)."""
        self.broker_id = broker_id
        self._port = port
        self.rlmm = TopicBasedRemoteLogMetadataManager(port)
        self._rlmm_configs = dict(rlmm_configs)
        copier, expiration, follower = pool_sizes(thread_pool_size, copier_thread_pool_size,
                                                  expiration_thread_pool_size)
        self.rlm = RemoteLogManager(broker_id, rsm, self.rlmm, log_of, task_interval_ms=task_interval_ms,
                                    copy_max_bytes_per_second=copy_max_bytes_per_second,
                                    copy_quota_window_num=copy_quota_window_num,
                                    copy_quota_window_size_seconds=copy_quota_window_size_seconds,
                                    copier_pool_size=copier, expiration_pool_size=expiration,
                                    follower_pool_size=follower)
        self.index_cache = RemoteIndexCache(index_cache_bytes, rsm, log_dir)
        self.rlm.index_cache = self.index_cache
        self.reader = RemoteLogReader(rsm, self.rlmm, self.index_cache, self.rlm.stats)
        self.fetch_quota = RLMQuotaManager(fetch_max_bytes_per_second, self.rlm.now_ms, fetch_quota_window_num,
                                           fetch_quota_window_size_seconds * 1000)
        self.remote_fetch_max_wait_ms = remote_fetch_max_wait_ms
        self.scheduler = scheduler if scheduler is not None else Scheduler("remote-log-manager")
        self._readers = ThreadPoolExecutor(max_workers=max(1, reader_threads), thread_name_prefix="remote-log-reader")
        self._reader_max_pending = max(1, reader_max_pending)
        self._pending_reads = 0
        self._pending_lock = threading.Lock()
        #: set once the metadata manager is configured (its topic exists); leadership changes and stops wait for it
        #: in ``_pending_ops``
        self.ready = threading.Event()
        self._pending_ops: List[Tuple[str, Callable[[], None]]] = []
        self._closed = False
        #: topic ids of the partitions handed to the RemoteLogManager (Kafka's topicIdByPartitionMap)
        self.topic_ids: Dict[Tuple[str, int], "uuid.UUID"] = {}

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        """Configure the metadata manager (creates ``__remote_log_metadata``), then sweep periodically."""
        self.scheduler.schedule("rlmm-initialize", self._initialize, 0.0)

    def _initialize(self) -> None:
        try:
            self.rlmm.configure(self._rlmm_configs)
        except Exception:
            logger.exception("Initializing the remote log metadata manager failed; retried in 5 s")
            self.scheduler.schedule("rlmm-initialize", self._initialize, 5.0)
            return
        with self._pending_lock:
            self.ready.set()
            pending, self._pending_ops = self._pending_ops, []
        for name, run in pending:  # the leadership changes that came before, in order
            self.scheduler.schedule(name, run, 0.0)
        self.scheduler.schedule("remote-log-manager-start", self.rlm.start, 0.0)

    def _submit(self, name: str, fn: Callable[[], None]) -> "Future[None]":
        """Run ``fn`` on the RemoteLogManager's thread, in order with everything else there."""
        fut: "Future[None]" = Future()

        def run() -> None:
            try:
                fn()
                fut.set_result(None)
            except BaseException as exc:  # noqa: BLE001 - reported to whoever waits
                logger.exception("%s failed", name)
                fut.set_exception(exc)
        with self._pending_lock:
            if self._closed:
                fut.set_result(None)
            elif not self.ready.is_set():  # the metadata manager is not configured yet: after it, in order
                self._pending_ops.append((name, run))
            else:
                self.scheduler.schedule(name, run, 0.0)
        return fut

    def close(self) -> None:
        """Shutdown: the tasks end, the plug-ins close (Kafka's RemoteLogManager.close)."""
        if self._closed:
            return
        self._closed = True
        close_port = getattr(self._port, "close", None)
        if close_port is not None:
            close_port()
        self.rlm.close()
        self.index_cache.close()
        self.scheduler.shutdown()
        self._readers.shutdown(wait=False, cancel_futures=True)

    def update_dynamic(self, copy_bytes_per_second: int, fetch_bytes_per_second: int,
                       remote_fetch_max_wait_ms: int) -> None:
        """remote.log.manager.copy/fetch.max.bytes.per.second and remote.fetch.max.wait.ms changed (dynamic
        broker configs, as Kafka's RemoteLogManager.updateCopyQuota / updateFetchQuota)."""
        self.rlm.copy_quota.bytes_per_second = copy_bytes_per_second
        self.fetch_quota.bytes_per_second = fetch_bytes_per_second
        self.remote_fetch_max_wait_ms = remote_fetch_max_wait_ms

    def resize_index_cache(self, max_bytes: int) -> None:
        """remote.log.index.file.cache.total.size.bytes changed (dynamic, as Kafka's resizeCacheSize): applied on
        the RemoteLogManager's thread, since a shrink renames the evicted entries' files, waiting for lookups under
        way (the caller may be the event loop); the cache's cleaner thread deletes them."""
        if max_bytes != self.index_cache.max_size_bytes and not self._closed:
            self.scheduler.schedule("remote-index-cache-resize", lambda: self.index_cache.resize(max_bytes), 0.0)

    # ------------------------------------------------------------------ leadership (from the ReplicaManager)
    def on_leadership_change(self, leaders: Iterable[Tuple[str, int, "uuid.UUID", int]],
                             followers: Iterable[Tuple[str, int, "uuid.UUID"]]) -> "Future[None]":
        """Partitions of tiered topics now led here (topic, partition, topic id, leader epoch) or followed."""
        lead = {TopicIdPartition(tid, t, p): epoch for t, p, tid, epoch in leaders}
        follow = {TopicIdPartition(tid, t, p) for t, p, tid in followers}
        if not lead and not follow:
            done: "Future[None]" = Future()
            done.set_result(None)
            return done
        for tip in list(lead) + list(follow):
            self.topic_ids[(tip.topic, tip.partition)] = tip.topic_id

        def apply() -> None:
            self.rlm.on_leadership_change(lead, follow)
        return self._submit("remote-log-leadership", apply)

    def on_stop_partitions(self, stops: Iterable[Tuple[str, int, bool, bool]]) -> "Future[None]":
        """StopReplica of (topic, partition, delete local log, delete remote log): Kafka's stopPartitions."""
        tips: Set[TopicIdPartition] = set()
        doomed: Set[TopicIdPartition] = set()
        for topic, partition, delete_local, delete_remote in stops:
            tid = self.topic_ids.get((topic, partition))
            if tid is None:
                continue
            tip = TopicIdPartition(tid, topic, partition)
            if delete_local:
                self.topic_ids.pop((topic, partition), None)
            tips.add(tip)
            if delete_remote:
                doomed.add(tip)

        def apply() -> None:
            if doomed:
                self.rlm.stop_partitions(doomed, delete_remote_log=True)
            if tips - doomed:
                self.rlm.stop_partitions(tips - doomed, delete_remote_log=False)
        if not tips:
            done: "Future[None]" = Future()
            done.set_result(None)
            return done
        return self._submit("remote-log-stop-partitions", apply)

    def topic_id_partition(self, topic: str, partition: int) -> Optional[TopicIdPartition]:
        tid = self.topic_ids.get((topic, partition))
        return TopicIdPartition(tid, topic, partition) if tid is not None else None

    # ------------------------------------------------------------------ remote reads
    async def read(self, tip: TopicIdPartition, epochs: Any, offset: int, max_bytes: int,
                   min_one_message: bool, read_committed: bool = False) -> RemoteFetchResult:
        """One partition's remote read on the reader pool (RemoteLogReader), recorded in the fetch quota."""
        with self._pending_lock:
            if self._pending_reads >= self._reader_max_pending:
                raise RemoteReadQueueFullError(f"{self._pending_reads} remote reads are pending")
            self._pending_reads += 1
        try:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._readers, self.reader.read, tip, epochs, offset, max_bytes,
                                                min_one_message, read_committed)
        finally:
            with self._pending_lock:
                self._pending_reads -= 1
        self.fetch_quota.record(len(result.records))
        return result

    async def find_offset_by_timestamp(self, tp: Tuple[str, int], topic_id: "uuid.UUID", timestamp: int,
                                       starting_offset: int) -> Optional[Tuple[int, int, int]]:
        """ListOffsets by timestamp in remote storage, on the reader pool: (offset, timestamp, epoch) or None."""
        tip = TopicIdPartition(topic_id, tp[0], tp[1])
        return await asyncio.get_running_loop().run_in_executor(self._readers, self.reader.find_offset_by_timestamp,
                                                                tip, timestamp, starting_offset)

    def fetch_quota_exceeded(self) -> bool:
        return self.fetch_quota.is_quota_exceeded()


__all__ = ["TieredStorage", "load_remote_storage_manager", "RemoteReadQueueFullError"]
