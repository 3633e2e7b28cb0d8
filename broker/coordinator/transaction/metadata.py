"""One transactional id's metadata and its state transitions, as Kafka 3.9's TransactionMetadata (transaction.version 0).

A transition happens in two steps, so that nothing changes before the transaction log holds it: ``prepare_*``
checks the transition, sets ``pending_state`` (which makes concurrent requests answer CONCURRENT_TRANSACTIONS) and
returns the target as a :class:`TxnTransitMetadata`; once that record is written, ``complete_transition_to``
applies it (or, when the write failed, the caller clears ``pending_state``).

States (id, name) and the states each may be entered from::

    0 Empty              <- Empty, CompleteCommit, CompleteAbort            (InitProducerId)
    1 Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort   (AddPartitions/AddOffsets)
    2 PrepareCommit      <- Ongoing                                         (EndTxn commit)
    3 PrepareAbort       <- Ongoing, PrepareEpochFence                      (EndTxn abort, fencing, timeout)
    4 CompleteCommit     <- PrepareCommit                                   (all markers written)
    5 CompleteAbort      <- PrepareAbort
    6 Dead               <- Empty, CompleteCommit, CompleteAbort            (transactional id expired)
    7 PrepareEpochFence  <- Ongoing                                         (never written: becomes PrepareAbort)

Pure data and rules: no I/O, no clock (timestamps are passed in).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional, Set, Tuple

from broker.errors import ErrorCode

TopicPartition = Tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


@dataclass(frozen=True)
class TransactionState:
    id: int
    name: str
    expiration_allowed: bool = False

    def __str__(self) -> str:
        return self.name


EMPTY = TransactionState(0, "Empty", True)
ONGOING = TransactionState(1, "Ongoing")
PREPARE_COMMIT = TransactionState(2, "PrepareCommit")
PREPARE_ABORT = TransactionState(3, "PrepareAbort")
COMPLETE_COMMIT = TransactionState(4, "CompleteCommit", True)
COMPLETE_ABORT = TransactionState(5, "CompleteAbort", True)
DEAD = TransactionState(6, "Dead")
PREPARE_EPOCH_FENCE = TransactionState(7, "PrepareEpochFence")

ALL_STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
              PREPARE_EPOCH_FENCE)
BY_ID = {s.id: s for s in ALL_STATES}
BY_NAME = {s.name: s for s in ALL_STATES}

VALID_PREVIOUS = {
    EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    PREPARE_COMMIT: {ONGOING},
    PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE},
    COMPLETE_COMMIT: {PREPARE_COMMIT},
    COMPLETE_ABORT: {PREPARE_ABORT},
    DEAD: {EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT},
    PREPARE_EPOCH_FENCE: {ONGOING},
}


class IllegalTransitionError(Exception):
    """A transition Kafka's coordinator treats as a bug (IllegalStateException)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MaxValue free so that a producer can always be fenced."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of a prepared transition (what gets written to the transaction log)."""
    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: FrozenSet[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class TransactionMetadata:
    """A transactional id's producer id/epoch, state and partitions (mutable; owned by one coordinator shard)."""

    def __init__(self, transactional_id: str, producer_id: int, previous_producer_id: int, producer_epoch: int,
                 last_producer_epoch: int, txn_timeout_ms: int, state: TransactionState,
                 topic_partitions: Optional[Set[TopicPartition]] = None, txn_start_timestamp: int = -1,
                 txn_last_update_timestamp: int = -1) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: Set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        #: the state a prepared transition leads to, until it is completed or abandoned
        self.pending_state: Optional[TransactionState] = None
        #: a fence whose log write failed already bumped the in-memory epoch: the next fence must not bump again
        self.has_failed_epoch_fence = False

    def __repr__(self) -> str:
        return (f"TransactionMetadata(transactionalId={self.transactional_id}, producerId={self.producer_id}, "
                f"producerEpoch={self.producer_epoch}, lastProducerEpoch={self.last_producer_epoch}, "
                f"state={self.state}, pendingState={self.pending_state}, partitions={sorted(self.topic_partitions)})")

    # ------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def has_pending_transaction(self) -> bool:
        return self.state in (ONGOING, PREPARE_ABORT, PREPARE_COMMIT)

    # ------------------------------------------------------------------ prepare
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Fence the current producer of an Ongoing transaction: bump the epoch (unless a failed fence did)."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransitionError("Cannot fence producer with epoch equal to Short.MaxValue since this "
                                         "would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: Optional[int],
                                         now: int) -> Tuple[int, Optional[TxnTransitMetadata]]:
        """(error, transit): InitProducerId's epoch bump; a retry of a bump that succeeded returns the same epoch."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return int(ErrorCode.PRODUCER_FENCED), None
        return 0, self._prepare(EMPTY, self.producer_id, epoch, last, new_timeout_ms, frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """Epoch exhausted: continue under a new producer id at epoch 0."""
        if self.has_pending_transaction():
            raise IllegalTransitionError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare(EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             new_timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: Set[TopicPartition], now: int) -> TxnTransitMetadata:
        start = now if self.state in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions | set(added)), start, now)

    def prepare_abort_or_commit(self, new_state: TransactionState, now: int) -> TxnTransitMetadata:
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp, now)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        new_state = COMPLETE_COMMIT if self.state == PREPARE_COMMIT else COMPLETE_ABORT
        # the transition is logged once PrepareX is: a failed fence is no longer pending
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: FrozenSet[TopicPartition], start: int, now: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"Preparing transaction state transition to {state} while it already has "
                                         f"a pending state {self.pending_state}")
        if producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {producer_id}")
        if state != DEAD and epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(f"Preparing transaction state transition to {state} failed since the "
                                         f"target state {state} is not a valid previous state of the current "
                                         f"state {self.state}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
                                  start, now)

    # ------------------------------------------------------------------ complete
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a prepared transition whose record is now in the log (Kafka's validity checks included)."""
        to = self.pending_state
        if to is None:
            raise IllegalTransitionError(f"TransactionalId {self.transactional_id} completing transaction state "
                                         f"transition while it does not have a pending state")
        if to != t.txn_state:
            self._fail(t)
        same_epoch = t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        if to == EMPTY:
            valid_bump = t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0
                                                                         and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not valid_bump) or t.topic_partitions \
                    or t.txn_start_timestamp != -1:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to == ONGOING:
            if not same_epoch or not self.topic_partitions <= t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif to in (PREPARE_ABORT, PREPARE_COMMIT):
            if not same_epoch or self.topic_partitions != set(t.topic_partitions) \
                    or self.txn_timeout_ms != t.txn_timeout_ms or self.txn_start_timestamp != t.txn_start_timestamp:
                self._fail(t)
        elif to in (COMPLETE_ABORT, COMPLETE_COMMIT):
            if not same_epoch or self.txn_timeout_ms != t.txn_timeout_ms or t.txn_start_timestamp == -1:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
        else:  # PrepareEpochFence is never written; Dead ends in removal, never in a completed transition
            self._fail(t)
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker reached ``tp`` (or its topic is gone): it no longer waits for one."""
        if self.state not in (PREPARE_COMMIT, PREPARE_ABORT):
            raise IllegalTransitionError(f"Transaction metadata's current state is {self.state}, and its pending "
                                         f"state is {self.pending_state} while trying to remove partitions whose txn "
                                         f"marker has been sent, this is not expected")
        self.topic_partitions.discard(tp)

    def _fail(self, t: TxnTransitMetadata) -> None:
        raise IllegalTransitionError(f"TransactionalId {self.transactional_id} failed transition to state {t} due "
                                     f"to unexpected metadata {self!r}")
