"""Worker threads for disk work, lighter than ``run_in_executor``.

Each worker drains a ``SimpleQueue`` and hands results back to the event loop with one
``call_soon_threadsafe`` per drained batch, not one per job, so under load many completions
cost one loop wake-up. Jobs with the same ``key`` (a topic-partition) go to the same worker,
which keeps appends to one log on one thread.

Thread affinity: ``submit`` is called on the event loop; jobs run on the workers.

The workers are also the owners of the partition logs (``broker/storage/log_owner.py``'s ``LogOwners``): a thread
that is not the loop (the storage scheduler, the cleaner, the checkpoint thread) hands a partition's log command to
that partition's worker with ``call`` / ``call_each`` and waits for it, so every change to one log runs on one
thread, in one queue with that partition's appends.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import threading
from queue import SimpleQueue
from typing import Any, Callable, Hashable, List, Optional, Sequence, Tuple, TypeVar

from broker.storage.log_owner import BlockingCommand, InlineLogOwners, TopicPartition, run_each

log = logging.getLogger(__name__)

_Job = Tuple["asyncio.Future[Any]", Callable[..., Any], Tuple[Any, ...]]
#: one item's result, or the exception it raised
Outcome = Tuple[Any, Optional[Exception]]
_STOP = None
T = TypeVar("T")


class IoWorkers:
    def __init__(self, num_threads: int, name: str = "io") -> None:
        self._queues: List["SimpleQueue[Optional[_Job]]"] = [SimpleQueue() for _ in range(max(1, num_threads))]
        self._threads = [threading.Thread(target=self._run, args=(q,), name=f"{name}-{i}", daemon=True)
                         for i, q in enumerate(self._queues)]
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._next = 0
        #: held by each job of a one_at_a_time submit_each while it runs
        self._turn = threading.Lock()
        #: guards ``_stopped`` against a blocking ``call`` queued after the stop marker (nobody would run it)
        self._stop_lock = threading.Lock()
        self._stopped = False
        #: the workers ended (joined): any thread may run a command now
        self._gone = False
        self._idents = [0] * len(self._threads)
        for t in self._threads:
            t.start()
        for i, t in enumerate(self._threads):
            self._idents[i] = t.ident or 0

    # --- LogOwners: the partition logs' owner threads, for callers that are not the loop ----------------------
    def _index(self, key: Hashable) -> int:
        return hash(key) % len(self._queues)

    def is_owner(self, key: TopicPartition) -> bool:
        return self._gone or threading.get_ident() == self._idents[self._index(key)]

    def call(self, key: TopicPartition, fn: Callable[[], T], cancelled: Optional[Callable[[], bool]] = None) -> T:
        i = self._index(key)
        if threading.get_ident() == self._idents[i]:
            return fn()
        cmd = BlockingCommand(fn)
        with self._stop_lock:
            if not self._stopped:
                self._queues[i].put((None, cmd.run, ()))  # type: ignore[arg-type]
                cmd_queued = True
            else:
                cmd_queued = False
        if not cmd_queued:
            self._threads[i].join(timeout=30)  # it finishes what was queued before the stop first
            return fn()  # the owners stopped (broker shutdown): the caller is the only one left
        return cmd.wait(key, cancelled)  # type: ignore[return-value]

    def call_each(self, keys: Sequence[TopicPartition], fn: Callable[[TopicPartition], T], chunk_size: int = 256
                  ) -> List[Tuple[Optional[T], Optional[Exception]]]:
        groups: List[List[int]] = [[] for _ in self._queues]
        for i, key in enumerate(keys):
            groups[self._index(key)].append(i)
        out: List[Tuple[Optional[T], Optional[Exception]]] = [(None, None)] * len(keys)
        pending: List[Tuple[List[int], BlockingCommand]] = []
        for qi, indexes in enumerate(groups):
            for start in range(0, len(indexes), chunk_size):
                chunk = indexes[start:start + chunk_size]
                chunk_keys = [keys[j] for j in chunk]
                if threading.get_ident() == self._idents[qi]:
                    for j, outcome in zip(chunk, _run_each(fn, chunk_keys)):
                        out[j] = outcome
                    continue
                cmd = BlockingCommand(functools.partial(_run_each, fn, chunk_keys))
                with self._stop_lock:
                    queued = not self._stopped
                    if queued:
                        self._queues[qi].put((None, cmd.run, ()))  # type: ignore[arg-type]
                if queued:
                    pending.append((chunk, cmd))
                else:
                    self._threads[qi].join(timeout=30)
                    for j, outcome in zip(chunk, _run_each(fn, chunk_keys)):
                        out[j] = outcome
        for chunk, cmd in pending:
            for j, outcome in zip(chunk, cmd.wait(keys[chunk[0]], None)):  # type: ignore[call-overload]
                out[j] = outcome
        return out

    def submit(self, fn: Callable[..., Any], *args: Any, key: Optional[Hashable] = None) -> "asyncio.Future[Any]":
        if key is None:
            self._next = (self._next + 1) % len(self._queues)
            q = self._queues[self._next]
        else:
            q = self._queues[hash(key) % len(self._queues)]
        return self._submit_to(q, fn, *args)

    def submit_each(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[Hashable],
                    chunk_size: int = 256, one_at_a_time: bool = False
                    ) -> List[Tuple[List[int], "asyncio.Future[List[Outcome]]"]]:
        """``fn(item)`` for every item, on the worker ``submit(key=...)`` would use for its key (so it stays
        ordered with that partition's other jobs), ``chunk_size`` items per job: 10,000 partitions in a
        LeaderAndIsr cost a few dozen hand-offs instead of 10,000. Returns, per job, the indexes of its items and
        a future of their outcomes, (result, None) or (None, exception), in that order.

        ``one_at_a_time``: the jobs are queued at once (their place in each worker's order is kept) but run one
        after the other, whichever worker they are on. For work that holds the GIL but for short blocking calls (a
        Produce's appends: a pwrite each): side by side, workers would hand the GIL to one another at every such
        call, and those hand-offs (futex calls, context switches) cost more CPU than overlapping the calls saves
        (measured on a Produce over 1,000 partitions: the broker's system CPU per request fell to a third)."""
        groups: List[List[int]] = [[] for _ in self._queues]
        for i, key in enumerate(keys):
            groups[hash(key) % len(self._queues)].append(i)
        jobs: List[Tuple[List[int], "asyncio.Future[List[Outcome]]"]] = []
        for qi, indexes in enumerate(groups):
            for start in range(0, len(indexes), chunk_size):
                chunk = indexes[start:start + chunk_size]
                chunk_items = [items[i] for i in chunk]
                if one_at_a_time:
                    jobs.append((chunk, self._submit_to(self._queues[qi], _run_each_in_turn, self._turn, fn,
                                                        chunk_items)))
                else:
                    jobs.append((chunk, self._submit_to(self._queues[qi], _run_each, fn, chunk_items)))
        return jobs

    async def run_each(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[Hashable],
                       chunk_size: int = 256, one_at_a_time: bool = False) -> List[Outcome]:
        """As :meth:`submit_each`, waiting for all: the outcome of each item, in the order of ``items``."""
        return await _gather(self.submit_each(fn, items, keys, chunk_size, one_at_a_time), len(items))

    def _submit_to(self, q: "SimpleQueue[Optional[_Job]]", fn: Callable[..., Any], *args: Any
                   ) -> "asyncio.Future[Any]":
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut = loop.create_future()
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
                if fut is None:  # a blocking caller's command (LogOwners.call): it hands its result over itself
                    fn()
                else:
                    try:
                        done.append((fut, fn(*args), None))
                    except BaseException as exc:  # delivered to the awaiting coroutine
                        done.append((fut, None, exc))
                if q.empty():
                    break
                job = q.get()
                if job is _STOP:
                    if done:
                        self._deliver(done)
                    return
            if done:
                self._deliver(done)

    def _deliver(self, done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
        loop = done[0][0].get_loop()
        try:
            loop.call_soon_threadsafe(_complete, done)
        except RuntimeError:  # loop closed during shutdown
            pass

    def shutdown(self) -> None:
        with self._stop_lock:
            self._stopped = True
            for q in self._queues:
                q.put(_STOP)
        for t in self._threads:
            t.join(timeout=30)
        self._gone = True


async def _gather(jobs: List[Tuple[List[int], "asyncio.Future[List[Outcome]]"]], n: int) -> List[Outcome]:
    """The outcomes of ``submit_each``'s jobs, back in the order of its ``n`` items."""
    out: List[Outcome] = [(None, None)] * n
    for indexes, fut in jobs:
        for i, outcome in zip(indexes, await fut):
            out[i] = outcome
    return out


def _run_each(fn: Callable[[Any], Any], items: List[Any]) -> List[Outcome]:
    """Worker side of :meth:`IoWorkers.submit_each`: one item's failure does not stop the others."""
    return run_each(fn, items)


def _run_each_in_turn(turn: threading.Lock, fn: Callable[[Any], Any], items: List[Any]) -> List[Outcome]:
    """Worker side of a ``one_at_a_time`` :meth:`IoWorkers.submit_each`: no other such job runs meanwhile (it
    holds no other lock and waits for nothing, so the jobs waiting for their turn cannot deadlock)."""
    with turn:
        return _run_each(fn, items)


def _complete(done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
    for fut, result, exc in done:
        if fut.done():
            continue
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)


class InlineIoWorkers:
    """:class:`IoWorkers` without threads, for unit tests (``ReplicaManager(io_threads=0)``): each job runs at once
    on the calling thread (the event loop) and its future is already done when ``submit`` returns, with the job's
    exception in it as the threaded workers deliver it. A test then needs no polling for a job's outcome, and the
    loop thread is every log's owner (the caller is the owner, as in :class:`InlineLogOwners`). The broker always
    uses threads (num.io.threads is at least 1)."""

    def __init__(self) -> None:
        self._owners = InlineLogOwners()

    # --- LogOwners: the caller is the owner ---------------------------------------------------------------------
    def is_owner(self, key: TopicPartition) -> bool:
        return True

    def call(self, key: TopicPartition, fn: Callable[[], T], cancelled: Optional[Callable[[], bool]] = None) -> T:
        return self._owners.call(key, fn, cancelled)

    def call_each(self, keys: Sequence[TopicPartition], fn: Callable[[TopicPartition], T], chunk_size: int = 256
                  ) -> List[Tuple[Optional[T], Optional[Exception]]]:
        return self._owners.call_each(keys, fn)

    # --- jobs for the event loop ----------------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], *args: Any, key: Optional[Hashable] = None) -> "asyncio.Future[Any]":
        fut: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:  # delivered to the awaiting coroutine, as by IoWorkers
            fut.set_exception(exc)
        return fut

    def submit_each(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[Hashable],
                    chunk_size: int = 256, one_at_a_time: bool = False
                    ) -> List[Tuple[List[int], "asyncio.Future[List[Outcome]]"]]:
        """As :meth:`IoWorkers.submit_each` with one worker: items in their order, ``chunk_size`` per job (each job
        runs alone, so ``one_at_a_time`` holds by construction)."""
        jobs: List[Tuple[List[int], "asyncio.Future[List[Outcome]]"]] = []
        for start in range(0, len(items), chunk_size):
            chunk = list(range(start, min(start + chunk_size, len(items))))
            jobs.append((chunk, self.submit(_run_each, fn, [items[i] for i in chunk])))
        return jobs

    async def run_each(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[Hashable],
                       chunk_size: int = 256, one_at_a_time: bool = False) -> List[Outcome]:
        """As :meth:`IoWorkers.run_each`: the outcome of each item, in the order of ``items``."""
        return await _gather(self.submit_each(fn, items, keys, chunk_size, one_at_a_time), len(items))

    def shutdown(self) -> None:
        """Nothing to stop."""
