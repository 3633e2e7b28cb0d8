"""Replica fetcher: error handling and backoff, fenced partitions, fetcher allocation, request contents."""
from __future__ import annotations

import asyncio
from typing import Any, Optional

from broker.errors import ErrorCode
from broker.replica.fetcher import fetcher_id_for, java_string_hash

from .harness import TOPIC_ID, TP, FakeCluster, records, state


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def fetch_error_response(req: Any, code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": t.topic_id, "partitions": [
            {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""}
            for p in t.partitions]} for t in req.topics]}


def fetches_from(c: FakeCluster, src: int, since: int = 0) -> list:
    return [body for s, _, k, body in c.requests[since:] if s == src and k == 1]


def test_fetcher_ids_follow_kafkas_hash() -> None:
    assert java_string_hash("abc") == 96354
    assert java_string_hash("") == 0
    assert java_string_hash("__consumer_offsets") == -970371369  # Java: "__consumer_offsets".hashCode()
    assert fetcher_id_for(("my-topic", 7), 3) == 1  # Java: abs(31 * "my-topic".hashCode() + 7) % 3
    assert fetcher_id_for(("t", 0), 1) == 0
    assert {fetcher_id_for(("t", p), 4) for p in range(8)} == {0, 1, 2, 3}


def test_fetch_request_contents(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        c.fetch_sessions = False  # every request is a full one: the last shows every field
        try:
            leader, follower = c.start(1), c.start(2)
            tp1 = ("t", 1)
            for b in (1, 2):
                await c.leader_and_isr(b, state(1, 3, [1, 2], [1, 2]), state(1, 3, [1, 2], [1, 2], tp=tp1))
            await leader.rm.append_records(1, {TP: records(b"a"), tp1: records(b"b")})
            # both partitions replicated, and a fetch sent after that (the one that shows their epochs)
            await c.wait_until(lambda: all(follower.rm.get_partition(tp).log.log_end_offset == 1 for tp in (TP, tp1)))
            await c.wait_until(lambda: [p["fetch_offset"] for t in fetches_from(c, 2)[-1]["topics"]
                                      for p in t["partitions"]] == [1, 1])
            body = fetches_from(c, 2)[-1]
            assert body["replica_state"] == {"replica_id": 2, "replica_epoch": 102}
            assert (body["max_wait_ms"], body["min_bytes"], body["max_bytes"]) == (200, 1, 10485760)
            # a full request opening a fetch session (KIP-227); this leader keeps none (session id 0 in its answers)
            assert body["session_id"] == 0 and body["session_epoch"] == 0 and body["isolation_level"] == 0
            [topic] = body["topics"]
            assert topic["topic_id"] == TOPIC_ID
            parts = {p["partition"]: p for p in topic["partitions"]}
            assert set(parts) == {0, 1}  # one request for both partitions
            assert parts[0]["current_leader_epoch"] == 3 and parts[0]["partition_max_bytes"] == 1048576
            assert parts[0]["last_fetched_epoch"] == 3 and parts[0]["fetch_offset"] == 1
            assert len(follower.rm.fetcher_manager.fetchers) == 1
            # the server prefixes "broker-<id>-": Kafka's fetcher client id is "broker-<id>-fetcher-<n>"
            assert [f.channel.client_id for f in follower.rm.fetcher_manager.fetchers.values()] == ["fetcher-0"]
        finally:
            await c.close()

    run(main())


def test_retriable_errors_back_off_and_recover(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = c.start(1), c.start(2)
            errors = {"code": ErrorCode.NOT_LEADER_OR_FOLLOWER}

            async def intercept(src: int, dst: int, api_key: int, req: Any) -> Optional[dict]:
                if api_key == 1 and errors["code"]:
                    return fetch_error_response(req, errors["code"])
                return None

            c.intercept = intercept
            await c.leader_and_isr(1, state(1, 0, [1], [1, 2]))
            await leader.rm.append_records(1, {TP: records(b"a")})
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            fm = follower.rm.fetcher_manager
            await c.wait_until(lambda: len(fetches_from(c, 2)) >= 1)
            await c.wait_until(lambda: fm.fetch_state(TP) is not None and fm.fetch_state(TP).is_delayed(c.clock.mono_ms()),
                             what="backoff after NOT_LEADER_OR_FOLLOWER")
            n = len(fetches_from(c, 2))
            errors["code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            await c.wait_until(lambda: len(fetches_from(c, 2)) > n, what="retry after the backoff")
            assert fm.fetch_state(TP) is not None
            # Leader unreachable: the whole request fails and is retried.
            errors["code"] = 0
            c.down.add(1)
            n = len(fetches_from(c, 2))
            await c.wait_until(lambda: len(fetches_from(c, 2)) > n + 1, what="retries while unreachable")
            c.down.discard(1)
            await c.wait_until(lambda: follower.log.log_end_offset == 1, what="recovered")
        finally:
            await c.close()

    run(main())


def test_fenced_partition_waits_for_the_next_leader_and_isr(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = c.start(1), c.start(2)
            # The leader already moved to epoch 1; the follower still fetches with epoch 0.
            await c.leader_and_isr(1, state(1, 1, [1], [1, 2]))
            await leader.rm.append_records(1, {TP: records(b"a")})
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            fm = follower.rm.fetcher_manager
            await c.wait_until(lambda: TP in fm.failed_partitions, what="partition marked failed")
            assert fm.fetch_state(TP) is None  # no fetcher fetches it any more
            await c.leader_and_isr(2, state(1, 1, [1], [1, 2]))
            assert TP not in fm.failed_partitions
            await c.wait_until(lambda: follower.log.log_end_offset == 1, what="fetching again")
            await c.wait_until(lambda: leader.rm.get_partition(TP).isr == (1, 2), what="joined the ISR")
        finally:
            await c.close()

    run(main())


def test_becoming_leader_stops_the_fetcher(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = c.start(1), c.start(2)
            for b in (1, 2):
                await c.leader_and_isr(b, state(1, 0, [1, 2], [1, 2]))
            await leader.rm.append_records(-1, {TP: records(b"a")}, timeout_ms=5000)
            fm = follower.rm.fetcher_manager
            assert fm.fetch_state(TP) is not None
            await c.crash(1)
            await c.leader_and_isr(2, state(2, 1, [2], [1, 2]))
            assert fm.fetch_state(TP) is None
            assert not fm.fetchers  # the idle fetcher was shut down
            p = follower.rm.get_partition(TP)
            assert p.is_leader and p.leader_epoch_start_offset == 1
            assert follower.log.leader_epoch_cache.entries == [(0, 0), (1, 1)]
            assert (await follower.rm.append_records(-1, {TP: records(b"b")}))[TP].base_offset == 1
        finally:
            await c.close()

    run(main())


def test_partition_without_a_local_log_backs_off_instead_of_spinning(tmp_path) -> None:
    async def main() -> None:
        from broker.replica.fetcher import InitialFetchState
        c = FakeCluster(str(tmp_path))
        try:
            c.start(1)
            follower = c.start(2)
            fm = follower.rm.fetcher_manager
            ghost = ("ghost", 0)
            await fm.add_fetcher_for_partitions({ghost: InitialFetchState(None, c.node(1), 0, 0),
                                                 ("ghost", 1): InitialFetchState(None, c.node(1), 0, -1)})
            await c.wait_until(lambda: all(fm.fetch_state(tp) is not None and fm.fetch_state(tp).is_delayed(c.clock.mono_ms())
                                         for tp in (ghost, ("ghost", 1))), what="backoff")
            assert not fetches_from(c, 2)
        finally:
            await c.close()

    run(main())
