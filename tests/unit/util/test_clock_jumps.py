"""Wall-clock jumps (an NTP step, an operator's ``date -s``) of an hour forward and back, while the monotonic clock
runs on: what Kafka times on its monotonic clock (session and rebalance deadlines, delayed operations, throttles,
idle connections) neither ends early nor late; what Kafka times on the wall clock because it is stored or compared
with stored timestamps (group state and commit timestamps, offset expiry, transaction timeouts) follows the jump,
as in Kafka. See broker/util/clock.py.

Components that take a Clock run on a ManualClock whose wall reading jumps (``jump_wall``) while its monotonic
reading and timers move only by ``advance``. For the others (and SYSTEM_CLOCK itself), ``wall`` moves ``time.time``
only; asyncio's timers and ``time.monotonic`` are untouched.
"""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, Callable, Dict, List

import pytest

from broker.api import fetch as fetch_api
from broker.api.fetch_session import FetchSessionCache
from broker.coordinator.group.state import OffsetAndMetadata
from broker.errors import ErrorCode
from broker.network.socket_server import ListenerSpec, SocketServer
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.quota.client_quota_manager import ClientQuotaManager
from broker.quota.entity import QuotaEntity
from broker.replica.replication_quota import ReplicationQuotaManager
from broker.util import clock
from tests.unit.coordinator import test_group_apis as group_apis
from tests.unit.coordinator.transaction import test_service as txn_service
from broker.util.clock import SYSTEM_CLOCK, ManualClock
from tests.unit.network.test_socket_server import advance
from tests.unit.replica.harness import (TP, FakeCluster, _FakeMetadata, _FakeRequestContext, drive, records, state,
                                       wait_until)

HOUR_S = 3600.0
HOUR_MS = 3_600_000


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    """``time.time`` = the real wall clock + ``wall[0]`` seconds (set it to jump)."""
    real = time.time
    offset = [0.0]
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])
    return offset


def test_the_clocks(wall: List[float]) -> None:
    before = clock.mono_ms()
    wall[0] = HOUR_S
    assert abs(clock.wall_ms() - clock.mono_ms() - HOUR_MS) < 60_000  # anchored at the wall clock of the import
    wall[0] = -HOUR_S
    assert 0 <= clock.mono_ms() - before < 60_000  # moved by neither jump


# ---------------------------------------------------------------------------- group coordinator (monotonic deadlines)
def test_a_member_session_does_not_expire_early_when_the_wall_clock_jumps_forward(wall: List[float]) -> None:
    """Kafka's DelayedHeartbeat runs on the monotonic timer: a session timer that fires right after a jump forward
    (before the member's next heartbeat) must find the session alive, not an hour past its deadline."""
    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        member, generation = await group_apis.joined_member(broker)  # session.timeout.ms 10 s
        wall[0] = HOUR_S
        gc._fire(0, ("heartbeat", "g", member))  # the armed session timer fires now
        assert member in gc.shards[0].groups["g"].members
        assert (0, ("heartbeat", "g", member)) in gc._timers  # re-armed for the rest of the session
        r = await group_apis.call(broker, ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": generation,
                                                                 "member_id": member, "group_instance_id": None})
        assert r.error_code == 0
    group_apis.run(scenario)


def test_a_member_session_expires_on_time_when_the_wall_clock_jumps_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jump back must not keep a silent member in the group for an extra hour (the coordinator on a ManualClock
    whose wall reading jumps back an hour)."""
    monkeypatch.setattr(group_apis.FakeConfig, "values",
                        dict(group_apis.FakeConfig.values, **{"group.min.session.timeout.ms": 100}))
    clock = ManualClock()

    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        body = dict(group_apis.JOIN, session_timeout_ms=300, member_id="")
        r = await drive(clock, group_apis.call(broker, ApiKey.JOIN_GROUP, 3, body))  # v3: no MEMBER_ID_REQUIRED
        assert r.error_code == 0
        s = await group_apis.call(broker, ApiKey.SYNC_GROUP, 3, {
            "group_id": "g", "generation_id": r.generation_id, "member_id": r.member_id, "group_instance_id": None,
            "assignments": [{"member_id": r.member_id, "assignment": b"A"}]})
        assert s.error_code == 0
        synced = clock.mono_ms()
        clock.jump_wall(-HOUR_MS)
        await wait_until(lambda: r.member_id not in gc.shards[0].groups["g"].members, clock, max_ms=1_000,
                         what="the session (300 ms) expired despite the wall-clock jump")
        assert 300 <= clock.mono_ms() - synced < 1_000
    group_apis.run(scenario, clock)


def test_group_state_timestamps_and_offset_expiry_stay_on_the_wall_clock(wall: List[float],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """As Kafka (time.milliseconds()): current_state_timestamp is written to __consumer_offsets and offsets expire
    by the wall clock against their commit timestamps, so those follow a jump."""
    monkeypatch.setattr(group_apis.FakeConfig, "values",
                        dict(group_apis.FakeConfig.values, **{"offsets.retention.minutes": 1}))

    async def scenario(broker: Any) -> None:
        gc = broker.group_coordinator
        wall[0] = HOUR_S
        await group_apis.joined_member(broker)
        assert abs(gc.shards[0].groups["g"].current_state_timestamp - clock.wall_ms()) < 60_000
        ts = clock.wall_ms()
        assert await gc.commit_offsets("simple", "", None, -1, {("t", 0): OffsetAndMetadata(5, commit_timestamp=ts)}) \
            == {("t", 0): 0}
        await gc.expire_offsets()
        assert "simple" in gc.shards[0].groups
        wall[0] += 61.0  # past offsets.retention.minutes by the wall clock only
        await gc.expire_offsets()
        assert "simple" not in gc.shards[0].groups
    group_apis.run(scenario)


# ---------------------------------------------------------------------------- transactions (wall-clock, as Kafka)
def test_transaction_timeouts_follow_the_wall_clock_as_in_kafka() -> None:
    """Kafka compares time.milliseconds() with txnStartTimestamp, which is stored in __transaction_state: a jump
    forward past transaction.timeout.ms aborts an open transaction, one back delays the abort. Same here (the
    coordinator's ManualClock jumps its wall reading only, as an NTP step)."""
    async def scenario(env: Any) -> None:
        await env.lead()
        pid, epoch = await env.start_txn(("a", 0))  # transaction.timeout.ms 60 s
        await env.tc.abort_timed_out_transactions()
        assert env.log.states()[-1] == (txn_service.TID, 1)  # still Ongoing
        env.clock.jump_wall(-HOUR_MS)
        await env.tc.abort_timed_out_transactions()
        assert env.log.states()[-1] == (txn_service.TID, 1)
        env.clock.jump_wall(2 * HOUR_MS)  # an hour ahead of the start
        await env.tc.abort_timed_out_transactions()
        await env.completed(5)  # CompleteAbort
        assert await env.tc.end_transaction(txn_service.TID, pid, epoch, False) == ErrorCode.PRODUCER_FENCED
    txn_service.run(scenario)


# ---------------------------------------------------------------------------- delayed produce and fetch
@pytest.mark.parametrize("jump", [HOUR_S, -HOUR_S])
def test_delayed_produce_and_fetch_deadlines_hold_across_a_jump(tmp_path: Any, wall: List[float],
                                                                jump: float) -> None:
    """acks=-1 waits its request timeout and a long-poll its max.wait.ms, measured on the event loop's monotonic
    clock: a jump in the middle of the wait neither cuts nor stretches it."""
    async def main() -> None:
        c = FakeCluster(str(tmp_path), clock=SYSTEM_CLOCK)
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))  # follower 2 never fetches
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, wall.__setitem__, 0, jump)
            t0 = loop.time()
            res = (await asyncio.wait_for(b.rm.append_records(-1, {TP: records(b"a")}, timeout_ms=300), 10))[TP]
            assert res.error_code == ErrorCode.REQUEST_TIMED_OUT
            # >= 0.299: deadlines are set from mono_ms(), whole milliseconds (truncated), so one may end up to 1 ms
            # before 300 ms of the loop's clock (seen: 0.29993 s); a jump would cut the wait to about 0.05 s
            assert loop.time() - t0 >= 0.299
            wall[0] = 0.0
            loop.call_later(0.05, wall.__setitem__, 0, jump)
            t0 = loop.time()
            got = await asyncio.wait_for(b.rm.fetch_messages([(TP, 0, 1 << 20)], 1 << 20, 1 << 20, 300), 10)
            assert got[TP].error_code == 0
            assert loop.time() - t0 >= 0.299
        finally:
            await c.close()
    asyncio.run(main())


# ---------------------------------------------------------------------------- fetch sessions
def _fetch_request(session_id: int, epoch: int) -> Any:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                       "last_fetched_epoch": -1, "log_start_offset": -1,
                                                       "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    frame = memoryview(proto.encode_request(ApiKey.FETCH, 12, 1, "consumer", body))[4:]
    _header, offset = proto.decode_request_header(frame)
    return proto.decode_request(ApiKey.FETCH, 12, frame, offset)


def test_a_fetch_session_is_not_evicted_by_a_jump_forward(tmp_path: Any, wall: List[float]) -> None:
    """Kafka's FetchSessionCache uses the wall clock; here idle time is monotonic (only safer): a jump forward
    past the eviction time, then a new session (which evicts stale ones), leaves the first session usable."""
    async def main() -> None:
        c = FakeCluster(str(tmp_path), clock=SYSTEM_CLOCK)
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            sessions = FetchSessionCache(eviction_ms=60_000)

            async def fetch(session_id: int, epoch: int) -> Dict[str, Any]:
                return await fetch_api.handle(_FakeRequestContext(12, "consumer"), _fetch_request(session_id, epoch),
                                              replica_manager=b.rm, metadata=_FakeMetadata(b.rm),  # type: ignore
                                              fetch_sessions=sessions)
            first = await fetch(0, 0)
            assert first["error_code"] == 0 and first["session_id"] > 0
            wall[0] = HOUR_S
            second = await fetch(0, 0)
            assert second["error_code"] == 0 and second["session_id"] not in (0, first["session_id"])
            again = await fetch(first["session_id"], 1)
            assert again["error_code"] == 0 and again["session_id"] == first["session_id"]
        finally:
            await c.close()
    asyncio.run(main())


# ---------------------------------------------------------------------------- quotas
def test_a_client_quota_throttle_is_neither_stretched_nor_cut() -> None:
    """The throttle time a client earns (and then waits muted, on the monotonic clock: Kafka's ThrottledChannel
    uses nanoseconds) is the same with the wall clock jumping between its requests (the manager on a ManualClock)."""
    def throttles(jumps: List[int]) -> List[int]:
        clock = ManualClock()
        m = ClientQuotaManager("producer_byte_rate", 11, 1, clock=clock)
        m.update(QuotaEntity(client_id="app"), 1000.0)
        out = []
        for j in jumps:
            clock.jump_wall(j)
            out.append(m.record("ANONYMOUS", "app", 6000))
            clock.advance(500)
        return out
    steady = throttles([0] * 6)
    assert steady[-1] > 0  # the client is throttled
    assert throttles([0, HOUR_MS, 0, -2 * HOUR_MS, HOUR_MS, -HOUR_MS]) == steady


def test_a_replication_throttle_ends_on_time_after_a_jump_back() -> None:
    """leader/follower.replication.throttled.rate windows roll on the monotonic clock (Kafka's sensors use the
    wall clock, where a jump back would keep old bytes counted for the length of the jump)."""
    clock = ManualClock()
    q = ReplicationQuotaManager("Leader", num_samples=11, window_size_seconds=1, bound=1000.0, clock=clock.mono_ms)
    q.record(100_000)
    assert q.is_quota_exceeded()
    clock.jump_wall(-HOUR_MS)
    clock.advance(12_000)  # past every window
    assert not q.is_quota_exceeded()
    q.record(100_000)
    clock.jump_wall(2 * HOUR_MS)
    clock.advance(100)
    assert q.is_quota_exceeded()  # a jump forward does not empty the windows either


# ---------------------------------------------------------------------------- idle connections
def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class _Echo:
    CLOSE = object()

    async def handle(self, connection: Any, frame: memoryview) -> Any:
        return [struct.pack(">i", len(frame)) + bytes(frame)]


def test_an_idle_connection_is_not_reaped_early_nor_kept_late() -> None:
    """connections.max.idle.ms is measured as Kafka's Selector does (nanoTime): a jump forward closes nothing, a
    jump back does not keep an idle connection open (the server on a ManualClock whose wall reading jumps)."""
    async def main(idle_ms: int, jump_ms: int, check: Callable[[ManualClock, asyncio.StreamReader,
                                                                  asyncio.StreamWriter], Any]) -> None:
        clock = ManualClock()
        server = SocketServer(_Echo(), [ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], 1 << 20,  # type: ignore
                              connections_max_idle_ms=idle_ms, clock=clock)
        await server.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", server.bound_ports["PLAINTEXT"])
            w.write(_frame(b"hi"))
            assert await asyncio.wait_for(r.readexactly(6), 5) == _frame(b"hi")
            clock.jump_wall(jump_ms)
            await check(clock, r, w)
            w.close()
        finally:
            await server.stop()

    async def still_open(clock: ManualClock, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await advance(clock, 2000)  # four reaper passes (every idle/10), less than the idle time
        w.write(_frame(b"again"))
        assert await asyncio.wait_for(r.readexactly(9), 5) == _frame(b"again")

    async def closed(clock: ManualClock, r: asyncio.StreamReader, _w: asyncio.StreamWriter) -> None:
        await advance(clock, 400)  # past the idle time (300 ms) on the monotonic reading, the wall an hour back
        assert await asyncio.wait_for(r.read(), 5) == b""

    asyncio.run(main(5000, HOUR_MS, still_open))
    asyncio.run(main(300, -HOUR_MS, closed))
