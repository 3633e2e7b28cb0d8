"""The RemoteLogManager's three pools (Kafka 3.9's RLMScheduledThreadPool): sizes and their -1 fallbacks, fixed-delay
schedules on the injected clock, a task never running concurrently with itself (also across a cancel and a new task
for the same partition), cancellation, shutdown, bounded threads for many partitions, and the RemoteLogManager
running its copy / expiration / follower tasks on them. Time is a ManualClock; waits are short polls."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, List

import pytest

from broker.remote_log.metadata_manager import InMemoryMetadataTopic
from broker.remote_log.remote_log_manager import RLMCopyTask, RLMExpirationTask
from broker.remote_log.rlm_thread_pool import RLMScheduledThreadPool, pool_sizes
from broker.replica.tiered_storage import TieredStorage
from broker.storage.config import LogConfig
from broker.storage.remote.local_tiered_storage import LocalTieredStorage
from broker.util.clock import ManualClock

from .test_remote_log_manager import ONE, TIP, Env


def poll(cond: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def test_pool_sizes_fall_back_to_the_deprecated_key_as_kafka() -> None:
    assert pool_sizes(10, -1, -1) == (10, 10, 10)  # Kafka's defaults: 10, -1, -1
    assert pool_sizes(4, 2, -1) == (2, 4, 4)
    assert pool_sizes(4, -1, 3) == (4, 3, 4)
    assert pool_sizes(1, 5, 6) == (5, 6, 1)  # the follower pool is always remote.log.manager.thread.pool.size


def test_tiered_storage_builds_the_pools_with_the_configured_sizes(tmp_path: Path) -> None:
    rsm = LocalTieredStorage()
    rsm.configure({"broker.id": 1, "dir": str(tmp_path / "remote")})
    ts = TieredStorage(1, rsm, InMemoryMetadataTopic(), {}, lambda t, p: None, log_dir=str(tmp_path / "logs"),
                       thread_pool_size=3, copier_thread_pool_size=2, expiration_thread_pool_size=-1)
    try:
        rlm = ts.rlm
        assert (rlm.copy_pool.size, rlm.expiration_pool.size, rlm.follower_pool.size) == (2, 3, 3)
        assert rlm.copy_pool.thread_name_prefix == "kafka-rlm-copy-thread-pool-"
        assert rlm.expiration_pool.thread_name_prefix == "kafka-rlm-expiration-thread-pool-"
        assert rlm.follower_pool.thread_name_prefix == "kafka-rlm-follower-thread-pool-"
        assert rlm.copy_pool.thread_count == 0  # threads come with tasks
    finally:
        ts.close()


def test_fixed_delay_on_the_clock_and_never_concurrent_with_itself() -> None:
    clock = ManualClock()
    pool = RLMScheduledThreadPool(4, "P", "p-", clock)
    release = threading.Event()
    inside: List[int] = []
    overlap: List[int] = []
    starts: List[int] = []

    def run() -> None:
        inside.append(1)
        if len(inside) > 1:
            overlap.append(1)
        starts.append(clock.now_ms)
        release.wait(5)
        inside.pop()
    try:
        task = pool.schedule_with_fixed_delay(run, 0, 1000, "t")
        poll(lambda: len(starts) == 1, "the first run")
        clock.advance(5000)  # far past the delay while the run is under way: no second run meanwhile
        pool.wake()
        time.sleep(0.02)
        assert len(starts) == 1 and task.running
        release.set()
        poll(lambda: task.runs == 1 and not task.running, "the first run's end")
        release.clear()
        end = clock.now_ms
        clock.advance(999)  # the delay counts from the run's end
        pool.wake()
        time.sleep(0.02)
        assert len(starts) == 1
        clock.advance(1)
        pool.wake()
        poll(lambda: len(starts) == 2, "the second run")
        assert starts[1] == end + 1000
        release.set()
        poll(lambda: task.runs == 2, "the second run's end")
        assert not overlap
        assert pool.thread_count == 1  # one task: one thread (threads come as tasks are scheduled)
    finally:
        release.set()
        pool.close()


def test_cancel_while_queued_or_running() -> None:
    clock = ManualClock()
    pool = RLMScheduledThreadPool(2, "P", "p-", clock)
    release = threading.Event()
    ran: List[str] = []

    def running() -> None:
        ran.append("a")
        release.wait(5)
    try:
        queued = pool.schedule_with_fixed_delay(lambda: ran.append("q"), 100, 100, "q")
        a = pool.schedule_with_fixed_delay(running, 0, 100, "a")
        poll(lambda: a.running, "a running")
        queued.cancel()
        a.cancel()  # under way: it ends, and is not scheduled again
        release.set()
        poll(lambda: not a.running, "a's end")
        clock.advance(1000)
        pool.wake()
        time.sleep(0.02)
        assert ran == ["a"] and pool.queued() == 0
    finally:
        pool.close()


def test_close_lets_runs_end_drops_the_queue_and_joins_the_threads() -> None:
    clock = ManualClock()
    pool = RLMScheduledThreadPool(3, "P", "p-", clock)
    started = threading.Event()
    finished: List[int] = []

    def slow() -> None:
        started.set()
        time.sleep(0.05)
        finished.append(1)
    pool.schedule_with_fixed_delay(slow, 0, 10, "slow")
    later = pool.schedule_with_fixed_delay(lambda: finished.append(2), 60_000, 10, "later")
    assert started.wait(5)
    pool.close()
    assert finished == [1] and later.cancelled and pool.queued() == 0
    assert all(not t.is_alive() for t in pool._threads)
    after = pool.schedule_with_fixed_delay(lambda: finished.append(3), 0, 10, "after")  # refused once closed
    assert after.cancelled and pool.thread_count == 3 - 1  # no thread started for it (2 were started before)


def test_ten_thousand_partitions_share_the_pool_threads() -> None:
    clock = ManualClock()
    pool = RLMScheduledThreadPool(3, "P", "p-", clock)
    counts = [0] * 10_000
    lock = threading.Lock()

    def task(i: int) -> Callable[[], None]:
        def run() -> None:
            with lock:
                counts[i] += 1
        return run
    try:
        before = threading.active_count()
        handles = [pool.schedule_with_fixed_delay(task(i), 0, 30_000, f"t{i}") for i in range(10_000)]
        poll(lambda: all(h.runs == 1 for h in handles), "one run of each", 30)
        assert pool.thread_count == 3 and threading.active_count() - before == 3
        assert counts == [1] * 10_000  # and no second run: the clock did not move
        assert pool.idle_percent() == 1.0
    finally:
        pool.close()


# ---------------------------------------------------------------------------------------------- RemoteLogManager
@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=-2))
    yield e  # type: ignore[misc]
    for rlm in e.rlms:
        rlm.close()
    e.log.close()


def test_rlm_runs_its_tasks_on_the_pools_every_interval(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.append(5)  # [0,1] [2,3] [4 active]
    rlm = env.rlm()
    names: List[str] = []
    for cls in (RLMCopyTask, RLMExpirationTask):
        def spy(self: object, log: object, _orig: Callable[..., None] = cls.execute) -> None:  # type: ignore[misc]
            names.append(threading.current_thread().name)
            _orig(self, log)
        monkeypatch.setattr(cls, "execute", spy)
    rlm.on_leadership_change({TIP: 3}, set())
    assert names == []  # not started: nothing scheduled (tests use run_once)
    rlm.start()
    poll(lambda: env.log.highest_offset_in_remote_storage == 3, "the copy on the copier pool")
    poll(lambda: len(names) >= 2, "both tasks ran")
    assert {n.rsplit("-", 1)[0] for n in names} == {"kafka-rlm-copy-thread-pool", "kafka-rlm-expiration-thread-pool"}
    handle = rlm.leader_copy_tasks[TIP].handle
    assert handle is not None
    runs = handle.runs
    env.clock.advance(rlm.task_interval_ms)
    rlm.copy_pool.wake()
    poll(lambda: handle.runs > runs, "the next run after the interval")
    # becoming a follower: the leader tasks are cancelled, the follower task runs on its pool
    rlm.on_leadership_change({}, {TIP})
    assert not rlm.leader_copy_tasks and handle.cancelled
    follower = rlm.follower_tasks[TIP].handle
    assert follower is not None
    poll(lambda: follower.runs >= 1, "the follower task's run")
    assert rlm.follower_pool.thread_count == 1
    rlm.close()
    assert rlm.copy_pool.queued() == rlm.expiration_pool.queued() == rlm.follower_pool.queued() == 0
    assert all(not t.is_alive() for p in (rlm.copy_pool, rlm.expiration_pool, rlm.follower_pool) for t in p._threads)


def test_a_new_task_for_a_partition_waits_for_the_cancelled_ones_run(env: Env) -> None:
    env.append(5)
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    old = rlm.leader_copy_tasks[TIP]
    gate = threading.Event()
    entered = threading.Event()
    copied: List[int] = []

    def blocked(log: object) -> None:
        entered.set()
        gate.wait(5)
        copied.append(1)
    old.execute = blocked  # type: ignore[method-assign]
    t = threading.Thread(target=old.run)
    t.start()
    assert entered.wait(5)
    rlm.on_leadership_change({}, {TIP})  # cancelled mid-run
    rlm.on_leadership_change({TIP: 4}, set())  # a new copy task for the same partition
    new = rlm.leader_copy_tasks[TIP]
    assert new is not old and old.cancelled
    new.run()  # the old run holds the partition's copy lock: this run is skipped
    assert env.log.highest_offset_in_remote_storage == -1
    gate.set()
    t.join(5)
    new.run()
    assert env.log.highest_offset_in_remote_storage == 3 and copied == [1]


def test_same_leader_new_epoch_keeps_the_task(env: Env) -> None:
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    task = rlm.leader_copy_tasks[TIP]
    rlm.on_leadership_change({TIP: 5}, set())  # Kafka's computeIfAbsent: the same task goes on
    assert rlm.leader_copy_tasks[TIP] is task and task.leader_epoch == 5 and not task.cancelled
