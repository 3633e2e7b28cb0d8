"""Worker threads for disk work, lighter than ``run_in_executor``.

Each worker drains a ``SimpleQueue`` and hands results back to the event loop with one
``call_soon_threadsafe`` per drained batch, not one per job, so under load many completions
cost one loop wake-up. Jobs with the same ``key`` (a topic-partition) go to the same worker,
which keeps appends to one log on one thread.

Thread affinity: ``submit`` is called on the event loop; jobs run on the workers.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from queue import SimpleQueue
from typing import Any, Callable, Hashable, List, Optional, Tuple

log = logging.getLogger(__name__)

_Job = Tuple["asyncio.Future[Any]", Callable[..., Any], Tuple[Any, ...]]
_STOP = None


class IoWorkers:
    def __init__(self, num_threads: int, name: str = "io") -> None:
        self._queues: List["SimpleQueue[Optional[_Job]]"] = [SimpleQueue() for _ in range(max(1, num_threads))]
        self._threads = [threading.Thread(target=self._run, args=(q,), name=f"{name}-{i}", daemon=True)
                         for i, q in enumerate(self._queues)]
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._next = 0
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], *args: Any, key: Optional[Hashable] = None) -> "asyncio.Future[Any]":
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if key is None:
            self._next = (self._next + 1) % len(self._queues)
            q = self._queues[self._next]
        else:
            q = self._queues[hash(key) % len(self._queues)]
        q.put((fut, fn, args))
        return fut

    def _run(self, q: "SimpleQueue[Optional[_Job]]") -> None:
        while True:
            job = q.get()
            if job is _STOP:
                return
            done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]] = []
            while job is not None:
                fut, fn, args = job
                try:
                    done.append((fut, fn(*args), None))
                except BaseException as exc:  # delivered to the awaiting coroutine
                    done.append((fut, None, exc))
                if q.empty():
                    break
                job = q.get()
                if job is _STOP:
                    self._deliver(done)
                    return
            self._deliver(done)

    def _deliver(self, done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
        loop = done[0][0].get_loop()
        try:
            loop.call_soon_threadsafe(_complete, done)
        except RuntimeError:  # loop closed during shutdown
            pass

    def shutdown(self) -> None:
        for q in self._queues:
            q.put(_STOP)
        for t in self._threads:
            t.join(timeout=30)


def _complete(done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
    for fut, result, exc in done:
        if fut.done():
            continue
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
