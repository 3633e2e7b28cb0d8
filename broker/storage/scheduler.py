"""Scheduler: one daemon thread running delayed and periodic tasks (Kafka's KafkaScheduler role).

Tasks run one at a time on the scheduler thread; a task that raises is logged and, if periodic,
rescheduled. ``shutdown`` stops the thread after the running task finishes.

Deadlines are on the clock's monotonic reading (``Clock.mono_ms()``); the API and the queue keep seconds (delays
and periods are given in seconds, as the callers in storage and tiered storage always did).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
from typing import Callable

from broker.util.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)


class Scheduler:
    """Runs ``fn`` after ``delay_s`` (once) or every ``period_s`` on a single background thread.

    ``threaded=False`` (unit tests): no thread; the test runs what is due with :meth:`run_due` (after advancing its
    ``ManualClock``) or :meth:`run_pending_now`, on its own thread, so nothing runs behind its back. The thread waits
    in real time, so a threaded scheduler wants the system clock."""

    def __init__(self, name: str = "storage-scheduler", clock: Clock = SYSTEM_CLOCK,
                 threaded: bool = True) -> None:
        self._mono_ms = clock.mono_ms
        self._cv = threading.Condition()
        self._queue: list[tuple[float, int, str, Callable[[], object], float]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        if threaded:
            self._thread.start()

    def _clock(self) -> float:
        """Now on the clock's monotonic reading, in seconds (the queue's unit)."""
        return self._mono_ms() / 1000.0

    def schedule(self, name: str, fn: Callable[[], object], delay_s: float = 0.0, period_s: float = -1.0) -> None:
        """Run ``fn`` after ``delay_s``; repeat every ``period_s`` when it is positive."""
        with self._cv:
            if self._stopped:
                return
            heapq.heappush(self._queue, (self._clock() + delay_s, next(self._seq), name, fn, period_s))
            self._cv.notify()

    def schedule_once(self, delay_s: float, fn: Callable[[], None]) -> None:
        """(delay, fn) form used by Log for deferred file deletion."""
        self.schedule("delete-file", fn, delay_s)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (not self._queue or self._queue[0][0] > self._clock()):
                    timeout = None if not self._queue else max(0.0, self._queue[0][0] - self._clock())
                    self._cv.wait(timeout)
                if self._stopped:
                    return
                due, _, name, fn, period = heapq.heappop(self._queue)
            try:
                fn()
            except Exception:
                logger.exception("Scheduled task %s failed", name)
            if period > 0:
                with self._cv:
                    if not self._stopped:
                        heapq.heappush(self._queue, (max(due + period, self._clock()), next(self._seq), name, fn,
                                                     period))

    def run_due(self) -> int:
        """Run, on the caller's thread, every task due by the clock (periodic ones are rescheduled); returns how many
        ran. For a scheduler without its thread."""
        ran = 0
        now = self._clock()  # one reading: a periodic task runs at most twice per call (as the thread catches up)
        while True:
            with self._cv:
                if self._stopped or not self._queue or self._queue[0][0] > now:
                    return ran
                due, _, name, fn, period = heapq.heappop(self._queue)
            try:
                fn()
            except Exception:
                logger.exception("Scheduled task %s failed", name)
            ran += 1
            if period > 0:
                with self._cv:
                    if not self._stopped:
                        heapq.heappush(self._queue, (max(due + period, now if due < now else now + period),
                                                     next(self._seq), name, fn, period))

    def run_pending_now(self) -> None:
        """Run every queued one-shot task immediately on the caller's thread (shutdown, tests)."""
        with self._cv:
            once = [t for t in self._queue if t[4] <= 0]
            self._queue = [t for t in self._queue if t[4] > 0]
            heapq.heapify(self._queue)
        for _, _, name, fn, _ in sorted(once):
            try:
                fn()
            except Exception:
                logger.exception("Scheduled task %s failed", name)

    def shutdown(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
