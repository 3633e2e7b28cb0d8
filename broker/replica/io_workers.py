"""Worker threads for disk work, lighter than ``run_in_executor``.

Each worker drains a ``SimpleQueue`` and hands results back to the event loop with one
``call_soon_threadsafe`` per drained batch, not one per job, so under load many completions
cost one loop wake-up. Jobs with the same ``key`` (a topic-partition) go to the same worker,
which keeps appends to one log on one thread.

Thread affinity: ``submit`` is called on the event loop; jobs run on the workers.

Ownership is the worker's run lock, held while it runs a job, and the worker is its usual holder. The event loop may
borrow it (``run_if_idle``) for a job of its own when that worker is idle: nothing the loop handed it still pending,
the lock free. The job then runs at once on the loop, in the same order as if it had been queued (after everything the
loop queued before, serialized with the other threads' commands by the lock), without the two thread wake-ups of a
hand-off, which cost a small Produce more CPU than its append (measured: 220 against 120 µs per request).

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
import time
from queue import SimpleQueue
from typing import Any, Callable, Hashable, List, Optional, Sequence, Tuple, TypeVar

from broker.storage.log_owner import BlockingCommand, InlineLogOwners, TopicPartition, run_each

log = logging.getLogger(__name__)

_Job = Tuple["asyncio.Future[Any]", Callable[..., Any], Tuple[Any, ...]]
#: one item's result, or the exception it raised
Outcome = Tuple[Any, Optional[Exception]]
_STOP = None
T = TypeVar("T")


class NotRun:
    """``run_if_idle``'s answer when the owner was busy: queue the job instead."""


NOT_RUN = NotRun()
#: an inline run slower than this (wall clock: a disk stalling its writes, a large gzip batch, or the thread preempted)
#: is slow; two slow runs in a row on one worker, or one slower than ``_INLINE_STALL_S``, send that worker's jobs back
#: to its queue for ``_INLINE_BACKOFF_S``, so one slow log cannot stall every connection's loop for long. A single run
#: between the two is taken for a preemption (the host's or another process's: measured on this 2-core VM, a 165 KB
#: lz4 append of ~0.2 ms of CPU took over 2 ms of wall time a few times a minute) and does not send a second of a busy
#: partition's appends through the worker hand-off.
_INLINE_SLOW_S = 0.002
_INLINE_STALL_S = 0.02
_INLINE_BACKOFF_S = 1.0


class IoWorkers:
    def __init__(self, num_threads: int, name: str = "io") -> None:
        self._queues: List["SimpleQueue[Optional[_Job]]"] = [SimpleQueue() for _ in range(max(1, num_threads))]
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}", daemon=True)
                         for i in range(len(self._queues))]
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
        #: held by whoever runs a worker's jobs (that worker, or the loop borrowing it: ``run_if_idle``)
        self._run_locks = [threading.Lock() for _ in self._queues]
        #: the thread borrowing each worker's ownership (0: none)
        self._borrower = [0] * len(self._queues)
        #: per worker, the jobs the loop submitted that were not delivered back yet (only the loop touches it)
        self._loop_pending = [0] * len(self._queues)
        #: per worker, the monotonic time before which ``run_if_idle`` does not borrow it (a slow run was seen)
        self._inline_after = [0.0] * len(self._queues)
        #: per worker, whether its last inline run was slow
        self._inline_slow = [False] * len(self._queues)
        for t in self._threads:
            t.start()
        for i, t in enumerate(self._threads):
            self._idents[i] = t.ident or 0

    # --- LogOwners: the partition logs' owner threads, for callers that are not the loop ----------------------
    def _index(self, key: Hashable) -> int:
        return hash(key) % len(self._queues)

    def is_owner(self, key: TopicPartition) -> bool:
        i = self._index(key)
        me = threading.get_ident()
        return self._gone or me == self._idents[i] or me == self._borrower[i]

    def call(self, key: TopicPartition, fn: Callable[[], T], cancelled: Optional[Callable[[], bool]] = None) -> T:
        i = self._index(key)
        me = threading.get_ident()
        if me == self._idents[i] or me == self._borrower[i]:
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
                if threading.get_ident() in (self._idents[qi], self._borrower[qi]):
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
            qi = self._next
        else:
            qi = hash(key) % len(self._queues)
        return self._submit_to(qi, fn, *args)

    def run_if_idle(self, key: Hashable, fn: Callable[..., T], *args: Any) -> "T | NotRun":
        """On the event loop: ``fn(*args)`` run here, now, as ``key``'s owner, when its worker is idle (nothing the
        loop submitted to it still pending, no other thread's command running); else ``NOT_RUN`` and nothing done.
        ``fn``'s exception is raised here. For short jobs that block on nothing but a write to the page cache (a
        Produce's append): the loop stops for as long as they run, and two runs in a row slower than 2 ms (or one
        slower than 20 ms) make that worker's jobs go through its queue for the next second."""
        i = hash(key) % len(self._queues)
        if self._loop_pending[i] or self._stopped:
            return NOT_RUN
        start = time.monotonic()
        if start < self._inline_after[i]:
            return NOT_RUN
        lock = self._run_locks[i]
        if not lock.acquire(False):
            return NOT_RUN
        self._borrower[i] = threading.get_ident()
        try:
            return fn(*args)
        finally:
            self._borrower[i] = 0
            lock.release()
            end = time.monotonic()
            if end - start <= _INLINE_SLOW_S:
                self._inline_slow[i] = False
            elif self._inline_slow[i] or end - start > _INLINE_STALL_S:
                self._inline_slow[i] = False
                self._inline_after[i] = end + _INLINE_BACKOFF_S
            else:
                self._inline_slow[i] = True

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
                    jobs.append((chunk, self._submit_to(qi, _run_each_in_turn, self._turn, fn, chunk_items)))
                else:
                    jobs.append((chunk, self._submit_to(qi, _run_each, fn, chunk_items)))
        return jobs

    async def run_each(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[Hashable],
                       chunk_size: int = 256, one_at_a_time: bool = False) -> List[Outcome]:
        """As :meth:`submit_each`, waiting for all: the outcome of each item, in the order of ``items``."""
        return await _gather(self.submit_each(fn, items, keys, chunk_size, one_at_a_time), len(items))

    def _submit_to(self, qi: int, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._loop_pending[qi] += 1
        self._queues[qi].put((fut, fn, args))
        return fut

    def _run(self, qi: int) -> None:
        q = self._queues[qi]
        lock = self._run_locks[qi]
        while True:
            job = q.get()
            if job is _STOP:
                return
            done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]] = []
            while job is not None:
                fut, fn, args = job
                lock.acquire()
                try:
                    if fut is None:  # a blocking caller's command (LogOwners.call): it hands its result over itself
                        fn()
                    else:
                        try:
                            done.append((fut, fn(*args), None))
                        except BaseException as exc:  # delivered to the awaiting coroutine
                            done.append((fut, None, exc))
                finally:
                    lock.release()
                if q.empty():
                    break
                job = q.get()
                if job is _STOP:
                    if done:
                        self._deliver(qi, done)
                    return
            if done:
                self._deliver(qi, done)

    def _deliver(self, qi: int, done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
        loop = done[0][0].get_loop()
        try:
            loop.call_soon_threadsafe(self._complete, qi, done)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _complete(self, qi: int, done: List[Tuple["asyncio.Future[Any]", Any, Optional[BaseException]]]) -> None:
        """On the loop: the delivered jobs are no longer pending (``run_if_idle``), and their futures get results."""
        self._loop_pending[qi] -= len(done)
        _complete(done)

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
    def run_if_idle(self, key: Hashable, fn: Callable[..., T], *args: Any) -> "T | NotRun":
        """As :meth:`IoWorkers.run_if_idle`: the loop is every log's owner here, so the job always runs."""
        return fn(*args)

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
