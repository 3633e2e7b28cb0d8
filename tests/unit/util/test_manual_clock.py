"""The shared fake clock: advance() fires due timers in deadline order, with the clock at each deadline."""
from __future__ import annotations

import asyncio

import pytest

from broker.util.clock import SYSTEM_CLOCK, ManualClock


def test_advance_fires_due_timers_in_deadline_order() -> None:
    clock = ManualClock(1_000)
    fired: list = []
    clock.call_later_ms(30, lambda: fired.append((30, clock.mono_ms())))
    clock.call_later_ms(10, lambda: fired.append((10, clock.mono_ms())))
    cancelled = clock.call_later_ms(20, lambda: fired.append((20, clock.mono_ms())))
    cancelled.cancel()
    clock.advance(25)
    assert fired == [(10, 1_010)] and clock.mono_ms() == clock.wall_ms() == 1_025
    assert clock.next_deadline_ms() == 1_030
    clock.advance(5)
    assert fired == [(10, 1_010), (30, 1_030)] and clock.next_deadline_ms() is None


def test_sleep_and_wait_for_end_only_when_advanced() -> None:
    async def main() -> None:
        clock = ManualClock(0)
        slept = asyncio.ensure_future(clock.sleep_ms(100))
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waited = asyncio.ensure_future(clock.wait_for_ms(never, 50))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not slept.done() and not waited.done()
        clock.advance(50)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not slept.done() and isinstance(waited.exception(), asyncio.TimeoutError) and never.cancelled()
        clock.advance(50)
        await asyncio.sleep(0)
        assert slept.done()
        assert await clock.wait_for_ms(asyncio.sleep(0, "ok"), 10) == "ok"

    asyncio.run(main())


def test_jump_wall_moves_only_the_wall_reading() -> None:
    clock = ManualClock(5_000)
    clock.jump_wall(-1_000)
    assert (clock.wall_ms(), clock.mono_ms()) == (4_000, 5_000)


def test_system_clock_wait_for_times_out() -> None:
    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await SYSTEM_CLOCK.wait_for_ms(asyncio.Event().wait(), 1)

    asyncio.run(main())
