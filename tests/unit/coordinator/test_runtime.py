"""CoordinatorRuntime on its own: a toy shard (a key-value map built only by replay), an in-memory coordinator log
whose loads run inline (no loader thread) and whose appends wait on gates the test opens, and a manual clock.
No threads and no sleeps: every step is driven by futures the test completes.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from broker.coordinator.runtime import CoordinatorRuntime, LoadSummary, Record, WriteResult
from broker.errors import ErrorCode as E, error_for_code
from broker.util.clock import ManualClock

P = 3


class KvShard:
    """State = the latest value of each key, built by replay only (load and writes alike)."""

    def __init__(self, partition: int, epoch: int) -> None:
        self.partition, self.epoch = partition, epoch
        self.kv: Dict[bytes, Optional[bytes]] = {}
        self.replayed: List[Tuple[int, bytes]] = []   # (offset, key) in replay order
        self.ended = False

    def replay_batch(self, records: Sequence[Any], producer_id: int, marker: Optional[bool]) -> None:
        for r in records:
            self._apply(r.offset, r.key, r.value)

    def end_replay(self) -> None:
        self.ended = True

    def replay_written(self, records: Sequence[Record], base_offset: int, producer_id: int) -> None:
        for i, (k, v) in enumerate(records):
            self._apply(base_offset + i, k, v)

    def _apply(self, offset: int, key: bytes, value: Optional[bytes]) -> None:
        self.replayed.append((offset, key))
        if value is None:
            self.kv.pop(key, None)
        else:
            self.kv[key] = value


class MemLog:
    """One coordinator topic in memory. ``gates`` holds each append until the test resolves its future (with
    None: written; with an error code: failed); ``load_gate`` holds a load until set."""

    def __init__(self) -> None:
        self.partitions: Dict[int, List[Tuple[bytes, Optional[bytes]]]] = {}
        self.hold_appends = False
        self.gates: List["asyncio.Future[Optional[int]]"] = []
        self.load_gate: Optional[asyncio.Event] = None
        self.leader = True
        self.appended: List[Tuple[int, Sequence[Record], int, Optional[Tuple[int, int]]]] = []

    async def load(self, partition: int, on_batch: Callable[..., None], buffer_bytes: int,
                   on_end: Optional[Callable[[], None]] = None) -> Tuple[int, int]:
        if self.load_gate is not None:
            await self.load_gate.wait()
        log = list(self.partitions.get(partition, []))
        for offset, (k, v) in enumerate(log):  # inline: the replay runs right here, no loader thread
            on_batch((SimpleNamespace(offset=offset, key=k, value=v),), -1, None)
        if on_end is not None:
            on_end()
        return len(log), len(log)

    async def _append(self, partition: int, records: Sequence[Record], base_sequence: int,
                      producer: Optional[Tuple[int, int]]) -> int:
        self.appended.append((partition, records, base_sequence, producer))
        if self.hold_appends:
            gate: "asyncio.Future[Optional[int]]" = asyncio.get_running_loop().create_future()
            self.gates.append(gate)
            code = await gate
            if code:
                raise error_for_code(code)("failed")
        log = self.partitions.setdefault(partition, [])
        log.extend(records)
        return len(log) - 1

    async def append(self, partition: int, records: Sequence[Record], base_sequence: int = -1) -> int:
        return await self._append(partition, records, base_sequence, None)

    async def append_transactional(self, partition: int, records: Sequence[Record], producer_id: int,
                                   producer_epoch: int, guard: Optional[object] = None) -> int:
        return await self._append(partition, records, 0, (producer_id, producer_epoch))

    def is_leader(self, partition: int) -> bool:
        return self.leader


class Env:
    def __init__(self) -> None:
        self.log = MemLog()
        self.clock = ManualClock(1_000)
        self.epochs: Dict[int, int] = {P: 5}
        self.loaded: List[Tuple[int, LoadSummary]] = []
        self.unloaded: List[Tuple[int, Optional[KvShard]]] = []
        self.rt: CoordinatorRuntime[KvShard] = CoordinatorRuntime(
            "Toy", "__toy", self.log, KvShard, lambda p, s, summary: self.loaded.append((p, summary)),
            lambda p, s: self.unloaded.append((p, s)), leader_epoch=lambda p: self.epochs[p], clock=self.clock)

    async def lead(self) -> KvShard:
        self.rt.schedule_load(P)
        await self.rt.wait_loaded()
        err, shard = self.rt.route(P)
        assert err == 0 and shard is not None
        return shard


async def settle() -> None:
    """Let every ready callback run (no time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


def run(scenario: Callable[[Env], Any]) -> None:
    asyncio.run(scenario(Env()))


def test_load_replays_the_whole_log_and_routes_load_in_progress_meanwhile() -> None:
    async def scenario(env: Env) -> None:
        env.log.partitions[P] = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")]
        env.log.load_gate = asyncio.Event()
        assert env.rt.route(P) == (E.NOT_COORDINATOR, None)
        env.rt.schedule_load(P)
        await settle()
        assert env.rt.route(P) == (E.COORDINATOR_LOAD_IN_PROGRESS, None) and env.rt.loading == {P}
        env.clock.advance(40)
        env.log.load_gate.set()
        await env.rt.wait_loaded()
        err, shard = env.rt.route(P)
        assert err == 0 and shard is not None and env.rt.shards == {P: shard}
        assert shard.kv == {b"b": b"2", b"c": b"3"} and shard.ended and shard.epoch == 5
        [(p, summary)] = env.loaded
        assert (p, summary.records, summary.end_offset, summary.elapsed_ms, summary.epoch) == (P, 4, 4, 40, 5)
        env.log.leader = False  # the replica layer says another broker leads now
        assert env.rt.route(P) == (E.NOT_COORDINATOR, None)
    run(scenario)


def test_a_successful_write_is_applied_by_replay_only_after_the_append() -> None:
    async def scenario(env: Env) -> None:
        env.log.partitions[P] = [(b"x", b"0")]
        shard = await env.lead()
        env.log.hold_appends = True
        write = asyncio.ensure_future(env.rt.write(P, shard, [(b"a", b"1"), (b"x", None)], base_sequence=0))
        await settle()
        assert shard.kv == {b"x": b"0"}  # not applied while the append is in flight
        env.log.gates.pop().set_result(None)
        assert await write == WriteResult(0, 1)
        assert shard.kv == {b"a": b"1"} and shard.replayed[-2:] == [(1, b"a"), (2, b"x")]
        assert env.log.appended[-1][2] == 0  # the base sequence reached the log
        # the same state a load of the log builds
        env.rt.schedule_unload(P)
        reloaded = await env.lead()
        assert reloaded.kv == shard.kv
    run(scenario)


def test_replay_false_appends_without_applying_and_transactional_writes_name_the_producer() -> None:
    async def scenario(env: Env) -> None:
        shard = await env.lead()
        assert await env.rt.write(P, shard, [(b"a", b"1")], replay=False) == WriteResult(0, 0)
        assert shard.kv == {}
        assert await env.rt.write(P, shard, [(b"t", b"1")], producer=(9, 2)) == WriteResult(0, 1)
        assert env.log.appended[-1][3] == (9, 2) and shard.kv == {b"t": b"1"}
        assert await env.rt.write(P, shard, []) == WriteResult(0)  # nothing to write: nothing appended
        assert len(env.log.appended) == 2
    run(scenario)


def test_a_failed_write_applies_nothing_and_returns_the_append_error() -> None:
    async def scenario(env: Env) -> None:
        shard = await env.lead()
        env.log.hold_appends = True
        write = asyncio.ensure_future(env.rt.write(P, shard, [(b"a", b"1")]))
        await settle()
        env.log.gates.pop().set_result(int(E.NOT_ENOUGH_REPLICAS))
        assert await write == WriteResult(int(E.NOT_ENOUGH_REPLICAS))
        assert shard.kv == {} and shard.replayed == []
    run(scenario)


def test_resigning_mid_write_fences_it_and_applies_nothing() -> None:
    async def scenario(env: Env) -> None:
        shard = await env.lead()
        env.log.hold_appends = True
        write = asyncio.ensure_future(env.rt.write(P, shard, [(b"a", b"1")]))
        await settle()
        env.rt.schedule_unload(P)
        assert env.unloaded == [(P, shard)] and env.rt.route(P) == (E.NOT_COORDINATOR, None)
        env.log.gates.pop().set_result(None)  # the append itself succeeded
        assert await write == WriteResult(int(E.NOT_COORDINATOR), fenced=True)
        assert shard.kv == {}
        # a shard no longer current cannot write at all
        assert await env.rt.write(P, shard, [(b"b", b"2")]) == WriteResult(int(E.NOT_COORDINATOR), fenced=True)
        assert len(env.log.appended) == 1
    run(scenario)


def test_a_reload_at_a_new_epoch_fences_the_old_shard_and_waits_for_its_appends() -> None:
    async def scenario(env: Env) -> None:
        old = await env.lead()
        env.log.hold_appends = True
        write = asyncio.ensure_future(env.rt.write(P, old, [(b"a", b"1")]))
        await settle()
        env.epochs[P] = 6
        env.rt.schedule_load(P)  # re-elected at a newer leader epoch while the old epoch's append runs
        await settle()
        assert env.rt.route(P) == (E.COORDINATOR_LOAD_IN_PROGRESS, None)
        assert len(env.loaded) == 1  # the new load waits for the append before reading
        env.log.gates.pop().set_result(None)
        assert await write == WriteResult(int(E.COORDINATOR_LOAD_IN_PROGRESS), fenced=True)
        await env.rt.wait_loaded()
        err, new = env.rt.route(P)
        assert err == 0 and new is not old and new is not None and new.epoch == 6
        assert old.kv == {} and new.kv == {b"a": b"1"}  # the record it wrote is in the new epoch's load
    run(scenario)


def test_a_second_election_at_the_same_epoch_while_loading_is_ignored() -> None:
    async def scenario(env: Env) -> None:
        env.log.load_gate = asyncio.Event()
        env.rt.schedule_load(P)
        env.rt.schedule_load(P)
        await settle()
        assert env.unloaded == []
        env.log.load_gate.set()
        await env.rt.wait_loaded()
        assert len(env.loaded) == 1
    run(scenario)


def test_resigning_while_loading_cancels_the_load() -> None:
    async def scenario(env: Env) -> None:
        env.log.load_gate = asyncio.Event()
        env.rt.schedule_load(P)
        await settle()
        env.rt.schedule_unload(P)
        env.log.load_gate.set()
        await env.rt.wait_loaded()
        await settle()
        assert env.loaded == [] and env.unloaded == [(P, None)] and env.rt.route(P) == (E.NOT_COORDINATOR, None)
    run(scenario)


def test_a_failed_load_leaves_the_partition_not_coordinator() -> None:
    async def scenario(env: Env) -> None:
        env.log.partitions[P] = [(b"a", b"1")]

        def broken(p: int, epoch: int) -> KvShard:
            shard = KvShard(p, epoch)

            def replay_batch(*_: Any) -> None:
                raise ValueError("unreadable")
            shard.replay_batch = replay_batch  # type: ignore[method-assign]
            return shard
        env.rt._hooks.new_shard = broken
        env.rt.schedule_load(P)
        await env.rt.wait_loaded()
        assert env.loaded == [] and env.unloaded == [(P, None)]
        assert env.rt.route(P) == (E.NOT_COORDINATOR, None) and env.rt.partitions() == set()
    run(scenario)
