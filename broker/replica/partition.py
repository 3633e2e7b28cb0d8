"""Partition: leader/follower state of one hosted partition (Kafka's cluster.Partition and Replica).

The leader tracks every follower's fetch position (:class:`ReplicaState`), keeps the ISR
(committed by the controller) and at most one pending ISR change (the "maximal ISR" of KIP-497:
an expansion counts at once for the high watermark; a shrink only once the controller commits
it), advances the high watermark, and answers acks=-1 produce waits. ISR changes go to the
controller through an AlterPartition submitter; its answer updates the state here.

Threading: event loop only, and never the log's lock: the log's offsets are read from what its owner published
(Log.offsets), and the leader's high watermark is raised without the lock (Log.maybe_increment_high_watermark);
disk work (creating logs, assigning a leader epoch start offset, truncation) is the ReplicaManager's job on its
I/O workers.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, Dict, Final, Iterable, List, NamedTuple, Optional, Protocol, Sequence,
                    Set, Tuple)

from broker.accel import record_batch
from broker.errors import ErrorCode, error_for_code
from broker.replica.errors import error_code_for
from broker.replica.results import ProduceResult, ReadResult
from broker.util.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from broker.storage.partition_log import LogAppendInfo, PartitionLog

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1

_NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_NOT_ENOUGH_REPLICAS_AFTER_APPEND = int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)

#: StopReplica leader epoch sentinels (LeaderAndIsr.EpochDuringDelete / NoEpoch)
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass
class LeaderAndIsrPartitionState:
    """One partition of a LeaderAndIsr request (the controller's decision for it)."""

    topic: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: List[int]
    partition_epoch: int
    replicas: List[int]
    adding_replicas: List[int] = field(default_factory=list)
    removing_replicas: List[int] = field(default_factory=list)
    is_new: bool = False
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition_index)

    @classmethod
    def from_message(cls, topic: str, msg: Any) -> "LeaderAndIsrPartitionState":
        """From a decoded LeaderAndIsrPartitionState (v2+ carries the topic name on the topic level)."""
        return cls(topic or getattr(msg, "topic_name", ""), msg.partition_index, msg.controller_epoch, msg.leader,
                   msg.leader_epoch, list(msg.isr), getattr(msg, "partition_epoch", 0), list(msg.replicas),
                   list(getattr(msg, "adding_replicas", None) or []),
                   list(getattr(msg, "removing_replicas", None) or []),
                   bool(getattr(msg, "is_new", False)), int(getattr(msg, "leader_recovery_state", 0)))


class LeaderAndIsr(NamedTuple):
    """A partition's leadership as the controller committed it (AlterPartition response)."""

    leader: int
    leader_epoch: int
    isr: Tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


class AlterPartitionError(Exception):
    """AlterPartition failed for one partition with ``error_code`` (from the controller or the manager)."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or _error_name(error_code))
        self.error_code = int(error_code)


class AlterPartitionSubmitter(Protocol):
    """What a Partition needs to propose ISR changes (see alter_partition.AlterPartitionManager)."""

    async def submit(self, tp: TopicPartition, topic_id: Optional[uuid.UUID], leader_epoch: int,
                     new_isr_with_epochs: List[Tuple[int, int]], leader_recovery_state: int,
                     partition_epoch: int) -> LeaderAndIsr:
        """The committed state, or raises AlterPartitionError."""
        ...


@dataclass
class ReplicaState:
    """The leader's view of one follower, updated by its Fetch requests."""

    broker_id: int
    log_start_offset: int = -1
    log_end_offset: int = -1
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: Optional[int] = None

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """At the leader's LEO, or was within the last ``max_lag_ms``."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int, broker_epoch: int) -> None:
        """A fetch at ``fetch_offset`` means the follower holds everything below it.

        lastCaughtUpTime becomes this fetch's time if it reached the leader's LEO, else the
        previous fetch's time if this one reached the LEO the leader had at that previous fetch
        (so a follower chasing a steady stream of small appends still counts as caught up).
        """
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """On a new leader epoch: ISR members count as caught up now, others not at all."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if is_new_leader:
            self.log_start_offset = -1
            self.log_end_offset = -1
            self.last_fetch_leader_log_end_offset = -1
            self.last_fetch_time_ms = 0
            self.broker_epoch = None
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0


@dataclass(frozen=True, eq=False)
class IsrState:
    """Committed ISR, or a pending change (compared by identity: each proposal is one object)."""

    isr: Tuple[int, ...]
    maximal_isr: Tuple[int, ...]
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    kind: str = "committed"  # or "expand" / "shrink"
    sent: Optional[LeaderAndIsr] = None
    last_committed: Optional["IsrState"] = None

    @property
    def in_flight(self) -> bool:
        return self.kind != "committed"

    @staticmethod
    def committed(isr: Iterable[int], leader_recovery_state: int = LEADER_RECOVERY_RECOVERED) -> "IsrState":
        t = tuple(dict.fromkeys(isr))
        return IsrState(t, t, leader_recovery_state)


#: Kafka's VerificationGuard.SENTINEL: the guard of a transactional append that started no verification (the log
#: held an open transaction of its producer when looked at on the loop); its append on the owner passes only if the
#: producer's transaction is still open then
SENTINEL_GUARD: Final = object()


class LeaderAppend(NamedTuple):
    """One append as leader, as the loop accepted it (Partition the gate), handed to the partition's owner."""
    partition: "Partition"
    records: "bytearray | memoryview"
    #: the leader epoch the append was accepted in
    leader_epoch: int
    is_from_client: bool
    #: KIP-890: the batch's verification guard, SENTINEL_GUARD, or None (not transactional, or no verification)
    guard: Optional[object]

    def run(self) -> "LogAppendInfo":
        """On the owner."""
        return self.partition.append_records_to_leader(self.records, self.leader_epoch, self.is_from_client,
                                                       self.guard)

    def run_without_waiting(self) -> "LogAppendInfo":
        """On the event loop borrowing the owner: LogBusyError, nothing done, where the Log's lock is held elsewhere
        (a reader of a log whose segments are changing), rather than wait for it."""
        return self.partition.append_records_to_leader(self.records, self.leader_epoch, self.is_from_client,
                                                       self.guard, wait=False)


class Partition:
    """One hosted topic-partition: its log and, as leader, its followers and ISR."""

    def __init__(self, topic: str, partition: int, local_broker_id: int, *, log: Optional[PartitionLog] = None,
                 topic_id: Optional[uuid.UUID] = None, replica_lag_time_max_ms: int = 30000,
                 clock: Clock = SYSTEM_CLOCK,
                 alter_partition_manager: Optional[AlterPartitionSubmitter] = None,
                 is_broker_alive: Callable[[int], bool] = lambda _b: True,
                 on_delayed_check: Callable[[TopicPartition], None] = lambda _tp: None,
                 alter_partition_retry_backoff_ms: int = 50) -> None:
        self.topic = topic
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.log = log
        #: while moving to another log dir of this broker (AlterReplicaLogDirs): the log being filled there
        self.future_log: Optional[PartitionLog] = None
        self.topic_id = topic_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        #: the ISR lag clock (lastCaughtUpTimeMs against replica.lag.time.max.ms) is its mono_ms(): Kafka's Partition
        #: uses time.milliseconds(), so a wall-clock jump forward shrinks every ISR at the next check and one back
        #: delays a shrink; these times are never stored or sent, so the monotonic clock is only safer. Its timers
        #: run the AlterPartition retry backoff. The ReplicaManager passes its own clock.
        self._time = clock
        self._clock = clock.mono_ms
        self.alter_partition_manager = alter_partition_manager
        self._is_broker_alive = is_broker_alive
        self._on_delayed_check = on_delayed_check
        self._retry_backoff_ms = alter_partition_retry_backoff_ms
        self.leader_id: int = -1
        self.leader_epoch: int = -1
        self.partition_epoch: int = -1
        self.controller_epoch: int = -1
        self.leader_epoch_start_offset: Optional[int] = None
        self.replicas: Tuple[int, ...] = ()
        self.adding_replicas: Tuple[int, ...] = ()
        self.removing_replicas: Tuple[int, ...] = ()
        self.isr_state: IsrState = IsrState.committed(())
        self.remote_replicas: Dict[int, ReplicaState] = {}
        #: min.insync.replicas override (legacy single-broker path); None = the log's config
        self.min_isr_override: Optional[int] = None
        #: set while the ReplicaManager changes this partition's leadership (appends wait on it)
        self.transition: Optional["asyncio.Future[None]"] = None
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self.deleted = False
        #: KIP-890 guards by producer id: issued on the loop, spent by the append on the owner
        self.verification_guards: Dict[int, object] = {}
        #: told "shrink" or "expand" when the controller commits an ISR change this leader asked for
        self.isr_change_listener: Optional[Callable[[str], None]] = None

    # ------------------------------------------------------------------ the gate of appends and reads
    def refuse_append(self, acks: int) -> Optional[ProduceResult]:
        """On the event loop, before an append goes to the partition's owner: why this replica may not append as
        leader now (not the leader; for acks=-1, an ISR below min.insync.replicas, as Kafka's appendRecordsToLeader
        checks it), or None. The caller has checked that the log is here."""
        if self.leader_id != self.local_broker_id:  # not is_leader (its log is there)
            return ProduceResult(_NOT_LEADER_OR_FOLLOWER)
        if acks == -1 and self.is_under_min_isr:
            return ProduceResult(int(ErrorCode.NOT_ENOUGH_REPLICAS), error_message=(
                "The size of the current ISR %s is insufficient to satisfy the min.isr requirement of %d for "
                "partition %s-%d" % (list(self.isr), self.effective_min_isr(), self.topic, self.partition)))
        return None

    def maybe_start_transaction_verification(self, producer_id: int, producer_epoch: int) -> Optional[object]:
        """KIP-890 (Kafka's Partition.maybeStartTransactionVerification), on the loop: a guard for a transactional
        append that must be verified with its coordinator first, or None when the log already holds an open
        transaction of this producer at this epoch (or there is no log: the append reports that). The producer's
        next marker drops the guard, so a verification that raced the end of its transaction cannot start a new
        one. This look at the log is made without its owner: the append looks again (``append_records_to_leader``)."""
        plog = self.log
        if plog is None or plog.has_ongoing_txn(producer_id, producer_epoch):
            return None
        guard = object()
        self.verification_guards[producer_id] = guard
        return guard

    def append_records_to_leader(self, buf: "bytearray | memoryview", leader_epoch: int, is_from_client: bool,
                                 guard: Optional[object] = None, wait: bool = True) -> "LogAppendInfo":
        """Kafka's Partition.appendRecordsToLeader, on the partition's owner: append as leader in ``leader_epoch``,
        unless leadership moved since the request was accepted on the loop (NOT_LEADER_OR_FOLLOWER). ``guard``
        (KIP-890, a transactional batch): the batch continues an open transaction of its producer, or presents the
        guard its verification took (not :data:`SENTINEL_GUARD`); otherwise INVALID_TXN_STATE, as Kafka's
        analyzeAndValidateProducerState checks every transactional batch. The HW is moved afterwards on the loop
        (``maybe_increment_leader_hw``)."""
        plog = self.log
        if self.deleted or plog is None or self.leader_id != self.local_broker_id or self.leader_epoch != leader_epoch:
            raise error_for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER)(
                "leadership of %s-%d changed before the append" % (self.topic, self.partition))
        if guard is not None and not (guard is SENTINEL_GUARD and record_batch.batch_header(buf).is_control):
            pid = record_batch.producer_id(buf)
            if not (plog.has_ongoing_txn(pid, record_batch.producer_epoch(buf))
                    or (guard is not SENTINEL_GUARD and self.verification_guards.get(pid) is guard)):
                raise error_for_code(ErrorCode.INVALID_TXN_STATE)("The transaction was not verified")
        info = plog.append_as_leader(buf, leader_epoch, is_from_client=is_from_client, wait=wait)
        if (guard is not None and guard is not SENTINEL_GUARD) or not is_from_client:
            pid = record_batch.producer_id(buf)
            if pid >= 0:  # the transaction started (or a marker ended one): a pending verification is spent
                self.verification_guards.pop(pid, None)
        return info

    def read_records(self, plog: "PartitionLog", fetch_offset: int, max_bytes: int, upper: str,
                     last_fetched_epoch: int, throttled: bool, min_one_message: bool, wait: bool = True
                     ) -> ReadResult:
        """Kafka's Partition.fetchRecords/readRecords for one partition of a Fetch, from ``plog`` (this partition's
        log when the read was accepted on the loop) up to ``upper`` ("leo" for a follower, "hw", or "lso" for
        read_committed), on the loop or a worker: no lock (the log's published state). Checks the fetcher's last
        fetched epoch (KIP-320: a diverging epoch answers where it ends, no data); ``throttled`` (a leader's
        replication quota) answers the offsets without records. A failed read answers its error and no offsets.
        Raises LogBusyError only with ``wait=False`` (the loop), when the log's segments are being changed."""
        from broker.storage.errors import LogBusyError, OffsetMovedToTieredStorageError, OffsetOutOfRangeError
        # Offsets before the read: appends after it must not make a follower look caught up. The HW first (the LSO
        # from it), then the owner's published offsets: one publication, whole.
        hw = plog.high_watermark
        offsets = plog.offsets
        leo = offsets.log_end_offset
        start = offsets.log_start_offset
        lso = offsets.last_stable_offset(hw)
        res = ReadResult(0, hw, lso, start, None, 0, leo)
        if (upper == "leo" and fetch_offset == leo and start <= leo
                and (last_fetched_epoch < 0 or last_fetched_epoch == plog.latest_epoch)):
            # A follower at the end of the log, in the leader's latest epoch: nothing to read, nothing can have
            # diverged (the epoch's end is the LEO). Most partitions of an idle follower's fetch are this case.
            return res
        try:
            if last_fetched_epoch >= 0:
                epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
                if epoch < 0 or end < 0:
                    raise OffsetOutOfRangeError("cannot determine the end offset of epoch %d" % last_fetched_epoch)
                if fetch_offset < start:
                    raise OffsetOutOfRangeError("offset %d is below the log start offset %d" % (fetch_offset, start))
                if epoch < last_fetched_epoch or end < fetch_offset:
                    res.diverging_epoch = (epoch, end)
                    return res
            if throttled:
                return res
            bound = None if upper == "leo" else (lso if upper == "lso" else hw)
            if upper == "lso":
                info = plog.read(fetch_offset, max_bytes, bound, min_one_message, include_aborted_txns=True, wait=wait)
                aborted = info.aborted_transactions
                if aborted is not None:
                    res.aborted_transactions = [(t.producer_id, t.first_offset) for t in aborted]
            else:
                info = plog.read(fetch_offset, max_bytes, bound, min_one_message, wait=wait)
            recs = info.records
            if recs is not None and len(recs) > 0:
                res.records = recs
                res.size = len(recs)
        except LogBusyError:
            raise
        except OffsetMovedToTieredStorageError:
            # Kafka's handleOffsetOutOfRangeError: at or above the log start but below the local log start
            if upper == "leo":  # a follower rebuilds from the leader's remote metadata (its TierStateMachine)
                return ReadResult(int(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE), hw, -1, start, None, 0, leo)
            res.remote_fetch = (fetch_offset, max_bytes, min_one_message, upper == "lso")
        except Exception as exc:
            # Kafka's createLogReadResult(e): a failed read reports no offsets (-1), no data
            res = ReadResult(error_code_for(exc))
            if res.error_code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("Unexpected error reading %s-%d at %d", self.topic, self.partition, fetch_offset)
        return res

    # ------------------------------------------------------------------ views
    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id and self.log is not None

    @property
    def isr(self) -> Tuple[int, ...]:
        """The committed ISR."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> Tuple[int, ...]:
        return self.isr_state.maximal_isr

    @property
    def in_sync_replica_ids(self) -> Tuple[int, ...]:
        return self.isr_state.isr

    @property
    def leader_recovery_state(self) -> int:
        return self.isr_state.leader_recovery_state

    @property
    def min_insync_replicas(self) -> int:
        if self.min_isr_override is not None:
            return self.min_isr_override
        return self.log.config.min_insync_replicas if self.log is not None else 1

    @property
    def replication_factor(self) -> int:
        """Adding replicas of a reassignment do not count (Kafka's OngoingReassignmentState)."""
        return len([r for r in self.replicas if r not in self.adding_replicas])

    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, number of replicas): a too-large setting cannot block forever."""
        return min(self.min_insync_replicas, len(self.remote_replicas) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and self._isr_below_min_isr()

    def _isr_below_min_isr(self) -> bool:
        """ISR smaller than the effective min.insync.replicas. That minimum is at most the number of replicas
        (followers + 1), so a full ISR is never below it and the config is read only when the ISR is short."""
        isr_size = len(self.isr_state.isr)
        return isr_size <= len(self.remote_replicas) and isr_size < self.effective_min_isr()

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and self.replication_factor - len(self.isr_state.isr) > 0

    def is_adding_replica(self, replica_id: int) -> bool:
        return replica_id in self.adding_replicas

    def remote_replica(self, replica_id: int) -> Optional[ReplicaState]:
        return self.remote_replicas.get(replica_id)

    def check_current_leader_epoch(self, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH if the requester is behind us, UNKNOWN_LEADER_EPOCH if ahead; -1 = not sent."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return 0
        if current_leader_epoch < self.leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        return int(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def __repr__(self) -> str:
        return ("Partition(%s-%d, leader=%d, leader_epoch=%d, partition_epoch=%d, isr=%s, state=%s)"
                % (self.topic, self.partition, self.leader_id, self.leader_epoch, self.partition_epoch,
                   list(self.isr_state.isr), self.isr_state.kind))

    # ------------------------------------------------------------------ leadership
    def update_assignment_and_isr(self, replicas: Sequence[int], is_leader: bool, isr: Iterable[int],
                                  adding: Sequence[int], removing: Sequence[int], leader_recovery_state: int) -> None:
        """Store the assignment; as leader keep one ReplicaState per follower (new ones start empty)."""
        if is_leader:
            followers = [r for r in replicas if r != self.local_broker_id]
            for r in followers:
                if r not in self.remote_replicas:
                    self.remote_replicas[r] = ReplicaState(r)
            for r in list(self.remote_replicas):
                if r not in followers:
                    del self.remote_replicas[r]
        else:
            self.remote_replicas.clear()
        self.replicas = tuple(replicas)
        self.adding_replicas = tuple(adding)
        self.removing_replicas = tuple(removing)
        self.isr_state = IsrState.committed(isr, leader_recovery_state)

    def make_leader(self, state: LeaderAndIsrPartitionState, topic_id: Optional[uuid.UUID], now_ms: int,
                    epoch_start_offset: Optional[int] = None) -> bool:
        """Become (or stay) leader per ``state``; True if this broker was not the leader before.

        A state whose partition epoch is older than ours is ignored (an AlterPartition response
        may have told us a newer one first). A new leader epoch starts at ``epoch_start_offset``
        (the LEO at which the ReplicaManager recorded the epoch in the log; default: the LEO now)
        and resets every follower's fetch state.
        """
        if state.partition_epoch < self.partition_epoch:
            log.info("Skipped the become-leader state change for %s-%d: partition epoch %d is older than %d",
                     self.topic, self.partition, state.partition_epoch, self.partition_epoch)
            return False
        if self.log is None:
            raise RuntimeError("make_leader before the log of %s-%d exists" % self.tp)
        self.controller_epoch = state.controller_epoch
        if topic_id is not None:
            self.topic_id = topic_id
        is_new_leader = not self.is_leader
        is_new_epoch = state.leader_epoch > self.leader_epoch
        if state.leader_recovery_state == LEADER_RECOVERY_RECOVERING:
            log.info("%s-%d was marked RECOVERING; marking it RECOVERED", self.topic, self.partition)
        self.update_assignment_and_isr(state.replicas, True, state.isr, state.adding_replicas,
                                       state.removing_replicas, LEADER_RECOVERY_RECOVERED)
        if is_new_epoch:
            start = self.log.log_end_offset if epoch_start_offset is None else epoch_start_offset
            log.info("Leader %s-%d starts at leader epoch %d from offset %d with partition epoch %d, high watermark "
                     "%d, ISR %s. Previous leader %d and previous leader epoch %d.", self.topic, self.partition,
                     state.leader_epoch, start, state.partition_epoch, self.log.high_watermark, list(state.isr),
                     self.leader_id, self.leader_epoch)
            for rid, rs in self.remote_replicas.items():
                rs.reset(now_ms, start, is_new_leader, rid in state.isr)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        self.leader_id = self.local_broker_id
        if self.maybe_increment_leader_hw(now_ms):
            self._on_delayed_check(self.tp)
        return is_new_leader

    def make_follower(self, state: LeaderAndIsrPartitionState, topic_id: Optional[uuid.UUID]) -> bool:
        """Follow ``state.leader``; True when the leader epoch changed (the fetcher must restart)."""
        if state.partition_epoch < self.partition_epoch:
            log.info("Skipped the become-follower state change for %s-%d: partition epoch %d is older than %d",
                     self.topic, self.partition, state.partition_epoch, self.partition_epoch)
            return False
        self.controller_epoch = state.controller_epoch
        if topic_id is not None:
            self.topic_id = topic_id
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self.update_assignment_and_isr(state.replicas, False, (), state.adding_replicas, state.removing_replicas,
                                       state.leader_recovery_state)
        if is_new_epoch:
            log.info("Follower %s-%d starts at leader epoch %d with partition epoch %d; leader is %d",
                     self.topic, self.partition, state.leader_epoch, state.partition_epoch, state.leader)
        return is_new_epoch

    def delete(self) -> None:
        """Forget all state (the partition is no longer hosted); pending AlterPartition answers are ignored."""
        self.deleted = True
        self.future_log = None
        self.remote_replicas.clear()
        self.isr_state = IsrState.committed(())
        self.leader_id = -1
        self.leader_epoch_start_offset = None
        for t in list(self._tasks):
            t.cancel()

    # ------------------------------------------------------------------ follower fetches
    def update_follower_fetch_state(self, replica_id: int, replica_epoch: int, fetch_offset: int,
                                    log_start_offset: int, now_ms: int,
                                    leader_end_offset: Optional[int] = None) -> bool:
        """Record a follower's Fetch; may expand the ISR and advance the HW.

        ``leader_end_offset`` is the leader's LEO when the fetch was read (default: now). Returns
        True if the high or low watermark moved (delayed produce / delete requests may complete;
        they have been checked already through ``on_delayed_check``).
        """
        rs = self.remote_replicas.get(replica_id)
        if rs is None or self.log is None:
            return False
        leo = self.log.log_end_offset if leader_end_offset is None else leader_end_offset
        prev_end = rs.log_end_offset
        prev_start = rs.log_start_offset
        rs.update_fetch_state(fetch_offset, log_start_offset, now_ms, leo, replica_epoch)
        self.maybe_expand_isr(replica_id, now_ms)
        hw_moved = prev_end != rs.log_end_offset and self.maybe_increment_leader_hw(now_ms)
        lw_moved = prev_start != rs.log_start_offset
        if hw_moved or lw_moved:
            self._on_delayed_check(self.tp)
        return hw_moved or lw_moved

    def _is_replica_isr_eligible(self, replica_id: int) -> bool:
        """ZooKeeper mode: the broker must be alive (the controller rejects shutting-down ones)."""
        return self._is_broker_alive(replica_id)

    def _is_follower_in_sync(self, rs: ReplicaState) -> bool:
        """Caught up to the HW and into the current leader epoch (else committed data between HW
        and LEO could be lost if it became leader)."""
        if self.log is None or self.leader_epoch_start_offset is None:
            return False
        return rs.log_end_offset >= self.log.high_watermark and rs.log_end_offset >= self.leader_epoch_start_offset

    def _can_add_to_isr(self, replica_id: int) -> bool:
        st = self.isr_state
        return not st.in_flight and replica_id not in st.isr and self._is_replica_isr_eligible(replica_id)

    def maybe_expand_isr(self, replica_id: int, now_ms: Optional[int] = None) -> bool:
        """Propose adding ``replica_id`` to the ISR if it caught up; True if a change was submitted."""
        rs = self.remote_replicas.get(replica_id)
        if rs is None or not self.is_leader or not self._can_add_to_isr(replica_id) or not self._is_follower_in_sync(rs):
            return False
        current = self.isr_state
        new_isr = current.isr + (replica_id,)
        pending = IsrState(current.isr, new_isr, current.leader_recovery_state, "expand",
                           LeaderAndIsr(self.local_broker_id, self.leader_epoch, new_isr,
                                        current.leader_recovery_state, self.partition_epoch), current)
        self.isr_state = pending
        log.info("Expanding ISR of %s-%d from %s to %s", self.topic, self.partition, list(current.isr), list(new_isr))
        self._submit_alter_partition(pending)
        return True

    def out_of_sync_replicas(self, now_ms: int) -> List[int]:
        """ISR followers that have not reached the leader's LEO within replica.lag.time.max.ms."""
        st = self.isr_state
        if st.in_flight or self.log is None:
            return []
        leo = self.log.log_end_offset
        out = []
        for rid in st.isr:
            if rid == self.local_broker_id:
                continue
            rs = self.remote_replicas.get(rid)
            if rs is None or not rs.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms):
                out.append(rid)
        return out

    def maybe_shrink_isr(self, now_ms: Optional[int] = None) -> bool:
        """Propose removing lagging followers from the ISR; True if a change was submitted.

        Unlike an expansion, a shrink does not count until committed (the maximal ISR stays the
        current one): a failed AlterPartition must not have let the HW advance.
        """
        plog = self.log
        if plog is None or not self.is_leader:
            return False
        now = self._clock() if now_ms is None else now_ms
        out = self.out_of_sync_replicas(now)
        if not out:
            return False
        current = self.isr_state
        new_isr = tuple(r for r in current.isr if r not in out)
        pending = IsrState(current.isr, current.isr, current.leader_recovery_state, "shrink",
                           LeaderAndIsr(self.local_broker_id, self.leader_epoch, new_isr,
                                        current.leader_recovery_state, self.partition_epoch), current)
        self.isr_state = pending
        details = ", ".join("(brokerId: %d, endOffset: %d, lastCaughtUpTimeMs: %d)" % (
            r, self.remote_replicas[r].log_end_offset if r in self.remote_replicas else -1,
            self.remote_replicas[r].last_caught_up_time_ms if r in self.remote_replicas else -1) for r in out)
        log.info("Shrinking ISR of %s-%d from %s to %s. Leader: (highWatermark: %d, endOffset: %d). Out of sync "
                 "replicas: %s.", self.topic, self.partition, list(current.isr), list(new_isr),
                 plog.high_watermark, plog.log_end_offset, details)
        self._submit_alter_partition(pending)
        return True

    # ------------------------------------------------------------------ watermarks
    def maybe_increment_leader_hw(self, now_ms: Optional[int] = None) -> bool:
        """HW = min LEO over the maximal ISR and over followers caught up enough to join it.

        Waiting for caught-up followers outside the ISR keeps a follower that is close behind from
        falling further behind an HW that races ahead. Nothing advances while the ISR is smaller
        than the effective min.insync.replicas. Returns True if the HW moved up. Takes no lock: the log's HW is
        raised lock-free and its LSO follows (Log.maybe_increment_high_watermark), so this runs after every append
        and every follower fetch without waiting for a worker's disk write.
        """
        plog = self.log
        if plog is None or self.leader_id != self.local_broker_id:
            return False
        remote = self.remote_replicas
        isr_size = len(self.isr_state.isr)
        if isr_size <= len(remote) and isr_size < self.effective_min_isr():  # is_under_min_isr, without the calls
            return False
        if not remote:  # a leader without followers (one replica): the HW is the LEO
            return plog.maybe_increment_high_watermark(None)
        leo = plog.log_end_offset
        new_hw = leo
        now = self._clock() if now_ms is None else now_ms
        maximal = self.isr_state.maximal_isr
        lag = self.replica_lag_time_max_ms
        for rid, rs in remote.items():
            if rs.log_end_offset < new_hw and (
                    rid in maximal or (rs.is_caught_up(leo, now, lag) and self._is_replica_isr_eligible(rid))):
                new_hw = rs.log_end_offset
        return plog.maybe_increment_high_watermark(new_hw)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> Tuple[bool, int]:
        """For a waiting acks=-1 produce: (done, error). Done once the HW passes ``required_offset``;
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR fell below min.insync.replicas."""
        plog = self.log
        if plog is None or self.leader_id != self.local_broker_id:  # not is_leader
            return False, _NOT_LEADER_OR_FOLLOWER
        if plog.high_watermark >= required_offset:
            # the effective minimum is at most the number of replicas: a maximal ISR of them all always meets it
            maximal = len(self.isr_state.maximal_isr)
            if maximal > len(self.remote_replicas) or self.effective_min_isr() <= maximal:
                return True, 0
            return True, _NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, 0

    def low_watermark_if_leader(self) -> int:
        """Min log start offset over this log and live followers (DeleteRecords completes at it)."""
        plog = self.log
        if plog is None or not self.is_leader:
            raise ValueError("not the leader of %s-%d" % self.tp)
        low = plog.log_start_offset
        for rid, rs in self.remote_replicas.items():
            if self._is_broker_alive(rid) and rs.log_start_offset < low:
                low = rs.log_start_offset
        return low

    # ------------------------------------------------------------------ AlterPartition
    def _submit_alter_partition(self, pending: IsrState) -> None:
        if self.alter_partition_manager is None:
            log.warning("No AlterPartition manager: ISR change of %s-%d to %s stays pending", self.topic,
                        self.partition, list(pending.sent.isr) if pending.sent else [])
            return
        task = asyncio.get_running_loop().create_task(self._alter_partition(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter_partition(self, pending: IsrState) -> None:
        sent = pending.sent
        assert sent is not None and self.alter_partition_manager is not None
        while True:
            result: Optional[LeaderAndIsr] = None
            error = 0
            try:
                # ZooKeeper mode sends -1 as every ISR member's broker epoch (not checked by the controller).
                result = await self.alter_partition_manager.submit(
                    self.tp, self.topic_id, sent.leader_epoch, [(b, -1) for b in sent.isr],
                    sent.leader_recovery_state, sent.partition_epoch)
            except AlterPartitionError as e:
                error = e.error_code
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AlterPartition for %s-%d failed unexpectedly", self.topic, self.partition)
                error = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            if self.isr_state is not pending or self.deleted:
                log.debug("Ignoring AlterPartition outcome for %s-%d: the state changed meanwhile", *self.tp)
                return
            if result is not None:
                # the HW may have moved, the ISR did (or was refused): waiting requests and fetch sessions look again
                self._handle_alter_partition_update(pending, result)
                self._on_delayed_check(self.tp)
                return
            if not self._handle_alter_partition_error(pending, error):
                self._on_delayed_check(self.tp)
                return
            await self._time.sleep_ms(self._retry_backoff_ms)
            if self.isr_state is not pending or self.deleted:
                return

    def _handle_alter_partition_error(self, pending: IsrState, error: int) -> bool:
        """Kafka's rules; returns True to retry."""
        if error in (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA):
            # The controller says the partition epoch is right and nothing was applied: drop the change.
            assert pending.last_committed is not None
            self.isr_state = pending.last_committed
            log.info("Failed to alter ISR of %s-%d to %s: %s. Reset to the committed state %s", self.topic,
                     self.partition, list(pending.sent.isr) if pending.sent else [], _error_name(error),
                     list(self.isr_state.isr))
            # The maximal ISR shrank back: the HW no longer waits for the replica the expansion would have added (a
            # broker in controlled shutdown, say). Without this, the HW stayed until the next append or follower
            # progress, and acks=all requests already waiting could time out (measured: 30 s).
            self.maybe_increment_leader_hw()
            return False
        if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
                     ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED):
            # Our state is out of date: stay pending until the next LeaderAndIsr replaces it.
            log.info("Failed to alter ISR of %s-%d: %s; awaiting new metadata", self.topic, self.partition,
                     _error_name(error))
            return False
        log.warning("Failed to alter ISR of %s-%d due to unexpected %s; retrying", self.topic, self.partition,
                    _error_name(error))
        return True

    def _handle_alter_partition_update(self, pending: IsrState, lai: LeaderAndIsr) -> bool:
        """Commit the controller's answer; True if the HW moved."""
        if lai.leader_epoch != self.leader_epoch:
            log.debug("Ignoring new ISR %s of %s-%d: stale leader epoch %d", lai, self.topic, self.partition,
                      self.leader_epoch)
            return False
        if lai.partition_epoch < self.partition_epoch:
            log.debug("Ignoring new ISR %s of %s-%d: we have partition epoch %d", lai, self.topic, self.partition,
                      self.partition_epoch)
            return False
        self.isr_state = IsrState.committed(lai.isr, lai.leader_recovery_state)
        self.partition_epoch = lai.partition_epoch
        if self.isr_change_listener is not None:
            self.isr_change_listener(pending.kind)
        log.info("ISR of %s-%d updated to %s%s and partition epoch to %d", self.topic, self.partition,
                 list(lai.isr), " (under-min-isr)" if self.is_under_min_isr else "", lai.partition_epoch)
        return self.maybe_increment_leader_hw()

    async def wait_alter_partition_idle(self) -> None:
        """For tests and shutdown: wait until no AlterPartition task of this partition is running."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


__all__ = ["Partition", "LeaderAndIsrPartitionState", "LeaderAndIsr", "AlterPartitionError", "AlterPartitionSubmitter",
           "ReplicaState", "IsrState", "LEADER_RECOVERY_RECOVERED", "LEADER_RECOVERY_RECOVERING",
           "EPOCH_DURING_DELETE", "NO_EPOCH"]
