"""The replica fetcher's incremental fetch sessions (KIP-227): a full request opens the session, later ones carry
only the partitions whose position changed and forget the ones no longer fetched; any error starts over."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

from broker.errors import ErrorCode
from broker.replica.fetch_session_handler import FetchSessionHandler

from .harness import TP, FakeCluster, handle_fetch, records, state


def test_handler_sends_changes_and_forgets_removed_partitions() -> None:
    h = FetchSessionHandler()
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    assert h.build({a: 1, b: 1}) == ([a, b], [])  # full: everything
    assert h.handle_response(0, 42) and (h.session_id, h.epoch) == (42, 1)
    assert h.build({a: 1, b: 1}) == ([], [])  # nothing changed
    assert h.handle_response(0, 42) and h.epoch == 2
    send, forget = h.build({a: 2, c: 1})  # a moved, c added, b no longer fetched
    assert sorted(send) == [a, c] and forget == [b]
    assert h.handle_response(0, 42) and h.epoch == 3 and h.sent(b) is None and h.sent(a) == 2
    # an error: the next request is a full one, replacing the session (same id, epoch 0)
    h.handle_error()
    assert h.build({a: 2, c: 1}) == ([a, c], []) and (h.session_id, h.epoch) == (42, 0)
    assert not h.handle_response(int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), 0) and h.is_full
    # a leader that keeps no session: full requests every time
    h2 = FetchSessionHandler()
    h2.build({a: 1})
    assert h2.handle_response(0, 0) and h2.is_full
    assert h2.build({a: 1}) == ([a], [])


class SessionLeader:
    """A leader keeping one fetch session (id 7) in front of the harness's sessionless Fetch handling: every request
    is recorded; the session's partitions are all read (long-polled), as a session's are, and the answer carries
    those the request sent plus those with news (records, an error, a moved high watermark)."""

    def __init__(self, cluster: FakeCluster, leader: int) -> None:
        self.cluster = cluster
        self.leader = leader
        self.requests: List[Any] = []
        self.fail_next: Optional[int] = None
        self.session: Dict[tuple, Any] = {}
        self.reported_hw: Dict[tuple, int] = {}
        #: partitions answered UNKNOWN_TOPIC_ID once and left out of the session (a leader that did not know the
        #: topic id yet)
        self.unknown_once: set = set()

    async def __call__(self, src: int, dst: int, api_key: int, req: Any) -> Optional[dict]:
        if api_key != 1 or dst != self.leader:
            return None
        self.requests.append(req)
        if self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            self.session.clear()
            return {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []}
        if req.session_epoch == 0:
            self.session.clear()
            self.reported_hw.clear()
        for f in req.forgotten_topics_data:
            for p in f.partitions:
                self.session.pop(("t", p), None)
        sent = set()
        refused = []
        for t in req.topics:
            for p in t.partitions:
                if p.partition in self.unknown_once:
                    self.unknown_once.discard(p.partition)
                    refused.append(p.partition)
                    continue
                self.session[("t", p.partition)] = (t.topic_id, p)
                sent.add(p.partition)
        full = SimpleNamespace(
            topics=[SimpleNamespace(topic_id=tid, topic="t", partitions=[p]) for tid, p in self.session.values()],
            replica_state=req.replica_state, replica_id=getattr(req, "replica_id", -1), max_bytes=req.max_bytes,
            min_bytes=req.min_bytes, max_wait_ms=req.max_wait_ms, isolation_level=0)
        resp = await handle_fetch(self.cluster.brokers[dst].rm, full, 17)
        for topic in resp["responses"]:
            keep = []
            for e in topic["partitions"]:
                tp = ("t", e["partition_index"])
                if (e["partition_index"] in sent or e["records"] or e["error_code"]
                        or self.reported_hw.get(tp) != e["high_watermark"]):
                    keep.append(e)
                    self.reported_hw[tp] = e["high_watermark"]
            topic["partitions"] = keep
        if refused:
            resp["responses"].append({"topic": "", "topic_id": req.topics[0].topic_id, "partitions": [
                {"partition_index": p, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "high_watermark": -1,
                 "records": b""} for p in refused]})
        resp["session_id"] = 7
        return resp


def parts_of(req: Any) -> Dict[int, int]:
    return {p.partition: p.fetch_offset for t in req.topics for p in t.partitions}


def test_fetcher_sends_only_changed_partitions_in_its_session(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        leader_srv = SessionLeader(c, 1)
        leader_srv.unknown_once = {3}
        c.intercept = leader_srv
        try:
            leader, follower = c.start(1), c.start(2)
            tps = [("t", p) for p in range(20)]
            for b in (1, 2):
                await c.leader_and_isr(b, *[state(1, 3, [1, 2], [1, 2], tp=tp) for tp in tps])
            await c.wait_until(lambda: len(leader_srv.requests) >= 3, what="a few fetches")
            first = leader_srv.requests[0]
            assert (first.session_id, first.session_epoch) == (0, 0) and len(parts_of(first)) == 20
            # partition 3 failed (the leader kept it out of its session): it backs off, leaves the fetcher's
            # session and comes back with its position sent again
            await c.wait_until(lambda: any(f.partitions == [3] for r in leader_srv.requests for f in
                                         r.forgotten_topics_data), what="partition 3 forgotten")
            await c.wait_until(lambda: ("t", 3) in leader_srv.session, what="partition 3 back in the session")
            n = len(leader_srv.requests)
            await c.wait_until(lambda: len(leader_srv.requests) >= n + 2, what="idle fetches")
            idle = leader_srv.requests[-1]
            assert idle.session_id == 7 and idle.session_epoch >= 1 and parts_of(idle) == {}
            n = len(leader_srv.requests)
            await leader.rm.append_records(1, {TP: records(b"a"), ("t", 3): records(b"c")})
            await c.wait_until(lambda: follower.rm.get_partition(TP).log.log_end_offset == 1, what="replication")
            await c.wait_until(lambda: follower.rm.get_partition(("t", 3)).log.log_end_offset == 1,
                             what="replication of the partition that failed once")
            await c.wait_until(lambda: any(parts_of(r) == {0: 1, 3: 1} for r in leader_srv.requests[n:]),
                             what="an incremental fetch carrying the moved partitions only")
            # the leader lost the session: the next request opens a new one (a full request), without a backoff
            leader_srv.fail_next = int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            n = len(leader_srv.requests)
            await c.wait_until(lambda: any(r.session_epoch == 0 and len(parts_of(r)) == 20
                                         for r in leader_srv.requests[n + 1:]), what="a new full fetch")
            await leader.rm.append_records(1, {("t", 5): records(b"b")})
            await c.wait_until(lambda: follower.rm.get_partition(("t", 5)).log.log_end_offset == 1,
                             what="replication in the new session")
            # a partition stops being fetched: the next request forgets it
            await follower.rm.fetcher_manager.remove_fetcher_for_partitions([("t", 19)])
            n = len(leader_srv.requests)
            await c.wait_until(lambda: any(f.partitions == [19] for r in leader_srv.requests[n:]
                                         for f in r.forgotten_topics_data), what="partition 19 forgotten")
        finally:
            await c.close()

    asyncio.run(main())


def test_handler_compares_only_the_partitions_said_to_have_changed() -> None:
    h = FetchSessionHandler()
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    h.build({a: 1, b: 1, c: 1})
    assert h.handle_response(0, 9)
    # only b said to have changed: a's new value is not looked at (it is sent once it is said to change)
    assert h.build({a: 5, b: 2, c: 1}, changed={b}) == ([b], [])
    assert h.handle_response(0, 9) and h.sent(b) == 2 and h.sent(a) == 1
    assert h.build({a: 5, c: 1}, changed={a, b}) == ([a], [b])  # a moved, b removed
    assert h.handle_response(0, 9) and h.sent(a) == 5 and h.sent(b) is None and h.sent(c) == 1
    # a failed request: the changes were not applied, the next request is full
    h.build({a: 6, c: 1}, changed={a})
    h.handle_error()
    assert h.build({a: 6, c: 1}, changed={a}) == ([a, c], [])


def test_an_idle_fetcher_looks_only_at_the_partitions_that_changed(tmp_path, monkeypatch) -> None:
    from broker.replica import fetcher as fetcher_module
    monkeypatch.setattr(fetcher_module, "SWEEP_MS", 10 ** 12)  # no periodic sweep: what is looked at is what changed

    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader, follower = c.start(1), c.start(2)
            tps = [("t", p) for p in range(40)]
            for b in (1, 2):
                await c.leader_and_isr(b, *[state(1, 3, [1, 2], [1, 2], tp=tp) for tp in tps])
            await leader.rm.append_records(1, {tp: records(b"x") for tp in tps})
            await c.wait_until(lambda: all(follower.rm.get_partition(tp).log.high_watermark == 1 for tp in tps),
                             what="replicated")
            looked: List[Any] = []
            real = follower.rm.get_partition
            follower.rm.get_partition = lambda tp: (looked.append(tp), real(tp))[1]  # type: ignore[assignment]
            n = len(c.requests)
            await c.wait_until(lambda: sum(1 for r in c.requests[n:] if r[2] == 1) >= 3, what="idle fetches")
            del looked[:]
            await leader.rm.append_records(1, {("t", 7): records(b"y")})
            await c.wait_until(lambda: real(("t", 7)).log.high_watermark == 2, what="the append replicated")
            n = len(c.requests)
            await c.wait_until(lambda: sum(1 for r in c.requests[n:] if r[2] == 1) >= 2, what="more fetches")
            assert looked and set(looked) == {("t", 7)}, sorted(set(looked))
            # the fetcher still follows every partition: another append anywhere arrives
            await leader.rm.append_records(1, {("t", 33): records(b"z")})
            await c.wait_until(lambda: real(("t", 33)).log.high_watermark == 2, what="a second partition's append")
        finally:
            await c.close()

    asyncio.run(main())
