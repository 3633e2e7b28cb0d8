"""PartitionChanges: a numbered log of the partitions whose fetchable state changed, for fetch sessions at size.

A follower's incremental fetch session (KIP-227) holds every partition it follows from this leader, thousands at
production size, while a fetch only has to answer the few that changed. Walking the whole session per fetch made
each acks=all round trip cost grow with the partition count (at 3,000 partitions on 3 brokers a round trip took
~55 ms, most of it that walk). Instead the ReplicaManager notes each partition whose state moved here (appends,
high watermark, log start offset, leadership, ISR) with an increasing sequence number; a session remembers the
number it has seen and asks :meth:`since` for what changed after it. What is not noted (a log start offset moved
by retention on the scheduler thread) is caught by the session's periodic sweep (``broker.api.fetch``).

Follower fetches parked for new data wait on :meth:`wait`: only changes noted with ``wake`` (new records, a
leadership change) complete it, as only appends complete a follower's DelayedFetch in Kafka; a moved high
watermark is answered by the next fetch.

Loop affinity: event loop only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Deque, Hashable, List, Optional, Set, Tuple


class PartitionChanges:
    def __init__(self, capacity: int = 1 << 16) -> None:
        #: the number of the last change noted (0: none yet)
        self.seq = 0
        self._log: Deque[Tuple[int, Hashable]] = deque(maxlen=capacity)
        self._waiters: Set["asyncio.Future[None]"] = set()

    def note(self, key: Hashable, wake: bool = False) -> None:
        """``key``'s state changed; ``wake``: parked follower fetches may have something to read now."""
        self.seq += 1
        self._log.append((self.seq, key))
        if wake and self._waiters:
            waiters, self._waiters = self._waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def since(self, seq: int) -> Optional[List[Hashable]]:
        """The keys noted after change ``seq`` (newest first, maybe repeated); None when the log no longer
        reaches back that far (the caller must look at everything)."""
        if seq >= self.seq:
            return []
        log = self._log
        if seq < 0 or not log or log[0][0] > seq + 1:
            return None
        out = []
        for s, key in reversed(log):
            if s <= seq:
                break
            out.append(key)
        return out

    def wait(self) -> "asyncio.Future[None]":
        """A future completed by the next change noted with ``wake`` (cancel it when done waiting)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        fut.add_done_callback(self._waiters.discard)
        return fut
