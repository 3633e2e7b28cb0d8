"""Requests that wait for a condition (Kafka's DelayedOperation) and the purgatory that completes them.

One implementation, one instance per kind of operation, as Kafka's ReplicaManager has them:

- :class:`DelayedProduce` (``delayed_produce_purgatory``): an acks=-1 produce waits until the high watermark
  passes the last appended offset of every partition it wrote;
- :class:`DelayedFetch` (``delayed_fetch_purgatory``): a long-poll Fetch that found fewer than ``min_bytes``
  waits until a partition it reads has news (new records for a follower, a moved high watermark for a
  consumer, a leadership change);
- :class:`DelayedRemoteFetch` (``delayed_remote_fetch_purgatory``): a consumer's Fetch whose one partition is being
  read from remote storage (KIP-405) waits for that read, up to ``remote.fetch.max.wait.ms``, or until a partition
  of the fetch is no longer hosted here;
- :class:`DelayedDeleteRecords` (``delayed_delete_records_purgatory``): DeleteRecords waits until the low
  watermark (the smallest log start offset of the live replicas) passes the requested offset;
- :class:`DelayedElectLeader` (``delayed_elect_leader_purgatory``): ElectLeaders waits until this broker's
  metadata shows the elected leaders.

An operation is watched by keys (topic-partitions). Whoever changes a partition calls
:meth:`DelayedOperationPurgatory.check_and_complete` with its key, so a waiting request completes in the same
event-loop turn as the append or follower fetch that satisfied it; a request whose condition does not come in
time completes when its timeout (``delay_ms``, counted from when it is watched) expires, on a timer of the
purgatory's :class:`~broker.util.clock.Clock` (the event loop's in the broker).
An operation completes once: :meth:`DelayedOperation.force_complete` runs ``on_complete``, sets its
future (what the request's coroutine awaits) and stops watching.

Checks after one key changed cost O(1) per waiting operation (:meth:`DelayedOperation.try_complete_key`), so a
request over 1,000 partitions costs O(partitions) checks as they complete one by one, not O(partitions^2).

Loop affinity: event loop only.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Generic, Hashable, Iterable, List, Optional, Set, Tuple, TypeVar)

from broker.errors import ErrorCode
from broker.util.clock import SYSTEM_CLOCK, Clock, Timer

_REQUEST_TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
_NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_KAFKA_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)
_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class DelayedOperation:
    """A request waiting for a condition over some keys, up to ``delay_ms``; completes its future once."""

    def __init__(self, delay_ms: float) -> None:
        #: the timeout, counted from when the purgatory starts watching the operation
        self.delay_ms = delay_ms
        self.future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.keys: List[Hashable] = []
        self._purgatory: Optional["DelayedOperationPurgatory[Any]"] = None
        self._timer: Optional[Timer] = None

    @property
    def completed(self) -> bool:
        return self.future.done()

    def try_complete(self) -> bool:
        """Check the whole condition; when it holds, :meth:`force_complete` and return True."""
        raise NotImplementedError

    def try_complete_key(self, key: Hashable) -> bool:
        """Re-check after ``key`` changed; by default the whole condition. An operation over many keys overrides it
        to look at ``key`` alone."""
        return self.try_complete()

    def on_complete(self) -> None:
        """Runs once, when the operation completes (condition met, expired or forced): make the answer final."""

    def on_expiration(self) -> None:
        """Runs after :meth:`on_complete` when the operation completed because its timeout expired."""

    def force_complete(self) -> bool:
        """Complete now, whatever the condition; False if it had already completed (or was cancelled)."""
        if self.future.done():
            return False
        self._stop_waiting()
        self.on_complete()
        self.future.set_result(None)
        return True

    def cancel(self) -> None:
        """The request stopped waiting (its connection went, its task was cancelled): forget the operation."""
        self._stop_waiting()
        if not self.future.done():
            self.future.cancel()

    def _expire(self) -> None:
        self._timer = None
        purgatory = self._purgatory
        if self.force_complete():
            if purgatory is not None:
                purgatory.expired += 1
            self.on_expiration()

    def _stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        purgatory, self._purgatory = self._purgatory, None
        if purgatory is not None:
            purgatory._unwatch(self)


T = TypeVar("T", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[T]):
    """Delayed operations of one kind, watched by key (a topic-partition), expired on its clock's timers."""

    def __init__(self, name: str, clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: whose timers expire the operations (a test's ManualClock expires them when advanced)."""
        #: Kafka's purgatory name ("Produce", "Fetch", "DeleteRecords", "ElectLeader")
        self.name = name
        self._clock = clock
        self._watchers: Dict[Hashable, Set[T]] = {}
        self._delayed: Set[T] = set()
        #: operations completed by their timeout so far (Kafka's Delayed*Metrics ExpiresPerSec meters)
        self.expired = 0

    def try_complete_else_watch(self, op: T, keys: Iterable[Hashable]) -> bool:
        """True if ``op`` completed at once; else it waits on ``keys`` until a check completes it or it expires.

        Kafka checks a second time after watching, for a completion racing with the registration; here
        everything runs on the event loop, so nothing can change between the check and the watch.
        """
        op.keys = list(keys)
        if op.try_complete():
            return True
        if op.completed:  # cancelled meanwhile
            return True
        for k in op.keys:
            watchers = self._watchers.get(k)
            if watchers is None:
                self._watchers[k] = {op}
            else:
                watchers.add(op)
        self._delayed.add(op)
        op._purgatory = self
        op._timer = self._clock.call_later_ms(op.delay_ms, op._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check every operation watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        n = 0
        for op in list(ops):
            if op.completed:
                op._stop_waiting()  # cancelled without cancel(): no longer watched
            elif op.try_complete_key(key):
                n += 1
        return n

    def watching(self) -> bool:
        """Whether any operation waits (one test before checking many keys)."""
        return bool(self._watchers)

    def watched(self) -> int:
        """How many (key, operation) watches there are (Kafka's PurgatorySize gauge counts these). Safe from a
        scrape's thread (a copy of the watcher sets is walked)."""
        return sum(len(s) for s in list(self._watchers.values()))

    def num_delayed(self, key: Optional[Hashable] = None) -> int:
        """Operations waiting (on ``key`` if given; Kafka's NumDelayedOperations gauge without one)."""
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len(self._delayed)

    def __len__(self) -> int:
        return len(self._delayed)

    def _unwatch(self, op: T) -> None:
        self._delayed.discard(op)
        watchers = self._watchers
        for k in op.keys:
            s = watchers.get(k)
            if s is not None:
                s.discard(op)
                if not s:
                    del watchers[k]


class _PerPartitionOperation(DelayedOperation):
    """An operation done when each of its partitions is (``_pending``: the partitions still waiting; ``_check``
    drops a partition once it is done or errored), so a change to one partition re-checks that one alone."""

    def __init__(self, delay_ms: float) -> None:
        super().__init__(delay_ms)
        self._pending: Dict[Any, Any] = {}

    def _check(self, tp: Any, st: Any) -> None:
        raise NotImplementedError

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


# --------------------------------------------------------------------------------------------- produce
@dataclass
class ProduceStatus:
    """One partition of a waiting produce: the offset the HW must reach and the result to send."""

    required_offset: int
    result: Any  # ProduceResult; error_code REQUEST_TIMED_OUT until satisfied
    acks_pending: bool = True


class DelayedProduce(_PerPartitionOperation):
    """acks=-1: done when every partition's HW reached its required offset, or errored."""

    def __init__(self, delay_ms: float, statuses: Dict[Any, ProduceStatus], get_partition: Callable[[Any], Any],
                 missing_error: Optional[Callable[[Any], int]] = None) -> None:
        """``missing_error(tp)``: the answer for a partition no longer hosted (KAFKA_STORAGE_ERROR once its log dir
        failed); default NOT_LEADER_OR_FOLLOWER."""
        super().__init__(delay_ms)
        self.statuses = statuses
        self._get_partition = get_partition
        self._missing_error = missing_error
        #: the partitions still waiting for their HW
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



# --------------------------------------------------------------------------------------------- fetch
#: what a parked fetch saw of a partition: (partition, its log, leader id, leader epoch, log start offset, end)
_FetchState = Optional[Tuple[Any, Any, int, int, int, int]]


class DelayedFetch(DelayedOperation):
    """A long-poll Fetch: done when any partition it reads changed since it was read (the end it reads up to, the
    log start offset, leadership, or the replica itself), or at ``max_wait_ms``.

    The state is taken before the read, so what changes while the read runs completes the operation as soon as it
    is watched. The end is the log end offset for a follower (only appends complete its fetch, as in Kafka) and the
    high watermark for a consumer (the last stable offset, read_committed's end, moves only with it). The fetch
    then reads again; with less than ``min_bytes`` still, it parks once more.
    """

    def __init__(self, delay_ms: float, keys: Iterable[Hashable], get_partition: Callable[[Any], Any],
                 from_follower: bool) -> None:
        super().__init__(delay_ms)
        self._get_partition = get_partition
        self._from_follower = from_follower
        self._seen: Dict[Hashable, _FetchState] = {k: self._state(k) for k in keys}

    def _state(self, key: Hashable) -> _FetchState:
        p = self._get_partition(key)
        if p is None:
            return None
        plog = p.log
        if plog is None:
            return (p, None, p.leader_id, p.leader_epoch, -1, -1)
        end = plog.log_end_offset if self._from_follower else plog.high_watermark
        return (p, plog, p.leader_id, p.leader_epoch, plog.log_start_offset, end)

    def watched_keys(self) -> List[Hashable]:
        """The partitions this fetch reads (its keys in the purgatory)."""
        return list(self._seen)

    def try_complete(self) -> bool:
        changed = self._changed
        for key, seen in self._seen.items():
            if changed(key, seen):
                return self.force_complete()
        return False

    def try_complete_key(self, key: Hashable) -> bool:
        seen = self._seen.get(key, _UNWATCHED)
        if seen is _UNWATCHED or not self._changed(key, seen):
            return False
        return self.force_complete()

    def _changed(self, key: Hashable, seen: _FetchState) -> bool:
        """Whether ``key``'s state differs from ``seen`` (what :meth:`_state` gives, compared without building it)."""
        p = self._get_partition(key)
        if seen is None or p is not seen[0]:
            return p is not None or seen is not None
        plog = p.log
        if plog is not seen[1] or p.leader_id != seen[2] or p.leader_epoch != seen[3]:
            return True
        if plog is None:
            return False
        end = plog.log_end_offset if self._from_follower else plog.high_watermark
        return end != seen[5] or plog.log_start_offset != seen[4]


_UNWATCHED: Any = object()


# --------------------------------------------------------------------------------------------- remote fetch
class DelayedRemoteFetch(DelayedOperation):
    """Kafka's DelayedRemoteFetch (KIP-405): a consumer's Fetch waiting for its remote read (``task``), watched by
    the partition read remotely (whose read completing calls ``check_and_complete`` with it). Done, as Kafka's
    ``tryComplete``, when a partition of the fetch (``partitions``: those whose local read had no error) is no
    longer hosted here (``hosted`` false: deleted or stopped, unknown, or its log dir offline; Kafka's
    getPartitionOrException throwing NotLeaderOrFollower, UnknownTopicOrPartition or KafkaStorage) or when the read
    is done (succeeded or failed); else at ``delay_ms`` (remote.fetch.max.wait.ms), when the read is abandoned
    (``onExpiration`` cancels it). What the fetch then answers is the caller's: the read's outcome when it is done,
    else the local read's (no records) as Kafka's ``onComplete``."""

    def __init__(self, delay_ms: float, task: "asyncio.Future[Any]", partitions: Iterable[Hashable],
                 hosted: Callable[[Any], bool]) -> None:
        super().__init__(delay_ms)
        self.task = task
        self._partitions = list(partitions)
        self._hosted = hosted
        #: why it completed: "read" (the remote read is done), "partition" (one is no longer hosted), "expired"
        self.outcome = ""

    def try_complete(self) -> bool:
        hosted = self._hosted
        for tp in self._partitions:
            if not hosted(tp):
                self.outcome = "partition"
                return self.force_complete()
        if self.task.done():
            self.outcome = "read"
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        self.outcome = "expired"
        self.task.cancel()


# --------------------------------------------------------------------------------------------- delete records
@dataclass
class DeleteRecordsStatus:
    required_offset: int
    error_code: int
    low_watermark: int
    acks_pending: bool = True


class DelayedDeleteRecords(_PerPartitionOperation):
    """DeleteRecords: done when every partition's low watermark reached the requested offset."""

    def __init__(self, delay_ms: float, statuses: Dict[Any, DeleteRecordsStatus], get_partition: Callable[[Any], Any],
                 missing_error: Optional[Callable[[Any], int]] = None) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._get_partition = get_partition
        self._missing_error = missing_error
        for tp, st in statuses.items():
            if st.error_code == 0:
                st.acks_pending = True
                st.error_code = _REQUEST_TIMED_OUT
                self._pending[tp] = st
            else:
                st.acks_pending = False

    def _check(self, tp: Any, st: DeleteRecordsStatus) -> None:
        p = self._get_partition(tp)
        if p is None:
            error = _UNKNOWN_TOPIC_OR_PARTITION
            if self._missing_error is not None and self._missing_error(tp) == _KAFKA_STORAGE_ERROR:
                error = _KAFKA_STORAGE_ERROR
            reached, low = False, -1
        elif not p.is_leader:
            reached, error, low = False, _NOT_LEADER_OR_FOLLOWER, -1
        else:
            low = p.low_watermark_if_leader()
            reached, error = low >= st.required_offset, 0
        if error or reached:
            st.acks_pending = False
            st.error_code = error
            st.low_watermark = low
            del self._pending[tp]



# --------------------------------------------------------------------------------------------- elect leaders
class DelayedElectLeader(DelayedOperation):
    """ElectLeaders: done when this broker's metadata shows every expected leader; the partitions still waiting
    at the timeout are :attr:`timed_out` (answered REQUEST_TIMED_OUT)."""

    def __init__(self, delay_ms: float, expected_leaders: Dict[Any, int],
                 leader_of: Callable[[Any], Optional[int]]) -> None:
        """``leader_of(tp)``: the partition's leader in this broker's metadata cache (None: unknown)."""
        super().__init__(delay_ms)
        self._leader_of = leader_of
        #: the partitions whose expected leader is not shown yet
        self.waiting: Dict[Any, int] = dict(expected_leaders)
        self.timed_out: List[Any] = []

    def try_complete(self) -> bool:
        leader_of = self._leader_of
        for tp, leader in list(self.waiting.items()):
            if leader_of(tp) == leader:
                del self.waiting[tp]
        if self.waiting:
            return False
        return self.force_complete()

    def try_complete_key(self, key: Hashable) -> bool:
        leader = self.waiting.get(key)
        if leader is not None and self._leader_of(key) == leader:
            del self.waiting[key]
        if self.waiting:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self.timed_out = sorted(self.waiting)
