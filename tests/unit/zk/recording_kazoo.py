"""A kazoo client wrapper that records what KafkaZkClient pipelines: how many async requests are unanswered at once
(issued, their result not yet collected with get()), and the ops of every multi.

Wraps the in-memory FakeKazooClient (whose results are computed at once), so "in flight" here is what the
client controls: how far it runs ahead of the answers it has read. Thread-safe: the count is over every thread.
"""
from __future__ import annotations

import threading
from typing import Any


class _Tracked:
    def __init__(self, recorder: "InFlightRecorder", inner: Any) -> None:
        self._recorder = recorder
        self._inner = inner
        self._open = True

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        self._recorder._answered(self)
        return self._inner.get(block, timeout)

    def get_nowait(self) -> Any:
        return self.get()

    def successful(self) -> bool:
        return self._inner.successful()


class _Transaction:
    def __init__(self, recorder: "InFlightRecorder", inner: Any) -> None:
        self._recorder = recorder
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def commit_async(self) -> _Tracked:
        self._recorder._multi(list(self._inner.operations))
        return self._recorder._issued(self._inner.commit_async())

    def commit(self) -> list[Any]:
        self._recorder._multi(list(self._inner.operations))
        return self._inner.commit()


class InFlightRecorder:
    """Delegates to `inner`; `max_in_flight`, `in_flight` and `multis` (the op tuples of each multi)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.issued = 0
        self.multis: list[list[tuple]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "chroot":
            self._inner.chroot = value
        else:
            super().__setattr__(name, value)

    def reset(self) -> None:
        with self._lock:
            self.max_in_flight = self.in_flight
            self.issued = 0
            self.multis = []

    # ------------------------------------------------------------------ recording
    def _issued(self, inner: Any) -> _Tracked:
        with self._lock:
            self.in_flight += 1
            self.issued += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return _Tracked(self, inner)

    def _answered(self, tracked: _Tracked) -> None:
        with self._lock:
            if tracked._open:
                tracked._open = False
                self.in_flight -= 1

    def _multi(self, ops: list[tuple]) -> None:
        with self._lock:
            self.multis.append(ops)

    # ------------------------------------------------------------------ the async calls KafkaZkClient pipelines
    def get_async(self, path: str, watch: Any = None) -> _Tracked:
        return self._issued(self._inner.get_async(path, watch))

    def exists_async(self, path: str, watch: Any = None) -> _Tracked:
        return self._issued(self._inner.exists_async(path, watch))

    def transaction(self) -> _Transaction:
        return _Transaction(self, self._inner.transaction())
