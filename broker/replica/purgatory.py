"""Waiting fetches (Kafka's DelayedFetch purgatory), keyed by topic-partition.

A Fetch that found fewer than ``min_bytes`` parks a future on the partitions it reads;
an append to any of them completes the future at once, so a long-polling consumer sees a
new record as soon as it is written, not when its ``max_wait_ms`` runs out.

Loop affinity: event loop only.
"""
from __future__ import annotations

import asyncio
from typing import Dict, Hashable, Iterable, Set


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: Dict[Hashable, Set[asyncio.Future[None]]] = {}

    def watch(self, keys: Iterable[Hashable]) -> "asyncio.Future[None]":
        """A future completed by the next :meth:`check_and_complete` of any of ``keys``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)

        def _cleanup(_: "asyncio.Future[None]") -> None:
            for key in keys:
                s = self._watchers.get(key)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._watchers[key]

        fut.add_done_callback(_cleanup)
        return fut

    def check_and_complete(self, key: Hashable) -> int:
        """Wake every fetch waiting on ``key``; returns how many were woken."""
        waiters = self._watchers.get(key)
        if not waiters:
            return 0
        n = 0
        for fut in list(waiters):
            if not fut.done():
                fut.set_result(None)
                n += 1
        return n

    def watching(self) -> bool:
        """Whether any fetch waits (one test before checking many keys)."""
        return bool(self._watchers)

    def __len__(self) -> int:
        return sum(len(s) for s in self._watchers.values())
