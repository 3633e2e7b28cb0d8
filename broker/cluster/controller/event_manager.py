"""ControllerEventManager: one queue, one thread, events processed strictly in order (Kafka's
controller-event-thread). ZooKeeper watches, API requests, broker responses and timers only enqueue; the
controller's state is touched by the processing thread alone, so it needs no locks.

Tests do not start the thread: they call ``process_pending()`` to run what is queued (and the timers that are
due on their manual clock) synchronously and deterministically.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

from broker.util.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


class ControllerEvent:
    """Base of the controller's events. Events that carry a reply override preempt() to answer when the event
    will never be processed (the controller is shutting down)."""

    def preempt(self) -> None:
        pass

    def __repr__(self) -> str:
        fields = getattr(self, "__dataclass_fields__", None)
        if not fields:
            return type(self).__name__
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in fields if k != "callback")
        return f"{type(self).__name__}({inner})"


class ControllerEventManager:
    def __init__(self, process: Callable[[ControllerEvent], None], clock: Clock | None = None,
                 name: str = "controller-event-thread") -> None:
        self._process = process
        #: the timers' deadlines are on its mono_ms() (a ManualClock in tests; the thread waits in real time)
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._name = name
        self._cond = threading.Condition()
        self._queue: list[ControllerEvent] = []
        self._timers: list[tuple[int, int, str]] = []   # (due ms, seq, key) heap
        self._timer_events: dict[str, tuple[int, Callable[[], ControllerEvent]]] = {}  # key -> (seq, factory)
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: the event being processed (for logs and tests)
        self.current: ControllerEvent | None = None

    # ------------------------------------------------------------------ producers (any thread)
    def put(self, event: ControllerEvent) -> None:
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._queue.append(event)
                self._cond.notify()
        if closed:
            event.preempt()

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop every queued event (answering those with replies) and enqueue `event` (Kafka does this on
        session expiry: nothing queued before the expiry may run)."""
        with self._cond:
            dropped, self._queue = self._queue, []
        for e in dropped:
            e.preempt()
        self.put(event)

    def schedule(self, key: str, delay_ms: int, factory: Callable[[], ControllerEvent]) -> None:
        """Enqueue factory() after delay_ms; scheduling the same key again replaces the pending one."""
        with self._cond:
            seq = next(self._seq)
            self._timer_events[key] = (seq, factory)
            heapq.heappush(self._timers, (self.clock.mono_ms() + max(0, int(delay_ms)), seq, key))
            self._cond.notify()

    def cancel(self, key: str) -> None:
        with self._cond:
            self._timer_events.pop(key, None)

    def cancel_all_timers(self) -> None:
        with self._cond:
            self._timer_events.clear()
            self._timers.clear()

    def has_timer(self, key: str) -> bool:
        with self._cond:
            return key in self._timer_events

    # ------------------------------------------------------------------ consumer
    def _move_due_timers(self) -> int | None:
        """Queue the events of due timers; return ms until the next one (None: no timer). Caller holds lock."""
        now = self.clock.mono_ms()
        while self._timers:
            due, seq, key = self._timers[0]
            current = self._timer_events.get(key)
            if current is None or current[0] != seq:
                heapq.heappop(self._timers)  # cancelled or replaced
                continue
            if due > now:
                return due - now
            heapq.heappop(self._timers)
            del self._timer_events[key]
            try:
                self._queue.append(current[1]())
            except Exception:
                log.exception("Building the timed controller event %s failed", key)
        return None

    def _take(self) -> ControllerEvent | None:
        with self._cond:
            self._move_due_timers()
            return self._queue.pop(0) if self._queue else None

    def _run_one(self, event: ControllerEvent) -> None:
        self.current = event
        try:
            self._process(event)
        except Exception as exc:
            if self._closed:  # abandoned by close() (e.g. ZooKeeper gone) and failed when ZooKeeper was closed
                log.info("Controller event %r abandoned at shutdown: %s", event, exc or type(exc).__name__)
            else:
                log.exception("Uncaught error processing controller event %r", event)
        finally:
            self.current = None

    def process_pending(self, limit: int | None = None) -> int:
        """Tests: process queued (and due timed) events on the calling thread until none is left."""
        n = 0
        while limit is None or n < limit:
            event = self._take()
            if event is None:
                break
            self._run_one(event)
            n += 1
        return n

    def pending(self) -> list[ControllerEvent]:
        with self._cond:
            return list(self._queue)

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    wait = self._move_due_timers()
                    if self._queue:
                        break
                    self._cond.wait(None if wait is None else wait / 1000.0)
                if self._closed:
                    return
                event = self._queue.pop(0)
            self._run_one(event)

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout_s: float = 30.0, give_up: Callable[[], bool] | None = None) -> None:
        """Stop the thread after the event in progress; queued events are preempted (their replies answered).

        Waits at most ``timeout_s`` for the event in progress, and stops waiting (within 0.1 s) once ``give_up()``
        is true (the controller passes "ZooKeeper is disconnected": an event waiting for ZooKeeper cannot finish;
        it fails when the ZooKeeper client is closed). The thread is a daemon: left running, it does not delay the
        exit."""
        with self._cond:
            self._closed = True
            dropped, self._queue = self._queue, []
            self._timer_events.clear()
            self._timers.clear()
            self._cond.notify_all()
        for e in dropped:
            try:
                e.preempt()
            except Exception:
                log.exception("Preempting %r failed", e)
        t = self._thread
        if t is None or t is threading.current_thread():
            return
        deadline = time.monotonic() + timeout_s
        while True:
            t.join(min(0.1, max(0.0, deadline - time.monotonic())))
            if not t.is_alive() or time.monotonic() >= deadline:
                return
            if give_up is not None and give_up():
                log.info("Controller event thread: not waiting for %r to finish", self.current)
                return

    def on_event_thread(self) -> bool:
        return self._thread is threading.current_thread()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def __repr__(self) -> str:
        return f"ControllerEventManager(queued={len(self._queue)}, timers={len(self._timer_events)})"
