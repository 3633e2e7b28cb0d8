"""The leader's side of incremental fetch sessions at size: a partition the fetcher did not resend and that has
nothing new is left out of the read (ReplicaManager._unchanged), so a fetch costs what changed, not the session's
size; and everything a fetcher must still learn (records, a moved high watermark, errors, an ISR it may rejoin)
still reaches it. Real ReplicaManagers and the broker's own Fetch handler (broker.api.fetch) with its session
cache, through the fake network of the harness."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, List, Tuple

from broker.api import fetch
from broker.api.fetch_session import FetchSessionCache
from broker.errors import ErrorCode

from .harness import TOPIC_ID, FakeCluster, records, state

N = 40
TPS = [("t", p) for p in range(N)]


def spy_reads(rm: Any) -> List[List[Any]]:
    """Record the partitions each pass of fetch_messages validates and reads."""
    seen: List[List[Any]] = []
    real = rm._prepare_reads

    def prepare(infos, *args):  # type: ignore[no-untyped-def]
        seen.append([tp for tp, _ in infos])
        return real(infos, *args)

    rm._prepare_reads = prepare
    return seen


async def replicated_pair(c: FakeCluster, *values: bytes) -> Tuple[Any, Any]:
    """Leader 1 and follower 2 of every partition in TPS, ``values`` appended to each and replicated (the follower
    knows the high watermark)."""
    leader, follower = c.start(1), c.start(2)
    for b in (1, 2):
        await c.leader_and_isr(b, *[state(1, 3, [1, 2], [1, 2], tp=tp) for tp in TPS])
    await leader.rm.append_records(1, {tp: records(*values) for tp in TPS})
    await c.wait_until(lambda: all(follower.rm.get_partition(tp).log.high_watermark == len(values) for tp in TPS),
                     what="every partition replicated, high watermark known to the follower")
    return leader, follower


def test_an_idle_follower_session_reads_only_what_changed(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = await replicated_pair(c, b"x")
            seen = spy_reads(leader.rm)
            await c.wait_until(lambda: len(seen) >= 3, what="idle fetches")
            assert all(len(s) == 0 for s in seen[1:]), [len(s) for s in seen]  # nothing read while idle

            del seen[:]
            await leader.rm.append_records(1, {("t", 7): records(b"y")})
            p7 = follower.rm.get_partition(("t", 7))
            await c.wait_until(lambda: p7.log.log_end_offset == 2 and p7.log.high_watermark == 2,
                             what="the append and its high watermark replicated")
            assert seen and max(len(s) for s in seen) == 1, seen  # only partition 7, never the whole session
            assert {tp for s in seen for tp in s} == {("t", 7)}
            assert leader.rm.get_partition(("t", 7)).log.high_watermark == 2
            # the others are still followed: one more append anywhere arrives
            await leader.rm.append_records(1, {("t", 31): records(b"z")})
            await c.wait_until(lambda: follower.rm.get_partition(("t", 31)).log.high_watermark == 2,
                             what="a second partition's append")
        finally:
            await c.close()

    asyncio.run(main())


def test_a_caught_up_follower_out_of_the_isr_is_still_read_and_rejoins(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = await replicated_pair(c, b"x")
            # the controller drops the follower from partition 5's ISR (as after a lag); its position does not
            # move, so the fetcher never resends it: the leader must still look at it to add it back
            leader.apm.auto = False
            await c.leader_and_isr(1, state(1, 4, [1], [1, 2], tp=("t", 5)))
            await c.leader_and_isr(2, state(1, 4, [1], [1, 2], tp=("t", 5)))
            await c.wait_until(lambda: bool(leader.apm.held), what="an ISR expansion proposed")
            sub = leader.apm.held[0][0]
            assert sub[0] == ("t", 5) and sub[3] == [1, 2]
            leader.apm.commit_held()
            await c.wait_until(lambda: leader.rm.get_partition(("t", 5)).isr == (1, 2), what="back in the ISR")
        finally:
            await c.close()

    asyncio.run(main())


def req(topics: List[Any], session_id: int, epoch: int, max_wait_ms: int = 0, forgotten: Any = ()) -> Any:
    return SimpleNamespace(topics=topics, session_id=session_id, session_epoch=epoch, max_wait_ms=max_wait_ms,
                           min_bytes=1, max_bytes=1 << 20, isolation_level=0, replica_id=-1,
                           forgotten_topics_data=list(forgotten), rack_id="")


def part(p: int, offset: int) -> Any:
    return SimpleNamespace(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                           last_fetched_epoch=-1, log_start_offset=-1)


def ctx(version: int) -> Any:
    return SimpleNamespace(api_version=version, client_id="consumer", listener_name="PLAINTEXT")


class Meta:
    def topic_name(self, tid: Any) -> Any:
        return "t" if tid == TOPIC_ID else None

    def topic_id(self, name: str) -> Any:
        return TOPIC_ID


def answered(resp: dict) -> dict:
    return {p["partition_index"]: p for t in resp["responses"] for p in t["partitions"]}


def test_a_consumer_session_answers_only_changes_and_wakes_on_an_append(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader = c.start(1)
            await c.leader_and_isr(1, *[state(1, 3, [1], [1], tp=tp) for tp in TPS])
            await leader.rm.append_records(1, {tp: records(b"x") for tp in TPS})
            rm, sessions, meta, v = leader.rm, FetchSessionCache(), Meta(), 10  # v10: by name, leader only
            topic = SimpleNamespace(topic="t", topic_id=TOPIC_ID, partitions=[part(p, 1) for p in range(N)])
            first = await fetch.handle(ctx(v), req([topic], 0, 0), replica_manager=rm, metadata=meta,
                                       fetch_sessions=sessions)
            sid = first["session_id"]
            assert sid > 0 and len(answered(first)) == N  # the full answer: every partition
            seen = spy_reads(rm)
            idle = await c.run(fetch.handle(ctx(v), req([], sid, 1, max_wait_ms=50), replica_manager=rm, metadata=meta,
                                            fetch_sessions=sessions))
            assert answered(idle) == {} and all(len(s) == 0 for s in seen)

            async def append_once_parked() -> None:
                await c.wait_until(lambda: rm.delayed_fetch_purgatory.num_delayed() == 1,
                                   max_ms=0, what="the session's fetch parked in the fetch purgatory")
                await rm.append_records(1, {("t", 9): records(b"new")})

            task = asyncio.ensure_future(append_once_parked())
            woke = await fetch.handle(ctx(v), req([], sid, 2, max_wait_ms=5000), replica_manager=rm, metadata=meta,
                                      fetch_sessions=sessions)  # the append wakes it: no time passes
            await task
            got = answered(woke)
            assert set(got) == {9} and got[9]["high_watermark"] == 2 and got[9]["records"]
            assert {tp for s in seen for tp in s} == {("t", 9)}  # only the partition that changed was read
            # the consumer moves partition 9 on: resent, read, nothing new
            moved = SimpleNamespace(topic="t", topic_id=TOPIC_ID, partitions=[part(9, 2)])
            after = await fetch.handle(ctx(v), req([moved], sid, 3), replica_manager=rm, metadata=meta,
                                       fetch_sessions=sessions)
            assert answered(after) == {}
            # a lost leadership is an error every fetch reports, without the consumer resending the partition
            await c.leader_and_isr(1, state(2, 4, [2], [1, 2], tp=("t", 20)))
            lost = await fetch.handle(ctx(v), req([], sid, 4), replica_manager=rm, metadata=meta,
                                      fetch_sessions=sessions)
            assert {p: e["error_code"] for p, e in answered(lost).items()} == {
                20: int(ErrorCode.NOT_LEADER_OR_FOLLOWER)}
        finally:
            await c.close()

    asyncio.run(main())


def test_partition_changes_numbers_changes_and_wakes_only_on_new_data() -> None:
    from broker.replica.partition_changes import PartitionChanges

    async def main() -> None:
        ch = PartitionChanges(capacity=4)
        assert ch.since(0) == [] and ch.seq == 0
        ch.note("a")
        ch.note("b")
        seen = ch.seq
        ch.note("a")
        assert ch.since(seen) == ["a"] and ch.since(ch.seq) == []
        assert sorted(ch.since(0)) == ["a", "a", "b"]
        for k in "cdef":
            ch.note(k)
        assert ch.since(seen) is None  # fell off the log: look at everything
        assert ch.since(-1) is None
        fut = ch.wait()
        ch.note("g")  # a moved high watermark: no wake
        await asyncio.sleep(0)
        assert not fut.done()
        ch.note("h", wake=True)
        await asyncio.sleep(0)
        assert fut.done()
        late = ch.wait()
        late.cancel()
        await asyncio.sleep(0)
        assert not ch._waiters

    asyncio.run(main())


def test_a_change_nothing_noted_reaches_the_follower_by_the_sweep(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = await replicated_pair(c, b"a", b"b", b"c")
            seen = spy_reads(leader.rm)
            await c.wait_until(lambda: len(seen) >= 2 and not seen[-1] and not seen[-2], what="idle fetches")
            # the leader's log start offset moves behind the ReplicaManager's back (as retention does on its thread)
            lp = leader.rm.get_partition(("t", 11)).log
            await leader.rm.run_io(lp.delete_records_before, 2)
            assert lp.log_start_offset == 2
            await c.wait_until(lambda: follower.rm.get_partition(("t", 11)).log.log_start_offset == 2,
                             what="the follower learning the new log start offset")
        finally:
            await c.close()

    asyncio.run(main())
