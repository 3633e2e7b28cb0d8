"""DeleteGroups and offset expiry through the coordinator runtime: their tombstones (the offsets', then the group's)
are appended first and the offsets and groups go only when the runtime replays the written records.

The real GroupCoordinator and CoordinatorRuntime over an in-memory ``__consumer_offsets`` whose appends wait on
futures the test completes (with None: written; with an error code: failed). No threads and no sleeps: every step is
a future the test completes or a loop turn (``settle``).
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import pytest

from broker.coordinator.group import records as rec
from broker.util.clock import ManualClock
from broker.coordinator.group.service import GroupCoordinator
from broker.coordinator.group.state import EMPTY, GroupConfig, GroupCoordinatorState, OffsetAndMetadata
from broker.coordinator.offsets_topic import LoadedRecord
from broker.errors import ErrorCode as E, error_for_code
from tests.unit.coordinator.test_group_apis import FakeConfig, FakeOffsetsTopic
from tests.unit.replica.harness import drive

TOPIC = "__consumer_offsets"
RETENTION_MS = 60_000
T0, T1 = ("t", 0), ("t", 1)


class GatedOffsetsTopic(FakeOffsetsTopic):
    """Appends wait on a gate the test completes while ``hold`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.gates: List["asyncio.Future[Optional[int]]"] = []

    async def append(self, partition: int, records: List[Tuple[bytes, Optional[bytes]]],
                     base_sequence: int = -1) -> int:
        if self.hold:
            gate: "asyncio.Future[Optional[int]]" = asyncio.get_running_loop().create_future()
            self.gates.append(gate)
            code = await gate
            if code:
                raise error_for_code(code)("append failed")
        return await super().append(partition, records, base_sequence)

    def open_gate(self, code: Optional[int] = None) -> None:
        self.gates.pop(0).set_result(code)


class Config(FakeConfig):
    values = dict(FakeConfig.values, **{"offsets.retention.minutes": 1})


async def settle() -> None:
    """Let every ready callback run (no time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


def group_value(generation: int, state_timestamp: int) -> bytes:
    """An Empty consumer group's metadata, as a group that had members writes it when the last one leaves."""
    return rec.group_metadata_value({"protocol_type": "consumer", "generation": generation, "protocol": None,
                                     "leader": None, "current_state_timestamp": state_timestamp, "members": []})


def seed(io: FakeOffsetsTopic, group: str, generation: int, offsets: Dict[Tuple[str, int], int], ts: int) -> None:
    """``group``'s records in the log before the coordinator loads it: its metadata (generation > 0) and offsets."""
    if generation:
        io.records.append(LoadedRecord(len(io.records), rec.group_metadata_key(group), group_value(generation, ts)))
    for (topic, partition), offset in offsets.items():
        io.records.append(LoadedRecord(len(io.records), rec.offset_commit_key(group, topic, partition),
                                       rec.offset_commit_value(offset, -1, "", ts, None)))


def loaded_from(io: FakeOffsetsTopic) -> GroupCoordinatorState:
    """A fresh shard loaded from the log, as the runtime loads one (every batch, then the end)."""
    state = GroupCoordinatorState(GroupConfig(offsets_retention_ms=RETENTION_MS))
    state.begin_loading()
    for r in io.records:
        state.replay_batch((r,), r.producer_id, r.marker)
    state.finish_loading(0)
    return state


def run(scenario: Callable[[GroupCoordinator, GatedOffsetsTopic, ManualClock], Awaitable[None]],
        prepare: Optional[Callable[[GatedOffsetsTopic, int], None]] = None) -> None:
    """``scenario`` with a coordinator on a ManualClock (it moves the wall reading by ``clock.jump_wall``: the
    stored timestamps and the expiry compared with them, no timer fires)."""
    clock = ManualClock(1_000_000)

    async def main() -> None:
        io = GatedOffsetsTopic()
        if prepare is not None:
            prepare(io, clock.wall_ms())
        gc = GroupCoordinator(Config(), io, topics=None, clock=clock)  # type: ignore[arg-type]
        gc.start()
        await gc.on_become_leader(TOPIC, 0)
        await gc.wait_loaded()
        try:
            await scenario(gc, io, clock)
        finally:
            for gate in io.gates:
                if not gate.done():
                    gate.set_result(int(E.NOT_LEADER_OR_FOLLOWER))
            await gc.stop()

    asyncio.run(main())


def offsets_of(gc: GroupCoordinator, group: str) -> Dict[Tuple[str, int], int]:
    state = gc.shards[0]
    return {tp: off for tp, off, _e, _m, err in state.fetch_offsets(group, None, False) if not err}


async def commit(gc: GroupCoordinator, group: str, offsets: Dict[Tuple[str, int], int], ts: int) -> None:
    answer = await gc.commit_offsets(group, "", None, -1, {tp: OffsetAndMetadata(o, commit_timestamp=ts)
                                                         for tp, o in offsets.items()})
    assert set(answer.values()) == {0}


async def join_new_member(gc: GroupCoordinator, group: str) -> int:
    """A new member's JoinGroup (KIP-394: the first answer asks for its member id): the error it gets."""
    answer = await gc.join_group(group, "", None, "client", "/10.0.0.1", 30_000, 10_000, "consumer",
                                 [("range", b"")], True, False)
    return int(answer["error_code"])


# ---------------------------------------------------------------------------------------------- DeleteGroups
def test_delete_groups_removes_a_group_only_once_its_tombstones_are_written() -> None:
    """The offsets' tombstones, then the group's (it had a generation), are appended; until the append succeeds the
    group and its offsets are still there for readers, while the group is Dead to writers as Kafka's group is from
    the start of its deletion: a new member's join gets COORDINATOR_NOT_AVAILABLE (it finds the coordinator again
    and rejoins), a commit too, a second DeleteGroups GROUP_ID_NOT_FOUND. Once written and replayed the group is
    gone, and the rejoin starts a new group."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 3, {T0: 5, T1: 6}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        before = state.snapshot()
        start = len(io.records)
        io.hold = True
        deleting = asyncio.ensure_future(gc.delete_groups(["g"]))
        await settle()
        assert len(io.gates) == 1 and not deleting.done()
        assert state.snapshot() == before and offsets_of(gc, "g") == {T0: 5, T1: 6}  # nothing applied yet
        assert state.describe_group("g")["group_state"] == EMPTY
        assert await join_new_member(gc, "g") == E.COORDINATOR_NOT_AVAILABLE
        answer = await gc.commit_offsets("g", "", None, -1, {T0: OffsetAndMetadata(9)})
        assert answer == {T0: E.COORDINATOR_NOT_AVAILABLE}
        assert await gc.delete_groups(["g"]) == {"g": E.GROUP_ID_NOT_FOUND}
        assert len(io.gates) == 1  # none of these wrote anything
        io.open_gate()
        assert await deleting == {"g": 0}
        assert [(r.key, r.value) for r in io.records[start:]] == [
            (rec.offset_commit_key("g", "t", 0), None), (rec.offset_commit_key("g", "t", 1), None),
            (rec.group_metadata_key("g"), None)]
        assert "g" not in state.groups and offsets_of(gc, "g") == {}
        assert state.describe_group("g")["group_state"] == "Dead"
        io.hold = False
        assert await join_new_member(gc, "g") == E.MEMBER_ID_REQUIRED  # a new group
        assert state.groups["g"].generation_id == 0

    run(scenario, prepare)


@pytest.mark.parametrize("append_error,answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_delete_groups_write_leaves_the_groups(append_error: int, answer: int) -> None:
    """A failed append applies nothing: the groups keep their offsets and metadata and can be written to again;
    every group of the write's partition is answered the write's error as Kafka 3.9's coordinator maps it
    (GroupCoordinatorService.handleOperationException), the group that was not empty included."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 2, {T0: 5}, now)
        seed(io, "simple", 0, {T1: 7}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        io.hold = True
        assert await join_new_member(gc, "busy") == E.MEMBER_ID_REQUIRED  # a pending member only: nothing written
        before = state.snapshot()
        deleting = asyncio.ensure_future(gc.delete_groups(["g", "simple", "none"]))
        await settle()
        io.open_gate(int(append_error))
        assert await deleting == {"g": answer, "simple": answer, "none": answer}
        assert state.snapshot() == before
        assert not state.groups["g"].deleting and not state.groups["simple"].deleting
        assert offsets_of(gc, "g") == {T0: 5} and offsets_of(gc, "simple") == {T1: 7}
        io.hold = False
        await commit(gc, "simple", {T0: 1}, clock.wall_ms())  # a writer may use it again
        assert await gc.delete_groups(["g", "simple"]) == {"g": 0, "simple": 0}
        assert "g" not in state.groups and "simple" not in state.groups

    run(scenario, prepare)


def test_a_group_with_members_is_not_deleted() -> None:
    """NON_EMPTY_GROUP for a group with members (Kafka: Stable, PreparingRebalance, CompletingRebalance); nothing
    is written for it."""
    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        joined = await drive(clock, gc.join_group("g", "", None, "client", "/10.0.0.1", 30_000, 10_000, "consumer",
                                                   [("range", b"")], False, False))  # the rebalance's timer
        assert joined["error_code"] == 0
        written = len(io.records)
        assert await gc.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
        assert len(io.records) == written and gc.shards[0].groups["g"].members

    run(scenario)


@pytest.mark.parametrize("append_error", [None, E.NOT_LEADER_OR_FOLLOWER])
def test_delete_groups_when_the_partition_is_resigned_mid_write(append_error: Optional[int]) -> None:
    """Resigned while the tombstones are being appended: the write is fenced and answers NOT_COORDINATOR (Kafka's
    runtime fails the writes of an unloaded partition so); the old shard applies nothing. Whether the group is gone
    is what the log says: a new load waits for the append and replays its tombstones if they were written."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 1, {T0: 5}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        old = gc.shards[0]
        group = old.groups["g"]
        io.hold = True
        deleting = asyncio.ensure_future(gc.delete_groups(["g"]))
        await settle()
        await gc.on_resign(TOPIC, 0)
        assert 0 not in gc.shards
        await gc.on_become_leader(TOPIC, 0)  # elected again: the load waits for the append under way
        await settle()
        assert gc.runtime.is_loading(0)
        io.open_gate(append_error)
        assert await deleting == {"g": E.NOT_COORDINATOR}
        assert T0 in group.offsets and group.generation_id == 1  # never applied to the old shard
        await gc.wait_loaded()
        reloaded = gc.shards[0]
        assert ("g" in reloaded.groups) == (append_error is not None)
        assert reloaded.snapshot() == loaded_from(io).snapshot()

    run(scenario, prepare)


# ---------------------------------------------------------------------------------------------- expiry
def test_expiry_removes_one_groups_offsets_once_written() -> None:
    """Only the expired offsets get tombstones; they stay until the append succeeds; a group used only for offsets
    (no generation, so no metadata tombstone) goes when the replay of its last offset's tombstone leaves it empty;
    another group's fresh offsets are untouched."""
    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        await commit(gc, "old", {T0: 1}, clock.wall_ms())
        await commit(gc, "mixed", {T0: 2}, clock.wall_ms())
        clock.jump_wall(30_000)
        await commit(gc, "mixed", {T1: 3}, clock.wall_ms())
        await commit(gc, "fresh", {T0: 4}, clock.wall_ms())
        clock.jump_wall(RETENTION_MS - 30_000)
        start = len(io.records)
        io.hold = True
        expiring = asyncio.ensure_future(gc.expire_offsets())
        await settle()
        assert offsets_of(gc, "old") == {T0: 1} and offsets_of(gc, "mixed") == {T0: 2, T1: 3}
        assert state.groups["old"].deleting and not state.groups["mixed"].deleting
        io.open_gate()
        await expiring
        assert {r.key for r in io.records[start:]} == {rec.offset_commit_key("old", "t", 0),
                                                       rec.offset_commit_key("mixed", "t", 0)}
        assert all(r.value is None for r in io.records[start:])
        assert "old" not in state.groups
        assert offsets_of(gc, "mixed") == {T1: 3} and offsets_of(gc, "fresh") == {T0: 4}
        assert state.snapshot() == loaded_from(io).snapshot()

    run(scenario)


def test_the_group_tombstone_follows_its_last_expired_offset() -> None:
    """An Empty group that had a generation: once its last offset expires, its offsets' tombstones and then its
    metadata tombstone are written (Kafka's cleanupGroupMetadata), and the group goes when they are replayed; a
    join meanwhile finds it Dead (COORDINATOR_NOT_AVAILABLE)."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 4, {T0: 5, T1: 6}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        clock.jump_wall(RETENTION_MS)
        start = len(io.records)
        io.hold = True
        expiring = asyncio.ensure_future(gc.expire_offsets())
        await settle()
        assert state.groups["g"].generation_id == 4 and offsets_of(gc, "g") == {T0: 5, T1: 6}
        assert await join_new_member(gc, "g") == E.COORDINATOR_NOT_AVAILABLE
        io.open_gate()
        await expiring
        assert [(r.key, r.value) for r in io.records[start:]] == [
            (rec.offset_commit_key("g", "t", 0), None), (rec.offset_commit_key("g", "t", 1), None),
            (rec.group_metadata_key("g"), None)]
        assert "g" not in state.groups
        assert loaded_from(io).groups == {}

    run(scenario, prepare)


def test_a_failed_expiry_write_leaves_the_offsets_and_the_next_pass_writes_them() -> None:
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 2, {T0: 5}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        clock.jump_wall(RETENTION_MS)
        before = state.snapshot()
        io.hold = True
        expiring = asyncio.ensure_future(gc.expire_offsets())
        await settle()
        io.open_gate(int(E.NOT_ENOUGH_REPLICAS))
        await expiring
        assert state.snapshot() == before and not state.groups["g"].deleting
        io.hold = False
        await gc.expire_offsets()
        assert "g" not in state.groups and loaded_from(io).groups == {}

    run(scenario, prepare)


def test_loading_the_tombstones_gives_the_state_the_writes_left() -> None:
    """Deletions and expiries written, one failed, then the partition reloaded from its log: the same groups and
    offsets as the shard that wrote them."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "deleted", 2, {T0: 1, T1: 2}, now)
        seed(io, "kept", 3, {T0: 3}, now)
        seed(io, "expired", 5, {T0: 4}, now - RETENTION_MS)
        seed(io, "half", 0, {T0: 5}, now - RETENTION_MS)
        seed(io, "half", 0, {T1: 6}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        assert await gc.delete_groups(["deleted"]) == {"deleted": 0}
        io.hold = True
        failing = asyncio.ensure_future(gc.delete_groups(["kept"]))
        await settle()
        io.open_gate(int(E.NOT_LEADER_OR_FOLLOWER))
        assert await failing == {"kept": E.NOT_COORDINATOR}
        io.hold = False
        await gc.expire_offsets()
        assert sorted(state.groups) == ["half", "kept"] and offsets_of(gc, "half") == {T1: 6}
        live = state.snapshot()
        assert loaded_from(io).snapshot() == live
        await gc.on_resign(TOPIC, 0)
        await gc.on_become_leader(TOPIC, 0)
        await gc.wait_loaded()
        assert gc.shards[0].snapshot() == live

    run(scenario, prepare)


# ---------------------------------------------------------------------------------------------- pure state
def test_deleting_a_group_with_a_pending_transactional_commit_drops_it() -> None:
    """As Kafka's OffsetMetadataManager.deleteAllOffsets: a partition with a transactional commit pending gets a
    tombstone too, whose replay drops the pending commit, so the transaction's COMMIT marker applies nothing and a
    load of the log agrees."""
    state = GroupCoordinatorState(GroupConfig())
    log: List[Tuple[Optional[bytes], Optional[bytes], int]] = []   # (key, value, producer id); key None: COMMIT

    def write(out: Any, producer_id: int = -1) -> None:
        base = len(log)
        log.extend((k, v, producer_id) for k, v in out.records)
        state.replay_written(out.records, base, producer_id)

    write(state.commit_offsets(0, "g", "", None, -1, {T0: OffsetAndMetadata(1)}))
    write(state.txn_commit_offsets(0, "g", 77, 0, "", None, -1, {T1: OffsetAndMetadata(2)}), 77)
    out = state.delete_groups(["g"])
    assert out.response == {"g": 0} and [k for k, _v in out.records] == [rec.offset_commit_key("g", "t", 0),
                                                                         rec.offset_commit_key("g", "t", 1)]
    assert state.groups["g"].pending_txn_commits  # nothing applied before the write
    write(out)
    assert "g" not in state.groups
    log.append((None, None, 77))
    state.complete_txn(77, True)
    assert "g" not in state.groups
    loaded = GroupCoordinatorState(GroupConfig())
    loaded.begin_loading()
    for offset, (key, value, pid) in enumerate(log):
        if key is None:
            loaded.replay_batch((), pid, True)
        else:
            loaded.replay_batch((LoadedRecord(offset, key, value, pid),), pid, None)
    loaded.finish_loading(0)
    assert loaded.groups == {}


def test_offset_delete_of_an_empty_groups_last_offsets_removes_the_group() -> None:
    """Kafka's handleDeleteOffsets goes through cleanupGroupMetadata: an Empty group left without offsets goes Dead,
    with a group tombstone after the offsets' when it had a generation; a group with offsets left stays."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 3, {T0: 5, T1: 6}, now)
        seed(io, "simple", 0, {T0: 7}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        assert await gc.delete_offsets("g", [T0]) == (0, {T0: 0})
        assert "g" in state.groups and offsets_of(gc, "g") == {T1: 6}
        written = len(io.records)
        assert await gc.delete_offsets("g", [T1, T1, ("u", 0)]) == (0, {T1: 0, ("u", 0): 0})
        assert [(r.key, r.value) for r in io.records[written:]] == [
            (rec.offset_commit_key("g", "t", 1), None), (rec.group_metadata_key("g"), None)]
        assert "g" not in state.groups
        assert await gc.delete_offsets("simple", [T0]) == (0, {T0: 0})  # generation 0: no metadata in the log
        assert "simple" not in state.groups and io.records[-1].key == rec.offset_commit_key("simple", "t", 0)
        assert loaded_from(io).snapshot() == state.snapshot()

    run(scenario, prepare)


@pytest.mark.parametrize("append_error,answer", [(E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                                                 (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)])
def test_a_failed_offset_delete_write_answers_the_error_and_keeps_the_group(append_error: int,
                                                                            answer: int) -> None:
    """Nothing changes when the tombstones are not written, and the client is not told they were; meanwhile the
    group being removed is Dead to a join (COORDINATOR_NOT_AVAILABLE is the runtime's answer to a Dead group)."""
    def prepare(io: GatedOffsetsTopic, now: int) -> None:
        seed(io, "g", 3, {T0: 5}, now)

    async def scenario(gc: GroupCoordinator, io: GatedOffsetsTopic, clock: ManualClock) -> None:
        state = gc.shards[0]
        before = state.snapshot()
        io.hold = True
        deleting = asyncio.ensure_future(gc.delete_offsets("g", [T0]))
        await settle()
        assert state.groups["g"].deleting
        assert await join_new_member(gc, "g") == E.COORDINATOR_NOT_AVAILABLE
        io.open_gate(int(append_error))
        assert await deleting == (answer, {})
        assert state.snapshot() == before and not state.groups["g"].deleting
        io.hold = False
        assert await gc.delete_offsets("g", [T0]) == (0, {T0: 0})
        assert "g" not in state.groups

    run(scenario, prepare)
