"""A Produce spread over many partitions: the per-partition fast paths of ReplicaManager.append_records (the HW of
a leader without followers moved by the append itself, acks=-1 answered at once when nothing has to wait, topic
stats counted per topic, the appends' jobs run one worker at a time) give the answers the general paths give."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List, Tuple

from broker.errors import ErrorCode
from broker.stats import BrokerTopicStats
from broker.replica.io_workers import IoWorkers
from broker.replica.purgatory import DelayedFetch

from .harness import TOPIC, FakeCluster, drive, records, state

N = 40


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def tps(n: int = N) -> List[Tuple[str, int]]:
    return [(TOPIC, i) for i in range(n)]


async def _leaders(c: FakeCluster, isr: List[int], replicas: List[int], n: int = N) -> Any:
    b = c.start(1)
    await c.leader_and_isr(1, *[state(1, 0, isr, replicas, tp=tp) for tp in tps(n)])
    return b


def test_spread_produce_to_leaders_without_followers_moves_each_hw_with_the_append(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = await _leaders(c, [1], [1])
            rm = b.rm
            rm.topic_stats = stats = BrokerTopicStats()
            # a consumer parked on one partition's HW is woken by the append that moves it
            parked = DelayedFetch(10_000, [(TOPIC, 3)], rm.get_partition, False)
            assert not rm.delayed_fetch_purgatory.try_complete_else_watch(parked, parked.watched_keys())
            first = await drive(rm, rm.append_records(1, {tp: records(b"a", b"b") for tp in tps()}))
            assert parked.completed and len(rm.delayed_fetch_purgatory) == 0
            second = await drive(rm, rm.append_records(1, {tp: records(b"c") for tp in tps()}))
            for tp in tps():
                assert (first[tp].error_code, first[tp].base_offset, first[tp].last_offset) == (0, 0, 1)
                assert (second[tp].error_code, second[tp].base_offset) == (0, 2)
                plog = rm.get_partition(tp).log
                assert plog.high_watermark == plog.log_end_offset == 3
            size = sum(len(records(b"a", b"b")) + len(records(b"c")) for _ in tps())
            assert (stats.topic(TOPIC).bytes_in, stats.topic(TOPIC).messages_in) == (size, 3 * N)
            assert (stats.all_topics.bytes_in, stats.all_topics.messages_in) == (size, 3 * N)
        finally:
            await c.close()

    run(main())


def test_acks_all_answers_at_once_when_no_partition_has_to_wait(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = await _leaders(c, [1], [1])
            rm = b.rm
            parked = []
            rm.delayed_produce_purgatory.try_complete_else_watch = lambda op, keys: parked.append(op)  # type: ignore
            out = await drive(rm, rm.append_records(-1, {tp: records(b"a") for tp in tps()}))
            assert not parked and all((r.error_code, r.base_offset) == (0, 0) for r in out.values())
        finally:
            await c.close()

    run(main())


def test_followers_hold_the_hw_and_acks_all_waits_for_them(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = await _leaders(c, [1, 2], [1, 2], n=3)
            rm = b.rm
            out = await drive(rm, rm.append_records(-1, {tp: records(b"a") for tp in tps(3)}, timeout_ms=50))
            for tp in tps(3):
                assert out[tp].error_code == ErrorCode.REQUEST_TIMED_OUT  # follower 2 never fetched
                plog = rm.get_partition(tp).log
                assert (plog.high_watermark, plog.log_end_offset) == (0, 1)
        finally:
            await c.close()

    run(main())


def test_one_at_a_time_jobs_never_overlap_and_keep_each_keys_order() -> None:
    async def main() -> None:
        workers = IoWorkers(4)
        running = [0]
        overlaps = [0]
        seen: Dict[int, List[int]] = {}
        lock = threading.Lock()

        def job(item: Tuple[int, int]) -> int:
            key, seq = item
            with lock:
                running[0] += 1
                overlaps[0] += running[0] > 1
                seen.setdefault(key, []).append(seq)
            time.sleep(0.0005)  # releases the GIL, as a pwrite does
            with lock:
                running[0] -= 1
            return key * 1000 + seq

        try:
            items = [(k, s) for s in range(5) for k in range(16)]
            calls = [workers.run_each(job, items[i::3], [k for k, _ in items[i::3]], chunk_size=4, one_at_a_time=True)
                     for i in range(3)]
            outcomes = await asyncio.gather(*calls)
            for i, out in enumerate(outcomes):
                assert [r for r, _ in out] == [k * 1000 + s for k, s in items[i::3]]
            assert overlaps[0] == 0
            for key, seqs in seen.items():  # one worker per key, its jobs in submission order
                assert seqs == [s for i in range(3) for k, s in items[i::3] if k == key], key
        finally:
            workers.shutdown()

    run(main())
