"""RLMScheduledThreadPool: Kafka 3.9's RemoteLogManager.RLMScheduledThreadPool (a ScheduledThreadPoolExecutor), the
pool that runs one kind of RemoteLogManager task (copy, expiration, follower) for every partition.

- ``schedule_with_fixed_delay``: the task runs ``initial_delay_ms`` from now, then ``delay_ms`` after each run
  ends (fixed delay, not fixed rate), so a task is never queued twice and never runs concurrently with itself.
- Threads are made as tasks are scheduled, up to ``size`` (Java's ``ensurePrestart``): a pool of 10 serving
  10,000 partitions has 10 threads; a broker leading one partition has one.
- ``ScheduledTask.cancel``: never run again (Kafka's ``setRemoveOnCancelPolicy(true)``; here its queue entry is
  skipped when it comes up); a run under way ends by itself (the RLM tasks look at their own ``cancelled`` flag
  between segments).
- ``close``: queued runs are dropped (Kafka's ``setExecuteExistingDelayedTasksAfterShutdownPolicy(false)``), the runs
  under way end, the threads are joined (10 s, as Kafka's shutdownAndAwaitTermination; the threads are daemons).
- ``idle_percent``: Kafka's getIdlePercent, ``1 - active / size`` (RemoteLogManagerTasksAvgIdlePercent of the copy
  pool).

Deadlines are on the injected clock's monotonic reading; the threads wait in real time for the earliest one, so a
test on a ManualClock calls :meth:`wake` after advancing it.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable, List, Tuple

from broker.util.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

#: Kafka's shutdownAndAwaitTermination timeout
CLOSE_TIMEOUT_S = 10.0


class ScheduledTask:
    """One task of the pool (Kafka's ScheduledFuture)."""

    __slots__ = ("pool", "fn", "name", "delay_ms", "cancelled", "running", "runs")

    def __init__(self, pool: "RLMScheduledThreadPool", fn: Callable[[], object], name: str, delay_ms: int) -> None:
        self.pool = pool
        self.fn = fn
        self.name = name
        self.delay_ms = delay_ms
        self.cancelled = False
        self.running = False
        #: runs finished so far
        self.runs = 0

    def cancel(self) -> None:
        """No run after the one under way, if any."""
        self.pool._cancel(self)

    def __repr__(self) -> str:
        return f"ScheduledTask({self.name})"


class RLMScheduledThreadPool:
    """See the module docstring."""

    def __init__(self, size: int, pool_name: str, thread_name_prefix: str, clock: Clock = SYSTEM_CLOCK) -> None:
        if size < 1:
            raise ValueError(f"{pool_name}: pool size {size} < 1")
        self.size = size
        self.pool_name = pool_name
        self.thread_name_prefix = thread_name_prefix
        self._mono_ms = clock.mono_ms
        self._cv = threading.Condition()
        #: (due mono ms, sequence, task); a cancelled task's entry is skipped when it comes up
        self._queue: List[Tuple[int, int, ScheduledTask]] = []
        self._seq = itertools.count()
        self._threads: List[threading.Thread] = []
        self._active = 0
        self._stopped = False

    # ------------------------------------------------------------------ scheduling
    def schedule_with_fixed_delay(self, fn: Callable[[], object], initial_delay_ms: int, delay_ms: int,
                                  name: str = "") -> ScheduledTask:
        task = ScheduledTask(self, fn, name or repr(fn), max(1, int(delay_ms)))
        with self._cv:
            if self._stopped:
                task.cancelled = True
                return task
            heapq.heappush(self._queue, (self._mono_ms() + max(0, int(initial_delay_ms)), next(self._seq), task))
            if len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self.thread_name_prefix}{len(self._threads) + 1}")
                self._threads.append(thread)
                thread.start()
            self._cv.notify()
        return task

    def _cancel(self, task: ScheduledTask) -> None:
        with self._cv:
            if task.cancelled:
                return
            task.cancelled = True  # its queue entry is dropped when it comes up (O(1) here: 10,000 cancel at once)
            self._cv.notify_all()

    def wake(self) -> None:
        """Re-read the clock now (after a test moved its ManualClock)."""
        with self._cv:
            self._cv.notify_all()

    # ------------------------------------------------------------------ the threads
    def _next(self) -> "ScheduledTask | None":
        """Under the condition: the next due task, marked running, or None once stopped (waits otherwise)."""
        while True:
            if self._stopped:
                return None
            queue = self._queue
            while queue and queue[0][2].cancelled:
                heapq.heappop(queue)
            now = self._mono_ms()
            if queue and queue[0][0] <= now:
                task = heapq.heappop(queue)[2]
                task.running = True
                self._active += 1
                return task
            self._cv.wait(None if not queue else (queue[0][0] - now) / 1000.0)

    def _work(self) -> None:
        while True:
            with self._cv:
                task = self._next()
            if task is None:
                return
            try:
                task.fn()
            except Exception:  # the RLM tasks log their own failures; anything else must not kill the thread
                logger.exception("%s: task %s failed; it runs again after its delay", self.pool_name, task.name)
            finally:
                with self._cv:
                    self._active -= 1
                    task.running = False
                    task.runs += 1
                    if not task.cancelled and not self._stopped:
                        heapq.heappush(self._queue, (self._mono_ms() + task.delay_ms, next(self._seq), task))
                    self._cv.notify_all()

    # ------------------------------------------------------------------ state, shutdown
    def idle_percent(self) -> float:
        """Kafka's getIdlePercent: ``1 - active / core pool size`` (a fraction, as Kafka's gauge)."""
        return 1.0 - self._active / self.size

    @property
    def active(self) -> int:
        return self._active

    @property
    def thread_count(self) -> int:
        return len(self._threads)

    def queued(self) -> int:
        with self._cv:
            return sum(1 for e in self._queue if not e[2].cancelled)

    def wait_until_idle(self, task: ScheduledTask, timeout_s: float) -> bool:
        """Wait (real time) until ``task`` has no run under way; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while task.running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Queued runs are dropped, runs under way end, the threads are joined (up to ``timeout_s`` in all)."""
        logger.info("Shutting down of thread pool %s is started", self.pool_name)
        with self._cv:
            self._stopped = True
            for _, _, task in self._queue:
                task.cancelled = True
            self._queue.clear()
            self._cv.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout_s
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            logger.warning("Shutting down of thread pool %s could not be completed: %s still running",
                           self.pool_name, ", ".join(alive))
        else:
            logger.info("Shutting down of thread pool %s is completed", self.pool_name)


def pool_sizes(thread_pool_size: int, copier: int, expiration: int) -> Tuple[int, int, int]:
    """(copier, expiration, follower) pool sizes from remote.log.manager.thread.pool.size and the
    copier/expiration keys: -1 falls back to the first (Kafka's RemoteLogManagerConfig
    remoteLogManagerCopierThreadPoolSize / remoteLogManagerExpirationThreadPoolSize); the follower pool is always
    remote.log.manager.thread.pool.size (Kafka's followerThreadPool)."""
    return (thread_pool_size if copier == -1 else copier,
            thread_pool_size if expiration == -1 else expiration,
            thread_pool_size)


__all__ = ["RLMScheduledThreadPool", "ScheduledTask", "pool_sizes", "CLOSE_TIMEOUT_S"]
