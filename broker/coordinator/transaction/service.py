"""TransactionCoordinator: the asyncio side of the transaction coordinator.

Routes each transactional id to its ``__transaction_state`` partition (Java ``String.hashCode``). The
:class:`~broker.coordinator.runtime.CoordinatorRuntime` keeps one pure :class:`TransactionCoordinatorState` per
partition this broker leads, at the partition's leader epoch (the coordinator epoch), loading it on election
(COORDINATOR_LOAD_IN_PROGRESS meanwhile), and writes the records the state asks for (acks=all), replaying each into
the state once written. This service resumes the markers of transactions a load found in PrepareCommit/PrepareAbort,
hands markers to the :class:`TransactionMarkerChannelManager` once a PrepareCommit/PrepareAbort is written (the
post-write action) and logs CompleteCommit/CompleteAbort once they are written (retrying
while the log is unavailable), aborts transactions that outlive their timeout
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and expires idle transactional ids
(``transactional.id.expiration.ms``, checked every ``transaction.remove.expired.transaction.cleanup.interval.ms``).

A shard that emigrates (or reloads at a newer epoch) is replaced by a new object, so a write that completes after
that is answered NOT_COORDINATOR (Kafka's coordinator-epoch check after the append; the runtime's fence) and its
markers are dropped.

Loop affinity: everything runs on the broker's event loop; only log reads and the replay go to the loader thread.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Dict, List, Optional, Protocol, Set, Tuple

from broker.util.java_hash import partition_for
from broker.coordinator.transaction.marker_channel import TransactionMarkerChannelManager
from broker.coordinator.transaction.metadata import BY_NAME
from broker.coordinator.runtime import CoordinatorLog, CoordinatorRuntime, LoadSummary
from broker.coordinator.transaction.records import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.state import (Outcome, PendingCompleteTxn, ProducerIdAndEpoch,
                                                  TransactionConfig, TransactionCoordinatorState,
                                                  check_init_producer_id, describe_error, log_error)
from broker.errors import ErrorCode
from broker.util.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
InitResult = Tuple[int, int, int]  # (error, producer id, producer epoch)
#: how long a CompleteCommit/CompleteAbort append waits before it is retried after COORDINATOR_NOT_AVAILABLE
COMPLETION_RETRY_BACKOFF_MS = 100


class ConfigSource(Protocol):
    def get(self, name: str) -> Any: ...


class InternalTopicCreator(Protocol):
    async def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Dict[str, str]) -> int: ...


class ProducerIdSource(Protocol):
    async def generate(self) -> int: ...


class TransactionCoordinator:
    """One per broker; registered as a leadership listener of ``__transaction_state``."""

    def __init__(self, config: ConfigSource, io: CoordinatorLog, topics: InternalTopicCreator,
                 producer_ids: ProducerIdSource, leader_epoch: Callable[[int], int],
                 markers: TransactionMarkerChannelManager, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        #: ``clock.wall_ms()`` as Kafka's TransactionCoordinator time.milliseconds(): transaction start and update
        #: timestamps are stored in ``__transaction_state`` and the timeout and transactional-id expiry compare
        #: with them, so a wall-clock jump moves them, in Kafka too; the intervals between checks and the retry
        #: backoff are the clock's sleeps (monotonic)
        self.clock = clock
        self.io = io
        self.topics = topics
        self.producer_ids = producer_ids
        #: partition -> its current leader epoch here (the coordinator epoch of a load)
        self.leader_epoch = leader_epoch
        self.markers = markers
        self.num_partitions = int(self._cfg("transaction.state.log.num.partitions", 50))
        self.runtime: CoordinatorRuntime[TransactionCoordinatorState] = CoordinatorRuntime(
            "TransactionCoordinator", TRANSACTION_STATE_TOPIC_NAME, io,
            lambda p, epoch: TransactionCoordinatorState(p, epoch, self.txn_config()), self._on_loaded,
            self._on_unloaded, leader_epoch=leader_epoch, clock=clock)
        #: the active shards by partition (the runtime's)
        self.shards: Dict[int, TransactionCoordinatorState] = self.runtime.shards
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self._periodic: List["asyncio.Task[None]"] = []
        self.active = False

    def _cfg(self, key: str, default: Any) -> Any:
        try:
            value = self.config.get(key)
        except KeyError:
            return default
        return default if value is None else value

    def txn_config(self) -> TransactionConfig:
        return TransactionConfig(
            transaction_max_timeout_ms=int(self._cfg("transaction.max.timeout.ms", 900000)),
            transactional_id_expiration_ms=int(self._cfg("transactional.id.expiration.ms", 604800000)))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.active = True
        self.markers.start(self)
        abort_ms = int(self._cfg("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000))
        expire_ms = int(self._cfg("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000))
        self._periodic = [loop.create_task(self._every(abort_ms, self.abort_timed_out_transactions, "transaction-abort")),
                          loop.create_task(self._every(expire_ms, self.expire_transactional_ids,
                                                       "transactionalId-expiration"))]

    async def stop(self) -> None:
        self.active = False
        for t in self._periodic:
            t.cancel()
        for p in self.runtime.partitions():
            await self.on_resign(TRANSACTION_STATE_TOPIC_NAME, p)
        await self.markers.stop()
        tasks = list(self._tasks) + self._periodic
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def loading(self) -> Set[int]:
        """The partitions being loaded."""
        return self.runtime.loading

    async def on_become_leader(self, topic: str, partition: int) -> None:
        if topic != TRANSACTION_STATE_TOPIC_NAME:
            return
        log.debug("[TransactionCoordinator] Elected as the txn coordinator for partition %d at epoch %d", partition,
                  self.runtime.epoch_of(partition))
        self.runtime.schedule_load(partition)

    async def on_resign(self, topic: str, partition: int) -> None:
        if topic != TRANSACTION_STATE_TOPIC_NAME:
            return
        if partition in self.runtime.partitions():
            log.debug("[TransactionCoordinator] Resigned as the txn coordinator for partition %d", partition)
        self.runtime.schedule_unload(partition)

    def _on_unloaded(self, partition: int, state: Optional[TransactionCoordinatorState]) -> None:
        """Unloaded: its markers are no longer ours to send."""
        self.markers.remove_markers_for_txn_partition(partition)
        if state is not None and state.transactions:
            log.info("[TransactionCoordinator] Unloaded transaction metadata of %d transactional ids of %s-%d",
                     len(state.transactions), TRANSACTION_STATE_TOPIC_NAME, partition)

    def _on_loaded(self, partition: int, state: TransactionCoordinatorState, load: LoadSummary) -> None:
        """Loaded: resume the markers of the transactions found prepared."""
        resumed = state.finish_loading(self.clock.wall_ms())
        log.log(logging.INFO if load.records else logging.DEBUG,
                "[TransactionCoordinator] Loaded %d transactional ids from %s-%d (%d records) at coordinator "
                "epoch %d in %d ms; %d transactions resume sending markers", len(state.transactions),
                TRANSACTION_STATE_TOPIC_NAME, partition, load.records, load.epoch, load.elapsed_ms, len(resumed))
        for pending in resumed:
            self.markers.add_markers(pending)

    async def wait_loaded(self) -> None:
        """Wait until no partition is loading (tests and tools)."""
        await self.runtime.wait_loaded()

    # ------------------------------------------------------------------ plumbing
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _route(self, tid: str) -> Tuple[int, int, Optional[TransactionCoordinatorState]]:
        """(error, partition, state): Kafka's getTransactionState errors."""
        p = self.partition_for(tid)
        err, state = self.runtime.route(p)
        return err, p, state

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, partition: int, state: TransactionCoordinatorState, out: Outcome) -> Any:
        """Send the outcome's markers, write its records through the runtime (which replays them into ``state``),
        then run its post-write action or failure; the caller's reply."""
        for pending in out.markers:
            self.markers.add_markers(pending)
        if not out.records:
            return out.response
        written = await self.runtime.write(partition, state, out.records)
        # fenced (emigrated, or reloaded at a new coordinator epoch): Kafka's epoch check answers as it is
        code = written.error if written.fenced else log_error(written.error)
        if code:
            log.info("[TransactionCoordinator] Appending to %s-%d failed with %s; the transition is abandoned",
                     TRANSACTION_STATE_TOPIC_NAME, partition, ErrorCode(code).name)
            assert out.on_write_failed is not None
            after = out.on_write_failed(self.clock.wall_ms(), code)
        elif out.after_write is not None:
            after = out.after_write(self.clock.wall_ms())
        else:
            return out.response
        return await self._finish(partition, state, after)

    # ------------------------------------------------------------------ MarkerOwner
    def is_current(self, pending: PendingCompleteTxn) -> bool:
        p = pending.txn_partition
        state = self.shards.get(p)
        return self.active and state is not None and state.is_current(pending)

    def on_marker_written(self, pending: PendingCompleteTxn, tp: TopicPartition) -> None:
        state = self.shards.get(pending.txn_partition)
        if state is not None:
            state.marker_written(pending, tp)

    def on_markers_complete(self, pending: PendingCompleteTxn) -> None:
        self._spawn(self._complete(pending))

    async def _complete(self, pending: PendingCompleteTxn) -> None:
        """Log CompleteCommit/CompleteAbort, retrying while the log answers COORDINATOR_NOT_AVAILABLE."""
        while self.active:
            state = self.shards.get(pending.txn_partition)
            if state is None:
                return
            out = state.complete_transaction(pending)
            if out is None:
                log.info("[TransactionCoordinator] No longer the coordinator of %s at coordinator epoch %d; cancel "
                         "appending its completion", pending.transactional_id, pending.coordinator_epoch)
                return
            code = await self._finish(pending.txn_partition, state, out)
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                if code:
                    log.warning("[TransactionCoordinator] Completing the transaction of %s failed with %s",
                                pending.transactional_id, ErrorCode(code).name)
                else:
                    log.debug("Completed transaction of %s (%s)", pending.transactional_id,
                              "commit" if pending.commit else "abort")
                return
            await self.clock.sleep_ms(COMPLETION_RETRY_BACKOFF_MS)

    # ------------------------------------------------------------------ the APIs
    async def init_producer_id(self, tid: str, timeout_ms: int,
                               expected: Optional[ProducerIdAndEpoch]) -> InitResult:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        err = check_init_producer_id(tid, timeout_ms, self.txn_config().transaction_max_timeout_ms)
        if err:
            return err, -1, -1
        new_pid: Optional[int] = None
        while True:
            err, p, state = self._route(tid)
            if state is None:
                return int(err), -1, -1
            out = state.init_producer_id(self.clock.wall_ms(), tid, timeout_ms, expected, new_pid)
            if not out.need_producer_id:
                result = await self._finish(p, state, out)
                if result[0] == 0:
                    log.info("[TransactionCoordinator] Initialized transactionalId %s with producerId %d and "
                             "producer epoch %d on partition %s-%d", tid, result[1], result[2],
                             TRANSACTION_STATE_TOPIC_NAME, p)
                return result
            try:
                new_pid = await self.producer_ids.generate()
            except Exception as exc:
                log.warning("Could not allocate a producer id for %s: %s", tid, exc)
                return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), -1, -1

    async def add_partitions(self, tid: str, pid: int, epoch: int, partitions: Set[TopicPartition]) -> int:
        if not tid:
            return int(ErrorCode.INVALID_REQUEST)
        err, p, state = self._route(tid)
        if state is None:
            return int(err)
        return await self._finish(p, state, state.add_partitions(self.clock.wall_ms(), tid, pid, epoch,
                                                                 set(partitions)))

    def verify_partitions(self, tid: str, pid: int, epoch: int,
                          partitions: Set[TopicPartition]) -> Dict[TopicPartition, int]:
        if not tid:
            return {tp: int(ErrorCode.INVALID_REQUEST) for tp in partitions}
        err, _p, state = self._route(tid)
        if state is None:
            return {tp: int(err) for tp in partitions}
        return state.verify_partitions(tid, pid, epoch, set(partitions))

    async def end_transaction(self, tid: str, pid: int, epoch: int, commit: bool) -> int:
        if not tid:
            return int(ErrorCode.INVALID_REQUEST)
        err, p, state = self._route(tid)
        if state is None:
            return int(err)
        return await self._finish(p, state, state.end_transaction(self.clock.wall_ms(), tid, pid, epoch,
                                                                  commit))

    def describe_transaction(self, tid: str) -> dict:
        if not self.active:
            return describe_error(tid, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not tid:
            return describe_error(tid, ErrorCode.INVALID_REQUEST)
        err, _p, state = self._route(tid)
        if state is None:
            return describe_error(tid, err)
        return state.describe(tid)

    def list_transactions(self, states: Set[str], producer_ids: Set[int],
                          duration_ms: int = -1) -> Tuple[int, List[str], List[dict]]:
        """(error, unknown state filters, entries)."""
        if not self.active:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), [], []
        if self.loading:
            return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), [], []
        unknown = [s for s in states if s not in BY_NAME]
        now = self.clock.wall_ms()
        entries: List[dict] = []
        for state in self.shards.values():
            entries.extend(state.list_transactions(now, states, producer_ids, duration_ms))
        return 0, unknown, entries

    # ------------------------------------------------------------------ background work
    async def abort_timed_out_transactions(self) -> None:
        now = self.clock.wall_ms()
        for p, state in list(self.shards.items()):
            for tid, pid, epoch in state.timed_out_transactions(now):
                if self.shards.get(p) is not state:
                    break
                out = state.abort_timed_out(now, tid, pid)
                if out is not None:
                    log.info("[TransactionCoordinator] Aborting transaction of %s (producer id %d, epoch %d): it "
                             "exceeded its timeout", tid, pid, epoch)
                    self._spawn(self._end_timed_out(p, state, out, tid))

    async def _end_timed_out(self, p: int, state: TransactionCoordinatorState, out: Outcome, tid: str) -> None:
        code = await self._finish(p, state, out)
        if code == 0:
            log.info("[TransactionCoordinator] Completed rollback of ongoing transaction for transactionalId %s due "
                     "to timeout", tid)
        elif code in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED,
                      ErrorCode.CONCURRENT_TRANSACTIONS):
            log.debug("Rollback of ongoing transaction for transactionalId %s has been cancelled due to error %s",
                      tid, ErrorCode(code).name)
        else:
            log.warning("[TransactionCoordinator] Rollback of ongoing transaction for transactionalId %s failed due "
                        "to error %s", tid, ErrorCode(code).name)

    async def expire_transactional_ids(self) -> None:
        for p, state in list(self.shards.items()):
            for out in state.expire_transactional_ids(self.clock.wall_ms()):
                if self.shards.get(p) is not state:
                    break
                await self._finish(p, state, out)

    async def _every(self, interval_ms: int, fn: Any, name: str) -> None:
        while True:
            await self.clock.sleep_ms(max(1, interval_ms))
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[TransactionCoordinator] Periodic task %s failed", name)

    # ------------------------------------------------------------------ FindCoordinator support
    async def ensure_transaction_state_topic(self) -> int:
        """Create ``__transaction_state`` on first use (Kafka's transactionTopicConfigs); 0 or
        COORDINATOR_NOT_AVAILABLE."""
        configs = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                   "unclean.leader.election.enable": "false",
                   "min.insync.replicas": str(self._cfg("transaction.state.log.min.isr", 2)),
                   "segment.bytes": str(self._cfg("transaction.state.log.segment.bytes", 104857600))}
        return int(await self.topics.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC_NAME, self.num_partitions,
            int(self._cfg("transaction.state.log.replication.factor", 3)), configs))

