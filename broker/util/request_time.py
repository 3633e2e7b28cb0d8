"""What "request handler time" means here, for request_percentage quotas.

Kafka charges a request with the time its network and I/O threads spent on it. In this broker a
request is one coroutine on the event loop plus work it hands to worker threads, so its handler
time is the coroutine's wall time *minus the time it sat parked* waiting for something other than
its own work: a DelayedProduce/DelayedFetch/DelayedDeleteRecords purgatory, or a group join
barrier. Disk I/O on the worker threads and time queued behind other requests on the loop are
charged, as a busy Kafka I/O thread pool would charge them. Code that parks wraps the wait in
:func:`parked`; the dispatcher reads the total with :func:`begin` / :func:`parked_ns`.
"""
from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator, List, Optional

_PARKED: "contextvars.ContextVar[Optional[List[int]]]" = contextvars.ContextVar("parked_ns", default=None)


def begin() -> List[int]:
    """Start counting parked time for the request handled in the current task."""
    acc = [0]
    _PARKED.set(acc)
    return acc


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """Wrap a wait that is not this request's own work (purgatory, join barrier)."""
    acc = _PARKED.get()
    if acc is None:
        yield
        return
    start = time.monotonic_ns()
    try:
        yield
    finally:
        acc[0] += time.monotonic_ns() - start



def parked_ns() -> int:
    """Parked time so far of the request handled in the current task (0 outside a counted request)."""
    acc = _PARKED.get()
    return acc[0] if acc is not None else 0


__all__ = ["begin", "parked", "parked_ns"]
