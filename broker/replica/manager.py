"""Partitions hosted by this broker: leadership, append, read, offsets, replication (Kafka's ReplicaManager).

The API handlers call in here with plain values (topic-partitions, record buffers, offsets);
this module calls the storage layer on worker threads (``run_io``; one partition's appends and
truncations always on one thread), so no disk access runs on the event loop.

Replication, as Kafka 3.9 does it in ZooKeeper mode:
- LeaderAndIsr (:meth:`become_leader_or_follower`) makes partitions leaders or followers; followers
  are handed to the :class:`~broker.replica.fetcher.ReplicaFetcherManager`, which fetches from the
  leader with Fetch requests carrying a replica id.
- A follower's Fetch (``replica_id >= 0``) reads up to the LEO and records the follower's position
  (:meth:`Partition.update_follower_fetch_state`), which may expand the ISR and advance the high
  watermark; an acks=-1 produce waits (:class:`~broker.replica.purgatory.DelayedProduce`) until the
  HW passes its records, and completes in the same loop turn as the fetch that advanced it.
- One purgatory per kind of delayed operation, as Kafka's (:mod:`broker.replica.purgatory`):
  ``delayed_produce_purgatory``, ``delayed_fetch_purgatory`` (a follower's fetch completes on an append,
  a consumer's when the HW moves, or on a follower when the fetcher raised the local HW for KIP-392
  follower reads), ``delayed_delete_records_purgatory`` and ``delayed_elect_leader_purgatory``
  (ElectLeaders, completed by UpdateMetadata). Whatever moves a partition's state calls
  :meth:`ReplicaManager.try_complete_delayed` (Kafka's tryCompleteDelayedRequests).
- ISR shrinks are checked every replica.lag.time.max.ms / 2; the HW is checkpointed every
  replica.high.watermark.checkpoint.interval.ms.

Log dir failure (KIP-112): storage reports an I/O error to the LogDirFailureChannel; the channel wakes the loop and
:meth:`ReplicaManager.handle_log_dir_failure` stops serving the dir's replicas: their fetchers stop, they move to
``offline_partitions`` (Kafka's HostedPartition.Offline: every request for them answers KAFKA_STORAGE_ERROR, waiting
produces and fetches complete at once), the LogManager forgets their logs, and the controller is told through the
``/log_dir_event_notification`` znode; with no live log dir left the process halts (status 1).

Loop affinity: every method runs on the event loop; disk work goes through ``run_io``.
"""
from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Protocol, Sequence, Tuple, TypeVar, Union, cast)

from broker.accel import record_batch
from broker.errors import ErrorCode
from broker.stats import BrokerTopicStats
from broker.replica.alter_log_dirs import ReplicaAlterLogDirsManager
from broker.replica.config import ReplicaConfig
from broker.replica.errors import error_code_for
from broker.replica.fetcher import InitialFetchState, ReplicaFetcherManager
from broker.replica.io_workers import NOT_RUN, InlineIoWorkers, IoWorkers, NotRun
from broker.replica.partition import (EPOCH_DURING_DELETE, NO_EPOCH, SENTINEL_GUARD, AlterPartitionSubmitter,
                                      LeaderAndIsrPartitionState, LeaderAppend, Partition)
from broker.replica.partition_changes import PartitionChanges
from broker.replica.purgatory import (DelayedDeleteRecords, DelayedElectLeader, DelayedFetch, DelayedOperationPurgatory,
                                      DelayedRemoteFetch,
                                      DelayedProduce, DeleteRecordsStatus, ProduceStatus)
from broker.replica.replication_quota import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, ReplicationQuotas
from broker.replica.results import ProduceResult, ReadResult
from broker.storage.errors import LogBusyError
from broker.storage.config import LONG_MAX
from broker.util import runtime_tuning
from broker.util.broker_channel import BrokerChannelFactory, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.util.request_time import parked

if TYPE_CHECKING:
    from broker.storage.config import LogConfig
    from broker.storage.partition_log import LogAppendInfo, PartitionLog
    from broker.storage.log_dir_failure_channel import LogDirFailureChannel
    from broker.storage.log_manager import LogManager
    from broker.replica.tiered_storage import TieredStorage

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
T = TypeVar("T")
ZERO_UUID = uuid.UUID(int=0)
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

__all__ = ["ReplicaManager", "Partition", "LeaderAndIsrPartitionState", "ProduceResult", "ReadResult",
           "FetchPartitionInfo", "ClientMetadata", "fetch_request_replica", "ReplicaConfig"]


@dataclass
class FetchPartitionInfo:
    """One partition of a Fetch request (Kafka's FetchRequest.PartitionData)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    topic_id: Optional[uuid.UUID] = None
    #: an incremental fetch session's partition the fetcher did not resend (its position is unchanged): the
    #: (high watermark, last stable offset, log start offset) it was last told. Such a partition with nothing
    #: new is left out of fetch_messages' answer without a read (see ReplicaManager._unchanged).
    known: Optional[Tuple[int, int, int]] = None


class SessionReads(Protocol):
    """A follower's incremental fetch session as fetch_messages reads it (``broker.api.fetch`` implements it):
    the partitions that changed since the session last looked are found through :class:`PartitionChanges`
    instead of by walking the whole session."""

    #: the PartitionChanges sequence number up to which this session's changes have been taken
    changes_seen: int

    def reads_for(self, tps: Optional[Iterable[TopicPartition]]) -> List[Tuple[TopicPartition, "FetchPartitionInfo"]]:
        """Those of ``tps`` (None: all) the session holds, as reads (``known`` set unless the fetcher resent them)."""


class ClientMetadata(NamedTuple):
    """A consumer's Fetch v11+ metadata: enables follower reads and the replica selector (KIP-392)."""

    rack_id: str = ""
    client_id: str = ""


FetchRead = Union[Tuple[TopicPartition, int, int], Tuple[TopicPartition, FetchPartitionInfo]]


def fetch_request_replica(request: Any, api_version: int) -> Tuple[int, int]:
    """(replica_id, replica_epoch) of a decoded Fetch request: v15+ carries them in ``replica_state``."""
    if api_version >= 15:
        st = getattr(request, "replica_state", None)
        if st is not None:
            return int(st.replica_id), int(st.replica_epoch)
        return CONSUMER_REPLICA_ID, -1
    return int(getattr(request, "replica_id", CONSUMER_REPLICA_ID)), -1


def _topic_id_str(topic_id: Any) -> Optional[str]:
    """partition.metadata wants the base64url form Kafka writes."""
    if topic_id is None:
        return None
    if isinstance(topic_id, uuid.UUID):
        if topic_id == ZERO_UUID:
            return None
        return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
    return str(topic_id)


def _parse_topic_id(text: Optional[str]) -> Optional[uuid.UUID]:
    if not text:
        return None
    try:
        if len(text) == 22:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        return uuid.UUID(text)
    except (ValueError, TypeError):
        return None


@dataclass
class _ReadJob:
    tp: TopicPartition
    partition: Partition
    #: the partition's log when the read was accepted (a deletion meanwhile leaves the read on it, then closed)
    log: PartitionLog
    fetch_offset: int
    max_bytes: int
    upper: str  # "leo" | "hw" | "lso"
    last_fetched_epoch: int
    #: leader replication throttle: answer the offsets but no records (Kafka's shouldLeaderThrottle)
    throttled: bool = False


class ReplicaManager:
    """Owns :class:`Partition` objects, their replication, and the threads that touch their logs."""

    def __init__(self, broker_id: int, log_manager: LogManager, io_threads: int = 4, *,
                 config: Optional[ReplicaConfig] = None,
                 clock: Clock = SYSTEM_CLOCK,
                 alter_partition_manager: Optional[AlterPartitionSubmitter] = None,
                 channel_factory: Optional[BrokerChannelFactory] = None,
                 broker_epoch: Optional[Callable[[], int]] = None,
                 is_broker_alive: Optional[Callable[[int], bool]] = None,
                 broker_node: Optional[Callable[[int], Optional[BrokerNode]]] = None,
                 broker_rack: Optional[Callable[[int], Optional[str]]] = None,
                 metadata_has_partition: Optional[Callable[[TopicPartition], bool]] = None,
                 quotas: Optional[ReplicationQuotas] = None,
                 log_dir_event_notifier: Optional[Callable[[], Any]] = None,
                 halt: Callable[[int], None] = os._exit) -> None:
        """
        ``io_threads``: the disk I/O workers (each partition's log owner); 0 (unit tests only: the broker always has
        at least one) runs every job, and the HW checkpoint, at once on the event loop (:class:`InlineIoWorkers`),
        so a test's outcomes are there when the call returns, without threads.
        ``clock``: the replica layer's time: its ``mono_ms()`` for the replica lag bookkeeping (ISR lag against
        replica.lag.time.max.ms, the leader's view of its followers: monotonic; Kafka's Partition uses
        time.milliseconds(), so a wall-clock jump forward would shrink every ISR at the next check; these times are
        never stored or sent, so the monotonic clock is only safer), its timers for the purgatories, the Fetch
        long poll and the fetchers' backoff. ``broker_epoch``: this broker's epoch (czxid of its
        registration). ``is_broker_alive`` / ``broker_node`` / ``broker_rack``: the metadata cache's view of
        other brokers. ``metadata_has_partition``: whether the cluster knows a partition this broker does not
        host (Kafka then answers NOT_LEADER_OR_FOLLOWER instead of UNKNOWN_TOPIC_OR_PARTITION).
        ``channel_factory`` builds the replica fetchers' channels (no fetcher manager without it).
        ``quotas``: the leader / follower / alter-log-dirs replication quotas (default: unthrottled).
        ``log_dir_event_notifier()`` (sync or async) tells the controller a log dir failed
        (KafkaZkClient.propagate_log_dir_event); ``halt(status)`` ends the process when every log dir failed.
        """
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.config = config if config is not None else ReplicaConfig()
        #: Kafka's ReplicaManager.time
        self.time = clock
        self._clock = clock.mono_ms
        self.alter_partition_manager = alter_partition_manager
        self._broker_epoch = broker_epoch if broker_epoch is not None else (lambda: -1)
        self._is_broker_alive = is_broker_alive if is_broker_alive is not None else (lambda _b: True)
        self._broker_node = broker_node if broker_node is not None else (lambda _b: None)
        self._broker_rack = broker_rack if broker_rack is not None else (lambda _b: None)
        self._metadata_has_partition = metadata_has_partition
        #: replication throttles (leader.replication.throttled.rate and friends)
        self.quotas = quotas if quotas is not None else ReplicationQuotas(broker_id, clock=clock.mono_ms)
        self.partitions: Dict[TopicPartition, Partition] = {}
        #: partitions whose log was in a failed log dir (Kafka's HostedPartition.Offline): KAFKA_STORAGE_ERROR
        self.offline_partitions: Dict[TopicPartition, Partition] = {}
        self._log_dir_event_notifier = log_dir_event_notifier
        self._halt = halt
        #: the LogManager's LogDirFailureChannel
        self.log_dir_failure_channel: LogDirFailureChannel = log_manager.failure_channel
        #: offline log dirs being handled, one after the other (Kafka's LogDirFailureHandler thread)
        self._log_dir_failures: Optional["asyncio.Task[None]"] = None
        #: which partitions' fetchable state changed, for followers' fetch sessions (see PartitionChanges)
        self.changes = PartitionChanges()
        #: Kafka's four purgatories of this ZooKeeper-mode broker (see broker.replica.purgatory)
        self.delayed_produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = \
            DelayedOperationPurgatory("Produce", clock)
        self.delayed_fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory("Fetch", clock)
        self.delayed_delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = \
            DelayedOperationPurgatory("DeleteRecords", clock)
        self.delayed_elect_leader_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = \
            DelayedOperationPurgatory("ElectLeader", clock)
        #: KIP-405's fifth: consumers' fetches waiting for a remote read
        self.delayed_remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] = \
            DelayedOperationPurgatory("RemoteFetch", clock)
        self.controller_epoch = 0
        self.leadership_listeners: List[Any] = []
        #: transaction.partition.verification.enable (a dynamic broker config; the server sets the reader): while
        #: true every transactional batch appended as leader must belong to an open transaction of its producer or
        #: present its verification guard, as Kafka's UnifiedLog.analyzeAndValidateProducerState checks
        self.transaction_verification_enabled: Callable[[], bool] = lambda: False
        #: called after a transaction marker appended as leader was replicated (add_txn_marker_listener)
        self.txn_marker_listeners: List[Callable[[str, int, int, bool], Any]] = []
        self.is_shutting_down = False
        #: BrokerTopicMetrics (bytes/messages in, bytes out) when the metrics endpoint is on, else None
        self.topic_stats: Optional[BrokerTopicStats] = None
        #: ISR changes of partitions led here, committed by the controller (IsrShrinksPerSec / IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._state_lock: Optional[asyncio.Lock] = None
        self._tasks: List["asyncio.Task[None]"] = []
        self._workers: Union[IoWorkers, InlineIoWorkers] = IoWorkers(io_threads) if io_threads > 0 else InlineIoWorkers()
        # each partition's worker is its log's owner: the storage scheduler's and the cleaner's commands go there too
        log_manager.attach_owners(self._workers)
        #: one thread for the periodic HW checkpoint (fsyncs), apart from the append/read workers (none when inline)
        self._checkpoint_pool: Optional[ThreadPoolExecutor] = \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="hw-checkpoint") if io_threads > 0 else None
        self.fetcher_manager: Optional[ReplicaFetcherManager] = None
        #: tiered storage (KIP-405): the RemoteLogManager and its reader pool, when remote.log.storage.system.enable
        self.tiered: Optional["TieredStorage"] = None
        #: partitions moving between this broker's log dirs (AlterReplicaLogDirs)
        self.alter_log_dirs = ReplicaAlterLogDirsManager(self)
        if channel_factory is not None:
            self.fetcher_manager = ReplicaFetcherManager(broker_id, self._broker_epoch, channel_factory, self,
                                                         self.config)

    # --- threading helper ----------------------------------------------------------
    async def run_io(self, fn: Callable[..., Any], *args: Any, key: Any = None) -> Any:
        """Run blocking (disk) work on a worker thread; same ``key``, same thread."""
        return await self._workers.submit(fn, *args, key=key)

    def run_here_if_owner_idle(self, key: TopicPartition, fn: Callable[..., T], *args: Any) -> "T | NotRun":
        """On the loop: ``fn(*args)`` now, as ``key``'s log owner, when that owner is idle (``run_if_idle`` in
        io_workers.py: nothing handed to it pending, no other thread's command running); else ``NOT_RUN``. For a
        short job that blocks on nothing but page-cache writes and takes the Log's lock without waiting."""
        return self._workers.run_if_idle(key, fn, *args)

    @property
    def state_lock(self) -> asyncio.Lock:
        """Serializes LeaderAndIsr / StopReplica handling (Kafka's replicaStateChangeLock)."""
        if self._state_lock is None:
            self._state_lock = asyncio.Lock()
        return self._state_lock

    def now_ms(self) -> int:
        return self._clock()

    # --- lifecycle -----------------------------------------------------------------
    def startup(self) -> None:
        """Start the ISR expiration and high watermark checkpoint loops (call on the event loop)."""
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._periodic(self.config.replica_lag_time_max_ms / 2,
                                                           self._shrink_isr_tick, "isr-expiration")))
        self._tasks.append(loop.create_task(self._periodic(self.config.replica_high_watermark_checkpoint_interval_ms,
                                                           self.checkpoint_high_watermarks, "highwatermark-checkpoint")))
        def wake() -> None:  # from the I/O thread that met the error
            loop.call_soon_threadsafe(self._on_offline_log_dir_queued)

        self.log_dir_failure_channel.set_wakeup(wake)
        self._on_offline_log_dir_queued()  # dirs that failed before start-up finished

    # --- log dir failure (KIP-112) --------------------------------------------------
    def _on_offline_log_dir_queued(self) -> None:
        """On the loop: take the queued offline dirs, one handler task at a time (Kafka's LogDirFailureHandler)."""
        if self._log_dir_failures is None or self._log_dir_failures.done():
            self._log_dir_failures = asyncio.get_running_loop().create_task(self._handle_queued_log_dir_failures())

    async def _handle_queued_log_dir_failures(self) -> None:
        channel = self.log_dir_failure_channel
        while not self.is_shutting_down:
            d = channel.poll_offline_log_dir()
            if d is None:
                return
            try:
                await self.handle_log_dir_failure(d)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Handling the failure of log dir %s failed", d)

    async def handle_log_dir_failure(self, log_dir: str, notify_controller: bool = True) -> None:
        """Stop serving the replicas in ``log_dir`` (Kafka's ReplicaManager.handleLogDirFailure): their fetchers and
        moves stop, they answer KAFKA_STORAGE_ERROR from now on and what waits on them completes, the LogManager
        forgets their logs; then halt when no log dir is left, else tell the controller (which sends LeaderAndIsr
        for every replica of this broker and elects new leaders for those answering KAFKA_STORAGE_ERROR)."""
        lm = self.log_manager
        log.warning("Stopping serving replicas in dir %s because the log directory has failed.", log_dir)
        async with self.state_lock:
            offline = sorted(tp for tp, p in self.partitions.items()
                             if p.log is not None and os.path.dirname(p.log.dir) == log_dir)
            moving = sorted(tp for tp, p in self.partitions.items()
                            if p.future_log is not None and os.path.dirname(p.future_log.dir) == log_dir)
            if self.fetcher_manager is not None and offline:
                await self.fetcher_manager.remove_fetcher_for_partitions(offline)
            await self.alter_log_dirs.remove(offline + moving)
            for tp in moving:
                self.partitions[tp].future_log = None  # dropped, not deleted (Kafka: deleteFromLogDir = false)
            for tp in offline:
                self.offline_partitions[tp] = self.partitions.pop(tp)
                # waiting produces fail with KAFKA_STORAGE_ERROR, fetches answer it: nobody waits for a timeout
                self._complete_delayed_fetch_and_produce(tp)
            log.warning("Broker %d stopped fetcher for partitions %s and stopped moving logs for partitions %s because "
                        "they are in the failed log directory %s.", self.broker_id,
                        ",".join("%s-%d" % tp for tp in offline), ",".join("%s-%d" % tp for tp in moving), log_dir)
        await self._run_on_checkpoint_thread(lm.handle_log_dir_failure, log_dir)
        cleaner = getattr(lm, "cleaner", None)
        for tp in moving:
            if cleaner is not None:
                cleaner.resume_cleaning(tp)
        live = getattr(lm, "live_log_dirs", None)
        if live is not None and not live:
            # Kafka logs this with fatal(), which SLF4J prints at ERROR
            log.error("Shutdown broker because all log dirs in %s have failed", ", ".join(lm.log_dirs))
            for handler in logging.getLogger().handlers:
                handler.flush()
            self._halt(1)
            return
        # the coordinators give up the __consumer_offsets / __transaction_state partitions they can no longer write
        await self._notify("on_resign", offline)
        if notify_controller and self._log_dir_event_notifier is not None:
            try:
                r = self._log_dir_event_notifier()
                if inspect.isawaitable(r):
                    await r
            except Exception as exc:  # noqa: BLE001 - the replicas are offline all the same
                log.error("Could not notify the controller of the failure of log dir %s: %s", log_dir, exc)
        log.warning("Stopped serving replicas in dir %s", log_dir)

    async def _periodic(self, interval_ms: float, fn: Callable[[], Any], name: str) -> None:
        while True:
            await self.time.sleep_ms(max(interval_ms, 1))
            try:
                r = fn()
                if inspect.isawaitable(r):
                    await r
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Periodic task %s failed", name)

    async def stop(self) -> None:
        """Stop fetchers, periodic tasks and the AlterPartition manager; checkpoint HWs (before the log manager
        shuts down)."""
        self.is_shutting_down = True
        if self.tiered is not None:  # its tasks end before the logs close (Kafka closes the RemoteLogManager first)
            await asyncio.get_running_loop().run_in_executor(None, self.tiered.close)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.alter_log_dirs.shutdown()
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        shutdown = getattr(self.alter_partition_manager, "shutdown", None)
        if shutdown is not None:
            r = shutdown()
            if inspect.isawaitable(r):
                await r
        try:
            await self.checkpoint_high_watermarks()
        except Exception:
            log.exception("Final high watermark checkpoint failed")

    def shutdown(self) -> None:
        """Stop the I/O worker threads (after :meth:`stop` and the log manager's shutdown)."""
        self._workers.shutdown()
        if self._checkpoint_pool is not None:
            self._checkpoint_pool.shutdown(wait=True)

    def add_leadership_listener(self, listener: Any) -> None:
        """``listener.on_become_leader(topic, partition)`` / ``on_resign(topic, partition)`` (sync or async)
        are called after LeaderAndIsr made this broker the leader of a partition / a follower in a new leader
        epoch, and (on_resign) when StopReplica deleted a partition (the group coordinator loads/unloads
        ``__consumer_offsets`` partitions there, as Kafka's onLeadershipChange / StopReplica handling do)."""
        self.leadership_listeners.append(listener)

    async def _notify(self, method: str, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            for listener in list(self.leadership_listeners):
                fn = getattr(listener, method, None)
                if fn is None:
                    continue
                try:
                    r = fn(tp[0], tp[1])
                    if inspect.isawaitable(r):
                        await r
                except Exception:
                    log.exception("Leadership listener %s.%s failed for %s-%d", type(listener).__name__, method, *tp)

    # --- transaction markers ---------------------------------------------------------
    def add_txn_marker_listener(self, cb: Callable[[str, int, int, bool], Any]) -> None:
        """``cb(topic, partition, producer_id, committed)`` runs on the event loop once a COMMIT/ABORT marker this
        broker appended as leader is replicated (WriteTxnMarkers answers NONE for that partition): the group
        coordinator then applies or drops the producer's pending transactional offsets on ``__consumer_offsets``
        (Kafka's onTransactionCompleted). A coroutine result is awaited before WriteTxnMarkers answers; an
        exception turns that partition's answer into UNKNOWN_SERVER_ERROR, as Kafka does."""
        self.txn_marker_listeners.append(cb)

    async def append_txn_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                 committed: bool, partitions: Iterable[TopicPartition], timeout_ms: int
                                 ) -> Dict[TopicPartition, int]:
        """One WriteTxnMarkers marker: append the COMMIT/ABORT control batch as leader to each partition with
        acks=-1 and the coordinator's origin; {partition: error code}. A partition this broker does not host
        answers UNKNOWN_TOPIC_OR_PARTITION (Kafka looks at the hosted partitions, not the metadata)."""
        from broker.protocol.records.control import end_txn_marker_batch
        errors: Dict[TopicPartition, int] = {}
        entries: Dict[TopicPartition, Any] = {}
        for tp in partitions:
            p = self.partitions.get(tp)
            if p is None or p.log is None or p.deleted:
                errors[tp] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                entries[tp] = bytearray(end_txn_marker_batch(producer_id, producer_epoch, coordinator_epoch, committed,
                                                             timestamp_ms=self.time.wall_ms()))
        if not entries:
            return errors
        results = await self.append_records(-1, entries, timeout_ms, is_from_client=False)
        for tp, res in results.items():
            errors[tp] = res.error_code
            if res.error_code:
                log.debug("Writing the %s marker of producer %d to %s-%d failed: %s", "COMMIT" if committed else
                          "ABORT", producer_id, tp[0], tp[1], res.error_message or ErrorCode(res.error_code).name)
                continue
            for cb in list(self.txn_marker_listeners):
                try:
                    r = cb(tp[0], tp[1], producer_id, committed)
                    if inspect.isawaitable(r):
                        await r
                except Exception:
                    log.exception("Transaction marker listener failed for producer %d on %s-%d", producer_id, *tp)
                    errors[tp] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        return errors

    # --- partitions ----------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Optional[Partition]:
        return self.partitions.get(tp)

    def _missing_partition_error(self, tp: TopicPartition) -> int:
        if tp in self.offline_partitions:
            return int(ErrorCode.KAFKA_STORAGE_ERROR)
        if self._metadata_has_partition is not None and self._metadata_has_partition(tp):
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def _new_partition(self, topic: str, partition: int) -> Partition:
        p = Partition(topic, partition, self.broker_id, replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                      clock=self.time, alter_partition_manager=self.alter_partition_manager,
                      is_broker_alive=self._is_broker_alive, on_delayed_check=self.try_complete_delayed,
                      alter_partition_retry_backoff_ms=self.config.alter_partition_retry_backoff_ms)
        p.isr_change_listener = self._on_isr_change
        return p

    def _on_isr_change(self, kind: str) -> None:
        """A leader's ISR change was committed (Kafka's DefaultAlterPartitionListener.markIsrShrink/Expand)."""
        if kind == "shrink":
            self.isr_shrinks += 1
        elif kind == "expand":
            self.isr_expands += 1

    def _ensure_log(self, topic: str, partition: int, log_config: LogConfig, topic_id: Optional[uuid.UUID],
                    is_new: bool = True) -> Tuple[PartitionLog, Optional[uuid.UUID]]:
        """(log, topic id stored in partition.metadata); runs on a worker. A log without one gets ours.
        ``is_new``: LeaderAndIsr's isNew (a replica not new is not created while a log dir is offline)."""
        from broker.storage.checkpoints import read_partition_metadata, write_partition_metadata
        created = self.log_manager.get_log((topic, partition)) is None
        if is_new:
            plog = self.log_manager.get_or_create_log(topic, partition, log_config, _topic_id_str(topic_id))
        else:
            plog = self.log_manager.get_or_create_log(topic, partition, log_config, _topic_id_str(topic_id),
                                                      is_new=False)
        if created and topic_id is not None and topic_id != ZERO_UUID:
            return plog, topic_id  # a new log: its partition.metadata was just written with this id
        try:
            stored = _parse_topic_id(read_partition_metadata(plog.dir))
        except ValueError:
            stored = None
        tid_str = _topic_id_str(topic_id)  # None for no id or the zero UUID
        if stored is None and tid_str is not None:
            plog.note_unsynced_file(write_partition_metadata(plog.dir, tid_str, sync=False))
            stored = topic_id
        return plog, stored

    def try_complete_delayed(self, tp: TopicPartition) -> None:
        """The HW or low watermark of ``tp`` moved, or its leadership or ISR changed: complete what waits on it
        (Kafka's tryCompleteDelayedRequests)."""
        self.changes.note(tp)
        self.delayed_produce_purgatory.check_and_complete(tp)
        self.delayed_fetch_purgatory.check_and_complete(tp)
        self.delayed_delete_records_purgatory.check_and_complete(tp)

    def brokers_gone(self, broker_ids: "set[int]") -> None:
        """The metadata cache no longer lists ``broker_ids`` as alive. A leader's HW waits for a caught-up follower
        outside the ISR only while that broker may join it (alive); the HW of every partition led here with such a
        follower is computed again, and what waited on it completed, instead of waiting for the next append or fetch.
        """
        for tp, p in list(self.partitions.items()):
            if p.leader_id == self.broker_id and not broker_ids.isdisjoint(p.remote_replicas):
                if p.maybe_increment_leader_hw():
                    self.try_complete_delayed(tp)

    def _complete_delayed_fetch_and_produce(self, tp: TopicPartition) -> None:
        """``tp`` changed leadership, went away or was truncated: also wake followers' session fetches."""
        self.changes.note(tp, wake=True)
        self.delayed_produce_purgatory.check_and_complete(tp)
        self.delayed_fetch_purgatory.check_and_complete(tp)
        self.delayed_remote_fetch_purgatory.check_and_complete(tp)
        self.delayed_delete_records_purgatory.check_and_complete(tp)

    def on_follower_high_watermark_advanced(self, tp: TopicPartition) -> None:
        """Called by the replica fetcher: consumers reading from this follower (KIP-392) may proceed."""
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def try_complete_election(self, tp: TopicPartition) -> None:
        """UpdateMetadata changed ``tp``: an ElectLeaders waiting to see its new leader may answer."""
        self.delayed_elect_leader_purgatory.check_and_complete(tp)

    # --- LeaderAndIsr --------------------------------------------------------------
    async def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                        states: Sequence[LeaderAndIsrPartitionState],
                                        topic_ids: Dict[str, uuid.UUID],
                                        live_leaders: Dict[int, BrokerNode],
                                        log_config_for: Callable[[str], Awaitable[LogConfig]]
                                        ) -> Tuple[int, Dict[TopicPartition, int]]:
        """Apply a LeaderAndIsr request; (top-level error, per-partition errors).

        A request from an older controller epoch: STALE_CONTROLLER_EPOCH. Per partition: a leader
        epoch above ours is applied; an equal one is ignored (STALE_CONTROLLER_EPOCH, Kafka's answer)
        and a smaller one too (STALE_CONTROLLER_EPOCH); a topic id other than the log's gives
        INCONSISTENT_TOPIC_ID; a partition whose replicas do not include us, UNKNOWN_TOPIC_OR_PARTITION.
        The caller checks the broker epoch (STALE_BROKER_EPOCH) before calling.
        """
        async with self.state_lock:
            if controller_epoch < self.controller_epoch:
                log.warning("Ignoring LeaderAndIsr from controller %d with epoch %d: latest known controller "
                            "epoch is %d", controller_id, controller_epoch, self.controller_epoch)
                code = int(ErrorCode.STALE_CONTROLLER_EPOCH)
                return code, {st.tp: code for st in states}
            self.controller_epoch = controller_epoch
            log.info("Handling LeaderAndIsr from controller %d epoch %d for %d partitions", controller_id,
                     controller_epoch, len(states))

            def tid(topic: str) -> Optional[uuid.UUID]:
                u = topic_ids.get(topic)
                return None if u is None or u == ZERO_UUID else u

            responses: Dict[TopicPartition, int] = {}
            accepted: List[Tuple[Partition, LeaderAndIsrPartitionState, bool]] = []
            for st in states:
                tp = st.tp
                if tp in self.offline_partitions:
                    log.warning("Ignoring LeaderAndIsr request from controller %d epoch %d for partition %s-%d as the "
                                "local replica for the partition is in an offline log directory", controller_id,
                                controller_epoch, *tp)
                    responses[tp] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                    continue
                p = self.partitions.get(tp)
                created = p is None
                if p is None:
                    p = self._new_partition(*tp)
                req_tid = tid(st.topic)
                if req_tid is not None and p.topic_id is not None and p.topic_id != req_tid:
                    log.error("Topic id %s of %s-%d does not match the LeaderAndIsr topic id %s", p.topic_id, *tp,
                              req_tid)
                    responses[tp] = int(ErrorCode.INCONSISTENT_TOPIC_ID)
                elif st.leader_epoch > p.leader_epoch:
                    if self.broker_id in st.replicas:
                        accepted.append((p, st, created))
                    else:
                        log.warning("Ignoring LeaderAndIsr for %s-%d: broker %d is not in its replicas %s", *tp,
                                    self.broker_id, st.replicas)
                        responses[tp] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    if st.leader_epoch < p.leader_epoch:
                        log.warning("Ignoring LeaderAndIsr for %s-%d: leader epoch %d is smaller than the current %d",
                                    *tp, st.leader_epoch, p.leader_epoch)
                    else:
                        log.info("Ignoring LeaderAndIsr for %s-%d: leader epoch %d matches the current one", *tp,
                                 st.leader_epoch)
                    responses[tp] = int(ErrorCode.STALE_CONTROLLER_EPOCH)

            failed = await self._create_logs([(p, st) for p, st, _ in accepted if p.log is None], tid,
                                             log_config_for)
            leaders: List[Tuple[Partition, LeaderAndIsrPartitionState]] = []
            followers: List[Tuple[Partition, LeaderAndIsrPartitionState]] = []
            for p, st, created in accepted:
                if p.tp in failed:
                    responses[p.tp] = failed[p.tp]
                    continue
                if created:
                    # Hosted only once its log exists (everything reading ``partitions`` may use ``p.log``).
                    self.partitions[p.tp] = p
                responses[p.tp] = 0
                (leaders if st.leader == self.broker_id else followers).append((p, st))

            became_leaders = await self._make_leaders(leaders, tid, responses) if leaders else []
            became_followers = await self._make_followers(followers, tid, live_leaders) if followers else []
            for p, _ in leaders + followers:
                self._maybe_resume_log_dir_move(p)
            if self.fetcher_manager is not None:
                await self.fetcher_manager.shutdown_idle_fetchers()
            await self._notify("on_become_leader", became_leaders)
            await self._notify("on_resign", became_followers)
            self._tiered_leadership(became_leaders, became_followers)
            created_count = sum(1 for _, _, created in accepted if created)
            if created_count >= runtime_tuning.FREEZE_AFTER_PARTITIONS:
                runtime_tuning.freeze_long_lived("LeaderAndIsr hosting %d new partitions" % created_count)
            return 0, responses

    async def _create_logs(self, items: List[Tuple[Partition, LeaderAndIsrPartitionState]],
                           tid: Callable[[str], Optional[uuid.UUID]],
                           log_config_for: Callable[[str], Awaitable[LogConfig]]) -> Dict[TopicPartition, int]:
        """Open (loaded at start-up) or create the log of each partition that has none yet; {tp: error code} of
        those that failed. The topic's config is read once per topic (ZooKeeper; it also carries the topic's
        throttled replicas), the log work runs on the partitions' own workers a chunk per job."""
        failed: Dict[TopicPartition, int] = {}
        if not items:
            return failed
        topics = sorted({st.topic for _, st in items})
        configs: Dict[str, LogConfig] = {}
        for topic, cfg in zip(topics, await asyncio.gather(*(log_config_for(t) for t in topics),
                                                           return_exceptions=True)):
            if isinstance(cfg, BaseException):
                log.error("Cannot create the logs of topic %s: reading its config failed: %s", topic, cfg)
                continue
            configs[topic] = cfg
            self.update_throttled_replicas(topic, cfg)
        jobs = []
        for p, st in items:
            if st.topic in configs:
                jobs.append((p.tp, configs[st.topic], tid(st.topic), st.is_new))
            else:
                failed[p.tp] = int(ErrorCode.KAFKA_STORAGE_ERROR)
        outcomes = await self._workers.run_each(self._ensure_log_job, jobs, [job[0] for job in jobs])
        by_tp = {p.tp: (p, st) for p, st in items}
        for (tp, _, req_tid, _), (found, exc) in zip(jobs, outcomes):
            p, st = by_tp[tp]
            if exc is not None:
                log.error("Cannot create the log of %s-%d: %s", *tp, exc)
                failed[tp] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                continue
            plog, stored = found
            if req_tid is not None and stored is not None and stored != req_tid:
                log.error("Topic id %s in the log of %s-%d does not match the LeaderAndIsr topic id %s", stored,
                          *tp, req_tid)
                failed[tp] = int(ErrorCode.INCONSISTENT_TOPIC_ID)
                continue
            p.log = plog
            p.topic_id = stored or req_tid
        return failed

    def _ensure_log_job(self, job: Tuple[TopicPartition, LogConfig, Optional[uuid.UUID], bool]
                        ) -> Tuple[PartitionLog, Optional[uuid.UUID]]:
        tp, cfg, topic_id, is_new = job
        return self._ensure_log(tp[0], tp[1], cfg, topic_id, is_new)

    async def _make_leaders(self, items: List[Tuple[Partition, LeaderAndIsrPartitionState]],
                            tid: Callable[[str], Optional[uuid.UUID]],
                            responses: Dict[TopicPartition, int]) -> List[TopicPartition]:
        if self.fetcher_manager is not None:
            await self.fetcher_manager.remove_fetcher_for_partitions([p.tp for p, _ in items])
        loop = asyncio.get_running_loop()
        for p, _ in items:
            if p.transition is None:
                p.transition = loop.create_future()
        became: List[TopicPartition] = []
        # A new leader epoch is recorded in the log after every append queued before this point (the
        # partition's worker runs them in order); a chunk of partitions per job.
        new_epoch = [(p, st) for p, st in items if st.leader_epoch > p.leader_epoch]
        same_epoch = [(p, st) for p, st in items if st.leader_epoch <= p.leader_epoch]

        def finish(chunk: List[Tuple[Partition, LeaderAndIsrPartitionState, Optional[int],
                                     Optional[BaseException]]]) -> None:
            for p, st, start, exc in chunk:
                try:
                    if exc is None:
                        if p.make_leader(st, tid(st.topic), self._clock(), start):
                            became.append(p.tp)
                        # Parked fetches/produces re-check against the new epoch.
                        self._complete_delayed_fetch_and_produce(p.tp)
                except Exception as e:  # noqa: BLE001 - this partition fails, the others go on
                    exc = e
                finally:
                    fut, p.transition = p.transition, None
                    if fut is not None and not fut.done():
                        fut.set_result(None)
                if exc is not None:
                    log.error("Become-leader of %s-%d failed: %r", *p.tp, exc)
                    responses[p.tp] = error_code_for(exc)

        finish([(p, st, None, None) for p, st in same_epoch])
        jobs = self._workers.submit_each(_assign_epoch_start_job, [(p.log, st.leader_epoch) for p, st in new_epoch],
                                         [p.tp for p, _ in new_epoch])

        async def when_done(indexes: List[int], fut: "asyncio.Future[List[Any]]") -> None:
            try:
                outcomes = await fut
            except Exception as e:  # noqa: BLE001 - the whole job failed (worker gone)
                outcomes = [(None, e)] * len(indexes)
            finish([(new_epoch[i][0], new_epoch[i][1], start, exc) for i, (start, exc) in zip(indexes, outcomes)])

        await asyncio.gather(*(when_done(indexes, fut) for indexes, fut in jobs))
        return became

    async def _make_followers(self, items: List[Tuple[Partition, LeaderAndIsrPartitionState]],
                              tid: Callable[[str], Optional[uuid.UUID]],
                              live_leaders: Dict[int, BrokerNode]) -> List[TopicPartition]:
        changed: List[Tuple[Partition, LeaderAndIsrPartitionState, BrokerNode]] = []
        for p, st in items:
            node = (live_leaders.get(st.leader) or self._broker_node(st.leader)) if st.leader >= 0 else None
            if node is None:
                log.error("Cannot become a follower of %s-%d: its new leader %d is unavailable", *p.tp, st.leader)
                continue
            if p.make_follower(st, tid(st.topic)):
                changed.append((p, st, node))
        if self.fetcher_manager is not None and changed:
            await self.fetcher_manager.remove_fetcher_for_partitions([p.tp for p, _, _ in changed])
        for p, _, _ in changed:
            self._complete_delayed_fetch_and_produce(p.tp)
        if self.fetcher_manager is not None and changed and not self.is_shutting_down:
            # The offset to fetch from is read on each partition's worker, after every append queued there: an
            # append accepted while this broker still led may pass its leadership check on the worker just before
            # make_follower ran (Kafka excludes that with its leaderIsrUpdateLock); read on the loop, the LEO would
            # then miss it and the fetcher would start one batch behind the log. Appends queued later fail that
            # check, so the LEO read here is final.
            offsets = await self._workers.run_each(lambda item: self._initial_fetch_offset(item.log),
                                                   [p for p, _, _ in changed], [p.tp for p, _, _ in changed])
            initial = {}
            for (p, _, node), (offset, exc) in zip(changed, offsets):
                if exc is not None:
                    log.error("Cannot become a follower of %s-%d: reading its log failed: %s", *p.tp, exc)
                    continue
                initial[p.tp] = InitialFetchState(p.topic_id, node, p.leader_epoch, offset)
            await self.fetcher_manager.add_fetcher_for_partitions(initial)
        return [p.tp for p, _, _ in changed]

    def _initial_fetch_offset(self, plog: PartitionLog) -> int:
        """From IBP 2.7 a follower with leader epochs starts at its LEO (the leader reports divergence);
        otherwise at its HW (it truncates there first)."""
        if self.config.truncation_on_fetch and plog.latest_epoch is not None:
            return plog.log_end_offset
        return plog.high_watermark

    # --- StopReplica ---------------------------------------------------------------
    async def stop_replicas(self, controller_id: int, controller_epoch: int,
                            partitions: Dict[TopicPartition, Tuple[int, bool]]
                            ) -> Tuple[int, Dict[TopicPartition, int]]:
        """Apply a StopReplica request: {tp: (leader_epoch, delete)} -> (top-level error, per-partition errors).

        A leader epoch below ours gives FENCED_LEADER_EPOCH; -2 (deletion) and -1 (not sent) always pass.
        Without delete the partition stays hosted (only its fetcher stops), as Kafka does.
        """
        async with self.state_lock:
            if controller_epoch < self.controller_epoch:
                log.warning("Ignoring StopReplica from controller %d with epoch %d: latest known controller epoch "
                            "is %d", controller_id, controller_epoch, self.controller_epoch)
                return int(ErrorCode.STALE_CONTROLLER_EPOCH), {}
            self.controller_epoch = controller_epoch
            responses: Dict[TopicPartition, int] = {}
            to_stop: List[Tuple[TopicPartition, bool]] = []
            for tp, (epoch, delete) in partitions.items():
                if tp in self.offline_partitions:
                    log.warning("Ignoring StopReplica request (delete=%s) from controller %d epoch %d for partition "
                                "%s-%d as the local replica for the partition is in an offline log directory",
                                str(delete).lower(), controller_id, controller_epoch, *tp)
                    responses[tp] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                    continue
                p = self.partitions.get(tp)
                if p is not None and not (epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or epoch >= p.leader_epoch):
                    log.warning("Ignoring StopReplica for %s-%d: leader epoch %d is smaller than the current %d", *tp,
                                epoch, p.leader_epoch)
                    responses[tp] = int(ErrorCode.FENCED_LEADER_EPOCH)
                    continue
                to_stop.append((tp, delete))
                responses[tp] = 0
            stopping = self._tiered_stops(to_stop, partitions)
            responses.update(await self._stop_partitions(to_stop))
            if stopping and self.tiered is not None:
                self.tiered.on_stop_partitions(stopping)
            return 0, responses

    # --- tiered storage (KIP-405) ----------------------------------------------------
    def _tiered_leadership(self, leaders: List[TopicPartition], followers: List[TopicPartition]) -> None:
        """The RemoteLogManager's onLeadershipChange: copy and expiration tasks for the tiered partitions now led here,
        follower tasks for those followed (handed to its own thread; nothing waits for them here)."""
        if self.tiered is None:
            return
        lead, follow = [], []
        for tps, leading in ((leaders, True), (followers, False)):
            for tp in tps:
                p = self.partitions.get(tp)
                if p is None or p.log is None or p.topic_id is None or not p.log.remote_log_enabled:
                    continue
                if leading:
                    lead.append((tp[0], tp[1], p.topic_id, p.leader_epoch))
                else:
                    follow.append((tp[0], tp[1], p.topic_id))
        if lead or follow:
            self.tiered.on_leadership_change(lead, follow)

    def _tiered_stops(self, to_stop: List[Tuple[TopicPartition, bool]],
                      requested: Dict[TopicPartition, Tuple[int, bool]]) -> List[Tuple[str, int, bool, bool]]:
        """StopReplica's StopPartitions for the RemoteLogManager: the remote data is deleted only by the leader of a
        deleted topic (delete with the EpochDuringDelete sentinel), as Kafka's ReplicaManager.stopReplicas."""
        if self.tiered is None:
            return []
        out = []
        for tp, delete in to_stop:
            p = self.partitions.get(tp)
            out.append((tp[0], tp[1], delete, bool(delete and p is not None and p.is_leader
                                                   and requested[tp][0] == EPOCH_DURING_DELETE)))
        return out

    async def _stop_partitions(self, to_stop: List[Tuple[TopicPartition, bool]]) -> Dict[TopicPartition, int]:
        if self.fetcher_manager is not None and to_stop:
            await self.fetcher_manager.remove_fetcher_for_partitions([tp for tp, _ in to_stop])
        await self.alter_log_dirs.remove([tp for tp, _ in to_stop])
        deleted: List[TopicPartition] = []
        for tp, delete in to_stop:
            p = self.partitions.get(tp)
            if delete:
                if p is not None:
                    del self.partitions[tp]
                    p.delete()
                deleted.append(tp)
            # If we led it, requests may be waiting: complete them now rather than let them time out.
            self._complete_delayed_fetch_and_produce(tp)
        await self._notify("on_resign", deleted)
        errors: Dict[TopicPartition, int] = {}
        # each on its partition's worker, a chunk of partitions per job (a topic deletion stops them all at once)
        outcomes = await self._workers.run_each(lambda tp: self.log_manager.delete_log(*tp), deleted, deleted)
        for tp, (_, exc) in zip(deleted, outcomes):
            if exc is not None:
                log.error("Deleting the log of %s-%d failed: %s", *tp, exc)
                errors[tp] = error_code_for(exc)
        return errors

    async def stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Legacy single-broker path: stop hosting ``topic-partition`` (and delete its log if asked)."""
        tp = (topic, partition)
        p = self.partitions.pop(tp, None)
        await self.alter_log_dirs.remove([tp])
        if p is not None:
            p.delete()
        if self.fetcher_manager is not None:
            await self.fetcher_manager.remove_fetcher_for_partitions([tp])
        if delete:
            await self.run_io(self.log_manager.delete_log, topic, partition, key=tp)
        self._complete_delayed_fetch_and_produce(tp)

    # --- moves between log dirs (AlterReplicaLogDirs, KIP-113) -------------------------
    async def alter_replica_log_dirs(self, partition_dirs: Dict[TopicPartition, str]) -> Dict[TopicPartition, int]:
        """Move each partition's replica to the given log dir of this broker (Kafka's alterReplicaLogDirs).

        Per partition: INVALID_TOPIC_EXCEPTION for a name too long for a future dir, LOG_DIR_NOT_FOUND for a
        path that is not one of log.dirs, REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION if the cluster does
        not know it) when this broker hosts no replica yet: its log will then be created in that dir when
        LeaderAndIsr comes. A move to another dir replaces one in progress; a move to the current dir cancels
        it. KAFKA_STORAGE_ERROR when the future log cannot be created.
        """
        out: Dict[TopicPartition, int] = {}
        async with self.state_lock:
            for tp, dest in partition_dirs.items():
                try:
                    out[tp] = await self._alter_replica_log_dir(tp, dest)
                except Exception as exc:
                    code = error_code_for(exc)
                    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                        log.exception("Error while changing the log dir of %s-%d to %s", *tp, dest)
                    else:
                        log.warning("Unable to alter the log dir of %s-%d to %s: %s", *tp, dest, exc)
                    out[tp] = code
        return out

    async def _alter_replica_log_dir(self, tp: TopicPartition, dest: str) -> int:
        from broker.storage.log_manager import future_dir_name
        lm = self.log_manager
        if len(future_dir_name(*tp)) > 255:
            return int(ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not lm.is_log_dir(dest):
            log.warning("Unable to alter the log dir of %s-%d: %s is not in log.dirs", *tp, dest)
            return int(ErrorCode.LOG_DIR_NOT_FOUND)
        dest = os.path.normpath(dest)
        p = self.partitions.get(tp)
        future_dir = lm.future_log_dir_of(tp)
        if future_dir is not None and future_dir != dest:
            # A different destination (or back to the current dir): stop the move in progress.
            await self.alter_log_dirs.remove([tp])
            await self.run_io(lm.remove_future_log, tp, key=tp)
            if p is not None:
                p.future_log = None
        lm.maybe_update_preferred_log_dir(tp, dest)
        if p is None or p.log is None:
            code = self._missing_partition_error(tp)
            return int(ErrorCode.REPLICA_NOT_AVAILABLE) if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else code
        if lm.log_dir_of(tp) != dest:
            p.future_log = await self.run_io(lm.create_future_log, tp, dest, _topic_id_str(p.topic_id), key=tp)
            self.alter_log_dirs.add(tp)
        return 0

    def _maybe_resume_log_dir_move(self, p: Partition) -> None:
        """A hosted partition with a future log (loaded at start-up, or its mover stopped): keep moving it."""
        if p.log is None or p.deleted or self.is_shutting_down:
            return
        fut = self.log_manager.get_future_log(p.tp)
        if fut is None or self.alter_log_dirs.is_moving(p.tp) or p.tp in self.alter_log_dirs.failed:
            return
        p.future_log = fut
        self.alter_log_dirs.add(p.tp)

    # --- legacy leadership (single broker, ZooKeeper state read directly) -------------
    async def make_leader(self, topic: str, partition: int, topic_id: Any, leader_epoch: int,
                          replicas: Iterable[int], isr: Iterable[int], log_config: LogConfig,
                          min_insync_replicas: int = 1) -> Partition:
        """Host ``topic-partition`` as its leader (creating the log on first use); same epoch = refresh."""
        tp = (topic, partition)
        tid = topic_id if isinstance(topic_id, uuid.UUID) else _parse_topic_id(topic_id)
        p = self.partitions.get(tp)
        if p is None:
            plog, stored = await self.run_io(self._ensure_log, topic, partition, log_config, tid, key=tp)
            p = self.partitions.get(tp)
            if p is None:
                p = self._new_partition(topic, partition)
                p.log, p.topic_id = plog, stored or tid
                self.partitions[tp] = p
        p.min_isr_override = min_insync_replicas
        st = LeaderAndIsrPartitionState(topic, partition, self.controller_epoch, self.broker_id, leader_epoch,
                                        list(isr), max(p.partition_epoch, 0), list(replicas))
        if leader_epoch < p.leader_epoch:
            return p
        if self.fetcher_manager is not None:
            await self.fetcher_manager.remove_fetcher_for_partitions([tp])
        start = None
        if leader_epoch > p.leader_epoch or not p.is_leader:
            start = await self.run_io(_assign_epoch_start, p.log, leader_epoch, key=tp)
            if leader_epoch == p.leader_epoch:
                p.leader_epoch -= 1  # same epoch, new leadership: restart the epoch bookkeeping
        p.make_leader(st, tid, self._clock(), start)
        self._complete_delayed_fetch_and_produce(tp)
        return p

    def update_config(self, topic: str, log_config: LogConfig) -> None:
        """Apply a topic's new effective config (AlterConfigs, dynamic broker defaults) to its logs."""
        self.update_throttled_replicas(topic, log_config)
        for (t, _), p in self.partitions.items():
            if t == topic and p.log is not None:
                p.log.update_config(log_config)

    def update_throttled_replicas(self, topic: str, log_config: LogConfig) -> None:
        """leader/follower.replication.throttled.replicas of ``topic`` (kept in the LogConfig's ``extra``)."""
        extra = getattr(log_config, "extra", None)
        if extra is None or (LEADER_THROTTLED_REPLICAS not in extra and FOLLOWER_THROTTLED_REPLICAS not in extra):
            return  # a config without them (built by hand) says nothing about throttles
        self.quotas.update_topic(topic, extra.get(LEADER_THROTTLED_REPLICAS), extra.get(FOLLOWER_THROTTLED_REPLICAS))

    def should_leader_throttle(self, p: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: a follower outside the ISR, a throttled partition, the quota exceeded."""
        q = self.quotas.leader
        return replica_id not in p.isr and q.is_throttled(p.tp) and q.is_quota_exceeded()

    # --- produce -------------------------------------------------------------------
    def start_transaction_verification(self, tp: TopicPartition, producer_id: int, producer_epoch: int
                                       ) -> Optional[object]:
        """KIP-890: the partition's guard for a transactional append that must be verified first, or None when none
        is needed (``Partition.maybe_start_transaction_verification``; None too when the partition is not here: the
        append reports that)."""
        p = self.partitions.get(tp)
        return None if p is None else p.maybe_start_transaction_verification(producer_id, producer_epoch)

    async def append_records(self, acks: int, entries: Dict[TopicPartition, Any], timeout_ms: int = 30000,
                             *, is_from_client: bool = True,
                             verification_guards: Optional[Dict[TopicPartition, object]] = None
                             ) -> Dict[TopicPartition, ProduceResult]:
        """Append each partition's record buffer as leader; with acks=-1 wait for the ISR (DelayedProduce).

        ``timeout_ms`` is the Produce request's timeout: partitions not replicated by then answer
        REQUEST_TIMED_OUT. NOT_ENOUGH_REPLICAS if the ISR is below min.insync.replicas before the
        append, NOT_ENOUGH_REPLICAS_AFTER_APPEND if it fell below while waiting. ``is_from_client``
        False is Kafka's coordinator origin (transaction markers, offset commits): control batches
        allowed, no client sequence checks.
        """
        if acks not in (0, 1, -1):
            return {tp: ProduceResult(int(ErrorCode.INVALID_REQUIRED_ACKS)) for tp in entries}
        partitions = self.partitions
        for tp in entries:
            p = partitions.get(tp)
            while p is not None and p.transition is not None:
                await asyncio.shield(p.transition)
                p = partitions.get(tp)
        results: Dict[TopicPartition, ProduceResult] = {}
        tps, jobs = self._leader_appends(acks, entries, results, is_from_client, verification_guards or {})
        if jobs:
            done = await self._append_on_workers(tps, jobs)
            self._after_leader_appends(tps, jobs, done, results)
        if acks == -1 and any(results[tp].error_code == 0 for tp in tps) and not self._replicated_at_once(results):
            statuses = {tp: ProduceStatus(r.last_offset + 1, r) for tp, r in results.items()}
            op = DelayedProduce(timeout_ms, statuses, self.partitions.get, self._missing_partition_error)
            if not self.delayed_produce_purgatory.try_complete_else_watch(op, list(statuses)):
                try:
                    with parked():
                        await op.future
                finally:
                    op.cancel()
        return results

    def _replicated_at_once(self, results: Dict[TopicPartition, ProduceResult]) -> bool:
        """acks=-1: True when every appended partition's HW already passed its records (leaders without followers),
        the answers then made final as a DelayedProduce completing at once would make them, without one.
        False, changing nothing, when some partition must wait (the DelayedProduce then checks them all)."""
        finals = []
        for tp, r in results.items():
            if r.error_code:
                continue
            p = self.partitions.get(tp)
            if p is None:
                return False
            done, error = p.check_enough_replicas_reach_offset(r.last_offset + 1)
            if not done:
                return False
            finals.append((r, error))
        for r, error in finals:
            r.error_code = error
        return True

    def _leader_appends(self, acks: int, entries: Dict[TopicPartition, Any],
                        results: Dict[TopicPartition, ProduceResult], is_from_client: bool,
                        guards: Dict[TopicPartition, object]) -> Tuple[List[TopicPartition], List[LeaderAppend]]:
        """(partitions, their append jobs) of the appends this broker makes as leader; the other partitions' answers
        go to ``results`` (not here, not the leader, or, for acks=-1, an ISR below min.insync.replicas)."""
        partitions = self.partitions
        tps: List[TopicPartition] = []
        jobs: List[LeaderAppend] = []
        verifying: Optional[bool] = None
        for tp, buf in entries.items():
            p = partitions.get(tp)
            if p is None or p.log is None:
                results[tp] = ProduceResult(self._missing_partition_error(tp))
                continue
            refused = p.refuse_append(acks)  # Partition is the gate: leadership, min.insync.replicas
            if refused is not None:
                results[tp] = refused
                continue
            tps.append(tp)
            guard = guards.get(tp) if guards else None
            if guard is None and record_batch.is_transactional(buf):
                if verifying is None:
                    verifying = bool(self.transaction_verification_enabled())
                if verifying:  # the owner checks the transaction is still open (a marker may come first)
                    guard = SENTINEL_GUARD
            jobs.append(LeaderAppend(p, buf, p.leader_epoch, is_from_client, guard))
        return tps, jobs

    async def _append_on_workers(self, tps: List[TopicPartition], jobs: List[LeaderAppend]) -> List[ProduceResult]:
        """Run the appends, each on its partition's owner (``LeaderAppend.run``); their results in the order of
        ``jobs``, a failed append's exception as its partition's error code (Kafka's appendToLocalLog).

        A single partition's append runs here on the loop when its owner is idle and the append cannot fsync
        (``flush.messages`` unset): handing it over and back costs two thread wake-ups, more CPU than a small
        append (measured: a ~100 B Produce 220 against 120 µs of broker CPU)."""
        if len(jobs) == 1:
            job = jobs[0]
            try:
                info: "LogAppendInfo | NotRun" = NOT_RUN
                plog = job.partition.log
                if plog is not None and plog.config.flush_messages == LONG_MAX:  # the append cannot fsync
                    # the owner idle: append here (io_workers.py's run_if_idle), without two thread wake-ups
                    try:
                        info = self.run_here_if_owner_idle(tps[0], job.run_without_waiting)
                    except LogBusyError:  # the Log's lock held elsewhere: the worker waits for it, not the loop
                        info = NOT_RUN
                if not isinstance(info, NotRun):
                    return [_appended(info)]
                return [_appended(await self.run_io(job.run, key=tps[0]))]
            except Exception as exc:
                return [_append_failed(job.partition, exc)]
        # One job per worker (not a task and a hand-off per partition): a Produce spread over 1,000 partitions
        # costs a few loop wake-ups, and each partition still appends on its own worker. The jobs run one at a
        # time: side by side the workers would pass the GIL back and forth at every append's pwrite.
        outcomes = await self._workers.run_each(LeaderAppend.run, jobs, tps, one_at_a_time=True)
        return [_appended(info) if exc is None else _append_failed(job.partition, exc)
                for job, (info, exc) in zip(jobs, outcomes)]

    def _after_leader_appends(self, tps: List[TopicPartition], jobs: List[LeaderAppend], done: List[ProduceResult],
                              results: Dict[TopicPartition, ProduceResult]) -> None:
        """Per appended partition, as Kafka after appendToLocalLog: count BytesIn/MessagesIn, wake the followers'
        fetches (the LEO moved), advance the HW and complete what waits on it.

        What waits is looked at once: nothing registers in a purgatory while this runs (completions only schedule
        callbacks), so a broker nobody fetches from pays no purgatory lookups per partition.
        """
        now = self._clock()
        fetches = self.delayed_fetch_purgatory if self.delayed_fetch_purgatory.watching() else None
        hw_waiters = (fetches is not None or self.delayed_produce_purgatory.watching()
                      or self.delayed_delete_records_purgatory.watching())
        note = self.changes.note
        for tp, job, res in zip(tps, jobs, done):
            results[tp] = res
            if res.error_code == 0:
                note(tp, True)
                # without the log's lock (a leader without followers: its HW becomes its LEO)
                hw_moved = job.partition.maybe_increment_leader_hw(now)
                if hw_moved and hw_waiters:
                    self.try_complete_delayed(tp)  # fetches included
                elif fetches is not None:  # followers parked on this partition fetch the new records at once
                    fetches.check_and_complete(tp)
        if self.topic_stats is not None:
            self._record_append_stats(tps, jobs, done)

    def _record_append_stats(self, tps: List[TopicPartition], jobs: List[LeaderAppend], done: List[ProduceResult]
                             ) -> None:
        """BytesInPerSec / MessagesInPerSec, as Kafka's appendToLocalLog marks them: one update per run of
        partitions of the same topic (a request lists a topic's partitions together)."""
        stats = self.topic_stats
        assert stats is not None
        topic: Optional[str] = None
        size = messages = 0
        for tp, job, res in zip(tps, jobs, done):
            if res.error_code:
                continue
            if tp[0] != topic:
                if topic is not None:
                    stats.record_append(topic, size, messages)
                topic, size, messages = tp[0], 0, 0
            size += len(job.records)
            messages += res.last_offset - res.base_offset + 1
        if topic is not None:
            stats.record_append(topic, size, messages)

    # --- fetch ---------------------------------------------------------------------
    async def fetch_messages(self, reads: Sequence[FetchRead], max_bytes: int, min_bytes: int,
                             max_wait_ms: int, isolation_level: int = 0, *, replica_id: int = CONSUMER_REPLICA_ID,
                             replica_epoch: int = -1, client_metadata: Optional[ClientMetadata] = None,
                             request_version: int = 17, session: Optional[SessionReads] = None
                             ) -> Dict[TopicPartition, ReadResult]:
        """Read, and long-poll until ``min_bytes`` are available or ``max_wait_ms`` passes.

        ``reads``: ``(tp, fetch_offset, partition_max_bytes)`` or ``(tp, FetchPartitionInfo)``.
        ``replica_id >= 0`` is a follower's fetch: it reads up to the LEO, must come to the leader, and
        records the follower's position (ISR, HW). Consumers read up to the HW (isolation 0) or LSO (1),
        from the leader only unless they sent ``client_metadata`` (Fetch v11+), which also lets the
        replica selector (replica.selector.class) point them to a follower (``preferred_read_replica``).

        ``session`` (a follower's incremental fetch session): ``reads`` are only the partitions that may have
        news (resent, changed, or left unanswered last time); while the fetch waits, the partitions that change
        join it (:class:`PartitionChanges`), instead of every partition of the session being watched and read.
        """
        infos: List[Tuple[TopicPartition, FetchPartitionInfo]] = []
        for r in reads:
            if len(r) == 3:
                tp, offset, pmax = r
                infos.append((tp, FetchPartitionInfo(offset, pmax)))
            else:
                infos.append((r[0], r[1]))
        is_follower = replica_id >= 0
        fetch_only_leader = is_follower or (replica_id == CONSUMER_REPLICA_ID and client_metadata is None)
        upper = "leo" if is_follower else ("lso" if isolation_level == 1 else "hw")
        hard_limit = request_version <= 2
        clock = self.time
        deadline = clock.mono_ms() + max(0, max_wait_ms)
        fetches = self.delayed_fetch_purgatory
        every = infos
        # Partitions of an incremental session that the fetcher did not resend and that have nothing new are left
        # out of the answer without being read: a follower's session holds every partition it follows from this
        # leader, and walking them all per fetch made replication cost grow with the partition count.
        skip_unchanged = session is not None or (
            (client_metadata is None or is_follower or not self.config.uses_rack_aware_selector)
            and any(info.known is not None for _, info in every))
        changes = self.changes
        first = True
        while True:
            if session is not None:
                # A change noted after changes_seen is taken on the next pass (none is missed: the sequence number
                # is checked again before waiting).
                op: Optional[DelayedFetch] = None
                if not first:
                    later = changes.since(session.changes_seen)
                    session.changes_seen = changes.seq
                    if later is None or later:
                        merged = dict(every)
                        merged.update(session.reads_for(cast("Optional[List[TopicPartition]]", later)))
                        every = list(merged.items())
            else:
                # The partitions' state is taken before reading: what changes during the read completes the
                # DelayedFetch as soon as it is watched, so nothing is missed.
                op = (DelayedFetch(0, [tp for tp, _ in every], self.partitions.get, is_follower)
                      if max_wait_ms > 0 and every else None)
            if skip_unchanged:
                unchanged = self._unchanged
                infos = [(tp, info) for tp, info in every
                         if info.known is None or not unchanged(tp, info, replica_id, upper)]
            results, jobs, parts = self._prepare_reads(infos, replica_id, fetch_only_leader, client_metadata, upper)
            if is_follower:
                for job in jobs:
                    job.throttled = self.should_leader_throttle(parts[job.tp], replica_id)
            recorded = set()
            if is_follower and first:
                # Fast path: a follower fetching in the current leader epoch (or sending no epoch) cannot
                # diverge, so its position counts before the read; the HW, and with it any acks=-1
                # produce waiting for this follower, moves one disk-thread round trip earlier.
                now = self._clock()
                for tp, info in infos:
                    p = parts.get(tp)
                    if p is None:
                        continue
                    plog = p.log
                    if plog is not None and (info.last_fetched_epoch < 0 or info.last_fetched_epoch == p.leader_epoch
                                             == plog.latest_epoch):
                        if plog.log_start_offset <= info.fetch_offset <= plog.log_end_offset:
                            p.update_follower_fetch_state(replica_id, replica_epoch, info.fetch_offset,
                                                          info.log_start_offset, now, plog.log_end_offset)
                            recorded.add(tp)
            if jobs:
                read = None
                if all(_reads_hot_tail(job) for job in jobs):
                    # A follower or consumer at the tail reads only the active segment, which was just written (page
                    # cache): index lookup plus a FileSlice, no data copied. Doing it here instead of on a worker
                    # thread saves a thread hop per fetch (on the acks=all path, and for every consumer keeping up),
                    # and lets the followers of one append be answered together rather than one worker hop after
                    # another. The read takes no lock (the Log's published view); only while a truncation, deletion
                    # or swap is under way does it go to a worker: the loop never waits behind a disk operation.
                    read = _read_logs_on_loop(jobs, max_bytes, not hard_limit)
                if read is None:
                    read = await self.run_io(_read_logs, jobs, max_bytes, not hard_limit)
                results.update(read)
            if is_follower and first and len(recorded) < len(parts):
                now = self._clock()
                for tp, info in infos:
                    res = results[tp]
                    p = parts.get(tp)
                    if (p is not None and tp not in recorded and res.error_code == 0 and res.diverging_epoch is None
                            and self.partitions.get(tp) is p and p.is_leader):
                        p.update_follower_fetch_state(replica_id, replica_epoch, info.fetch_offset,
                                                      info.log_start_offset, now, res.log_end_offset)
            ordered = {tp: results[tp] for tp, _ in infos}
            remote = not is_follower and self.tiered is not None and await self._maybe_read_remote(ordered, parts)
            total = sum(res.size for res in ordered.values())
            done = (remote or max_wait_ms <= 0 or (session is None and op is None) or total >= min_bytes
                    or not first and clock.mono_ms() >= deadline
                    or any(res.error_code or res.diverging_epoch is not None or res.preferred_read_replica >= 0
                           for res in ordered.values()))
            if done:
                stats = self.topic_stats
                if stats is not None and not is_follower:  # BytesOutPerSec counts consumers' reads only
                    for tp, res in ordered.items():
                        if res.size:
                            stats.record_bytes_out(tp[0], res.size)
                if is_follower:
                    # Kafka records every throttled partition's bytes sent to followers (in sync or not).
                    leader_quota = self.quotas.leader
                    throttled_bytes = sum(r.size for tp, r in ordered.items() if leader_quota.is_throttled(tp))
                    if throttled_bytes:
                        leader_quota.record(throttled_bytes)
                return ordered
            first = False
            remaining = deadline - clock.mono_ms()
            if session is not None:
                if changes.seq != session.changes_seen or remaining <= 0:
                    continue  # changed meanwhile: another pass (or the deadline answers)
                if jobs and all(j.throttled for j in jobs):
                    with parked():
                        await clock.sleep_ms(min(remaining, 100))
                    continue
                waiter = changes.wait()
                try:
                    with parked():
                        await clock.wait_for_ms(waiter, remaining)
                except asyncio.TimeoutError:
                    pass
                continue
            if remaining > 0 and jobs and all(j.throttled for j in jobs):
                # Only throttled data could be sent: appends cannot complete this fetch, the quota freeing up can.
                with parked():
                    await clock.sleep_ms(min(remaining, 100))
            elif remaining > 0 and op is not None:
                op.delay_ms = remaining
                if not fetches.try_complete_else_watch(op, op.watched_keys()):
                    try:
                        with parked():
                            await op.future
                    finally:
                        op.cancel()

    async def _maybe_read_remote(self, ordered: Dict[TopicPartition, ReadResult],
                                 parts: Dict[TopicPartition, Partition]) -> bool:
        """KIP-405, Kafka's fetchMessages / processRemoteFetch / DelayedRemoteFetch: the first partition of a
        consumer's fetch whose offset only remote storage holds is read from there on the remote reader pool (the
        others answer no records this time), waiting at most remote.fetch.max.wait.ms; the fetch is then answered
        at once with what the local reads found. Over the remote fetch quota nothing is read remotely (empty, no
        error). True when a remote read was made (the fetch answers now)."""
        tiered = self.tiered
        assert tiered is not None
        first = next((tp for tp, r in ordered.items() if r.remote_fetch is not None and r.error_code == 0), None)
        if first is None:
            return False
        res = ordered[first]
        assert res.remote_fetch is not None
        offset, max_bytes, min_one, read_committed = res.remote_fetch
        if tiered.fetch_quota_exceeded():
            return False
        p = parts.get(first) or self.partitions.get(first)
        plog = p.log if p is not None else None
        epochs = plog.leader_epoch_cache if plog is not None else None
        tip = tiered.topic_id_partition(*first)
        if tip is None and p is not None and p.topic_id is not None:
            from broker.storage.remote.metadata import TopicIdPartition
            tip = TopicIdPartition(p.topic_id, first[0], first[1])
        if tip is None or epochs is None:
            return False
        task = asyncio.ensure_future(tiered.read(tip, epochs, offset, max_bytes, min_one, read_committed))
        # DelayedRemoteFetch: done when the read is, when a partition of the fetch is no longer hosted here, or at
        # remote.fetch.max.wait.ms (on the replica manager's clock; the read itself is not cut)
        purgatory = self.delayed_remote_fetch_purgatory
        op = DelayedRemoteFetch(tiered.remote_fetch_max_wait_ms, task,
                                [tp for tp, r in ordered.items() if r.error_code == 0], self.partitions.__contains__)
        task.add_done_callback(lambda _t: purgatory.check_and_complete(first))
        if not purgatory.try_complete_else_watch(op, [first]):
            try:
                with parked():
                    await op.future
            except asyncio.CancelledError:
                op.cancel()
                task.cancel()
                raise
        if not task.done() or task.cancelled():
            # expired (DelayedRemoteFetch.onExpiration: the read is abandoned) or a partition left this broker: the
            # partition answers the local read's result, no records (Kafka's onComplete)
            task.cancel()
            log.debug("Remote fetch of %s-%d at %d answered without its read (%s)", *first, offset, op.outcome)
            return True
        try:
            fetched = task.result()
        except Exception as exc:  # noqa: BLE001 - that partition answers the error (Kafka's createLogReadResult(e))
            log.warning("Error reading %s-%d at %d from remote storage: %s", *first, offset, exc)
            ordered[first] = ReadResult(error_code_for(exc))
            return True
        if fetched.records:
            res.records = fetched.records
            res.size = len(fetched.records)
            if read_committed:  # the aborted transactions overlapping the records, the local log's too if needed
                aborted = list(fetched.aborted_transactions or [])
                if fetched.local_aborted_upper >= 0 and plog is not None:
                    try:
                        local = await self.run_io(plog.collect_aborted_transactions, offset,
                                                  fetched.local_aborted_upper, key=first)
                    except Exception as exc:  # noqa: BLE001 - the partition answers the error
                        ordered[first] = ReadResult(error_code_for(exc))
                        return True
                    aborted += [(t.producer_id, t.first_offset) for t in local]
                res.aborted_transactions = aborted
        return True

    def _unchanged(self, tp: TopicPartition, info: FetchPartitionInfo, replica_id: int, upper: str) -> bool:
        """Whether a fetch of ``tp`` (``info.known`` set) would find nothing new: still led here in the fetcher's
        epoch, nothing to read at its offset, the high watermark, LSO and log start offset it was told unchanged;
        and for a follower, its position already recorded while it is in the ISR (a caught-up follower stays in
        sync: Kafka's isCaughtUp holds while its LEO equals the leader's), so recording it again would change
        nothing. Anything else (errors, divergence, ISR expansion, reads) takes the full path."""
        p = self.partitions.get(tp)
        if p is None:
            return False
        plog = p.log
        if plog is None or p.leader_id != self.broker_id:
            return False
        epoch = info.current_leader_epoch
        if epoch >= 0 and epoch != p.leader_epoch:
            return False
        hw, lso, start = info.known  # type: ignore[misc]
        if plog.high_watermark != hw or plog.log_start_offset != start or plog.last_stable_offset != lso:
            return False
        tid = info.topic_id
        if tid is not None and p.topic_id is not None and tid != ZERO_UUID and tid != p.topic_id:
            return False
        offset = info.fetch_offset
        if replica_id < 0:
            return offset == (lso if upper == "lso" else hw)
        if offset != plog.log_end_offset:
            return False
        rs = p.remote_replicas.get(replica_id)
        return rs is not None and rs.log_end_offset == offset and replica_id in p.isr_state.maximal_isr

    def _prepare_reads(self, infos: List[Tuple[TopicPartition, FetchPartitionInfo]], replica_id: int,
                       fetch_only_leader: bool, client_metadata: Optional[ClientMetadata], upper: str
                       ) -> Tuple[Dict[TopicPartition, ReadResult], List[_ReadJob], Dict[TopicPartition, Partition]]:
        """Validate each partition on the loop; what passes becomes a read job for a worker."""
        results: Dict[TopicPartition, ReadResult] = {}
        jobs: List[_ReadJob] = []
        parts: Dict[TopicPartition, Partition] = {}
        is_follower = replica_id >= 0
        now = self._clock()
        for tp, info in infos:
            p = self.partitions.get(tp)
            if p is None or p.log is None:
                results[tp] = ReadResult(self._missing_partition_error(tp))
                continue
            if info.topic_id is not None and info.topic_id != ZERO_UUID and p.topic_id is not None \
                    and info.topic_id != p.topic_id:
                results[tp] = ReadResult(int(ErrorCode.INCONSISTENT_TOPIC_ID))
                continue
            if client_metadata is not None and not is_follower:
                preferred = self._find_preferred_read_replica(p, client_metadata, info.fetch_offset, now)
                if preferred is not None:
                    err = p.check_current_leader_epoch(info.current_leader_epoch)
                    plog = p.log
                    results[tp] = ReadResult(err, plog.high_watermark, plog.high_watermark, plog.log_start_offset,
                                             None, 0, plog.log_end_offset, None, -1 if err else preferred)
                    continue
            err = p.check_current_leader_epoch(info.current_leader_epoch)
            if not err and fetch_only_leader and not p.is_leader:
                err = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if not err and is_follower and p.remote_replica(replica_id) is None:
                # A replica the leader does not know (yet): retry with the same epoch, or refresh metadata.
                err = int(ErrorCode.UNKNOWN_LEADER_EPOCH if info.current_leader_epoch >= 0
                          else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if err:
                results[tp] = ReadResult(err)
                continue
            parts[tp] = p
            jobs.append(_ReadJob(tp, p, p.log, info.fetch_offset, info.max_bytes, upper, info.last_fetched_epoch))
        return results, jobs, parts

    def _find_preferred_read_replica(self, p: Partition, client: ClientMetadata, fetch_offset: int,
                                     now_ms: int) -> Optional[int]:
        """KIP-392 RackAwareReplicaSelector: a same-rack in-sync replica holding ``fetch_offset``, unless the
        leader is in the client's rack. None = read here."""
        if not p.is_leader or not self.config.uses_rack_aware_selector or not client.rack_id:
            return None
        if self.config.broker_rack == client.rack_id:
            return None  # the leader is in the client's rack
        candidates = []
        for rid, rs in p.remote_replicas.items():
            # Only in-sync replicas that hold the offset; a lagging one would keep the consumer behind.
            if (rid in p.isr and rs.log_end_offset >= fetch_offset and rs.log_start_offset <= fetch_offset
                    and self._is_broker_alive(rid) and self._broker_rack(rid) == client.rack_id):
                candidates.append((rs.log_end_offset, -(now_ms - rs.last_caught_up_time_ms), rid))
        if not candidates:
            return None
        return max(candidates)[2]

    # --- offsets -------------------------------------------------------------------
    async def list_offset(self, tp: TopicPartition, timestamp: int, isolation_level: int, *,
                          replica_id: int = CONSUMER_REPLICA_ID, current_leader_epoch: int = -1
                          ) -> Tuple[int, int, int, int]:
        """(error_code, timestamp, offset, leader_epoch) for ListOffsets.

        Consumers see up to the HW (isolation 0) or LSO (1); a follower (``replica_id >= 0``) sees up
        to the LEO. Right after a leader change, while the new leader's HW lags its epoch start,
        consumers get OFFSET_NOT_AVAILABLE for the latest offset.
        """
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return self._missing_partition_error(tp), -1, -1, -1
        err = p.check_current_leader_epoch(current_leader_epoch)
        if err:
            return err, -1, -1, -1
        if replica_id != DEBUGGING_REPLICA_ID and not p.is_leader:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, -1, -1
        plog = p.log
        is_client = replica_id == CONSUMER_REPLICA_ID
        if not is_client:
            last_fetchable = plog.log_end_offset
        elif isolation_level == 1:
            last_fetchable = plog.last_stable_offset
        else:
            last_fetchable = plog.high_watermark
        lagging = (is_client and p.leader_epoch_start_offset is not None
                   and p.leader_epoch_start_offset > plog.high_watermark)
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                return int(ErrorCode.OFFSET_NOT_AVAILABLE), -1, -1, -1
            return 0, -1, last_fetchable, p.leader_epoch
        try:
            found = None
            if timestamp >= 0 and self.tiered is not None and plog.remote_log_enabled and p.topic_id is not None:
                # a tiered log: remote storage first, then the local log (Kafka's UnifiedLog.fetchOffsetByTimestamp)
                found = await self.tiered.find_offset_by_timestamp(tp, p.topic_id, timestamp, plog.log_start_offset)
            if found is None:
                found = await self.run_io(plog.fetch_offset_by_timestamp, timestamp, key=tp)
        except Exception as exc:
            return error_code_for(exc), -1, -1, -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            if found is None:
                return 0, -1, -1, -1
            return 0, found[1], found[0], found[2] if found[2] is not None else -1
        if found is not None and found[0] < last_fetchable:
            return 0, found[1], found[0], found[2] if found[2] is not None else -1
        if lagging:
            return int(ErrorCode.OFFSET_NOT_AVAILABLE), -1, -1, -1
        return 0, -1, -1, -1

    async def delete_records(self, tp: TopicPartition, offset: int, timeout_ms: int = 30000) -> Tuple[int, int]:
        """(error_code, low_watermark) for DeleteRecords; offset -1 means the high watermark."""
        return (await self.delete_records_all({tp: offset}, timeout_ms))[tp]

    async def delete_records_all(self, offsets: Dict[TopicPartition, int], timeout_ms: int = 30000
                                 ) -> Dict[TopicPartition, Tuple[int, int]]:
        """DeleteRecords for many partitions: move each log start offset, then wait (up to ``timeout_ms``)
        until every live replica's log start offset passed it (the low watermark)."""
        statuses: Dict[TopicPartition, DeleteRecordsStatus] = {}
        for tp, offset in offsets.items():
            statuses[tp] = await self._delete_records_local(tp, offset)
        if any(st.error_code == 0 and st.low_watermark < st.required_offset for st in statuses.values()):
            op = DelayedDeleteRecords(timeout_ms, statuses, self.partitions.get, self._missing_partition_error)
            if not self.delayed_delete_records_purgatory.try_complete_else_watch(op, list(statuses)):
                try:
                    with parked():
                        await op.future
                finally:
                    op.cancel()
        return {tp: (st.error_code, st.low_watermark) for tp, st in statuses.items()}

    async def _delete_records_local(self, tp: TopicPartition, offset: int) -> DeleteRecordsStatus:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return DeleteRecordsStatus(offset, self._missing_partition_error(tp), -1, False)
        if not p.is_leader:
            return DeleteRecordsStatus(offset, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, False)
        plog = p.log
        if not plog.config.delete:
            return DeleteRecordsStatus(offset, int(ErrorCode.POLICY_VIOLATION), -1, False)
        target = plog.high_watermark if offset == -1 else offset
        if target < 0:
            return DeleteRecordsStatus(target, int(ErrorCode.OFFSET_OUT_OF_RANGE), -1, False)
        try:
            await self.run_io(plog.delete_records_before, target, key=tp)
        except Exception as exc:
            return DeleteRecordsStatus(target, error_code_for(exc), -1, False)
        if self.partitions.get(tp) is not p or not p.is_leader:
            return DeleteRecordsStatus(target, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, False)
        self.changes.note(tp)  # the log start offset moved
        return DeleteRecordsStatus(target, 0, p.low_watermark_if_leader())

    async def end_offset_for_epoch(self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
                                   ) -> Tuple[int, int, int]:
        """(error_code, epoch, end_offset) for OffsetForLeaderEpoch (leader only)."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return self._missing_partition_error(tp), -1, -1
        err = p.check_current_leader_epoch(current_leader_epoch)
        if err:
            return err, -1, -1
        if not p.is_leader:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, -1
        epoch, end = await self.run_io(p.log.end_offset_for_epoch, leader_epoch)
        return 0, epoch, end

    def check_leader_epoch(self, p: Partition, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH as Kafka validates a client's epoch (-1 = not sent)."""
        return p.check_current_leader_epoch(current_leader_epoch)

    # --- ISR and checkpoints -------------------------------------------------------
    def _shrink_isr_tick(self) -> None:
        self.maybe_shrink_isr()

    def maybe_shrink_isr(self, now_ms: Optional[int] = None) -> List[TopicPartition]:
        """Propose ISR shrinks for every led partition with lagging followers; returns those partitions."""
        now = self._clock() if now_ms is None else now_ms
        out = []
        for tp, p in list(self.partitions.items()):
            if p.is_leader and p.maybe_shrink_isr(now):
                out.append(tp)
        return out

    async def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every log dir, on the checkpoint thread: its fsyncs must not
        hold up the appends queued on the disk I/O workers (Kafka runs it on its scheduler, not its handlers)."""
        await self._run_on_checkpoint_thread(self.log_manager.checkpoint_high_watermarks)

    async def _run_on_checkpoint_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the checkpoint thread, or at once on the loop with inline I/O workers (io_threads=0)."""
        if self._checkpoint_pool is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._checkpoint_pool, fn, *args)


def _appended(info: LogAppendInfo) -> ProduceResult:
    """The answer of a partition appended to."""
    return ProduceResult(0, info.first_offset, info.log_append_time, info.log_start_offset, (), None,
                         info.last_offset)


def _append_failed(p: Partition, exc: Exception) -> ProduceResult:
    """The answer of a partition whose append failed: its error code (storage errors, leadership, KIP-890)."""
    code = error_code_for(exc)
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.error("Unexpected error appending to %s-%d", p.topic, p.partition, exc_info=exc)
    else:
        log.debug("Append to %s-%d rejected: %s", p.topic, p.partition, exc)
    record_errors = list(getattr(exc, "record_errors", []) or [])
    lso = p.log.log_start_offset if p.log is not None else -1
    return ProduceResult(code, -1, -1, lso, record_errors, str(exc) or None)


def _assign_epoch_start_job(job: Tuple[PartitionLog, int]) -> int:
    return _assign_epoch_start(*job)


def _assign_epoch_start(plog: PartitionLog, leader_epoch: int) -> int:
    """Worker thread (the partition's): record ``leader_epoch`` starting at the current LEO; returns it."""
    start = plog.log_end_offset
    plog.assign_epoch_start_offset(leader_epoch, start)
    return start


def _reads_hot_tail(job: _ReadJob) -> bool:
    """Whether ``job`` reads only from the active segment (recently written, so in the page cache)."""
    segments = job.log.view.segments  # published: a roll since at worst makes it the previous one
    return bool(segments) and job.fetch_offset >= segments[-1].base_offset


def _read_logs_on_loop(jobs: List[_ReadJob], max_bytes: int, min_one_message: bool
                       ) -> Optional[Dict[TopicPartition, ReadResult]]:
    """On the loop: :func:`_read_logs` without waiting for anything (the reads take no lock); None when a log's
    segment list is being changed (a truncation, deletion or swap under way), and the caller reads on a worker."""
    try:
        return _read_logs(jobs, max_bytes, min_one_message, wait=False)
    except LogBusyError:
        return None


def _read_logs(jobs: List[_ReadJob], max_bytes: int, min_one_message: bool, wait: bool = True
               ) -> Dict[TopicPartition, ReadResult]:
    """Read each partition through its Partition (the read gate: bounds, the fetcher's last fetched epoch) within the
    response's byte budget: on a worker, or on the loop with ``wait=False`` (LogBusyError when a read would wait for
    a log's lock)."""
    out: Dict[TopicPartition, ReadResult] = {}
    budget = max_bytes
    for job in jobs:
        res = job.partition.read_records(job.log, job.fetch_offset, max(0, min(job.max_bytes, budget)), job.upper,
                                         job.last_fetched_epoch, job.throttled, min_one_message, wait)
        if res.size:
            budget = max(0, budget - res.size)
            min_one_message = False
        out[job.tp] = res
    return out
