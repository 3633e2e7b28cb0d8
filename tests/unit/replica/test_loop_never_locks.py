"""The event loop never waits for a Log's lock (issue 20): with another thread holding it, as an I/O worker does
across a disk write, the loop still moves the HW (a follower's fetch, an append), reads the HW, LSO and log start
offset, answers ListOffsets for the latest offset, applies a topic config and sizes the log; a follower's read of
the hot tail is made on the loop all the same (it takes no lock), and goes to a worker only while a truncation,
deletion or swap is under way. A read_committed fetch parked at the LSO completes once a
follower's fetch moves the HW past the transaction's marker, the LSO having moved with the HW alone."""
from __future__ import annotations

import asyncio
from typing import Any

from broker.protocol.records.builder import build_batch
from broker.replica.manager import FetchPartitionInfo, _read_logs_on_loop, _ReadJob
from broker.storage.config import LogConfig

from ..storage.lock_helpers import lock_held_elsewhere
from .harness import TOPIC, TP, FakeCluster, records, state

PID = 4343


def txn_records(seq: int, *values: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", v, [], 1_700_000_000_000) for v in values], producer_id=PID,
                                 producer_epoch=0, base_sequence=seq, is_transactional=True))


async def follower_fetch(rm: Any, offset: int) -> Any:
    """Broker 2's Fetch at ``offset`` (sessionless, no epoch: the leader records its position before reading)."""
    return (await rm.fetch_messages([(TP, FetchPartitionInfo(offset, 1 << 20))], 1 << 20, 1, 0, replica_id=2))[TP]


def test_loop_paths_do_not_wait_for_the_log_lock(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)  # a worker thread, as in the broker
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            rm, p = b.rm, b.rm.get_partition(TP)
            assert (await rm.append_records(1, {TP: txn_records(0, b"a", b"b")}))[TP].error_code == 0  # 0-1, open
            assert (await rm.append_records(1, {TP: records(b"c")}))[TP].error_code == 0               # 2
            plog = p.log
            with lock_held_elsewhere(plog) as still_held:
                assert p.update_follower_fetch_state(2, -1, 3, 0, c.clock.mono_ms())  # the HW moves to 3
                assert (plog.high_watermark, plog.last_stable_offset, plog.log_start_offset) == (3, 0, 0)
                assert await rm.list_offset(TP, -1, 1) == (0, -1, 0, 0)     # latest, read_committed: the LSO
                assert await rm.list_offset(TP, -1, 0) == (0, -1, 3, 0)     # read_uncommitted: the HW
                assert rm._unchanged(TP, FetchPartitionInfo(0, 100, known=(3, 0, 0)), -1, "lso")
                rm.update_config(TOPIC, LogConfig(file_delete_delay_ms=0, retention_ms=60000))
                assert plog.size_bytes > 0
                read = _read_logs_on_loop([_ReadJob(TP, p, plog, 2, 1 << 20, "leo", 0)], 1 << 20, True)
                assert read is not None and read[TP].error_code == 0  # on the loop, lock held elsewhere
                assert read[TP].records is not None and read[TP].records.read()[:8] == (2).to_bytes(8, "big")
                assert rm.start_transaction_verification(TP, PID, 0) is None  # its transaction is open
                assert still_held(), "a loop-side call waited for the Log's lock"
            assert plog.config.retention_ms == 60000
            # while a truncation, deletion or swap is under way, the loop's read goes to a worker instead of waiting
            with plog._lock:
                plog._begin_layout_change()  # a change begun, its view not published yet
            with lock_held_elsewhere(plog) as still_held:
                assert _read_logs_on_loop([_ReadJob(TP, p, plog, 2, 1 << 20, "leo", 0)], 1 << 20, True) is None
                assert still_held()
            with plog._lock:
                plog._publish()
            assert _read_logs_on_loop([_ReadJob(TP, p, plog, 2, 1 << 20, "leo", 0)], 1 << 20, True) is not None
            assert not plog._lock._is_owned()
        finally:
            await c.close()

    asyncio.run(main())


def test_a_parked_read_committed_fetch_completes_when_the_hw_passes_the_marker(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)  # a worker thread, as in the broker
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            rm = b.rm
            plog = b.log
            assert (await rm.append_records(1, {TP: txn_records(0, b"a", b"b")}))[TP].error_code == 0  # 0-1
            await follower_fetch(rm, 2)
            assert (plog.high_watermark, plog.last_stable_offset) == (2, 0)
            consumer = asyncio.ensure_future(rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20))], 1 << 20, 1,
                                                               10000, 1))
            await c.wait_real(lambda: rm.delayed_fetch_purgatory.num_delayed() > 0, 5, "the consumer's fetch parked")
            assert not consumer.done()  # parked: nothing below the LSO
            marker = asyncio.ensure_future(rm.append_txn_markers(PID, 0, 0, True, [TP], 10000))  # 2: COMMIT
            await c.wait_real(lambda: plog.log_end_offset == 3, 5, "the marker appended")
            for _ in range(50):  # loop turns only: the clock stands still, so the parked fetch cannot expire
                await asyncio.sleep(0)
            assert plog.high_watermark == 2 and not marker.done() and not consumer.done()
            with lock_held_elsewhere(plog) as still_held:
                follower = asyncio.ensure_future(follower_fetch(rm, 3))  # moves the HW past the marker
                await c.wait_real(lambda: plog.high_watermark == 3, 5, "the follower's fetch to move the HW")
                assert plog.last_stable_offset == 3  # the marker is below the HW: without the producer state
                assert await asyncio.wait_for(marker, 5) == {TP: 0}  # acks=-1 answered without the lock
                assert still_held()
            res = (await asyncio.wait_for(consumer, 8))[TP]
            assert (res.high_watermark, res.last_stable_offset) == (3, 3)
            assert res.size > 0 and res.aborted_transactions == []
            await asyncio.wait_for(follower, 8)
        finally:
            await c.close()

    asyncio.run(main())
