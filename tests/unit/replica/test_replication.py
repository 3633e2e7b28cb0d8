"""End-to-end replication between in-process brokers: real Logs, real fetchers, real wire codecs."""
from __future__ import annotations

import asyncio

from broker.errors import ErrorCode
from broker.replica.config import ReplicaConfig
from broker.storage.checkpoints import OffsetCheckpointFile

from .harness import TP, FakeCluster, drive, read_all_bytes, records, state, values_of


def run(coro):
    return asyncio.run(coro)


def test_acks_all_replicates_to_every_follower_and_commits(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            for b in (1, 2, 3):
                c.start(b)
            for b in (1, 2, 3):
                code, errs = await c.leader_and_isr(b, state(1, 0, [1, 2, 3]))
                assert (code, errs) == (0, {TP: 0})
            leader = c.brokers[1]
            res = (await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"a", b"b")}, timeout_ms=20000)))[TP]
            assert (res.error_code, res.base_offset) == (0, 0)
            assert leader.log.high_watermark == 2
            res = (await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"c")}, timeout_ms=20000)))[TP]
            assert (res.error_code, res.base_offset) == (0, 2)
            assert all(c.brokers[b].log.log_end_offset == 3 for b in (2, 3))
            # A follower learns the HW (3) from a later fetch response.
            await drive(leader.rm, leader.rm.append_records(1, {TP: records(b"d")}))
            for b in (2, 3):
                f = c.brokers[b]
                await c.wait_until(lambda: f.log.high_watermark >= 3, what="follower HW")
                assert values_of(f.log)[:3] == [b"a", b"b", b"c"]
            await c.wait_until(lambda: all(c.brokers[b].log.log_end_offset == 4 for b in (2, 3)))
            assert read_all_bytes(c.brokers[2].log) == read_all_bytes(leader.log) == read_all_bytes(c.brokers[3].log)
            # The leader-epoch cache was replicated with the batches.
            assert c.brokers[2].log.leader_epoch_cache.entries == [(0, 0)]
            # HW checkpoint
            await leader.rm.checkpoint_high_watermarks()
            hw = OffsetCheckpointFile(str(tmp_path / "broker-1" / "replication-offset-checkpoint")).read()
            assert hw[TP] == leader.log.high_watermark
        finally:
            await c.close()

    run(main())


def test_parked_follower_fetch_is_woken_by_an_append(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            await drive(leader.rm, leader.rm.append_records(1, {TP: records(b"x")}))
            from broker.replica.manager import FetchPartitionInfo
            loop = asyncio.get_running_loop()
            # Follower 2 is caught up (offset 1): its fetch parks for up to 10 s.
            t0 = loop.time()
            task = asyncio.ensure_future(leader.rm.fetch_messages(
                [(TP, FetchPartitionInfo(1, 1 << 20, 0, 0, 0))], 1 << 20, 1, 10000, replica_id=2, replica_epoch=5))
            await c.wait_until(lambda: len(leader.rm.delayed_fetch_purgatory) == 1, what="parked fetch")
            assert not task.done()
            await drive(leader.rm, leader.rm.append_records(1, {TP: records(b"y")}))
            res = (await asyncio.wait_for(task, 8.0))[TP]
            assert loop.time() - t0 < 8.0   # the append completed it, not its 10 s wait
            assert res.error_code == 0 and res.size > 0
            assert res.log_end_offset == 2
        finally:
            await c.close()

    run(main())


def test_follower_fetch_that_advances_hw_completes_waiting_produce(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1, 2], [1, 2]))
            from broker.replica.manager import FetchPartitionInfo
            produce = asyncio.ensure_future(leader.rm.append_records(-1, {TP: records(b"v")}, timeout_ms=10000))
            await c.wait_until(lambda: leader.rm.delayed_produce_purgatory.num_delayed() == 1, what="delayed produce")
            # Follower 2 reads the record (offset 0), then fetches at 1: that fetch acknowledges it.
            r = (await drive(leader.rm, leader.rm.fetch_messages([(TP, FetchPartitionInfo(0, 1 << 20, 0))], 1 << 20, 1, 0,
                                                replica_id=2)))[TP]
            assert r.size > 0 and not produce.done()
            await drive(leader.rm, leader.rm.fetch_messages([(TP, FetchPartitionInfo(1, 1 << 20, 0, 0, 0))], 1 << 20, 1, 0,
                                           replica_id=2))
            # Completed in the same loop turn as the fetch (the task itself resumes on the next turn).
            assert leader.rm.delayed_produce_purgatory.num_delayed() == 0
            assert (await asyncio.wait_for(produce, 10))[TP].error_code == 0
            assert leader.log.high_watermark == 1
        finally:
            await c.close()

    run(main())


def test_follower_hw_and_log_start_offset_follow_the_leader(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            for b in (1, 2):
                c.start(b)
                await c.leader_and_isr(b, state(1, 0, [1, 2], [1, 2]))
            leader, follower = c.brokers[1], c.brokers[2]
            for i in range(5):
                res = await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"%d" % i)}, timeout_ms=5000))
                assert res[TP].error_code == 0
            await c.wait_until(lambda: follower.log.high_watermark == 4, what="follower HW 4")
            # DeleteRecords waits until the follower's log start offset reached 3 (the low watermark).
            code, low = await drive(leader.rm, leader.rm.delete_records(TP, 3, timeout_ms=5000))
            assert (code, low) == (0, 3)
            assert follower.log.log_start_offset == 3
            await drive(leader.rm, leader.rm.append_records(-1, {TP: records(b"5")}, timeout_ms=5000))
            await c.wait_until(lambda: follower.log.high_watermark == 5, what="follower HW 5")
            assert follower.log.log_start_offset == 3
        finally:
            await c.close()

    run(main())


def test_out_of_range_follower_restarts_at_leader_log_start(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            leader = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1, 2]))
            for i in range(6):
                await drive(leader.rm, leader.rm.append_records(1, {TP: records(b"%d" % i)}))
            assert (await drive(leader.rm, leader.rm.delete_records(TP, 4, timeout_ms=0)))[0] in (0, ErrorCode.REQUEST_TIMED_OUT)
            assert leader.log.log_start_offset == 4
            follower = c.start(2)
            await c.leader_and_isr(2, state(1, 0, [1], [1, 2]))
            await c.wait_until(lambda: follower.log.log_end_offset == 6, what="follower caught up")
            assert follower.log.log_start_offset == 4
            assert any(src == 2 and key == 2 for src, _, key, _ in c.requests)  # ListOffsets
            assert values_of(follower.log) == [b"4", b"5"]
            assert read_all_bytes(follower.log) == read_all_bytes(leader.log)
            # ...and it joins the ISR through AlterPartition.
            await c.wait_until(lambda: leader.rm.get_partition(TP).isr == (1, 2), what="ISR expansion")
            assert leader.apm.submissions[-1][3] == [1, 2]
        finally:
            await c.close()

    run(main())


def test_out_of_range_follower_ahead_of_new_leader_truncates_to_its_end(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), config=ReplicaConfig(replica_fetch_wait_max_ms=200, replica_fetch_backoff_ms=20,
                                                            inter_broker_protocol_version="2.6"))
        try:
            # Broker 2 wrote 4 records as leader (epoch 0), broker 1 has only 2: an unclean election makes 1
            # the leader (epoch 1) with an empty epoch cache (old message format: no epochs known).
            b1, b2 = c.start(1), c.start(2)
            await c.leader_and_isr(2, state(2, 0, [2], [1, 2]))
            for i in range(4):
                await drive(b2.rm, b2.rm.append_records(1, {TP: records(b"%d" % i)}))
            await c.leader_and_isr(1, state(2, 0, [2], [1, 2]))
            await c.wait_until(lambda: b1.log.log_end_offset == 4)
            await c.crash(1)
            await c.crash(2)
            b1 = c.start(1)
            # Forget broker 1's last two records and its epochs, and its HW: it comes back with a short log.
            b1.log_manager.owners.call(TP, lambda: b1.log_manager.get_log(TP).truncate_to(2))
            b1.log_manager.get_log(TP).leader_epoch_cache.clear()
            await c.leader_and_isr(1, state(1, 1, [1], [1, 2]))
            b1.log.leader_epoch_cache.clear()
            b2 = c.start(2)
            b2.log_manager.owners.call(TP, lambda: b2.log_manager.get_log(TP).update_high_watermark(4))
            await c.leader_and_isr(2, state(1, 1, [1], [1, 2]))
            # Broker 2 starts at its HW (4) > leader LEO (2): OFFSET_OUT_OF_RANGE -> truncate to 2.
            await c.wait_until(lambda: b2.log.log_end_offset == 2 and b2.rm.fetcher_manager.fetch_state(TP) is not None
                             and b2.rm.fetcher_manager.fetch_state(TP).fetch_offset == 2, what="truncated to 2")
            assert any(src == 2 and key == 2 for src, _, key, _ in c.requests)  # ListOffsets
            await drive(b1.rm, b1.rm.append_records(1, {TP: records(b"new")}))
            await c.wait_until(lambda: b2.log.log_end_offset == 3)
            assert values_of(b2.log) == [b"0", b"1", b"new"]
            assert read_all_bytes(b2.log) == read_all_bytes(b1.log)
        finally:
            await c.close()

    run(main())


def test_failover_under_load_keeps_every_acknowledged_record(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            for b in (1, 2, 3):
                c.start(b)
                await c.leader_and_isr(b, state(1, 0, [1, 2, 3]))
            acked = []

            async def produce(rm, tag: bytes) -> None:
                res = (await drive(rm, rm.append_records(-1, {TP: records(tag)}, timeout_ms=5000)))[TP]
                if res.error_code == 0:
                    acked.append(tag)

            await asyncio.gather(*(produce(c.brokers[1].rm, b"a%d" % i) for i in range(30)))
            assert len(acked) == 30
            await c.crash(1)
            for b in (2, 3):
                await c.leader_and_isr(b, state(2, 1, [2, 3]))
            await asyncio.gather(*(produce(c.brokers[2].rm, b"b%d" % i) for i in range(30)))
            assert len(acked) == 60
            c.start(1)
            await c.leader_and_isr(1, state(2, 1, [2, 3]))
            logs = [c.brokers[b].log for b in (1, 2, 3)]
            await c.wait_until(lambda: len({read_all_bytes(lg) for lg in logs}) == 1
                             and logs[0].log_end_offset == logs[1].log_end_offset, what="identical logs")
            assert sorted(values_of(logs[0])) == sorted(acked)
            await c.wait_until(lambda: c.brokers[2].rm.get_partition(TP).isr == (2, 3, 1), what="rejoined the ISR")
        finally:
            await c.close()

    run(main())
