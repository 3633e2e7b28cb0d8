"""A Log's lock held by another thread, as an I/O worker holds it across a disk write: for the tests proving that
what the event loop calls on a Log never waits for that lock."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from broker.storage.log import Log

#: how long the other thread holds the lock at most: a caller that waited for it returns only after this
HOLD_S = 10.0


@contextmanager
def lock_held_elsewhere(log: Log) -> Iterator[Callable[[], bool]]:
    """Another thread holds ``log``'s lock for at most HOLD_S seconds. Yields a check that is True while that thread
    still holds it: calls made inside the block that return while it does cannot have waited for the lock (one that
    waited would return only after the release, and the check would then be False)."""
    taken, done, released = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with log._lock:
            taken.set()
            done.wait(HOLD_S)
            released.set()

    t = threading.Thread(target=hold, name="lock-holder", daemon=True)
    t.start()
    assert taken.wait(5), "the other thread did not get the lock"
    try:
        yield lambda: not released.is_set()
    finally:
        done.set()
        t.join(HOLD_S + 5)


def raw_high_watermark(log: Log) -> int:
    """The HW as stored, without the reader's clamp to the published LEO."""
    st = log._hw_state
    return st[1] if st[0] == log._hw_gen else log._owner_hw[1]
