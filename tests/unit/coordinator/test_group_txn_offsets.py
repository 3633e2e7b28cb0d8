"""Transactional offset commits in the pure group state machine (Kafka's pendingTransactionalOffsetCommits).

The offsets of a TxnOffsetCommit stay pending until the producer's marker: COMMIT applies them
(unless a plain commit written later in the log overtook them), ABORT drops them; OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile; loading replays the same rule.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from broker.coordinator.group.state import GroupConfig, GroupCoordinatorState, OffsetAndMetadata
from broker.errors import ErrorCode as E
from tests.unit.coordinator.test_group_state import Driver

TP = ("t", 0)
PID, EPOCH = 4000, 0


def txn_commit(d: Driver, group: str, offsets: Dict[Tuple[str, int], int], pid: int = PID, member: str = "",
               gen: int = -1, instance: Optional[str] = None) -> Dict[Tuple[str, int], int]:
    out = d.state.txn_commit_offsets(d.now, group, pid, EPOCH, member, instance, gen,
                                     {tp: OffsetAndMetadata(o, commit_timestamp=d.now) for tp, o in offsets.items()})
    assert out.producer == (pid, EPOCH) or out.response is not None
    return d.finish(out)  # type: ignore[no-any-return]


def fetch(d: Driver, group: str, stable: bool = False) -> List[Tuple[Tuple[str, int], int, int]]:
    return [(tp, off, err) for tp, off, _e, _m, err in d.state.fetch_offsets(group, [TP], stable)]


def test_offsets_are_pending_until_the_commit_marker() -> None:
    d = Driver()
    assert txn_commit(d, "g", {TP: 42}) == {TP: 0}
    assert len(d.log) == 1
    assert fetch(d, "g") == [(TP, -1, 0)]
    assert fetch(d, "g", stable=True) == [(TP, -1, E.UNSTABLE_OFFSET_COMMIT)]
    d.state.complete_txn(PID, committed=True)
    assert fetch(d, "g", stable=True) == [(TP, 42, 0)]


def test_abort_drops_the_pending_offsets_and_keeps_the_old_ones() -> None:
    d = Driver()
    d.commit("g", {TP: 7})
    txn_commit(d, "g", {TP: 42})
    d.state.complete_txn(PID, committed=False)
    assert fetch(d, "g", stable=True) == [(TP, 7, 0)]


def test_a_plain_commit_written_after_the_transactional_one_wins() -> None:
    d = Driver()
    txn_commit(d, "g", {TP: 42})
    d.commit("g", {TP: 50})  # a later record in the log
    d.state.complete_txn(PID, committed=True)
    assert fetch(d, "g") == [(TP, 50, 0)]


def test_a_transactional_commit_written_after_a_plain_one_wins() -> None:
    d = Driver()
    d.commit("g", {TP: 50})
    txn_commit(d, "g", {TP: 42})
    d.state.complete_txn(PID, committed=True)
    assert fetch(d, "g") == [(TP, 42, 0)]


def test_markers_of_another_producer_leave_the_pending_offsets_alone() -> None:
    d = Driver()
    txn_commit(d, "g", {TP: 42})
    d.state.complete_txn(PID + 1, committed=True)
    assert fetch(d, "g", stable=True) == [(TP, -1, E.UNSTABLE_OFFSET_COMMIT)]


def test_a_failed_append_forgets_the_pending_offsets() -> None:
    d = Driver()
    d.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    assert txn_commit(d, "g", {TP: 42}) == {TP: E.NOT_COORDINATOR}
    assert fetch(d, "g", stable=True) == [(TP, -1, 0)]
    assert "g" not in d.state.groups  # nothing left to keep the group for


def test_kip_447_fencing_by_member_and_generation() -> None:
    d = Driver()
    (member,) = d.stable_group("g", 1)
    gen = d.state.groups["g"].generation_id
    assert txn_commit(d, "g", {TP: 1}, member="ghost", gen=gen) == {TP: E.UNKNOWN_MEMBER_ID}
    assert txn_commit(d, "g", {TP: 1}, member=member, gen=gen + 1) == {TP: E.ILLEGAL_GENERATION}
    # without member and generation (v0-v2 clients) the commit is accepted even in a non-empty group
    assert txn_commit(d, "g", {TP: 1}) == {TP: 0}
    assert txn_commit(d, "g", {TP: 2}, member=member, gen=gen) == {TP: 0}


def test_unknown_group_is_created_even_with_a_generation() -> None:
    d = Driver()
    assert txn_commit(d, "fresh", {TP: 3}, member="m", gen=5) == {TP: E.UNKNOWN_MEMBER_ID}
    assert txn_commit(d, "fresh2", {TP: 3}) == {TP: 0}
    assert "fresh2" in d.state.groups


def test_no_generation_to_an_empty_group_commits_whatever_the_member_id() -> None:
    """Kafka 3.9 (validateOffsetCommit, seen in the matrix against a real broker): generation -1 to an Empty group
    is accepted before any member check; with a generation the unknown member is refused."""
    d = Driver()
    assert txn_commit(d, "empty", {TP: 3}, member="ghost", gen=-1) == {TP: 0}
    assert txn_commit(d, "empty", {TP: 4}, member="", gen=7) == {TP: E.UNKNOWN_MEMBER_ID}
    d.stable_group("busy", 1)
    assert txn_commit(d, "busy", {TP: 5}, member="ghost", gen=-1) == {TP: E.UNKNOWN_MEMBER_ID}


def test_metadata_too_large_is_refused_per_partition() -> None:
    d = Driver(offset_metadata_max_bytes=4)
    out = d.state.txn_commit_offsets(d.now, "g", PID, EPOCH, "", None, -1,
                                     {TP: OffsetAndMetadata(1, metadata="too long"),
                                      ("t", 1): OffsetAndMetadata(2, metadata="ok")})
    assert d.finish(out) == {TP: E.OFFSET_METADATA_TOO_LARGE, ("t", 1): 0}


def test_pending_offsets_block_expiry_and_group_removal() -> None:
    d = Driver(offsets_retention_ms=1000)
    txn_commit(d, "g", {TP: 42})
    d.advance(5000)
    out = d.state.expire_offsets(d.now)
    assert out.records == [] and "g" in d.state.groups


def test_loading_replays_transactional_records_and_markers() -> None:
    from broker.coordinator.group import records as rec
    key = rec.offset_commit_key("g", "t", 0)

    def value(off: int) -> bytes:
        return rec.offset_commit_value(off, -1, "", 1, None)

    state = GroupCoordinatorState(GroupConfig())
    state.replay(key, value(5), 0)                      # plain commit
    state.replay_txn_record(key, value(10), 1, PID)     # committed transaction
    state.replay_txn_marker(PID, True)
    state.replay_txn_record(key, value(20), 3, PID + 1)  # aborted transaction
    state.replay_txn_marker(PID + 1, False)
    state.replay_txn_record(key, value(30), 5, PID + 2)  # still open when the partition moved
    state.finish_loading(0)
    rows = state.fetch_offsets("g", [TP], True)
    assert rows == [(TP, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT)]
    assert state.fetch_offsets("g", [TP], False)[0][1] == 10
    state.complete_txn(PID + 2, True)
    assert state.fetch_offsets("g", [TP], True)[0][1] == 30


def test_a_group_with_only_open_transactional_offsets_survives_loading() -> None:
    from broker.coordinator.group import records as rec
    state = GroupCoordinatorState(GroupConfig())
    state.replay_txn_record(rec.offset_commit_key("only", "t", 0), rec.offset_commit_value(9, -1, "", 1, None), 0,
                            PID)
    state.finish_loading(0)
    assert "only" in state.groups
    state.complete_txn(PID, True)
    assert state.fetch_offsets("only", [TP], True)[0][1] == 9
