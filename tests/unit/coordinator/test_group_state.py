"""The pure classic-group state machine, driven with a manual clock (no asyncio, no I/O).

``Driver`` plays the runtime's and the service's role: it keeps the parked replies, "writes" records by appending
them to a list (optionally failing), replays written offset commits, runs write callbacks and fires due timers.
"""
from __future__ import annotations

import itertools
import struct
from typing import Any, Dict, List, Optional, Tuple

import pytest

from broker.coordinator.group import records as rec
from broker.coordinator.group.state import (COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, GroupConfig,
                                            GroupCoordinatorState, OffsetAndMetadata, Outcome)
from broker.errors import ErrorCode as E


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Driver:
    def __init__(self, **cfg: Any) -> None:
        cfg.setdefault("initial_rebalance_delay_ms", 0)
        ids = itertools.count(1)
        self.state = GroupCoordinatorState(GroupConfig(**cfg), new_member_id=lambda p: f"{p}-{next(ids)}")
        self.now = 1_000_000
        self.replies: Dict[Any, Any] = {}
        self.timers: Dict[Tuple[str, ...], int] = {}
        self.log: List[Tuple[bytes, Optional[bytes]]] = []
        self.fail_writes: Optional[int] = None
        self._tokens = itertools.count(1)

    def finish(self, out: Outcome) -> Any:
        for k, d in out.timers:
            self.timers[k] = d
        for tok, r in out.completions:
            self.replies[tok] = r
        if out.records:
            if self.fail_writes:
                after = out.on_write_failed(self.now, self.fail_writes) if out.on_write_failed else None
            else:
                batch_offset = len(self.log)
                self.log.extend(out.records)
                if out.replay:  # as the runtime: the records are applied through replay once written
                    self.state.replay_written(out.records, batch_offset, out.producer[0] if out.producer else -1)
                after = out.on_written(self.now, batch_offset) if out.on_written else None
            if after is not None:
                r = self.finish(after)
                return r if r is not None else out.response
        return out.response

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order."""
        end = self.now + ms
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            d, k = due[0]
            del self.timers[k]
            self.now = max(self.now, d)
            self.finish(self.state.on_timer(self.now, k))
        self.now = end

    def join(self, group: str, member: str = "", protocols: Optional[List[Tuple[str, bytes]]] = None,
             instance: Optional[str] = None, session: int = 10_000, rebalance: int = 30_000,
             require_known: bool = True, ptype: str = "consumer", skip: bool = False) -> Tuple[Any, Any]:
        """(token, immediate reply or None when parked)."""
        tok = next(self._tokens)
        protos = protocols if protocols is not None else [("range", subscription("t"))]
        out = self.state.join_group(self.now, tok, group, member, instance, "client", "/127.0.0.1", rebalance,
                                    session, ptype, protos, require_known, skip)
        return tok, self.finish(out)

    def join_new(self, group: str, **kw: Any) -> Any:
        """Dynamic member: MEMBER_ID_REQUIRED then the real join; returns the token."""
        _, r = self.join(group, **kw)
        assert r["error_code"] == E.MEMBER_ID_REQUIRED
        tok, r2 = self.join(group, member=r["member_id"], **kw)
        assert r2 is None
        return tok

    def sync(self, group: str, gen: int, member: str, assignments: Optional[Dict[str, bytes]] = None,
             instance: Optional[str] = None) -> Tuple[Any, Any]:
        tok = next(self._tokens)
        out = self.state.sync_group(self.now, tok, group, gen, member, instance, None, None, assignments or {})
        return tok, self.finish(out)

    def heartbeat(self, group: str, member: str, gen: int, instance: Optional[str] = None) -> int:
        return self.finish(self.state.heartbeat(self.now, group, member, instance, gen))  # type: ignore

    def commit(self, group: str, offsets: Dict[Tuple[str, int], int], member: str = "", gen: int = -1,
               metadata: str = "m", instance: Optional[str] = None) -> Dict[Tuple[str, int], int]:
        oms = {tp: OffsetAndMetadata(o, 3, metadata, self.now) for tp, o in offsets.items()}
        return self.finish(self.state.commit_offsets(self.now, group, member, instance, gen, oms))  # type: ignore

    def stable_group(self, group: str, n: int, **kw: Any) -> List[str]:
        """n dynamic members joined and synced; member ids in join order (leader first)."""
        toks = [self.join_new(group, **kw) for _ in range(n)]
        self.advance(0)
        res = [self.replies.pop(t) for t in toks]
        assert all(r["error_code"] == 0 for r in res), res
        ids = [r["member_id"] for r in res]
        leader = res[0]["leader"]
        gen = res[0]["generation_id"]
        followers = [self.sync(group, gen, m)[0] for m in ids if m != leader]
        _, lr = self.sync(group, gen, leader, {m: f"A-{m}".encode() for m in ids})
        assert lr is None  # answered through the completion once written
        assert self.state.groups[group].state == STABLE
        for t in followers:
            assert self.replies.pop(t)["error_code"] == 0
        return ids


def test_member_id_required_then_join_leader_gets_metadata() -> None:
    d = Driver()
    _, r = d.join("g")
    assert r["error_code"] == E.MEMBER_ID_REQUIRED and r["member_id"].startswith("client-")
    assert "g" in d.state.groups and d.state.groups["g"].pending_members
    t1, parked = d.join("g", member=r["member_id"], protocols=[("range", b"m1")])
    assert parked is None
    d.advance(0)  # initial delay 0 elapses
    res = d.replies.pop(t1)
    assert res["error_code"] == 0 and res["generation_id"] == 1 and res["protocol_name"] == "range"
    assert res["leader"] == r["member_id"]
    assert res["members"] == [{"member_id": r["member_id"], "group_instance_id": None, "metadata": b"m1"}]
    assert d.state.groups["g"].state == COMPLETING_REBALANCE


def test_join_without_member_id_requirement_and_follower_gets_no_metadata() -> None:
    d = Driver()
    t1, _ = d.join("g", require_known=False)
    t2, _ = d.join("g", require_known=False)
    d.advance(0)
    r1, r2 = d.replies[t1], d.replies[t2]
    assert r1["generation_id"] == r2["generation_id"] == 1
    leader = r1["leader"]
    assert r2["leader"] == leader
    by_id = {r1["member_id"]: r1, r2["member_id"]: r2}
    assert len(by_id[leader]["members"]) == 2
    assert [r for m, r in by_id.items() if m != leader][0]["members"] == []


def test_protocol_selection_by_votes_among_common_protocols() -> None:
    d = Driver()
    toks = [d.join("g", protocols=p, require_known=False)[0] for p in
            ([("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")],
             [("roundrobin", b"2"), ("range", b"2")],
             [("roundrobin", b"3"), ("range", b"3")])]
    d.advance(0)
    assert {d.replies[t]["protocol_name"] for t in toks} == {"roundrobin"}
    leader = next(d.replies[t] for t in toks if d.replies[t]["members"])
    assert sorted(m["metadata"] for m in leader["members"]) == [b"1", b"2", b"3"]


def test_inconsistent_protocol_type_and_protocols() -> None:
    d = Driver()
    d.stable_group("g", 1)
    assert d.join("g", ptype="connect", require_known=False)[1]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    r = d.join("g", protocols=[("other", b"")], require_known=False)[1]
    assert r["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert d.join("h", protocols=[], require_known=False)[1]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_and_group_id_and_unknown_member() -> None:
    d = Driver(min_session_timeout_ms=6000, max_session_timeout_ms=60000)
    assert d.join("g", session=100)[1]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert d.join("g", session=70000)[1]["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert d.join("")[1]["error_code"] == E.INVALID_GROUP_ID
    assert d.join("g", member="nobody")[1]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_sync_parks_followers_until_leader_assignment_is_written() -> None:
    d = Driver()
    t1, t2 = d.join_new("g"), d.join_new("g")
    d.advance(0)
    r1, r2 = d.replies.pop(t1), d.replies.pop(t2)
    leader, follower = (r1, r2) if r1["members"] else (r2, r1)
    ft, fr = d.sync("g", 1, follower["member_id"])
    assert fr is None and ft not in d.replies
    assert d.heartbeat("g", follower["member_id"], 1) == 0  # CompletingRebalance heartbeats are fine
    lt, lr = d.sync("g", 1, leader["member_id"], {follower["member_id"]: b"F", leader["member_id"]: b"L"})
    assert d.replies[ft]["assignment"] == b"F" and d.replies[lt]["assignment"] == b"L"
    assert d.replies[ft]["protocol_name"] == "range" and d.replies[ft]["protocol_type"] == "consumer"
    assert d.state.groups["g"].state == STABLE
    # group metadata record written with the assignment
    key, value = d.log[-1]
    assert rec.decode_key(key) == rec.GroupKey("g")
    v = rec.decode_group_value(value)
    assert v.generation == 1 and {m.member_id: m.assignment for m in v.members} == {
        follower["member_id"]: b"F", leader["member_id"]: b"L"}
    # Stable: a late sync just gets the assignment
    assert d.sync("g", 1, follower["member_id"])[1]["assignment"] == b"F"


def test_sync_errors() -> None:
    d = Driver()
    ids = d.stable_group("g", 2)
    assert d.sync("g", 7, ids[0])[1]["error_code"] == E.ILLEGAL_GENERATION
    assert d.sync("g", 1, "nobody")[1]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert d.sync("nogroup", 1, "x")[1]["error_code"] == E.UNKNOWN_MEMBER_ID
    tok = 999
    out = d.state.sync_group(d.now, tok, "g", 1, ids[0], None, "consumer", "roundrobin", {})
    assert out.response["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    d.join("g", member=ids[1])  # follower changes nothing -> immediate reply, stays Stable
    d.join("g", member=ids[0])  # leader rejoin -> rebalance
    assert d.state.groups["g"].state == PREPARING_REBALANCE
    assert d.sync("g", 1, ids[1])[1]["error_code"] == E.REBALANCE_IN_PROGRESS


def test_heartbeat_states_and_errors() -> None:
    d = Driver()
    ids = d.stable_group("g", 2)
    assert d.heartbeat("g", ids[0], 1) == 0
    assert d.heartbeat("g", ids[0], 2) == E.ILLEGAL_GENERATION
    assert d.heartbeat("g", "nobody", 1) == E.UNKNOWN_MEMBER_ID
    assert d.heartbeat("nogroup", "x", 1) == E.UNKNOWN_MEMBER_ID
    d.join_new("g")  # a third member joins: rebalance
    assert d.heartbeat("g", ids[1], 1) == E.REBALANCE_IN_PROGRESS


def test_new_member_triggers_rebalance_completed_when_all_rejoin() -> None:
    d = Driver()
    ids = d.stable_group("g", 2)
    t3 = d.join_new("g")
    assert d.state.groups["g"].state == PREPARING_REBALANCE
    t1, _ = d.join("g", member=ids[0])
    assert d.state.groups["g"].state == PREPARING_REBALANCE
    t2, _ = d.join("g", member=ids[1])
    # everyone has rejoined: completes at once, without waiting for the rebalance timeout
    assert d.state.groups["g"].state == COMPLETING_REBALANCE
    assert {d.replies[t]["generation_id"] for t in (t1, t2, t3)} == {2}


def test_rebalance_timeout_evicts_members_that_do_not_rejoin() -> None:
    d = Driver()
    ids = d.stable_group("g", 2, rebalance=20_000)
    d.join_new("g", rebalance=20_000)
    t1, _ = d.join("g", member=ids[0], rebalance=20_000)
    d.advance(9_000)
    assert d.heartbeat("g", ids[1], 1) == E.REBALANCE_IN_PROGRESS  # still alive, just not rejoined
    d.advance(12_000)
    g = d.state.groups["g"]
    assert ids[1] not in g.members and len(g.members) == 2
    assert g.generation_id == 2 and d.replies[t1]["error_code"] == 0


def test_session_timeout_evicts_member_and_rebalances() -> None:
    d = Driver()
    ids = d.stable_group("g", 2, session=10_000)
    d.advance(6_000)
    assert d.heartbeat("g", ids[0], 1) == 0
    d.advance(5_000)  # ids[1] has been silent for 11 s > session timeout
    assert d.heartbeat("g", ids[0], 1) == E.REBALANCE_IN_PROGRESS
    g = d.state.groups["g"]
    assert ids[1] not in g.members and g.state == PREPARING_REBALANCE
    t, _ = d.join("g", member=ids[0])
    assert d.replies[t]["generation_id"] == 2 and d.replies[t]["leader"] == ids[0]


def test_pending_member_expires_after_session_timeout() -> None:
    d = Driver()
    _, r = d.join("g", session=10_000)
    assert r["member_id"] in d.state.groups["g"].pending_members
    d.advance(10_001)
    assert "g" not in d.state.groups or not d.state.groups["g"].pending_members


def test_first_generation_skips_pending_members_and_a_late_join_cancels_its_sync() -> None:
    """Kafka 3.9 with group.initial.rebalance.delay.ms=0 (issue 19's group-join case): the InitialDelayedJoin forms
    generation 1 on its timer with the members that rejoined, not waiting for KIP-394 pending ones; a pending member's
    join in CompletingRebalance answers the leader's SyncGroup, parked on its assignment write, REBALANCE_IN_PROGRESS,
    and that write ending afterwards leaves the group rebalancing (GroupCoordinator.doSyncGroup's storeGroup callback
    checks state and generation), so the leader rejoins at once instead of at its next heartbeat."""
    d = Driver()
    _, r1 = d.join("g")
    _, r2 = d.join("g")
    assert r1["error_code"] == r2["error_code"] == E.MEMBER_ID_REQUIRED
    leader, late = r1["member_id"], r2["member_id"]
    t1, _ = d.join("g", member=leader)
    d.advance(0)
    res = d.replies.pop(t1)
    assert res["generation_id"] == 1 and [m["member_id"] for m in res["members"]] == [leader]
    g = d.state.groups["g"]
    assert g.state == COMPLETING_REBALANCE and late in g.pending_members
    sync_tok = 99
    write = d.state.sync_group(d.now, sync_tok, "g", 1, leader, None, None, None, {leader: b"A"})
    assert write.response is None and write.records and write.on_written is not None  # the append is in flight
    t2, parked = d.join("g", member=late)
    assert parked is None and g.state == PREPARING_REBALANCE
    assert d.replies.pop(sync_tok)["error_code"] == E.REBALANCE_IN_PROGRESS
    d.finish(write.on_written(d.now, 0))
    assert g.state == PREPARING_REBALANCE and g.members[leader].assignment == b""
    t1, parked = d.join("g", member=leader)
    assert parked is None  # every member has rejoined: generation 2 forms at once
    assert d.replies[t1]["generation_id"] == d.replies[t2]["generation_id"] == 2
    assert g.state == COMPLETING_REBALANCE and len(d.replies[t1]["members"]) == 2


def test_initial_rebalance_delay_extends_while_members_arrive() -> None:
    d = Driver(initial_rebalance_delay_ms=3000)
    t1 = d.join_new("g", rebalance=60_000)
    d.advance(2000)
    t2 = d.join_new("g", rebalance=60_000)
    d.advance(1500)  # first delay over, a member arrived meanwhile: wait another delay
    assert t1 not in d.replies and d.state.groups["g"].state == PREPARING_REBALANCE
    d.advance(3000)
    assert d.replies[t1]["generation_id"] == d.replies[t2]["generation_id"] == 1


def test_zero_initial_delay_still_gathers_members_that_join_within_the_minimum() -> None:
    """Consumers started together reach the coordinator a few ms apart: with group.initial.rebalance.delay.ms=0
    the first generation waits initial_join_min_ms (as Kafka's 0 ms InitialDelayedJoin, completed through its
    timer wheel, does), each arrival in it extending the wait, so all three form generation 1 (issue 19)."""
    d = Driver(initial_rebalance_delay_ms=0, initial_join_min_ms=5)
    t1 = d.join_new("g")
    d.advance(3)
    assert t1 not in d.replies
    t2 = d.join_new("g")
    d.advance(4)  # past the first member's 5 ms, but a member arrived meanwhile: wait another 5 ms
    t3 = d.join_new("g")
    assert t1 not in d.replies
    d.advance(10)
    assert d.replies[t1]["generation_id"] == d.replies[t2]["generation_id"] == d.replies[t3]["generation_id"] == 1
    assert len(d.state.groups["g"].members) == 3


def test_zero_initial_delay_without_minimum_completes_at_once() -> None:
    """The bare rule (initial_join_min_ms=0, the state's default): the first generation forms on the 0 ms timer."""
    d = Driver(initial_rebalance_delay_ms=0)
    t1 = d.join_new("g")
    d.advance(0)
    assert d.replies[t1]["generation_id"] == 1


def test_group_max_size() -> None:
    d = Driver(max_size=2)
    d.stable_group("g", 2)
    _, r = d.join("g", require_known=False)
    assert r["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_leave_group_batched_and_errors() -> None:
    d = Driver()
    ids = d.stable_group("g", 3)
    top, results = d.finish(d.state.leave_group(d.now, "g", [(ids[1], None), ("nobody", None), (ids[2], None)]))
    assert top == 0 and [e for _, _, e in results] == [0, E.UNKNOWN_MEMBER_ID, 0]
    g = d.state.groups["g"]
    assert list(g.members) == [ids[0]] and g.state == PREPARING_REBALANCE
    top, results = d.finish(d.state.leave_group(d.now, "nogroup", [("x", None)]))
    assert top == 0 and results[0][2] == E.UNKNOWN_MEMBER_ID
    generation, written = g.generation_id, len(d.log)
    top, results = d.finish(d.state.leave_group(d.now, "g", [(ids[0], None)]))
    # the last member gone: Empty, next generation, written, before the answer (Kafka completes the DelayedJoin of
    # an emptied group at once), not when a timer fires later
    assert d.state.groups["g"].state == EMPTY and d.state.groups["g"].generation_id == generation + 1
    assert len(d.log) == written + 1
    assert d.commit("g", {("t", 0): 5}) == {("t", 0): 0}  # a simple (generation -1) commit is accepted at once


def test_the_last_member_leaving_a_stable_group_leaves_it_empty_before_the_answer() -> None:
    d = Driver()
    ids = d.stable_group("g", 1)
    g = d.state.groups["g"]
    assert g.state == STABLE
    generation, written = g.generation_id, len(d.log)
    top, results = d.finish(d.state.leave_group(d.now, "g", [(ids[0], None)]))
    assert top == 0 and results[0][2] == 0
    # Kafka: prepareRebalance's DelayedJoin completes at once with nobody left (tryCompleteElseWatch)
    assert g.state == EMPTY and g.generation_id == generation + 1 and len(d.log) == written + 1
    assert d.commit("g", {("t", 0): 5}) == {("t", 0): 0}  # what test_every_version's OffsetCommit v0 does next


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    d = Driver()
    t1, _ = d.join("g", instance="i1")
    t2, _ = d.join("g", instance="i2")
    d.advance(0)
    r1, r2 = d.replies.pop(t1), d.replies.pop(t2)
    old = r2["member_id"]
    assert old.startswith("i2-")
    leader = r1["leader"]
    ids = [r1["member_id"], r2["member_id"]]
    d.sync("g", 1, leader, {m: f"A-{m}".encode() for m in ids})
    gen = d.state.groups["g"].generation_id
    # i2 restarts (no member id): new id, same generation, no rebalance
    tok, r = d.join("g", instance="i2")
    assert r is None
    new = d.replies[tok]
    assert new["error_code"] == 0 and new["member_id"] != old and new["generation_id"] == gen
    assert new["leader"] == leader and new["members"] == []
    assert d.state.groups["g"].state == STABLE
    assert d.sync("g", gen, new["member_id"], instance="i2")[1]["assignment"] == f"A-{old}".encode()
    # the old incarnation is fenced
    assert d.heartbeat("g", old, gen, instance="i2") == E.FENCED_INSTANCE_ID
    assert d.sync("g", gen, old, instance="i2")[1]["error_code"] == E.FENCED_INSTANCE_ID
    out = d.state.commit_offsets(d.now, "g", old, "i2", gen, {("t", 0): OffsetAndMetadata(1)})
    assert out.response == {("t", 0): E.FENCED_INSTANCE_ID}
    assert d.join("g", member=old, instance="i2")[1]["error_code"] == E.FENCED_INSTANCE_ID


def test_static_member_leave_by_instance_id_and_survives_rebalance_timeout() -> None:
    d = Driver()
    t1, _ = d.join("g", instance="i1", rebalance=20_000)
    t2, _ = d.join("g", instance="i2", rebalance=20_000)
    d.advance(0)
    r1 = d.replies.pop(t1)
    d.sync("g", 1, r1["leader"], {})
    top, res = d.finish(d.state.leave_group(d.now, "g", [("", "i2")]))
    assert res[0][2] == 0 and "i2" not in d.state.groups["g"].static_members
    top, res = d.finish(d.state.leave_group(d.now, "g", [("", "nope")]))
    assert res[0][2] == E.UNKNOWN_MEMBER_ID


def test_static_leader_rejoin_with_skip_assignment_v9() -> None:
    d = Driver()
    t1, _ = d.join("g", instance="i1")
    d.advance(0)
    r1 = d.replies.pop(t1)
    d.sync("g", 1, r1["member_id"], {r1["member_id"]: b"x"})
    tok, _ = d.join("g", instance="i1", skip=True)
    r = d.replies[tok]
    assert r["skip_assignment"] is True and r["leader"] == r["member_id"] and len(r["members"]) == 1


def test_commit_and_fetch_offsets() -> None:
    d = Driver(offset_metadata_max_bytes=10)
    res = d.commit("simple", {("t", 0): 5, ("t", 1): 7})
    assert res == {("t", 0): 0, ("t", 1): 0}
    rows = d.state.fetch_offsets("simple", None, False)
    assert rows == [(("t", 0), 5, 3, "m", 0), (("t", 1), 7, 3, "m", 0)]
    assert d.state.fetch_offsets("simple", [("t", 9)], False) == [(("t", 9), -1, -1, "", 0)]
    assert d.state.fetch_offsets("nogroup", [("t", 0)], False) == [(("t", 0), -1, -1, "", 0)]
    res = d.commit("simple", {("t", 0): 6, ("t", 1): 8}, metadata="x" * 11)
    assert res == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert d.commit("unknown-group", {("t", 0): 1}, member="m", gen=3) == {("t", 0): E.ILLEGAL_GENERATION}


def test_commit_rules_for_managed_groups() -> None:
    d = Driver()
    ids = d.stable_group("g", 2)
    assert d.commit("g", {("t", 0): 1}, member=ids[0], gen=1) == {("t", 0): 0}
    assert d.commit("g", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # non-member into non-empty group
    assert d.commit("g", {("t", 0): 1}, member="x", gen=1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert d.commit("g", {("t", 0): 1}, member=ids[0], gen=0) == {("t", 0): E.ILLEGAL_GENERATION}
    d.join("g", member=ids[0])
    d.join("g", member=ids[1])
    assert d.state.groups["g"].state == COMPLETING_REBALANCE
    assert d.commit("g", {("t", 0): 1}, member=ids[0], gen=2) == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_require_stable_sees_pending_commit_and_failed_write_maps_error() -> None:
    d = Driver()
    out = d.state.commit_offsets(d.now, "g", "", None, -1, {("t", 0): OffsetAndMetadata(4)})
    assert d.state.fetch_offsets("g", [("t", 0)], True)[0][4] == E.UNSTABLE_OFFSET_COMMIT
    assert d.state.fetch_offsets("g", [("t", 0)], False)[0][1] == -1
    assert out.on_write_failed is not None
    assert out.on_write_failed(d.now, E.NOT_LEADER_OR_FOLLOWER).response == {("t", 0): E.NOT_COORDINATOR}
    assert d.state.fetch_offsets("g", [("t", 0)], True) == [(("t", 0), -1, -1, "", 0)]


def test_sync_write_failure_propagates_error_and_rebalances() -> None:
    d = Driver()
    t1 = d.join_new("g")
    d.advance(0)
    m = d.replies.pop(t1)["member_id"]
    d.fail_writes = E.NOT_ENOUGH_REPLICAS
    tok, _ = d.sync("g", 1, m, {m: b"a"})
    assert d.replies[tok]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert d.state.groups["g"].state == PREPARING_REBALANCE


def test_describe_and_list_groups() -> None:
    d = Driver()
    ids = d.stable_group("g", 2)
    d.commit("simple", {("t", 0): 1})
    desc = d.state.describe_group("g")
    assert desc["group_state"] == "Stable" and desc["protocol_data"] == "range"
    assert {m["member_id"] for m in desc["members"]} == set(ids)
    assert all(m["member_assignment"] == f"A-{m['member_id']}".encode() for m in desc["members"])
    assert d.state.describe_group("nope")["group_state"] == "Dead"
    assert {g["group_id"] for g in d.state.list_groups()} == {"g", "simple"}
    assert [g["group_id"] for g in d.state.list_groups({"stable"})] == ["g"]
    assert [g["group_id"] for g in d.state.list_groups({"empty"})] == ["simple"]


def test_delete_groups_writes_tombstones() -> None:
    """Kafka's handleDeleteGroups -> cleanupGroupMetadata(removeAllOffsets): every offset's tombstone, and the
    group metadata's tombstone only for a group that had a generation (one used only for offsets wrote none)."""
    d = Driver()
    d.stable_group("busy", 1)
    d.commit("idle", {("t", 0): 1, ("t", 1): 2})
    left = d.stable_group("left", 1)
    d.commit("left", {("t", 0): 5}, member=left[0], gen=1)
    d.finish(d.state.leave_group(d.now, "left", [(left[0], None)]))
    d.advance(0)
    assert d.state.groups["left"].state == EMPTY
    start = len(d.log)
    res = d.finish(d.state.delete_groups(["busy", "idle", "left", "none"]))
    assert res == {"busy": E.NON_EMPTY_GROUP, "idle": 0, "left": 0, "none": E.GROUP_ID_NOT_FOUND}
    tombstones = [rec.decode_key(k) for k, v in d.log[start:] if v is None]
    assert set(tombstones) == {rec.OffsetKey("idle", "t", 0), rec.OffsetKey("idle", "t", 1),
                               rec.OffsetKey("left", "t", 0), rec.GroupKey("left")}
    assert "idle" not in d.state.groups and "left" not in d.state.groups


def test_offset_delete_refuses_subscribed_topics() -> None:
    d = Driver()
    ids = d.stable_group("g", 1, protocols=[("range", subscription("t"))])
    d.commit("g", {("t", 0): 1, ("u", 0): 2}, member=ids[0], gen=1)
    top, errors = d.finish(d.state.delete_offsets("g", [("t", 0), ("u", 0)]))
    assert top == 0 and errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    assert d.log[-1] == (rec.offset_commit_key("g", "u", 0), None)
    assert d.finish(d.state.delete_offsets("none", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND


def test_offsets_expire_once_group_is_empty() -> None:
    d = Driver(offsets_retention_ms=60_000)
    ids = d.stable_group("g", 1, session=120_000)
    d.commit("g", {("t", 0): 1}, member=ids[0], gen=1)
    d.advance(50_000)
    assert d.heartbeat("g", ids[0], 1) == 0
    d.advance(50_000)
    assert d.heartbeat("g", ids[0], 1) == 0
    written = len(d.log)
    d.finish(d.state.expire_offsets(d.now))
    assert len(d.log) == written  # Stable and subscribed to t: kept although older than the retention
    d.finish(d.state.leave_group(d.now, "g", [(ids[0], None)]))
    d.advance(0)
    assert d.state.groups["g"].state == EMPTY
    d.advance(59_000)
    d.finish(d.state.expire_offsets(d.now))
    assert d.state.groups["g"].offsets
    d.advance(2_000)
    d.finish(d.state.expire_offsets(d.now))
    assert "g" not in d.state.groups
    assert d.log[-2:] == [(rec.offset_commit_key("g", "t", 0), None), (rec.group_metadata_key("g"), None)]


def test_replay_of_written_records_rebuilds_identical_state() -> None:
    d = Driver()
    ids = d.stable_group("g", 3)
    d.commit("g", {("t", 0): 10, ("t", 1): 11}, member=ids[1], gen=1)
    d.commit("g", {("t", 0): 12}, member=ids[0], gen=1)
    t1, _ = d.join("s", instance="i1")
    d.advance(0)
    r = d.replies.pop(t1)
    d.sync("s", 1, r["member_id"], {r["member_id"]: b"S"})
    d.join("s", instance="i1")  # static restart: new member id persisted
    d.commit("simple", {("u", 0): 1, ("u", 1): 2})
    d.finish(d.state.delete_offsets("simple", [("u", 1)]))
    d.commit("gone", {("u", 0): 1})
    d.finish(d.state.delete_groups(["gone"]))
    replayed = GroupCoordinatorState(GroupConfig())
    for k, v in d.log:
        replayed.replay(k, v)
    replayed.finish_loading(d.now)
    assert replayed.snapshot() == d.state.snapshot()
    assert replayed.groups["g"].state == STABLE and replayed.groups["simple"].state == EMPTY
    assert "gone" not in replayed.groups


def test_loaded_members_expire_without_heartbeats() -> None:
    d = Driver()
    d.stable_group("g", 1)
    loaded = GroupCoordinatorState(GroupConfig())
    for k, v in d.log:
        loaded.replay(k, v)
    out = loaded.finish_loading(d.now)
    (key, deadline), = out.timers
    generation = loaded.groups["g"].generation_id
    out2 = loaded.on_timer(deadline, key)
    # Kafka: the expired member leaves, the rebalance it starts completes at once with nobody left (the DelayedJoin's
    # tryComplete): Empty, next generation, written
    g = loaded.groups["g"]
    assert not g.members and g.state == EMPTY and g.generation_id == generation + 1
    assert len(out2.records) == 1


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_reads_every_offset_value_version(version: int) -> None:
    from broker.protocol.api import data_codec
    fields = {"offset": 42, "leader_epoch": 5, "metadata": "md", "commit_timestamp": 7, "expire_timestamp": 9}
    value = struct.pack(">h", version) + data_codec("OffsetCommitValue", version).encode(fields)
    st = GroupCoordinatorState(GroupConfig())
    st.replay(struct.pack(">h", 0) + rec.offset_commit_key("g", "t", 3)[2:], value)
    offset, leader_epoch, metadata, commit_ts, expire_ts, _record_offset = st.groups["g"].offsets[("t", 3)]
    assert (offset, metadata, commit_ts) == (42, "md", 7)
    assert leader_epoch == (5 if version >= 3 else -1)
    assert expire_ts == (9 if version == 1 else None)


def test_member_validation_with_instance_ids_and_admin_commits() -> None:
    d = Driver()
    ids = d.stable_group("g", 1)
    assert d.heartbeat("g", ids[0], 1, instance="unregistered") == E.UNKNOWN_MEMBER_ID
    d.finish(d.state.leave_group(d.now, "g", [(ids[0], None)]))
    d.advance(0)
    assert d.state.groups["g"].state == EMPTY
    # generation -1 into an empty group is an admin/standalone commit, whatever the member id says
    assert d.commit("g", {("t", 0): 3}, member="stale-member", gen=-1) == {("t", 0): 0}
    assert d.commit("g", {("t", 0): 3}, member="stale-member", gen=2) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_a_commit_is_applied_by_replaying_its_records_once_written() -> None:
    d = Driver()
    out = d.state.commit_offsets(d.now, "g", "", None, -1, {("t", 0): OffsetAndMetadata(4, 2, "m", d.now)})
    assert out.replay and out.response == {("t", 0): 0}
    assert d.state.fetch_offsets("g", [("t", 0)], False)[0][1] == -1  # not applied while in flight
    d.state.replay_written(out.records, 7, -1)
    assert d.state.fetch_offsets("g", [("t", 0)], True) == [(("t", 0), 4, 2, "m", 0)]  # applied, pending settled
    replayed = GroupCoordinatorState(GroupConfig())
    for i, (k, v) in enumerate(out.records):
        replayed.replay(k, v, 7 + i)
    assert replayed.snapshot() == d.state.snapshot()


def test_offset_delete_removes_offsets_by_replaying_its_tombstones_once_written() -> None:
    d = Driver()
    d.commit("g", {("x", 0): 5, ("x", 1): 6})
    out = d.state.delete_offsets("g", [("x", 0)])
    assert out.replay and out.response == (0, {("x", 0): 0}) and out.records == [(rec.offset_commit_key("g", "x", 0),
                                                                                     None)]
    assert d.state.fetch_offsets("g", [("x", 0)], False)[0][1] == 5  # a failed write would leave it: still there
    d.state.replay_written(out.records, 10, -1)
    assert [r[1] for r in d.state.fetch_offsets("g", [("x", 0), ("x", 1)], False)] == [-1, 6]
