"""The coordinator's lazy timers: a deadline moved later is only recorded (no new timer per heartbeat or commit);
the armed timer, firing early, sleeps again until the latest deadline; an earlier deadline re-arms at once.

The coordinator runs on a ManualClock: its timers are the clock's, and fire when the test moves it."""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

from broker.coordinator.group.service import GroupCoordinator
from broker.coordinator.group.state import Outcome
from broker.util.clock import ManualClock, Timer
from tests.unit.coordinator.test_group_apis import FakeConfig

KEY = ("heartbeat", "g", "m")


class ArmingClock(ManualClock):
    """A ManualClock that notes the deadline of every timer set on it."""

    def __init__(self) -> None:
        super().__init__(1_000)
        self.armed: List[int] = []

    def call_later_ms(self, ms: float, callback: Callable[[], Any]) -> Timer:
        self.armed.append(int(self.mono_ms() + ms))
        return super().call_later_ms(ms, callback)


class FakeState:
    def __init__(self) -> None:
        self.fired: List[Tuple[int, Any]] = []

    def on_timer(self, now: int, key: Any) -> Outcome:
        self.fired.append((now, key))
        return Outcome()


def coordinator() -> Tuple[GroupCoordinator, ArmingClock, FakeState]:
    clock = ArmingClock()
    gc = GroupCoordinator(FakeConfig(), io=None, topics=None, clock=clock)  # type: ignore[arg-type]
    state = FakeState()
    gc.shards[0] = state  # type: ignore[assignment]
    return gc, clock, state


def test_later_deadlines_are_recorded_not_rearmed() -> None:
    gc, clock, state = coordinator()
    gc._apply(0, Outcome(timers=[(KEY, 46_000)]))
    for deadline in range(47_000, 60_000, 1_000):  # a heartbeat a second moves the session deadline
        gc._apply(0, Outcome(timers=[(KEY, deadline)]))
    assert clock.armed == [46_000]
    clock.advance(46_000 - clock.mono_ms())  # early: sleeps again until the latest deadline, the state hears nothing
    assert clock.armed == [46_000, 59_000] and state.fired == []
    clock.advance(59_000 - clock.mono_ms())
    assert state.fired == [(59_000, KEY)] and (0, KEY) not in gc._timers and (0, KEY) not in gc._deadlines
    assert clock.next_deadline_ms() is None


def test_an_earlier_deadline_rearms_at_once() -> None:
    gc, clock, state = coordinator()
    gc._apply(0, Outcome(timers=[(KEY, 300_000)]))  # a new member's join timeout
    gc._apply(0, Outcome(timers=[(KEY, 46_000)]))  # joined: the session timeout, sooner
    assert clock.armed == [300_000, 46_000]
    clock.advance(46_000 - clock.mono_ms())
    assert state.fired == [(46_000, KEY)]
    clock.advance(300_000 - clock.mono_ms())  # the first timer was cancelled
    assert state.fired == [(46_000, KEY)] and clock.next_deadline_ms() is None


def test_resigning_drops_timers_and_deadlines() -> None:
    gc, clock, _state = coordinator()
    gc._apply(0, Outcome(timers=[(KEY, 46_000), (("join", "g"), 2_000)]))
    assert clock.next_deadline_ms() == 2_000
    state = gc.shards.pop(0)
    state.shutdown = lambda: Outcome()  # type: ignore[attr-defined]
    state.groups = {}  # type: ignore[attr-defined]
    gc._drop_shard(0, state)
    assert gc._timers == {} and gc._deadlines == {} and clock.next_deadline_ms() is None
