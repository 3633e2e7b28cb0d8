"""Producer ids for InitProducerId, handed out from blocks of 1000.

Where a block comes from depends on inter.broker.protocol.version, as in Kafka: from 3.0 the broker
asks the controller with AllocateProducerIds (KIP-730), which advances ``/latest_producer_id_block``;
before that the broker advances it itself with compare-and-set. Either way no two brokers ever hand
out the same id. The next block is fetched in the background when the current one is nearly used, so
InitProducerId rarely waits.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Optional, Tuple

#: Returns the next block as (first id, last id), inclusive.
BlockSource = Callable[[], Awaitable[Tuple[int, int]]]


class ProducerIdManager:
    def __init__(self, block_source: BlockSource) -> None:
        self._block_source = block_source
        self._next = 0
        self._end = -1  # inclusive end of the current block
        self._prefetched: Optional[Tuple[int, int]] = None
        self._prefetch_task: Optional[asyncio.Task[None]] = None
        self._lock = asyncio.Lock()

    async def _prefetch(self) -> None:
        self._prefetched = await self._block_source()

    async def generate(self) -> int:
        async with self._lock:
            if self._next > self._end:
                if self._prefetch_task is not None:
                    task, self._prefetch_task = self._prefetch_task, None
                    try:
                        await task
                    except Exception:
                        self._prefetched = None  # fetch again below
                block = self._prefetched or await self._block_source()
                self._prefetched = None
                self._next, self._end = block
            pid = self._next
            self._next += 1
            if self._end - pid < 100 and self._prefetched is None and self._prefetch_task is None:
                self._prefetch_task = asyncio.get_running_loop().create_task(self._prefetch())
            return pid
