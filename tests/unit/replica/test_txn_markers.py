"""ReplicaManager and transactions: WriteTxnMarkers appends (acks=all, coordinator origin, the marker listener),
read_committed fetches (LSO bound, aborted transactions, waking when the LSO moves), follower replication of
markers and the transaction index."""
from __future__ import annotations

import asyncio
import struct
from typing import Any, List, Tuple

from broker.errors import ErrorCode
from broker.protocol.records.builder import build_batch
from broker.replica.manager import FetchPartitionInfo
from broker.storage.config import LogConfig

from .harness import TOPIC, TP, FakeCluster, drive, records, state

PID = 4242


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def txn_records(seq: int, *values: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", v, [], 1_700_000_000_000) for v in values], producer_id=PID,
                                 producer_epoch=0, base_sequence=seq, is_transactional=True))


def test_markers_are_appended_as_leader_and_the_listener_hears_of_them(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            rm = b.rm
            heard: List[Tuple[str, int, int, bool]] = []

            async def async_listener(topic: str, partition: int, pid: int, committed: bool) -> None:
                await asyncio.sleep(0)
                heard.append((topic, partition, pid, committed))

            rm.add_txn_marker_listener(async_listener)
            assert (await drive(rm, rm.append_records(-1, {TP: txn_records(0, b"a", b"b")})))[TP].error_code == 0
            assert b.log.last_stable_offset == 0
            before = c.clock.wall_ms()
            errors = await drive(rm, rm.append_txn_markers(PID, 0, 3, False, [TP, (TOPIC, 7)], 5000))
            assert errors == {TP: 0, (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            marker = bytes(b.log.read(2, 1 << 20).records.read())
            assert before <= struct.unpack_from(">q", marker, 35)[0] <= c.clock.wall_ms()  # max timestamp: the clock's
            assert heard == [(TOPIC, 0, PID, False)]
            assert b.log.last_stable_offset == b.log.log_end_offset == 3
            assert b.log_manager.owners.call(TP, b.log.active_producers)[0].coordinator_epoch == 3
            # a zombie coordinator (older coordinator epoch) is fenced; nothing is appended, nobody hears of it
            assert await drive(rm, rm.append_txn_markers(PID, 0, 2, True, [TP], 5000)) == {
                TP: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
            assert await drive(rm, rm.append_txn_markers(PID, 0, 3, True, [TP], 5000)) == {TP: 0}  # the same coordinator epoch again
            assert len(heard) == 2 and b.log.log_end_offset == 4

            def failing(topic: str, partition: int, pid: int, committed: bool) -> None:
                raise RuntimeError("group coordinator failed")

            rm.add_txn_marker_listener(failing)
            assert await drive(rm, rm.append_txn_markers(PID, 0, 3, True, [TP], 5000)) == {TP: ErrorCode.UNKNOWN_SERVER_ERROR}
        finally:
            await c.close()

    run(main())


def test_markers_wait_for_the_isr_like_acks_all(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), log_config=LogConfig(min_insync_replicas=2, file_delete_delay_ms=0))
        try:
            b1, b2 = c.start(1), c.start(2)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            await c.leader_and_isr(2, state(1, 0, [1, 2], [1, 2]))
            heard: List[Any] = []
            b1.rm.add_txn_marker_listener(lambda *a: heard.append(a))
            assert (await drive(b1.rm, b1.rm.append_records(-1, {TP: txn_records(0, b"a")})))[TP].error_code == 0
            assert await drive(b1.rm, b1.rm.append_txn_markers(PID, 0, 0, True, [TP], 10000)) == {TP: 0}
            assert heard == [(TOPIC, 0, PID, True)]
            await c.wait_until(lambda: b2.log.log_end_offset == 2, what="the follower has the marker")
            assert b2.log.producer_state.last_entry(PID).current_txn_first_offset == -1
            # the marker is never answered before the HW passes it: no follower, no answer within the timeout
            await c.crash(2)
            assert await drive(b1.rm, b1.rm.append_txn_markers(PID, 0, 0, False, [TP], 100)) == {TP: ErrorCode.REQUEST_TIMED_OUT}
            assert len(heard) == 1
            # a follower of the partition refuses markers; an ISR below min.insync.replicas too
            b2 = c.start(2)
            await c.leader_and_isr(2, state(1, 1, [1], [1, 2]))
            assert await drive(b2.rm, b2.rm.append_txn_markers(PID, 0, 0, False, [TP], 100)) == {
                TP: ErrorCode.NOT_LEADER_OR_FOLLOWER}
            await c.leader_and_isr(1, state(1, 1, [1], [1, 2]))
            assert await drive(b1.rm, b1.rm.append_txn_markers(PID, 0, 0, False, [TP], 100)) == {TP: ErrorCode.NOT_ENOUGH_REPLICAS}
        finally:
            await c.close()

    run(main())


def test_follower_builds_the_same_transaction_index(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b1, b2 = c.start(1), c.start(2)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            await c.leader_and_isr(2, state(1, 0, [1, 2], [1, 2]))
            assert (await drive(b1.rm, b1.rm.append_records(-1, {TP: txn_records(0, b"a", b"b")})))[TP].error_code == 0
            assert await drive(b1.rm, b1.rm.append_txn_markers(PID, 0, 0, False, [TP], 10000)) == {TP: 0}
            await c.wait_until(lambda: b2.log.log_end_offset == 3, what="replication")
            def index(plog: Any) -> list:
                return [(s.base_offset, t) for s in plog.segments for t in s.txn_index.all_aborted_txns()]

            assert index(b1.log) == index(b2.log) and [t[1][:3] for t in index(b1.log)] == [(PID, 0, 2)]
        finally:
            await c.close()

    run(main())


def test_read_committed_fetch_stops_at_the_lso_and_wakes_when_it_moves(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            rm = b.rm
            await drive(rm, rm.append_records(-1, {TP: records(b"plain")}))           # 0
            await drive(rm, rm.append_records(-1, {TP: txn_records(0, b"t1")}))       # 1 (open)
            await drive(rm, rm.append_records(-1, {TP: records(b"plain2")}))          # 2
            committed = (await drive(rm, rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1, 0, 1)))[TP]
            assert (committed.last_stable_offset, committed.high_watermark) == (1, 3)
            assert committed.aborted_transactions == [] and committed.size > 0
            uncommitted = (await drive(rm, rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1, 0, 0)))[TP]
            assert uncommitted.aborted_transactions is None and uncommitted.size > committed.size
            # parked: nothing below the LSO past offset 1 until the transaction ends
            waiting = asyncio.ensure_future(rm.fetch_messages([(TP, FetchPartitionInfo(1, 1 << 20))], 1 << 20, 1,
                                                              10000, 1))
            await c.wait_until(lambda: rm.delayed_fetch_purgatory.num_delayed(TP) == 1 or waiting.done(),
                             what="the read_committed fetch to park on the partition")
            assert not waiting.done()
            assert await drive(rm, rm.append_txn_markers(PID, 0, 0, False, [TP], 5000)) == {TP: 0}  # 3
            res = (await asyncio.wait_for(waiting, 8))[TP]
            assert res.last_stable_offset == 4 and res.size > 0
            assert res.aborted_transactions == [(PID, 1)]
        finally:
            await c.close()

    run(main())
