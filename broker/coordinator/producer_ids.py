"""Producer ids for InitProducerId, taken from ZooKeeper in blocks of 1000.

``/latest_producer_id_block`` is advanced with compare-and-set, so brokers never hand out
the same id. The next block is fetched in the background when the current one is
90% used, so InitProducerId rarely waits on ZooKeeper.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional, Tuple


class ProducerIdManager:
    def __init__(self, broker_id: int, allocate_block: Callable[[int], Tuple[int, int]],
                 run_io: Callable[..., Any]) -> None:
        self._broker_id = broker_id
        self._allocate_block = allocate_block
        self._run_io = run_io
        self._next = 0
        self._end = -1  # inclusive end of the current block
        self._prefetched: Optional[Tuple[int, int]] = None
        self._prefetch_task: Optional[asyncio.Task[None]] = None
        self._lock = asyncio.Lock()

    async def _fetch(self) -> Tuple[int, int]:
        return await self._run_io(self._allocate_block, self._broker_id)

    async def _prefetch(self) -> None:
        self._prefetched = await self._fetch()

    async def generate(self) -> int:
        async with self._lock:
            if self._next > self._end:
                if self._prefetch_task is not None:
                    await self._prefetch_task
                    self._prefetch_task = None
                block = self._prefetched or await self._fetch()
                self._prefetched = None
                self._next, self._end = block
            pid = self._next
            self._next += 1
            size = self._end - pid
            if size < 100 and self._prefetched is None and self._prefetch_task is None:
                self._prefetch_task = asyncio.get_running_loop().create_task(self._prefetch())
            return pid
