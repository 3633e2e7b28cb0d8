"""The broker's clock, as Kafka's ``Time``: one unit (milliseconds), two readings, and the timers that wait on it.

- ``wall_ms()`` (Kafka's ``time.milliseconds()``): for what is stored or compared with stored times: record and
  batch timestamps, retention against segment timestamps, transaction start/update timestamps in the transaction
  log, commit and group-state timestamps in ``__consumer_offsets``, ZooKeeper registration timestamps.
- ``mono_ms()`` (Kafka's ``hiResClockMs()`` / ``nanoseconds()``): for deadlines and idle times that only this
  process measures: session, join and sync timeouts, delayed operations, throttles, idle connections, fetch
  session eviction, ISR lag. A wall-clock jump (NTP step, manual change) moves neither early nor late.
- ``sleep_ms`` / ``call_later_ms`` / ``wait_for_ms``: timers whose deadline is on ``mono_ms()``, so that code
  taking a :class:`Clock` can be run by a test on :class:`ManualClock` without waiting in real time.

:func:`mono_ms` is anchored at the wall clock when this module is imported, so its values look like epoch
milliseconds and a default of 0 ("never") stays long ago, whatever the machine's uptime; it never jumps after.
Its values must not be stored or sent.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Any, Awaitable, Callable, List, Optional, Protocol, Tuple, TypeVar

T = TypeVar("T")

#: seconds added to time.monotonic() so that mono_ms() starts at the wall clock of the import
_ANCHOR_S = time.time() - time.monotonic()


def wall_ms() -> int:
    """Wall-clock epoch milliseconds (Kafka's Time.milliseconds())."""
    return int(time.time() * 1000)


def mono_ms() -> int:
    """Monotonic milliseconds (Kafka's Time.hiResClockMs()), starting near the wall clock; never stored or sent."""
    return int((time.monotonic() + _ANCHOR_S) * 1000)


class Timer(Protocol):
    """A pending :meth:`Clock.call_later_ms` (asyncio's TimerHandle is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Kafka's ``Time``: the readings and the event-loop timers of one clock, all in milliseconds."""

    def wall_ms(self) -> int: ...

    def mono_ms(self) -> int: ...

    async def sleep_ms(self, ms: float) -> None: ...

    def call_later_ms(self, ms: float, callback: Callable[[], Any]) -> Timer: ...

    async def wait_for_ms(self, aw: Awaitable[T], timeout_ms: float) -> T:
        """``aw``'s result, or asyncio.TimeoutError after ``timeout_ms`` (``aw`` is then cancelled)."""
        ...


class SystemClock:
    """The real clock: the module's readings and the running event loop's timers (the broker's only clock)."""

    def wall_ms(self) -> int:
        return wall_ms()

    def mono_ms(self) -> int:
        return mono_ms()

    async def sleep_ms(self, ms: float) -> None:
        await asyncio.sleep(max(ms, 0) / 1000.0)

    def call_later_ms(self, ms: float, callback: Callable[[], Any]) -> Timer:
        return asyncio.get_running_loop().call_later(max(ms, 0) / 1000.0, callback)

    async def wait_for_ms(self, aw: Awaitable[T], timeout_ms: float) -> T:
        return await asyncio.wait_for(aw, max(timeout_ms, 0) / 1000.0)


#: the process's clock, the default of everything that takes a Clock
SYSTEM_CLOCK: Clock = SystemClock()


def _resolve(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


class _ManualTimer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], Any]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A fake :class:`Clock` moved by hand: :meth:`advance` moves both readings and runs the timers that fall due,
    in deadline order, each with the clock at its deadline. Timers only set results; the coroutines waiting on
    them resume in the loop's next turns (``await asyncio.sleep(0)``), never in real time.

    It lives here, beside the protocol it fakes, so that the unit tests, the test harnesses and tools (simulations,
    benchmarks of one component) share one fake and one convention instead of one hand-made clock each."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._wall = now_ms
        self._mono = now_ms
        self._timers: List[Tuple[float, int, _ManualTimer]] = []
        self._seq = itertools.count()

    @property
    def now_ms(self) -> int:
        """The monotonic reading (equal to the wall reading unless :meth:`jump_wall` moved that)."""
        return self._mono

    def wall_ms(self) -> int:
        return self._wall

    def mono_ms(self) -> int:
        return self._mono

    def jump_wall(self, ms: int) -> None:
        """Move the wall reading only (an NTP step or a manual change); no timer fires."""
        self._wall += ms

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms``, running every timer due by then in deadline order (ties: first set)."""
        target = self._mono + ms
        timers = self._timers
        while timers and timers[0][0] <= target:
            deadline, _, t = heapq.heappop(timers)
            if t.cancelled:
                continue
            self._step_to(deadline)
            t.callback()
        self._step_to(target)

    def _step_to(self, mono: float) -> None:
        if mono > self._mono:
            self._wall += int(mono) - self._mono
            self._mono = int(mono)

    def next_deadline_ms(self) -> Optional[float]:
        """The earliest pending timer's deadline, None without one."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def call_later_ms(self, ms: float, callback: Callable[[], Any]) -> Timer:
        t = _ManualTimer(callback)
        heapq.heappush(self._timers, (self._mono + max(ms, 0), next(self._seq), t))
        return t

    async def sleep_ms(self, ms: float) -> None:
        if ms <= 0:
            await asyncio.sleep(0)
            return
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        timer = self.call_later_ms(ms, lambda: _resolve(fut))
        try:
            await fut
        finally:
            timer.cancel()

    async def wait_for_ms(self, aw: Awaitable[T], timeout_ms: float) -> T:
        task = asyncio.ensure_future(aw)
        expired = False

        def expire() -> None:
            nonlocal expired
            if not task.done():
                expired = True
                task.cancel()

        timer = self.call_later_ms(timeout_ms, expire)
        try:
            return await task
        except asyncio.CancelledError:
            if expired:
                raise asyncio.TimeoutError() from None
            raise
        finally:
            timer.cancel()
