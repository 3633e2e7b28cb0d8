"""NamedExecutor: a small thread pool for one kind of blocking work, awaited from the event loop.

The disk I/O workers (``broker.replica.io_workers``) serve appends and reads; work that may run
long or block on something else gets a pool of its own so it never delays them: ZooKeeper calls
(``broker.zk.executor``) and coordinator loads (replaying a ``__consumer_offsets`` partition).
"""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


class NamedExecutor:
    def __init__(self, name: str, max_workers: int = 1) -> None:
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on this pool and await its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
