"""The event loop borrowing an idle partition owner (``IoWorkers.run_if_idle``): a job runs at once on the loop only
when that worker has nothing of the loop's pending and runs no other thread's command; it runs as the owner; a
command another thread hands over meanwhile waits for it; two slow runs in a row, or one stalled run, send the worker's
jobs back to its queue for a while (a single slow run, a preemption, does not). And the Produce path: a
single-partition append is made on the loop when the owner is idle, goes to the worker where the Log's lock is held
elsewhere (the loop does not wait for it) or where the append may fsync."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import pytest

from broker.replica import io_workers
from broker.replica.io_workers import NOT_RUN, IoWorkers
from broker.storage.config import LogConfig

from ..storage.lock_helpers import lock_held_elsewhere
from .harness import TOPIC, TP, FakeCluster, records, state, values_of

KEY = ("t", 0)


def run(coro_fn: Any) -> None:
    asyncio.run(coro_fn())


def test_an_idle_owner_runs_the_job_on_the_loop_as_the_owner() -> None:
    async def main() -> None:
        w = IoWorkers(2)
        try:
            seen: List[Any] = []
            result = w.run_if_idle(KEY, lambda a: seen.append((threading.get_ident(), w.is_owner(KEY))) or a * 2, 21)
            assert result == 42
            assert seen == [(threading.get_ident(), True)]
            assert not w.is_owner(KEY)  # lent for the job only
        finally:
            w.shutdown()
    run(main)


def test_a_job_of_the_loop_still_pending_keeps_the_next_one_queued() -> None:
    """Order: what the loop queued for a worker runs before what the loop would run itself."""
    async def main() -> None:
        w = IoWorkers(1)
        try:
            order: List[str] = []
            release = threading.Event()

            def first() -> None:
                release.wait(5)
                order.append("queued")
            fut = w.submit(first, key=KEY)
            assert w.run_if_idle(KEY, order.append, "inline") is NOT_RUN
            release.set()
            await fut
            assert w.run_if_idle(KEY, order.append, "inline") is None  # delivered: idle again
            assert order == ["queued", "inline"]
        finally:
            w.shutdown()
    run(main)


def test_another_threads_command_keeps_the_loop_out_and_one_handed_over_meanwhile_waits() -> None:
    async def main() -> None:
        w = IoWorkers(1)
        try:
            started, release = threading.Event(), threading.Event()

            def command() -> str:
                started.set()
                release.wait(5)
                return "done"
            caller = threading.Thread(target=lambda: w.call(KEY, command))
            caller.start()
            assert started.wait(5)
            assert w.run_if_idle(KEY, lambda: "inline") is NOT_RUN  # the worker runs that command
            release.set()
            caller.join(5)

            order: List[str] = []

            def inline() -> None:
                other = threading.Thread(target=lambda: w.call(KEY, lambda: order.append("handed over")))
                other.start()
                time.sleep(0.2)  # the worker has the command, and waits for the loop to give ownership back
                order.append("inline")
                inline.other = other  # type: ignore[attr-defined]
            w.run_if_idle(KEY, inline)
            inline.other.join(5)  # type: ignore[attr-defined]
            assert order == ["inline", "handed over"]
        finally:
            w.shutdown()
    run(main)


def test_a_command_for_the_same_partition_inside_the_job_runs_at_once() -> None:
    async def main() -> None:
        w = IoWorkers(1)
        try:
            assert w.run_if_idle(KEY, lambda: w.call(KEY, lambda: "nested")) == "nested"
            assert w.call_each([KEY], lambda k: k) == [(KEY, None)]  # from the loop, not lent: handed over
        finally:
            w.shutdown()
    run(main)


def test_an_exception_reaches_the_caller_and_the_owner_is_given_back() -> None:
    async def main() -> None:
        w = IoWorkers(1)
        try:
            def boom() -> None:
                raise ValueError("bad batch")
            with pytest.raises(ValueError, match="bad batch"):
                w.run_if_idle(KEY, boom)
            assert not w.is_owner(KEY)
            assert await w.submit(lambda: "worker", key=KEY) == "worker"  # the worker is not locked out
            assert w.run_if_idle(KEY, lambda: "inline") == "inline"
        finally:
            w.shutdown()
    run(main)


def _other_worker_key(workers: int) -> Any:
    return next(k for k in (("t", i) for i in range(1, 50)) if hash(k) % workers != hash(KEY) % workers)


def _inline_limits(monkeypatch: Any, slow_s: float, stall_s: float, backoff_s: float = 1.0) -> None:
    """The slow-run rule's thresholds, scaled for a test (io_workers' _INLINE_SLOW_S, _STALL_S, _BACKOFF_S)."""
    monkeypatch.setattr(io_workers, "_INLINE_SLOW_S", slow_s)
    monkeypatch.setattr(io_workers, "_INLINE_STALL_S", stall_s)
    monkeypatch.setattr(io_workers, "_INLINE_BACKOFF_S", backoff_s)


def test_two_slow_runs_in_a_row_send_that_workers_jobs_to_its_queue_for_a_while(monkeypatch) -> None:
    async def main() -> None:
        w = IoWorkers(2)
        try:
            _inline_limits(monkeypatch, slow_s=0.01, stall_s=10.0, backoff_s=0.3)
            assert w.run_if_idle(KEY, time.sleep, 0.02) is None  # slow once: taken for a preemption
            assert w.run_if_idle(KEY, time.sleep, 0.02) is None  # slow again: the worker takes its jobs back
            assert w.run_if_idle(KEY, lambda: "inline") is NOT_RUN
            assert w.run_if_idle(_other_worker_key(2), lambda: "inline") == "inline"  # the other one is not concerned
            await asyncio.sleep(0.35)
            assert w.run_if_idle(KEY, lambda: "inline") == "inline"
        finally:
            w.shutdown()
    run(main)


def test_a_single_slow_run_between_quick_ones_keeps_the_loop_borrowing(monkeypatch) -> None:
    async def main() -> None:
        w = IoWorkers(1)
        try:
            _inline_limits(monkeypatch, slow_s=0.05, stall_s=10.0)  # a quick run of a loaded machine stays below
            for _ in range(3):
                assert w.run_if_idle(KEY, time.sleep, 0.06) is None  # slow (a preemption, say)
                assert w.run_if_idle(KEY, lambda: "quick") == "quick"  # quick: the slow one is forgotten
            assert w.run_if_idle(KEY, lambda: "inline") == "inline"
        finally:
            w.shutdown()
    run(main)


def test_one_stalled_run_sends_that_workers_jobs_to_its_queue_at_once(monkeypatch) -> None:
    async def main() -> None:
        w = IoWorkers(1)
        try:
            _inline_limits(monkeypatch, slow_s=0.001, stall_s=0.01, backoff_s=30.0)
            assert w.run_if_idle(KEY, time.sleep, 0.02) is None  # a stall (a disk holding its writes)
            assert w.run_if_idle(KEY, lambda: "inline") is NOT_RUN
            assert await w.submit(lambda: "queued", key=KEY) == "queued"
        finally:
            w.shutdown()
    run(main)


def test_nothing_is_borrowed_once_the_workers_stop() -> None:
    async def main() -> None:
        w = IoWorkers(1)
        w.shutdown()
        assert w.run_if_idle(KEY, lambda: "inline") is NOT_RUN
    run(main)


# --- the Produce path ---------------------------------------------------------------------------------------------
def _record_append_threads(plog: Any, method: str = "append_as_leader") -> List[int]:
    """The threads ``plog.<method>`` runs on from now on, in order."""
    threads: List[int] = []
    append = getattr(plog, method)

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return append(*args, **kwargs)
    setattr(plog, method, recording)
    return threads


async def _leader_and_follower(c: Any) -> tuple:
    """Brokers 1 (leader) and 2 (follower) of ``TP``, and the threads the follower's appends will run on."""
    for b in (1, 2):
        c.start(b)
    for b in (1, 2):
        await c.leader_and_isr(b, state(1, 0, [1, 2], [1, 2]))
    leader, follower = c.brokers[1], c.brokers[2]
    return leader, follower, _record_append_threads(follower.log, "append_as_follower")


def test_a_produce_appends_on_the_loop_when_the_owner_is_idle_and_on_the_worker_when_it_may_fsync(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)  # a worker thread, as in the broker
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            rm, plog = b.rm, b.log
            threads = _record_append_threads(plog)
            for v in (b"a", b"b"):
                assert (await rm.append_records(-1, {TP: records(v)}))[TP].error_code == 0
            assert threads == [threading.get_ident()] * 2
            rm.update_config(TOPIC, LogConfig(flush_messages=1))  # each append fsyncs: not on the loop
            assert (await rm.append_records(1, {TP: records(b"c")}))[TP].error_code == 0
            assert threads[2] != threading.get_ident()
            assert plog.log_end_offset == 3
        finally:
            await c.close()
    run(main)


def test_a_produce_goes_to_the_worker_when_the_logs_lock_is_held_elsewhere(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)
        try:
            b = c.start(1)
            await c.leader_and_isr(1, state(1, 0, [1], [1]))
            rm, plog = b.rm, b.log
            threads = _record_append_threads(plog)
            with lock_held_elsewhere(plog) as still_held:
                produce = asyncio.ensure_future(rm.append_records(1, {TP: records(b"a")}))
                await asyncio.sleep(0.2)  # the loop runs: it did not wait for the lock
                assert not produce.done() and still_held()
            assert (await asyncio.wait_for(produce, 5))[TP].error_code == 0
            assert threads[0] == threading.get_ident() and threads[-1] != threading.get_ident()  # tried, then worker
            assert plog.log_end_offset == 1
        finally:
            await c.close()
    run(main)


# --- the follower's appends ---------------------------------------------------------------------------------------
def test_a_follower_appends_fetched_records_on_the_loop_and_on_the_worker_when_the_lock_is_held(tmp_path) -> None:
    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)
        try:
            leader, follower, threads = await _leader_and_follower(c)
            assert (await leader.rm.append_records(1, {TP: records(b"a")}))[TP].error_code == 0
            await c.wait_mixed(lambda: follower.log.log_end_offset == 1, 10, "the follower's append")
            assert threads and set(threads) == {threading.get_ident()}  # on the loop, as the borrowed owner
            assert follower.log.high_watermark <= 1
            with lock_held_elsewhere(follower.log) as still_held:
                assert (await leader.rm.append_records(1, {TP: records(b"b")}))[TP].error_code == 0
                await asyncio.sleep(0.3)  # the loop runs on: the fetcher did not wait for the lock
                assert follower.log.log_end_offset == 1 and still_held()
            await c.wait_mixed(lambda: follower.log.log_end_offset == 2, 10, "the follower's append on its worker")
            assert threads[-1] != threading.get_ident()
            assert values_of(follower.log) == [b"a", b"b"]
        finally:
            await c.close()
    run(main)


def test_a_fetch_responses_appends_go_to_the_workers_once_its_loop_time_is_spent(tmp_path, monkeypatch) -> None:
    """A response covering thousands of partitions must not hold the loop for all of them: past the budget (here
    spent at once), the appends are the workers'."""
    from broker.replica import fetcher
    monkeypatch.setattr(fetcher, "_INLINE_BUDGET_S", -1.0)

    async def main() -> None:
        c = FakeCluster(str(tmp_path), io_threads=1)
        try:
            leader, follower, threads = await _leader_and_follower(c)
            assert (await leader.rm.append_records(1, {TP: records(b"a")}))[TP].error_code == 0
            await c.wait_mixed(lambda: follower.log.log_end_offset == 1, 10, "the follower's append")
            assert threads and threading.get_ident() not in threads
        finally:
            await c.close()
    run(main)
