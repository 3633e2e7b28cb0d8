"""The pure transaction coordinator (one ``__transaction_state`` partition) with a manual clock: every transition
and every error of Kafka 3.9's TransactionCoordinator at transaction.version 0, and load by replay.

``Log`` plays the partition and the runtime: it appends an outcome's records (or fails them with a given error),
replays what it wrote and runs the post-write action, as the asyncio service does.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import pytest

from broker.coordinator.transaction import records as rec
from broker.coordinator.transaction.metadata import (IllegalTransitionError, TransactionMetadata, EMPTY, ONGOING,
                                                     PREPARE_COMMIT)
from broker.coordinator.transaction.state import (Outcome, PendingCompleteTxn, TransactionConfig,
                                                  TransactionCoordinatorState, check_init_producer_id, log_error)
from broker.errors import ErrorCode as E

T0 = 1_700_000_000_000
TP_A, TP_B, TP_C = ("a", 0), ("a", 1), ("b", 0)


class Log:
    """The partition: records appended in order; markers handed out by outcomes."""

    def __init__(self, state: TransactionCoordinatorState) -> None:
        self.state = state
        self.records: List[Tuple[bytes, Optional[bytes]]] = []
        self.markers: List[PendingCompleteTxn] = []
        self.now = T0

    def run(self, out: Outcome, fail: int = 0) -> Any:
        """Write the outcome's records (or fail with ``fail``), follow the callbacks; the reply."""
        self.markers.extend(out.markers)
        if not out.records:
            return out.response
        assert out.on_write_failed is not None
        if fail:
            return self.run(out.on_write_failed(self.now, fail))
        base = len(self.records)
        self.records.extend(out.records)
        self.state.replay_written(out.records, base, -1)  # as the runtime: written, then replayed
        return out.response if out.after_write is None else self.run(out.after_write(self.now))

    # shortcuts ------------------------------------------------------------------------------------------------
    def init(self, tid: str = "tx", timeout_ms: int = 60000, expected: Optional[Tuple[int, int]] = None,
             pid: int = 1000, fail: int = 0) -> Tuple[int, int, int]:
        out = self.state.init_producer_id(self.now, tid, timeout_ms, expected)
        if out.need_producer_id:
            out = self.state.init_producer_id(self.now, tid, timeout_ms, expected, new_producer_id=pid)
        return self.run(out, fail)  # type: ignore[no-any-return]

    def add(self, pid: int, epoch: int, *tps: Tuple[str, int], tid: str = "tx", fail: int = 0) -> int:
        return self.run(self.state.add_partitions(self.now, tid, pid, epoch, set(tps)), fail)  # type: ignore

    def end(self, pid: int, epoch: int, commit: bool, tid: str = "tx", fail: int = 0) -> int:
        return self.run(self.state.end_transaction(self.now, tid, pid, epoch, commit), fail)  # type: ignore

    def deliver_markers(self, fail: int = 0) -> List[Any]:
        """Every pending marker written; then the Complete* records (or their failure)."""
        out = []
        while self.markers:
            pending = self.markers.pop(0)
            for tp in pending.partitions:
                self.state.marker_written(pending, tp)
            done = self.state.complete_transaction(pending)
            out.append(None if done is None else self.run(done, fail))
        return out

    def txn(self, tid: str = "tx") -> TransactionMetadata:
        return self.state.transactions[tid]


def fresh(**config: int) -> Log:
    return Log(TransactionCoordinatorState(7, 3, TransactionConfig(**config)))


def last_value(log: Log) -> rec.TxnLogValue:
    key, value = log.records[-1]
    assert rec.decode_key(key) == "tx"
    v = rec.decode_value(value)
    assert v is not None
    return v


# ====================================================================================== InitProducerId
def test_checks_before_lookup_empty_id_and_timeouts() -> None:
    assert check_init_producer_id("", 1000, 900000) == E.INVALID_REQUEST
    assert check_init_producer_id("tx", 0, 900000) == E.INVALID_TRANSACTION_TIMEOUT
    assert check_init_producer_id("tx", -5, 900000) == E.INVALID_TRANSACTION_TIMEOUT
    assert check_init_producer_id("tx", 900001, 900000) == E.INVALID_TRANSACTION_TIMEOUT
    assert check_init_producer_id("tx", 900000, 900000) == 0


def test_new_transactional_id_gets_a_new_producer_id_at_epoch_0() -> None:
    log = fresh()
    out = log.state.init_producer_id(T0, "tx", 60000, None)
    assert out.need_producer_id and not out.records
    assert log.init(pid=1000) == (0, 1000, 0)
    v = last_value(log)
    assert (v.producer_id, v.producer_epoch, v.transaction_status, v.partitions, v.start_timestamp_ms,
            v.last_update_timestamp_ms, v.transaction_timeout_ms) == (1000, 0, EMPTY.id, (), -1, T0, 60000)
    assert log.txn().state == EMPTY and log.txn().pending_state is None


def test_init_again_bumps_the_epoch_and_takes_the_new_timeout() -> None:
    log = fresh()
    log.init()
    log.now += 5
    assert log.init(timeout_ms=30000) == (0, 1000, 1)
    assert log.txn().txn_timeout_ms == 30000 and log.txn().last_producer_epoch == -1


def test_init_while_a_transition_is_pending_is_concurrent() -> None:
    log = fresh()
    log.init()
    out = log.state.init_producer_id(T0, "tx", 60000, None)  # prepared, not yet written
    assert out.records
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert log.run(out) == (0, 1000, 1)


def test_failed_append_answers_the_mapped_error_and_changes_nothing() -> None:
    log = fresh()
    assert log.init(fail=E.NOT_COORDINATOR) == (E.NOT_COORDINATOR, -1, -1)
    txn = log.txn()  # as Kafka, the new metadata stays cached at epoch -1
    assert (txn.producer_epoch, txn.pending_state) == (-1, None)
    assert log.init() == (0, 1000, 0)
    assert log.init(fail=E.COORDINATOR_NOT_AVAILABLE) == (E.COORDINATOR_NOT_AVAILABLE, -1, -1)
    assert log.txn().producer_epoch == 0


def test_append_errors_map_as_kafka() -> None:
    for code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 E.REQUEST_TIMED_OUT):
        assert log_error(code) == E.COORDINATOR_NOT_AVAILABLE
    for code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        assert log_error(code) == E.NOT_COORDINATOR
    for code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        assert log_error(code) == E.UNKNOWN_SERVER_ERROR
    assert log_error(E.INVALID_REQUEST) == E.INVALID_REQUEST


# ====================================================================================== KIP-360 / exhaustion
def test_kip360_bump_with_the_current_epoch_records_the_last_epoch() -> None:
    log = fresh()
    log.init()
    log.init()                                   # epoch 1
    assert log.init(expected=(1000, 1)) == (0, 1000, 2)
    assert log.txn().last_producer_epoch == 1
    # the retry of that bump (the producer never saw the answer) gets the same epoch back
    assert log.init(expected=(1000, 1)) == (0, 1000, 2)
    # an epoch that is neither current nor last: fenced
    assert log.init(expected=(1000, 0)) == (E.PRODUCER_FENCED, -1, -1)
    # a producer id that is not this transactional id's
    assert log.init(expected=(999, 2)) == (E.PRODUCER_FENCED, -1, -1)


def test_kip360_on_a_just_created_id_returns_the_new_producer() -> None:
    log = fresh()
    assert log.init(expected=(555, 3), pid=1000) == (0, 1000, 0)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    log = fresh()
    log.init()
    log.txn().producer_epoch = 32766               # Short.MaxValue - 1: exhausted
    assert log.init(pid=2000) == (0, 2000, 0)
    txn = log.txn()
    assert (txn.producer_id, txn.previous_producer_id, txn.last_producer_epoch) == (2000, 1000, -1)
    assert last_value(log).producer_id == 2000


def test_exhausted_epoch_with_expected_epoch_records_it_and_accepts_the_retry() -> None:
    log = fresh()
    log.init()
    log.txn().producer_epoch = 32766
    assert log.init(expected=(1000, 32766), pid=2000) == (0, 2000, 0)
    assert log.txn().last_producer_epoch == 32766
    # retry naming the previous producer id with its exhausted epoch: same answer, no new id
    assert log.init(expected=(1000, 32766), pid=3000) == (0, 2000, 0)


# ====================================================================================== AddPartitions
def test_add_partitions_errors() -> None:
    log = fresh()
    assert log.add(1000, 0, TP_A) == E.INVALID_PRODUCER_ID_MAPPING   # unknown id
    log.init()
    assert log.add(999, 0, TP_A) == E.INVALID_PRODUCER_ID_MAPPING
    assert log.add(1000, 1, TP_A) == E.PRODUCER_FENCED


def test_add_partitions_starts_the_transaction_and_extends_it() -> None:
    log = fresh()
    log.init()
    log.now = T0 + 100
    assert log.add(1000, 0, TP_A, TP_B) == 0
    v = last_value(log)
    assert (v.transaction_status, v.partitions, v.start_timestamp_ms) == (ONGOING.id, (TP_A, TP_B), T0 + 100)
    n = len(log.records)
    assert log.add(1000, 0, TP_A) == 0 and len(log.records) == n   # already in: answered without a write
    log.now = T0 + 200
    assert log.add(1000, 0, TP_C) == 0
    v = last_value(log)
    assert v.partitions == (TP_A, TP_B, TP_C) and v.start_timestamp_ms == T0 + 100
    assert v.last_update_timestamp_ms == T0 + 200


def test_add_partitions_while_pending_or_preparing_is_concurrent() -> None:
    log = fresh()
    log.init()
    out = log.state.add_partitions(T0, "tx", 1000, 0, {TP_A})
    assert log.add(1000, 0, TP_B) == E.CONCURRENT_TRANSACTIONS
    log.run(out)
    assert log.end(1000, 0, True) == 0          # PrepareCommit, markers pending
    assert log.add(1000, 0, TP_B) == E.CONCURRENT_TRANSACTIONS


def test_failed_add_partitions_leaves_the_transaction_as_it_was() -> None:
    log = fresh()
    log.init()
    assert log.add(1000, 0, TP_A, fail=E.NOT_ENOUGH_REPLICAS) == E.NOT_ENOUGH_REPLICAS
    assert log.txn().state == EMPTY and not log.txn().topic_partitions and log.txn().pending_state is None


# ====================================================================================== EndTxn
def test_commit_goes_prepare_then_markers_then_complete() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A, TP_C)
    log.now = T0 + 50
    assert log.end(1000, 0, True) == 0
    v = last_value(log)
    assert (v.transaction_status, v.partitions) == (PREPARE_COMMIT.id, (TP_A, TP_C))
    [pending] = log.markers
    assert (pending.commit, pending.producer_id, pending.producer_epoch, pending.partitions,
            pending.coordinator_epoch, pending.txn_partition) == (True, 1000, 0, frozenset({TP_A, TP_C}), 3, 7)
    # while markers are out: retries are CONCURRENT_TRANSACTIONS, a contrary request INVALID_TXN_STATE... is still
    # refused as concurrent (the pending state is checked first)
    assert log.end(1000, 0, True) == E.CONCURRENT_TRANSACTIONS
    assert log.end(1000, 0, False) == E.CONCURRENT_TRANSACTIONS
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    log.state.marker_written(pending, TP_A)
    assert log.state.describe("tx")["topics"] == [{"topic": "b", "partitions": [0]}]
    assert log.deliver_markers() == [0]
    v = last_value(log)
    assert (v.transaction_status, v.partitions) == (4, ())
    assert log.txn().state.name == "CompleteCommit" and log.txn().pending_state is None


def test_completed_end_txn_retried_answers_as_kafka() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    log.end(1000, 0, True)
    log.deliver_markers()
    n = len(log.records)
    assert log.end(1000, 0, True) == 0 and len(log.records) == n
    assert log.end(1000, 0, False) == E.INVALID_TXN_STATE
    log.add(1000, 0, TP_A)
    log.end(1000, 0, False)
    log.deliver_markers()
    assert log.end(1000, 0, False) == 0
    assert log.end(1000, 0, True) == E.INVALID_TXN_STATE


def test_end_txn_errors() -> None:
    log = fresh()
    assert log.end(1000, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    log.init()
    assert log.end(1000, 0, True) == E.INVALID_TXN_STATE     # Empty: nothing to end
    assert log.end(1000, 0, False) == E.INVALID_TXN_STATE
    log.add(1000, 0, TP_A)
    assert log.end(999, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert log.end(1000, 1, True) == E.PRODUCER_FENCED       # a client must send the current epoch exactly
    assert log.end(1000, -1, True) == E.PRODUCER_FENCED


def test_prepare_state_without_pending_completion_answers_retry_and_contrary() -> None:
    """PrepareCommit whose completion append failed for good (pending cleared): Kafka's direct answers."""
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    log.end(1000, 0, True)
    assert log.deliver_markers(fail=E.NOT_COORDINATOR) == [E.NOT_COORDINATOR]
    assert log.txn().state == PREPARE_COMMIT and log.txn().pending_state is None
    assert log.end(1000, 0, True) == E.CONCURRENT_TRANSACTIONS
    assert log.end(1000, 0, False) == E.INVALID_TXN_STATE


def test_completion_unavailable_keeps_the_pending_state_for_the_retry() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    log.end(1000, 0, False)
    pending = log.markers[0]
    assert log.deliver_markers(fail=E.COORDINATOR_NOT_AVAILABLE) == [E.COORDINATOR_NOT_AVAILABLE]
    assert log.txn().pending_state is not None
    done = log.state.complete_transaction(pending)
    assert done is not None and log.run(done) == 0
    assert log.txn().state.name == "CompleteAbort"


def test_failed_prepare_commit_answers_the_error_and_stays_ongoing() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    assert log.end(1000, 0, True, fail=E.COORDINATOR_NOT_AVAILABLE) == E.COORDINATOR_NOT_AVAILABLE
    assert log.txn().state == ONGOING and log.txn().pending_state is None and not log.markers
    assert log.end(1000, 0, True) == 0


# ====================================================================================== fencing
def test_init_during_a_transaction_fences_aborts_and_answers_concurrent() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A, TP_B)
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    v = last_value(log)
    assert (v.transaction_status, v.producer_epoch) == (3, 1)   # PrepareAbort under the bumped epoch
    [pending] = log.markers
    assert (pending.commit, pending.producer_epoch) == (False, 1)
    # the fenced producer is refused everywhere from now on
    assert log.add(1000, 0, TP_C) == E.PRODUCER_FENCED
    assert log.end(1000, 0, True) == E.PRODUCER_FENCED
    assert log.state.verify_partitions("tx", 1000, 0, {TP_A}) == {TP_A: E.PRODUCER_FENCED}
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)      # still aborting
    log.deliver_markers()
    assert log.txn().state.name == "CompleteAbort"
    assert log.init() == (0, 1000, 2)                              # the retry bumps once more


def test_failed_fence_does_not_bump_twice() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    assert log.init(fail=E.NOT_ENOUGH_REPLICAS) == (E.NOT_ENOUGH_REPLICAS, -1, -1)
    txn = log.txn()
    assert (txn.producer_epoch, txn.state, txn.has_failed_epoch_fence, txn.pending_state) == (1, ONGOING, True, None)
    assert log.add(1000, 0, TP_B) == E.PRODUCER_FENCED              # the bumped epoch is in force in memory
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert last_value(log).producer_epoch == 1                      # not 2
    log.deliver_markers()
    assert log.txn().has_failed_epoch_fence is False


def test_fencing_the_last_epoch_leads_to_a_new_producer_id_on_retry() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    log.txn().producer_epoch = 32766
    assert log.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)        # fenced at 32767
    log.deliver_markers()
    assert log.init(pid=4000) == (0, 4000, 0)


# ====================================================================================== timeouts
def test_timed_out_transaction_is_aborted_under_a_bumped_epoch() -> None:
    log = fresh()
    log.init(timeout_ms=1000)
    log.add(1000, 0, TP_A)
    assert log.state.timed_out_transactions(T0 + 1000) == []
    assert log.state.timed_out_transactions(T0 + 1001) == [("tx", 1000, 0)]
    assert log.state.abort_timed_out(T0 + 1001, "tx", 999) is None        # another producer id: skipped
    out = log.state.abort_timed_out(T0 + 1001, "tx", 1000)
    assert out is not None and log.run(out) == 0
    assert last_value(log).producer_epoch == 1 and log.markers[0].commit is False
    assert log.state.timed_out_transactions(T0 + 5000) == []                # no longer Ongoing
    log.deliver_markers()
    # the producer whose transaction timed out is fenced, as Kafka 3.9 answers (its epoch is not current)
    assert log.end(1000, 0, False) == E.PRODUCER_FENCED
    assert log.init(expected=(1000, 0)) == (E.PRODUCER_FENCED, -1, -1)
    assert log.init() == (0, 1000, 2)


def test_a_pending_transaction_is_not_timed_out() -> None:
    log = fresh()
    log.init(timeout_ms=1000)
    log.add(1000, 0, TP_A)
    out = log.state.add_partitions(T0, "tx", 1000, 0, {TP_B})      # pending
    assert out.records
    assert log.state.timed_out_transactions(T0 + 5000) == []
    assert log.state.abort_timed_out(T0 + 5000, "tx", 1000) is None


# ====================================================================================== expiration
def test_idle_ids_expire_with_a_tombstone() -> None:
    log = fresh(transactional_id_expiration_ms=10000)
    log.init("idle")
    log.init("busy")
    log.add(1000, 0, TP_A, tid="busy")
    log.now = T0 + 10000
    outs = log.state.expire_transactional_ids(log.now)
    assert len(outs) == 1 and outs[0].records == [(rec.key_bytes("idle"), None)]
    assert log.state.transactions["idle"].pending_state is not None
    log.run(outs[0])
    assert "idle" not in log.state.transactions and "busy" in log.state.transactions
    assert log.state.describe("idle")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND


def test_expiration_waits_for_the_idle_time_and_survives_a_failed_write() -> None:
    log = fresh(transactional_id_expiration_ms=10000)
    log.init()
    assert log.state.expire_transactional_ids(T0 + 9999) == []
    [out] = log.state.expire_transactional_ids(T0 + 10000)
    log.run(out, fail=E.NOT_ENOUGH_REPLICAS)
    assert log.txn().pending_state is None and log.txn().state == EMPTY


def test_expiration_is_chunked() -> None:
    log = fresh(transactional_id_expiration_ms=1)
    for i in range(5):
        log.init(f"t{i}", pid=i)
    outs = log.state.expire_transactional_ids(T0 + 10, max_records=2)
    assert [len(o.records) for o in outs] == [2, 2, 1]


# ====================================================================================== verify (KIP-890)
def test_verify_only_answers_per_partition() -> None:
    log = fresh()
    assert log.state.verify_partitions("tx", 1000, 0, {TP_A}) == {TP_A: E.INVALID_PRODUCER_ID_MAPPING}
    log.init()
    log.add(1000, 0, TP_A)
    assert log.state.verify_partitions("tx", 1000, 0, {TP_A, TP_B}) == {TP_A: 0, TP_B: E.TRANSACTION_ABORTABLE}
    assert log.state.verify_partitions("tx", 999, 0, {TP_A}) == {TP_A: E.INVALID_PRODUCER_ID_MAPPING}
    assert log.state.verify_partitions("tx", 1000, 1, {TP_A}) == {TP_A: E.PRODUCER_FENCED}
    n = len(log.records)
    log.end(1000, 0, True)
    assert len(log.records) == n + 1
    assert log.state.verify_partitions("tx", 1000, 0, {TP_A}) == {TP_A: E.CONCURRENT_TRANSACTIONS}


# ====================================================================================== describe / list
def test_describe_and_list() -> None:
    log = fresh()
    log.init("one", timeout_ms=5000, pid=1)
    log.init("two", pid=2)
    log.now = T0 + 10
    log.add(2, 0, TP_B, TP_A, tid="two")
    d = log.state.describe("two")
    assert d == {"error_code": 0, "transactional_id": "two", "transaction_state": "Ongoing",
                 "transaction_timeout_ms": 60000, "transaction_start_time_ms": T0 + 10, "producer_id": 2,
                 "producer_epoch": 0, "topics": [{"topic": "a", "partitions": [0, 1]}]}
    assert log.state.describe("one")["transaction_state"] == "Empty"
    assert log.state.describe("nope")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND

    def names(states: set = set(), pids: set = set(), duration: int = -1) -> list:
        return sorted(e["transactional_id"] for e in log.state.list_transactions(T0 + 1000, states, pids, duration))
    assert names() == ["one", "two"]
    assert names({"Ongoing"}) == ["two"]
    assert names({"Ongoing", "Bogus"}) == ["two"]
    assert names(pids={1}) == ["one"]
    assert names({"Empty"}, {2}) == []
    assert names(duration=989) == ["one", "two"]      # "one" has no start (-1): it counts as long-running
    assert names(duration=990) == ["one"]             # running exactly 990 ms is not longer than 990


def test_dead_ids_are_neither_described_nor_listed() -> None:
    log = fresh(transactional_id_expiration_ms=1)
    log.init()
    [out] = log.state.expire_transactional_ids(T0 + 5)
    log.txn().state = log.txn().pending_state  # what Kafka's cache shows while the tombstone is in flight
    assert log.state.describe("tx")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    assert log.state.list_transactions(T0, set(), set()) == []


# ====================================================================================== load / replay
def test_replay_rebuilds_what_was_written() -> None:
    log = fresh()
    log.init("done", pid=1)
    log.add(1, 0, TP_A, tid="done")
    log.end(1, 0, True, tid="done")
    log.deliver_markers()
    log.init("open", pid=2)
    log.add(2, 0, TP_B, TP_C, tid="open")
    log.init("gone", pid=3)
    log.records.append((rec.key_bytes("gone"), None))
    del log.state.transactions["gone"]
    log.init("preparing", pid=4)
    log.add(4, 0, TP_A, tid="preparing")
    log.end(4, 0, False, tid="preparing")       # markers not delivered: PrepareAbort in the log

    loaded = TransactionCoordinatorState(7, 4, TransactionConfig())
    for key, value in log.records:
        loaded.replay(key, value)
    assert loaded.snapshot() == log.state.snapshot()
    assert set(loaded.transactions) == {"done", "open", "preparing"}
    assert loaded.transactions["open"].last_producer_epoch == -1
    # the transaction found in PrepareAbort resumes its markers at the new coordinator epoch
    [pending] = loaded.finish_loading(T0 + 99)
    assert (pending.transactional_id, pending.commit, pending.partitions, pending.coordinator_epoch) == \
        ("preparing", False, frozenset({TP_A}), 4)
    assert loaded.transactions["preparing"].pending_state is not None


def test_markers_of_an_old_coordinator_epoch_are_not_current() -> None:
    log = fresh()
    log.init()
    log.add(1000, 0, TP_A)
    log.end(1000, 0, True)
    pending = log.markers[0]
    reloaded = TransactionCoordinatorState(7, 4, TransactionConfig())
    for key, value in log.records:
        reloaded.replay(key, value)
    assert log.state.is_current(pending)
    assert not reloaded.is_current(pending)
    assert reloaded.complete_transaction(pending) is None


def test_unknown_key_versions_are_skipped_and_bad_states_refused() -> None:
    state = TransactionCoordinatorState(0, 0, TransactionConfig())
    state.replay(b"\x00\x05\x00\x01x", b"whatever")
    assert state.transactions == {}
    with pytest.raises(ValueError):
        state.replay(rec.key_bytes("x"), rec.value_bytes(1, 0, 1000, 9, None, 0, -1))


# ====================================================================================== illegal transitions
def test_illegal_transitions_raise() -> None:
    txn = TransactionMetadata("x", 1, -1, 0, -1, 1000, EMPTY)
    with pytest.raises(IllegalTransitionError):
        txn.prepare_abort_or_commit(PREPARE_COMMIT, T0)        # Empty -> PrepareCommit
    t = txn.prepare_add_partitions({TP_A}, T0)
    txn.pending_state = None
    with pytest.raises(IllegalTransitionError):
        txn.complete_transition_to(t)                           # no pending state
    t = txn.prepare_add_partitions({TP_A}, T0)
    with pytest.raises(IllegalTransitionError):
        txn.prepare_add_partitions({TP_B}, T0)                 # already pending
    txn.complete_transition_to(t)
    with pytest.raises(IllegalTransitionError):
        txn.remove_partition(TP_A)                              # only while markers are written
    with pytest.raises(IllegalTransitionError):
        txn.prepare_producer_id_rotation(5, 1000, T0, False)    # a transaction is open
    txn.producer_epoch = 32767
    with pytest.raises(IllegalTransitionError):
        txn.prepare_fence_producer_epoch()                      # would overflow


def test_a_transition_is_applied_by_replaying_its_record_once_written_and_not_on_failure() -> None:
    log = fresh()
    pid, epoch = log.init()[1:]
    before = log.state.snapshot()
    out = log.state.add_partitions(log.now + 1, "tx", pid, epoch, {TP_A})
    assert log.state.snapshot() == before and log.txn().pending_state == ONGOING  # only prepared
    assert out.on_write_failed is not None
    assert out.on_write_failed(log.now, E.NOT_COORDINATOR).response == E.NOT_COORDINATOR
    assert log.state.snapshot() == before and log.txn().pending_state is None
    out = log.state.add_partitions(log.now + 2, "tx", pid, epoch, {TP_A})
    log.state.replay_written(out.records, 5, -1)
    assert log.txn().state == ONGOING and log.txn().topic_partitions == {TP_A}
    assert log.txn().pending_state is None and out.response == 0
    replayed = TransactionCoordinatorState(7, 3, TransactionConfig())
    for key, value in log.records + out.records:
        replayed.replay(key, value)
    assert replayed.snapshot() == log.state.snapshot()
