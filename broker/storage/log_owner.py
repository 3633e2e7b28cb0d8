"""Who runs a partition log's commands: one owner thread per partition (issue 20's PartitionLog).

Every change to a Log (an append, a truncation, a roll, retention's deletion, a flush's recovery point, the cleaner's
segment swap, producer expiry, a close) is a command run by the partition's owner, one after the other. Readers
never wait for one: after each command the Log publishes immutable offsets and a segment view (``LogOffsets``,
``LogView``) that any thread reads as they are.

The owner is chosen by whoever hosts the logs: in the broker, the ReplicaManager's I/O worker that a partition's key
hashes to (``replica/io_workers.py`` implements :class:`LogOwners`), so appends (already queued there) and the
scheduler's and cleaner's commands share one queue per partition. Without one (tools, unit tests of storage alone)
:class:`InlineLogOwners` runs a command on the caller's thread: the caller is the owner.

A thread that is not the owner (the storage scheduler, the cleaner, the checkpoint thread) hands the command over and
waits for its result. Long I/O that changes no state (a segment's fsync, the cleaner's pass over the segments) stays
on the thread that asked; only the short state changes around it are commands.

Checking: with ``BROKER_CHECK_LOG_OWNER=1`` (the test suites set it) every Log command asserts that it runs on its
owner, so a path that reaches the Log from another thread fails its test instead of racing in production.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Optional, Protocol, Sequence, TypeVar

from broker.storage.errors import StorageError

__all__ = ["LogOwners", "InlineLogOwners", "LogCommandCancelled", "NotLogOwnerError", "CHECK_OWNER",
           "TopicPartition", "run_each"]

T = TypeVar("T")
TopicPartition = tuple[str, int]

#: assert in every Log command that it runs on the partition's owner (tests; off in production: one call each)
CHECK_OWNER = os.environ.get("BROKER_CHECK_LOG_OWNER", "") not in ("", "0")


class LogCommandCancelled(StorageError):
    """A command was withdrawn by its caller before its owner started it (the cleaner's swap of an aborted clean)."""


class NotLogOwnerError(AssertionError):
    """A Log command ran on a thread that is not the partition's owner (only raised with BROKER_CHECK_LOG_OWNER)."""


class LogOwners(Protocol):
    """Runs each partition's log commands on that partition's one owner thread."""

    def call(self, key: TopicPartition, fn: Callable[[], T], cancelled: Optional[Callable[[], bool]] = None) -> T:
        """Run ``fn`` on ``key``'s owner and return its result (or raise its exception). Called from a thread that
        is not an event loop. On the owner itself, or once the owners have stopped, ``fn`` runs at once. While it
        waits, ``cancelled()`` is asked now and then: True before the owner started ``fn`` withdraws it
        (LogCommandCancelled); once started, the command always completes."""
        ...

    def call_each(self, keys: Sequence[TopicPartition], fn: Callable[[TopicPartition], T]
                  ) -> list[tuple[Optional[T], Optional[Exception]]]:
        """``fn(key)`` on each key's owner, a few hand-offs in all (one per owner and chunk), not one per key: a
        periodic pass over 10,000 partitions. Returns (result, None) or (None, exception) per key, in order."""
        ...

    def is_owner(self, key: TopicPartition) -> bool:
        """The calling thread may run ``key``'s commands (its owner, or any thread once the owners stopped)."""
        ...


class InlineLogOwners:
    """The caller is the owner: for storage used alone (tools, unit tests), where one thread drives the logs."""

    def call(self, key: TopicPartition, fn: Callable[[], T], cancelled: Optional[Callable[[], bool]] = None) -> T:
        if cancelled is not None and cancelled():
            raise LogCommandCancelled("command for %s-%d withdrawn" % key)
        return fn()

    def call_each(self, keys: Sequence[TopicPartition], fn: Callable[[TopicPartition], T]
                  ) -> list[tuple[Optional[T], Optional[Exception]]]:
        return run_each(fn, keys)

    def is_owner(self, key: TopicPartition) -> bool:
        return True


I = TypeVar("I")


def run_each(fn: Callable[[I], T], items: Sequence[I]) -> list[tuple[Optional[T], Optional[Exception]]]:
    """``fn(item)`` for each item: (result, None) or (None, exception) each, so one item's failure does not stop the
    others (a pass over thousands of partitions, where one log's dir may have failed)."""
    out: list[tuple[Optional[T], Optional[Exception]]] = []
    for item in items:
        try:
            out.append((fn(item), None))
        except Exception as exc:  # noqa: BLE001 - handed back with the item it belongs to
            out.append((None, exc))
    return out


class BlockingCommand:
    """One command handed to an owner by a waiting thread: started at most once, withdrawn only before it starts."""

    __slots__ = ("fn", "_lock", "_started", "_cancelled", "_done", "result", "error")

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self._lock = threading.Lock()
        self._started = False
        self._cancelled = False
        self._done = threading.Event()
        self.result: object = None
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        """Owner side."""
        with self._lock:
            if self._cancelled:
                return
            self._started = True
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the waiting thread
            self.error = exc
        finally:
            self._done.set()

    def wait(self, key: TopicPartition, cancelled: Optional[Callable[[], bool]]) -> object:
        """Caller side: the command's result, its exception, or LogCommandCancelled."""
        while not self._done.wait(0.1 if cancelled is not None else None):
            if cancelled is not None and cancelled():
                with self._lock:
                    if not self._started:
                        self._cancelled = True
                        raise LogCommandCancelled("command for %s-%d withdrawn" % key)
                # started: it completes without waiting for anything, so keep waiting
        if self.error is not None:
            raise self.error
        return self.result
