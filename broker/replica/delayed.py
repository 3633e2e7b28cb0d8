"""Delayed operations (Kafka's DelayedProduce / DelayedDeleteRecords) and the purgatory that wakes them.

An acks=-1 produce waits until the high watermark passes the last appended offset of every
partition it wrote; a DeleteRecords waits until the low watermark (the smallest log start offset
of the live replicas) passes the requested offset. Each waits on a future with the request's
timeout; the ReplicaManager calls :meth:`OperationPurgatory.check_and_complete` for a partition
whenever its high/low watermark moves or its leadership changes, so a waiting request completes
in the same event-loop turn as the follower fetch that satisfied it.

Loop affinity: event loop only.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Set

from broker.errors import ErrorCode


class DelayedOperation:
    """A request waiting for a condition over some keys; completes its future once."""

    def __init__(self) -> None:
        self.future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.keys: List[Hashable] = []

    @property
    def completed(self) -> bool:
        return self.future.done()

    def try_complete(self) -> bool:
        """Check the condition; complete and return True when satisfied."""
        raise NotImplementedError

    def try_complete_key(self, key: Hashable) -> bool:
        """Re-check after ``key`` changed (its HW, low watermark or leadership); by default the whole condition.
        An operation over many keys overrides it to look at ``key`` alone, so a request over 1,000 partitions
        costs O(partitions) checks as they complete one by one, not O(partitions^2)."""
        return self.try_complete()

    def force_complete(self) -> bool:
        if self.future.done():
            return False
        self.future.set_result(None)
        return True


class OperationPurgatory:
    """Delayed operations watched by key (a topic-partition)."""

    def __init__(self) -> None:
        self._watchers: Dict[Hashable, Set[DelayedOperation]] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """True if ``op`` completed at once; else it waits on ``keys``.

        The check runs after the op is registered, so a completion racing with registration is
        not lost (everything runs on the loop, but the check happens last anyway).
        """
        op.keys = list(keys)
        if op.try_complete():
            return True
        for k in op.keys:
            self._watchers.setdefault(k, set()).add(op)
        return op.try_complete()

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check every operation watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        n = 0
        for op in list(ops):
            if op.completed or op.try_complete_key(key):
                self.remove(op)
                n += 1
        return n

    def watching(self) -> bool:
        """Whether any operation waits (one test before checking many keys)."""
        return bool(self._watchers)

    def remove(self, op: DelayedOperation) -> None:
        for k in op.keys:
            s = self._watchers.get(k)
            if s is not None:
                s.discard(op)
                if not s:
                    del self._watchers[k]

    def num_delayed(self, key: Optional[Hashable] = None) -> int:
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({op for s in self._watchers.values() for op in s})

    def __len__(self) -> int:
        return self.num_delayed()


@dataclass
class ProduceStatus:
    """One partition of a waiting produce: the offset the HW must reach and the result to send."""

    required_offset: int
    result: Any  # ProduceResult; error_code REQUEST_TIMED_OUT until satisfied
    acks_pending: bool = True


_REQUEST_TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
_NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_KAFKA_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


class DelayedProduce(DelayedOperation):
    """acks=-1: done when every partition's HW reached its required offset, or errored."""

    def __init__(self, statuses: Dict[Any, ProduceStatus], get_partition: Callable[[Any], Any],
                 missing_error: Optional[Callable[[Any], int]] = None) -> None:
        """``missing_error(tp)``: the answer for a partition no longer hosted (KAFKA_STORAGE_ERROR once its log dir
        failed); default NOT_LEADER_OR_FOLLOWER."""
        super().__init__()
        self.statuses = statuses
        self._get_partition = get_partition
        self._missing_error = missing_error
        #: the partitions still waiting for their HW
        self._pending: Dict[Any, ProduceStatus] = {}
        for tp, st in statuses.items():
            if st.result.error_code == 0:
                st.acks_pending = True
                st.result.error_code = _REQUEST_TIMED_OUT
                self._pending[tp] = st
            else:
                st.acks_pending = False

    def _check(self, tp: Any, st: ProduceStatus) -> None:
        p = self._get_partition(tp)
        if p is None:
            # The replica went away while we waited (deleted, reassigned, or its log dir failed).
            done = False
            error = _NOT_LEADER_OR_FOLLOWER
            if self._missing_error is not None:
                code = self._missing_error(tp)
                if code == _KAFKA_STORAGE_ERROR:
                    error = code
        else:
            done, error = p.check_enough_replicas_reach_offset(st.required_offset)
        if error or done:
            st.acks_pending = False
            st.result.error_code = error
            del self._pending[tp]

    def try_complete(self) -> bool:
        for tp, st in list(self._pending.items()):
            self._check(tp, st)
        if self._pending:
            return False
        return self.force_complete()

    def try_complete_key(self, key: Hashable) -> bool:
        st = self._pending.get(key)
        if st is not None:
            self._check(key, st)
        if self._pending:
            return False
        return self.force_complete()


@dataclass
class DeleteRecordsStatus:
    required_offset: int
    error_code: int
    low_watermark: int
    acks_pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: done when every partition's low watermark reached the requested offset."""

    def __init__(self, statuses: Dict[Any, DeleteRecordsStatus], get_partition: Callable[[Any], Any],
                 missing_error: Optional[Callable[[Any], int]] = None) -> None:
        super().__init__()
        self.statuses = statuses
        self._get_partition = get_partition
        self._missing_error = missing_error
        for st in statuses.values():
            if st.error_code == 0:
                st.acks_pending = True
                st.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
            else:
                st.acks_pending = False

    def try_complete(self) -> bool:
        for tp, st in self.statuses.items():
            if not st.acks_pending:
                continue
            p = self._get_partition(tp)
            if p is None:
                error = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if self._missing_error is not None and self._missing_error(tp) == _KAFKA_STORAGE_ERROR:
                    error = _KAFKA_STORAGE_ERROR
                reached, low = False, -1
            elif not p.is_leader:
                reached, error, low = False, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1
            else:
                low = p.low_watermark_if_leader()
                reached, error = low >= st.required_offset, 0
            if error or reached:
                st.acks_pending = False
                st.error_code = error
                st.low_watermark = low
        if any(st.acks_pending for st in self.statuses.values()):
            return False
        return self.force_complete()
