"""The transaction coordinator as a pure state machine: one instance per ``__transaction_state`` partition led here.

No asyncio, sockets or files: every call takes ``now`` (wall-clock ms) and returns an :class:`Outcome` naming the
record to append to the partition and the reply once it is durable. Replay is the only write path: a transition is
only *prepared* by the call (the transactional id's ``pending_state``, in memory, as Kafka's); once the record is
written the runtime hands it to :meth:`TransactionCoordinatorState.replay_written`, which completes the transition
from the record itself, as a load applies the same record through :meth:`TransactionCoordinatorState.replay`. What
the record does not carry (the previous producer id and last producer epoch, in-memory fields of KIP-360) is kept
from the prepared transition meanwhile. ``on_write_failed(now, coordinator_error)`` clears the pending state and
answers; ``after_write(now)``, where a reply reads the state the record made, is the explicit post-write action:
after a PrepareCommit/PrepareAbort it names the markers to send (:class:`PendingCompleteTxn`) and changes nothing the
record holds. An Outcome without records answers at once. ``finish_loading`` resumes the transactions a load found
in PrepareCommit/PrepareAbort.

Behaviour follows Kafka 3.9's TransactionCoordinator and TransactionStateManager at transaction.version 0 (the only
version of ZooKeeper mode): the epoch is bumped by InitProducerId, fencing and timeouts, never by EndTxn. The
coordinator epoch (the partition's leader epoch) fences this shard: the I/O layer drops a shard that lost or
regained leadership, and whatever it had prepared is then answered NOT_COORDINATOR.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from broker.coordinator.transaction import records as rec
from broker.coordinator.transaction.metadata import (BY_ID, BY_NAME, COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY,
                                                     NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ONGOING, PREPARE_ABORT,
                                                     PREPARE_COMMIT, PREPARE_EPOCH_FENCE, IllegalTransitionError,
                                                     TransactionMetadata, TxnTransitMetadata, is_epoch_exhausted)
from broker.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
Record = Tuple[bytes, Optional[bytes]]
#: the (producer id, producer epoch) an InitProducerId v3+ names
ProducerIdAndEpoch = Tuple[int, int]


@dataclass
class TransactionConfig:
    """The broker settings the coordinator obeys (transaction.*, transactional.id.*)."""
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000


@dataclass(eq=False)
class PendingCompleteTxn:
    """A transaction whose PrepareCommit/PrepareAbort is logged: markers go to ``partitions``, then ``complete``."""
    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    commit: bool
    producer_id: int
    producer_epoch: int
    partitions: FrozenSet[TopicPartition]
    txn: TransactionMetadata
    complete: TxnTransitMetadata


@dataclass
class Outcome:
    """What one call produced; see the module docstring."""
    #: the reply (once the records are written and replayed, when there are records)
    response: Any = None
    records: List[Record] = field(default_factory=list)
    #: the post-write action, run after the replay: a further Outcome with the reply and the markers to send
    after_write: Optional[Callable[[int], "Outcome"]] = None
    on_write_failed: Optional[Callable[[int, int], "Outcome"]] = None
    markers: List[PendingCompleteTxn] = field(default_factory=list)
    #: InitProducerId needs a fresh producer id: call again with ``new_producer_id``
    need_producer_id: bool = False


def log_error(code: int) -> int:
    """Kafka's mapping of a failed ``__transaction_state`` append to the error the client sees."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return int(ErrorCode.NOT_COORDINATOR)
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)
    return code


def check_init_producer_id(transactional_id: str, timeout_ms: int, max_timeout_ms: int) -> int:
    """The checks Kafka makes before looking the transactional id up (0: none failed)."""
    if transactional_id == "":
        return int(ErrorCode.INVALID_REQUEST)
    if not 0 < timeout_ms <= max_timeout_ms:
        return int(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    return 0


def transit_record(tid: str, t: TxnTransitMetadata) -> Record:
    """The log record of a prepared transition (Dead = tombstone)."""
    if t.txn_state == DEAD:
        return rec.key_bytes(tid), None
    parts = None if t.txn_state == EMPTY else t.topic_partitions
    return rec.key_bytes(tid), rec.value_bytes(t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.txn_state.id,
                                               parts, t.txn_last_update_timestamp, t.txn_start_timestamp)


def describe_error(tid: str, code: int) -> Dict[str, Any]:
    """A DescribeTransactions entry carrying only an error (the other fields at their defaults)."""
    return {"error_code": int(code), "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}


def _init_error(code: int) -> Tuple[int, int, int]:
    return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH


class TransactionCoordinatorState:
    """The transactional ids of one ``__transaction_state`` partition, at one coordinator epoch."""

    def __init__(self, partition: int, coordinator_epoch: int, config: TransactionConfig) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.config = config
        self.transactions: Dict[str, TransactionMetadata] = {}
        #: transitions prepared and being written, by transactional id: what replay_written takes from them is only
        #: what their record does not carry
        self._in_flight: Dict[str, TxnTransitMetadata] = {}

    # ================================================================== append plumbing
    def _append(self, txn: TransactionMetadata, t: TxnTransitMetadata, failed: Callable[[int, int], Outcome],
                response: Any = None, after_write: Optional[Callable[[int], Outcome]] = None) -> Outcome:
        """Write ``t``'s record; once written, :meth:`replay_written` completes the transition and the reply is
        ``response`` (or ``after_write``'s); on failure clear the pending state (Kafka's appendTransactionToLog)
        and continue with ``failed``."""
        tid = txn.transactional_id
        self._in_flight[tid] = t

        def on_failed(now: int, code: int) -> Outcome:
            self._in_flight.pop(tid, None)
            txn.pending_state = None
            return failed(now, code)
        return Outcome(response=response, records=[transit_record(tid, t)], after_write=after_write,
                       on_write_failed=on_failed)

    # ================================================================== InitProducerId
    def init_producer_id(self, now: int, tid: str, timeout_ms: int, expected: Optional[ProducerIdAndEpoch],
                         new_producer_id: Optional[int] = None) -> Outcome:
        """Outcome.response is (error, producer id, epoch). ``check_init_producer_id`` passed already."""
        txn = self.transactions.get(tid)
        if txn is None:
            if new_producer_id is None:
                return Outcome(need_producer_id=True)
            txn = self.transactions[tid] = TransactionMetadata(
                tid, new_producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms, EMPTY,
                txn_last_update_timestamp=now)
            new_producer_id = None
        if txn.pending_transition_in_progress:
            return Outcome(response=_init_error(ErrorCode.CONCURRENT_TRANSACTIONS))
        if expected is not None and not self._valid_producer_id(txn, expected):
            return Outcome(response=_init_error(ErrorCode.PRODUCER_FENCED))
        if txn.state in (PREPARE_ABORT, PREPARE_COMMIT):
            return Outcome(response=_init_error(ErrorCode.CONCURRENT_TRANSACTIONS))
        if txn.state in (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY):
            if txn.is_producer_epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                if new_producer_id is None:
                    return Outcome(need_producer_id=True)
                transit = txn.prepare_producer_id_rotation(new_producer_id, timeout_ms, now, expected is not None)
            else:
                err, maybe = txn.prepare_increment_producer_epoch(timeout_ms, None if expected is None
                                                                  else expected[1], now)
                if maybe is None:
                    return Outcome(response=_init_error(err))
                transit = maybe
            log.debug("InitProducerId of %s: %s", tid, transit)
            return self._append(txn, transit, lambda _now, code: Outcome(response=_init_error(code)),
                                response=(0, transit.producer_id, transit.producer_epoch))
        if txn.state == ONGOING:
            # Abort the open transaction under a bumped epoch; the client retries (CONCURRENT_TRANSACTIONS) and the
            # retry bumps the epoch again, rotating the producer id if fencing used up the last epoch.
            fence = txn.prepare_fence_producer_epoch()
            return self.end_transaction(now, tid, fence.producer_id, fence.producer_epoch, False, from_client=False,
                                        respond=lambda code: _init_error(code or ErrorCode.CONCURRENT_TRANSACTIONS))
        raise IllegalTransitionError(f"Found transactionalId {tid} with state {txn.state}. This is illegal as we "
                                     f"should never have transitioned to this state.")

    @staticmethod
    def _valid_producer_id(txn: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
        """KIP-360: the named producer may bump unless another one took over (see Kafka's isValidProducerId)."""
        pid, epoch = expected
        return (txn.producer_epoch == NO_PRODUCER_EPOCH or pid == txn.producer_id
                or (pid == txn.previous_producer_id and is_epoch_exhausted(epoch)))

    # ================================================================== AddPartitionsToTxn / AddOffsetsToTxn
    def add_partitions(self, now: int, tid: str, pid: int, epoch: int, partitions: Set[TopicPartition]) -> Outcome:
        """Outcome.response is the error code."""
        txn = self.transactions.get(tid)
        if txn is None or txn.producer_id != pid:
            return Outcome(response=int(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        if txn.producer_epoch != epoch:
            return Outcome(response=int(ErrorCode.PRODUCER_FENCED))
        if txn.pending_transition_in_progress or txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return Outcome(response=int(ErrorCode.CONCURRENT_TRANSACTIONS))
        if txn.state == ONGOING and partitions <= txn.topic_partitions:
            return Outcome(response=0)
        transit = txn.prepare_add_partitions(partitions, now)
        return self._append(txn, transit, lambda _now, code: Outcome(response=code), response=0)

    def verify_partitions(self, tid: str, pid: int, epoch: int,
                          partitions: Set[TopicPartition]) -> Dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ ``verify_only`` (KIP-890): is each partition in this producer's open transaction?

        A partition not in it answers TRANSACTION_ABORTABLE, whatever the request version, as Kafka 3.9's
        coordinator: the partition leader maps it for producers that predate it. The pending state is not checked:
        the leader's append verifies again.
        """
        txn = self.transactions.get(tid)
        if txn is None or txn.producer_id != pid:
            err = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        elif txn.producer_epoch != epoch:
            err = int(ErrorCode.PRODUCER_FENCED)
        elif txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            err = int(ErrorCode.CONCURRENT_TRANSACTIONS)
        else:
            missing = int(ErrorCode.TRANSACTION_ABORTABLE)
            return {tp: (0 if tp in txn.topic_partitions else missing) for tp in partitions}
        return {tp: err for tp in partitions}

    # ================================================================== EndTxn
    def end_transaction(self, now: int, tid: str, pid: int, epoch: int, commit: bool, from_client: bool = True,
                        respond: Optional[Callable[[int], Any]] = None) -> Outcome:
        """Outcome.response is ``respond(error)`` (the error code by default). Kafka's endTransaction at
        transaction.version 0: a completed EndTxn retried answers NONE, a contrary one INVALID_TXN_STATE."""
        answer: Callable[[int], Any] = respond or (lambda code: code)
        txn = self.transactions.get(tid)
        if txn is None or txn.producer_id != pid:
            return Outcome(response=answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        if (from_client and epoch != txn.producer_epoch) or epoch < txn.producer_epoch:
            return Outcome(response=answer(ErrorCode.PRODUCER_FENCED))
        if txn.pending_state is not None and txn.pending_state != PREPARE_EPOCH_FENCE:
            return Outcome(response=answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        wanted = PREPARE_COMMIT if commit else PREPARE_ABORT
        if txn.state in (DEAD, PREPARE_EPOCH_FENCE):
            raise IllegalTransitionError(f"Found transactionalId {tid} with state {txn.state}. This is illegal as "
                                         f"we should never have transitioned to this state.")
        if txn.state != ONGOING:
            if txn.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
                return Outcome(response=answer(0))
            if txn.state == wanted:
                return Outcome(response=answer(ErrorCode.CONCURRENT_TRANSACTIONS))
            log.warning("TransactionalId: %s's state is %s, but received transaction marker result to send: %s",
                        tid, txn.state, "COMMIT" if commit else "ABORT")
            return Outcome(response=answer(ErrorCode.INVALID_TXN_STATE))
        is_epoch_fence = False
        if not commit and txn.pending_state == PREPARE_EPOCH_FENCE:
            # fencing: the bumped epoch takes effect now, so the fenced producer is refused from here on
            is_epoch_fence = True
            txn.pending_state = None
            txn.producer_epoch = epoch
            txn.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = txn.prepare_abort_or_commit(wanted, now)

        def written(now: int) -> Outcome:
            if txn.producer_id != pid:
                return Outcome(response=answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
            if txn.producer_epoch != epoch:
                return Outcome(response=answer(ErrorCode.PRODUCER_FENCED))
            if txn.pending_transition_in_progress:
                return Outcome(response=answer(ErrorCode.CONCURRENT_TRANSACTIONS))
            if txn.state != wanted:
                return Outcome(response=answer(ErrorCode.INVALID_TXN_STATE))
            return Outcome(response=answer(0), markers=[self._pending_complete(now, txn, commit)])

        def failed(_now: int, code: int) -> Outcome:
            if is_epoch_fence:
                txn.has_failed_epoch_fence = True
                log.warning("The coordinator failed to write an epoch fence transition for producer %s to the "
                            "transaction log with error %s. The epoch was increased to %d but not returned to the "
                            "client", tid, ErrorCode(code).name, transit.producer_epoch)
            return Outcome(response=answer(code))
        return self._append(txn, transit, failed, after_write=written)

    def _pending_complete(self, now: int, txn: TransactionMetadata, commit: bool) -> PendingCompleteTxn:
        partitions = frozenset(txn.topic_partitions)
        return PendingCompleteTxn(txn.transactional_id, self.partition, self.coordinator_epoch, commit,
                                  txn.producer_id, txn.producer_epoch, partitions, txn, txn.prepare_complete(now))

    # ================================================================== markers
    def is_current(self, pending: PendingCompleteTxn) -> bool:
        """Whether markers of ``pending`` are still this shard's to send."""
        return (pending.coordinator_epoch == self.coordinator_epoch
                and self.transactions.get(pending.transactional_id) is pending.txn)

    def marker_written(self, pending: PendingCompleteTxn, tp: TopicPartition) -> None:
        """``tp`` has its marker (or its topic is gone); DescribeTransactions stops listing it."""
        if self.is_current(pending) and pending.txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
            pending.txn.remove_partition(tp)

    def complete_transaction(self, pending: PendingCompleteTxn) -> Optional[Outcome]:
        """Every marker is written: log CompleteCommit/CompleteAbort. A failed write keeps the pending state when it
        is COORDINATOR_NOT_AVAILABLE (the caller retries), else clears it. None: no longer this shard's."""
        if not self.is_current(pending):
            return None
        txn = pending.txn
        tid = txn.transactional_id
        self._in_flight[tid] = pending.complete

        def on_failed(now: int, code: int) -> Outcome:
            self._in_flight.pop(tid, None)
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                txn.pending_state = None
            return Outcome(response=code)
        return Outcome(response=0, records=[transit_record(tid, pending.complete)], on_write_failed=on_failed)

    # ================================================================== timeouts and expiration
    def timed_out_transactions(self, now: int) -> List[Tuple[str, int, int]]:
        """(transactional id, producer id, epoch) of Ongoing transactions older than their timeout."""
        return [(tid, txn.producer_id, txn.producer_epoch) for tid, txn in self.transactions.items()
                if txn.pending_state is None and txn.state == ONGOING
                and txn.txn_start_timestamp + txn.txn_timeout_ms < now]

    def abort_timed_out(self, now: int, tid: str, pid: int) -> Optional[Outcome]:
        """Fence the producer of a timed-out transaction and abort it (Kafka bumps the epoch); None: skipped."""
        txn = self.transactions.get(tid)
        if txn is None:
            return None
        if txn.producer_id != pid:
            log.error("Found incorrect producerId when expiring transactionalId: %s. Expected producerId: %d. Found "
                      "producerId: %d", tid, pid, txn.producer_id)
            return None
        if txn.pending_transition_in_progress or txn.state != ONGOING:
            return None
        try:
            fence = txn.prepare_fence_producer_epoch()
        except IllegalTransitionError as exc:
            log.error("Cannot abort timed-out transaction of %s: %s", tid, exc)
            return None
        return self.end_transaction(now, tid, fence.producer_id, fence.producer_epoch, False, from_client=False)

    def expire_transactional_ids(self, now: int, max_records: int = 1000) -> List[Outcome]:
        """Tombstones for ids idle longer than transactional.id.expiration.ms (state Empty or Complete*), in appends
        of at most ``max_records``; each id leaves the cache once its tombstone is written."""
        deadline = now - self.config.transactional_id_expiration_ms
        expired = [txn for txn in self.transactions.values()
                   if txn.pending_state is None and txn.state.expiration_allowed
                   and txn.txn_last_update_timestamp <= deadline]
        outcomes = []
        for i in range(0, len(expired), max(1, max_records)):
            chunk = [(txn, txn.prepare_dead()) for txn in expired[i:i + max_records]]
            outcomes.append(self._tombstones(chunk))
        return outcomes

    def _tombstones(self, chunk: List[Tuple[TransactionMetadata, TxnTransitMetadata]]) -> Outcome:
        """One append of tombstones; each id leaves the cache when :meth:`replay_written` meets its tombstone."""
        for txn, t in chunk:
            self._in_flight[txn.transactional_id] = t

        def on_failed(now: int, code: int) -> Outcome:
            for txn, _ in chunk:
                self._in_flight.pop(txn.transactional_id, None)
                txn.pending_state = None
            return Outcome()
        return Outcome(records=[transit_record(txn.transactional_id, t) for txn, t in chunk],
                       on_write_failed=on_failed)

    # ================================================================== Describe / List
    def describe(self, tid: str) -> dict:
        """One DescribeTransactions entry."""
        entry = describe_error(tid, 0)
        txn = self.transactions.get(tid)
        if txn is None or txn.state == DEAD:
            entry["error_code"] = int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            return entry
        by_topic: Dict[str, List[int]] = {}
        for topic, p in sorted(txn.topic_partitions):
            by_topic.setdefault(topic, []).append(p)
        entry.update(transaction_state=txn.state.name, transaction_timeout_ms=txn.txn_timeout_ms,
                     transaction_start_time_ms=txn.txn_start_timestamp, producer_id=txn.producer_id,
                     producer_epoch=txn.producer_epoch,
                     topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        return entry

    def list_transactions(self, now: int, states: Set[str], producer_ids: Set[int],
                          duration_ms: int = -1) -> List[dict]:
        """ListTransactions entries matching every filter (empty = no filter; Dead is never listed)."""
        wanted = {BY_NAME[s] for s in states if s in BY_NAME}
        out = []
        for tid, txn in self.transactions.items():
            if txn.state == DEAD or (producer_ids and txn.producer_id not in producer_ids) \
                    or (states and txn.state not in wanted) \
                    or (duration_ms >= 0 and now - txn.txn_start_timestamp <= duration_ms):
                continue
            out.append({"transactional_id": tid, "producer_id": txn.producer_id, "transaction_state": txn.state.name})
        return out

    # ================================================================== replay
    def replay_written(self, records: Sequence[Record], base_offset: int, producer_id: int) -> None:
        """Records this shard prepared are written: complete each prepared transition from its record (the
        runtime calls it once the append succeeded, before the reply and any post-write action)."""
        for key, value in records:
            tid = rec.decode_key(key)
            prepared = self._in_flight.pop(tid, None) if tid is not None else None
            txn = self.transactions.get(tid) if tid is not None else None
            if prepared is None or txn is None or txn.pending_state is None:
                self.replay(key, value)  # not prepared here (never expected): applied as a load would
                continue
            v = rec.decode_value(value)
            if v is None:  # Dead: the id leaves the cache, unless its transition changed meanwhile
                if txn.pending_state == DEAD and txn.producer_epoch == prepared.producer_epoch:
                    del self.transactions[txn.transactional_id]
                    log.info("Expired transactional id %s (producer id %d)", tid, txn.producer_id)
                else:
                    txn.pending_state = None
                continue
            txn.complete_transition_to(TxnTransitMetadata(
                v.producer_id, prepared.prev_producer_id, v.producer_epoch, prepared.last_producer_epoch,
                v.transaction_timeout_ms, BY_ID[v.transaction_status], frozenset(v.partitions),
                v.start_timestamp_ms, v.last_update_timestamp_ms))

    def replay_batch(self, records: Sequence[Any], producer_id: int, marker: Optional[bool]) -> None:
        """One loaded batch (on the loader thread); an unreadable record is skipped. No markers are expected."""
        if marker is not None:
            return
        for r in records:
            try:
                self.replay(r.key, r.value)
            except Exception:
                log.exception("[TransactionCoordinator] Skipping unreadable record at %s-%d offset %d",
                              rec.TRANSACTION_STATE_TOPIC_NAME, self.partition, r.offset)

    def end_replay(self) -> None:
        """The load read the whole partition (nothing is buffered here)."""

    def replay(self, key: Optional[bytes], value: Optional[bytes]) -> None:
        """Apply one ``__transaction_state`` record (loading; the latest record of an id wins)."""
        if key is None:
            raise ValueError("Transaction state log's key should not be null")
        tid = rec.decode_key(key)
        if tid is None:
            log.warning("Unknown message key version while loading transaction state from %s-%d; ignoring it",
                        rec.TRANSACTION_STATE_TOPIC_NAME, self.partition)
            return
        v = rec.decode_value(value)
        if v is None:
            self.transactions.pop(tid, None)
            return
        state = BY_ID.get(v.transaction_status)
        if state is None:
            raise ValueError(f"Unknown transaction state id {v.transaction_status} from the transaction status message")
        self.transactions[tid] = TransactionMetadata(
            tid, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH, v.transaction_timeout_ms, state,
            set(v.partitions) if state != EMPTY else set(), v.start_timestamp_ms, v.last_update_timestamp_ms)

    def finish_loading(self, now: int) -> List[PendingCompleteTxn]:
        """Transactions loaded in PrepareCommit/PrepareAbort: their markers must be (re)sent, then completed."""
        out = []
        for txn in self.transactions.values():
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                out.append(self._pending_complete(now, txn, txn.state == PREPARE_COMMIT))
        return out

    def snapshot(self) -> Dict[str, tuple]:
        """The persistent part of the state (what replay must rebuild), for tests and tools."""
        return {tid: (t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.state.name, tuple(sorted(t.topic_partitions)),
                      t.txn_start_timestamp, t.txn_last_update_timestamp)
                for tid, t in sorted(self.transactions.items())}
