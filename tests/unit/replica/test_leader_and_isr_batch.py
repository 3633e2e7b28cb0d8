"""LeaderAndIsr for many partitions at once: each topic's config read once (not once per partition), the logs
created or opened on the partitions' own I/O workers in chunks, every partition led or followed with its epoch
recorded in its log, and a failing topic failing only its own partitions."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Dict, List

from broker.errors import ErrorCode
from broker.replica.io_workers import IoWorkers
from broker.storage.config import LogConfig

from .harness import FakeCluster, state

TOPICS = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2), "c": uuid.UUID(int=3)}


def test_many_partitions_read_each_topic_config_once(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)
            reads: List[str] = []

            async def cfg(topic: str) -> LogConfig:
                reads.append(topic)
                if topic == "c":
                    raise RuntimeError("ZooKeeper unavailable")
                return c.log_config

            sts = ([state(1, 2, [1, 2], [1, 2], tp=("a", p)) for p in range(300)]
                   + [state(2, 1, [1, 2], [2, 1], tp=("b", p)) for p in range(200)]
                   + [state(1, 0, [1], [1], tp=("c", p)) for p in range(5)])
            code, errs = await b.rm.become_leader_or_follower(0, 1, sts, TOPICS, {2: c.node(2)}, cfg)
            assert code == 0
            assert sorted(reads) == ["a", "b", "c"]  # once per topic
            assert {tp for tp, e in errs.items() if e} == {("c", p) for p in range(5)}
            assert all(errs[("c", p)] == ErrorCode.KAFKA_STORAGE_ERROR for p in range(5))
            assert all(b.rm.get_partition(("c", p)) is None for p in range(5))
            for p in range(300):
                part = b.rm.get_partition(("a", p))
                assert part.is_leader and part.leader_epoch == 2 and part.topic_id == TOPICS["a"]
                assert part.log.latest_epoch == 2  # the new epoch recorded in the log on the partition's worker
            for p in range(200):
                part = b.rm.get_partition(("b", p))
                assert not part.is_leader and part.leader_id == 2 and part.leader_epoch == 1
            assert b.rm.fetcher_manager.fetch_state(("b", 199)) is not None

            # again, with the logs open: no config read for partitions that have their log
            reads.clear()
            sts2 = [state(1, 3, [1, 2], [1, 2], tp=("a", p)) for p in range(300)]
            code, errs = await b.rm.become_leader_or_follower(0, 1, sts2, TOPICS, {}, cfg)
            assert reads == [] and not any(errs.values())
            assert all(b.rm.get_partition(("a", p)).log.latest_epoch == 3 for p in range(0, 300, 37))
        finally:
            await c.close()

    asyncio.run(main())


def test_restart_opens_existing_logs_with_their_stored_topic_id(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path))
        try:
            b = c.start(1)

            async def cfg(_topic: str) -> Any:
                return c.log_config

            sts = [state(1, 0, [1], [1], tp=("a", p)) for p in range(50)]
            await b.rm.become_leader_or_follower(0, 1, sts, TOPICS, {}, cfg)
            await c.crash(1)
            b = c.start(1)  # the log manager loads the 50 logs
            code, errs = await b.rm.become_leader_or_follower(0, 2, sts, {"a": uuid.UUID(int=9)}, {}, cfg)
            # the stored topic id is read back from partition.metadata: another id is refused, as Kafka does
            assert set(errs.values()) == {ErrorCode.INCONSISTENT_TOPIC_ID}
            code, errs = await b.rm.become_leader_or_follower(0, 2, sts, TOPICS, {}, cfg)
            assert not any(errs.values()) and b.rm.get_partition(("a", 49)).topic_id == TOPICS["a"]
        finally:
            await c.close()

    asyncio.run(main())


def test_submit_each_keeps_order_key_affinity_and_per_item_failures() -> None:
    async def main() -> None:
        workers = IoWorkers(3)
        try:
            import threading
            seen: Dict[Any, set] = {}

            def job(item: int) -> int:
                seen.setdefault(item % 7, set()).add(threading.current_thread().name)
                if item == 13:
                    raise ValueError("bad item")
                return item * 2

            items = list(range(100))
            out = await workers.run_each(job, items, [i % 7 for i in items], chunk_size=4)
            assert [r for r, _ in out][:13] == [i * 2 for i in range(13)]
            assert isinstance(out[13][1], ValueError) and out[13][0] is None
            assert [r for r, _ in out][14:] == [i * 2 for i in range(14, 100)]
            # every item of one key ran on that key's worker
            assert all(len(names) == 1 for names in seen.values())
            jobs = workers.submit_each(job, items, [i % 7 for i in items], chunk_size=10)
            assert sum(len(ix) for ix, _ in jobs) == 100 and all(len(ix) <= 10 for ix, _ in jobs)
            await asyncio.gather(*(f for _, f in jobs))
        finally:
            workers.shutdown()

    asyncio.run(main())


def test_a_follower_starts_fetching_after_appends_still_queued_on_its_worker(tmp_path) -> None:
    """An append accepted while this broker led, still running on the partition's worker when LeaderAndIsr makes
    it a follower, is in the log before the fetcher's starting offset is read (Kafka: leaderIsrUpdateLock)."""
    import threading

    from .harness import TP, records

    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)  # the append is in flight on a worker thread
        try:
            b = c.start(1)
            c.start(2)
            await c.leader_and_isr(1, state(1, 1, [1, 2], [1, 2]))
            part = b.rm.get_partition(TP)
            release = threading.Event()

            def in_flight_append() -> None:  # an append that passed its leadership check, then is slow
                release.wait(10)
                part.log.append_as_leader(records(b"late"), 1)

            started: Dict[Any, Any] = {}
            add = b.rm.fetcher_manager.add_fetcher_for_partitions

            async def record_start(states: Dict[Any, Any]) -> None:
                started.update(states)
                await add(states)

            b.rm.fetcher_manager.add_fetcher_for_partitions = record_start  # type: ignore[method-assign]
            pending = b.rm._workers.submit(in_flight_append, key=TP)  # queued now (run_io would queue when awaited)
            asyncio.get_running_loop().call_later(0.2, release.set)
            code, errs = await c.leader_and_isr(1, state(2, 2, [1, 2], [1, 2]))
            await pending
            assert code == 0 and not any(errs.values())
            assert part.log.log_end_offset == 1
            assert started[TP].fetch_offset == 1  # not 0: the late append is counted
        finally:
            await c.close()

    asyncio.run(main())
