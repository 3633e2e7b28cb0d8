"""The coordinator's lazy timers: a deadline moved later is only recorded (no new timer per heartbeat or commit);
the armed timer, firing early, sleeps again until the latest deadline; an earlier deadline re-arms at once."""
from __future__ import annotations

from typing import Any, List, Tuple

from broker.coordinator.group import service
from broker.coordinator.group.state import Outcome
from tests.unit.coordinator.test_group_apis import FakeConfig

KEY = ("heartbeat", "g", "m")


class FakeHandle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeState:
    def __init__(self) -> None:
        self.fired: List[Tuple[int, Any]] = []

    def on_timer(self, now: int, key: Any) -> Outcome:
        self.fired.append((now, key))
        return Outcome()


def coordinator(monkeypatch: Any) -> Tuple[Any, List[Tuple[Any, int]], List[int], FakeState]:
    now = [1_000]
    monkeypatch.setattr(service, "_mono_ms", lambda: now[0])
    gc = service.GroupCoordinator(FakeConfig(), io=None, topics=None)  # type: ignore[arg-type]
    armed: List[Tuple[Any, int]] = []

    def arm(k: Any, deadline: int, _now: int) -> None:
        armed.append((k, deadline))
        gc._timers[k] = (FakeHandle(), deadline)

    monkeypatch.setattr(gc, "_arm", arm)
    state = FakeState()
    gc.shards[0] = state
    return gc, armed, now, state


def test_later_deadlines_are_recorded_not_rearmed(monkeypatch: Any) -> None:
    gc, armed, now, state = coordinator(monkeypatch)
    gc._apply(0, Outcome(timers=[(KEY, 46_000)]))
    for deadline in range(47_000, 60_000, 1_000):  # a heartbeat a second moves the session deadline
        gc._apply(0, Outcome(timers=[(KEY, deadline)]))
    assert armed == [((0, KEY), 46_000)]
    now[0] = 46_000
    gc._fire(0, KEY)  # early: sleeps again until the latest deadline, the state hears nothing
    assert armed[-1] == ((0, KEY), 59_000) and state.fired == []
    now[0] = 59_000
    gc._fire(0, KEY)
    assert state.fired == [(59_000, KEY)] and (0, KEY) not in gc._timers and (0, KEY) not in gc._deadlines


def test_an_earlier_deadline_rearms_at_once(monkeypatch: Any) -> None:
    gc, armed, now, state = coordinator(monkeypatch)
    gc._apply(0, Outcome(timers=[(KEY, 300_000)]))  # a new member's join timeout
    first = gc._timers[(0, KEY)][0]
    gc._apply(0, Outcome(timers=[(KEY, 46_000)]))  # joined: the session timeout, sooner
    assert first.cancelled and armed == [((0, KEY), 300_000), ((0, KEY), 46_000)]
    now[0] = 46_000
    gc._fire(0, KEY)
    assert state.fired == [(46_000, KEY)]


def test_resigning_drops_timers_and_deadlines(monkeypatch: Any) -> None:
    gc, _armed, _now, _state = coordinator(monkeypatch)
    gc._apply(0, Outcome(timers=[(KEY, 46_000), (("join", "g"), 2_000)]))
    handles = [h for h, _d in gc._timers.values()]
    state = gc.shards.pop(0)
    state.shutdown = lambda: Outcome()  # type: ignore[attr-defined]
    state.groups = {}  # type: ignore[attr-defined]
    gc._drop_shard(0, state)
    assert gc._timers == {} and gc._deadlines == {} and all(h.cancelled for h in handles)
