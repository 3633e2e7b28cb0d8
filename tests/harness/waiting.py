"""Polling waits for tests that drive real processes (a broker may be restarting: exceptions count as "not yet")."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.1,
             detail: Optional[Callable[[], str]] = None) -> Any:
    """Poll until ``predicate()`` is truthy and return it; fail the test naming ``what`` otherwise.

    Truthy means a predicate answering a broker id must not answer 0 for "ready": return a tuple or
    ``id is not None``. ``detail()`` (e.g. broker outputs) is appended to the failure message.
    """
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval_s)
    extra = f"\n{detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r}){extra}")
