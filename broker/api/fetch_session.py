"""Incremental fetch sessions (KIP-227), the broker side.

A consumer that opens a session (epoch 0) later sends only the partitions whose fetch
position changed; the broker remembers the rest and answers only with partitions that have
something new (records, a moved high watermark / log start offset, or an error).

Rules, as Kafka's FetchManager applies them:
- session_id 0, epoch -1: sessionless full fetch.
- epoch 0: (close session_id if set and) open a new session with the request's partitions.
- epoch > 0: incremental fetch on session_id; unknown id -> FETCH_SESSION_ID_NOT_FOUND,
  wrong epoch -> INVALID_FETCH_SESSION_EPOCH.
- epoch -1 with a session id: close it, then a sessionless full fetch.

Pure state: no I/O; the clock is passed in. The Fetch handler passes a monotonic clock: a session's idle time
(eviction after ``eviction_ms``) is then not changed by a wall-clock jump. Kafka's FetchSessionCache uses
time.milliseconds() here; the difference is deliberate and only safer (a jump forward would evict every idle
session at once, one back would keep them an hour more), nothing of it is stored or sent.
"""
from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from broker.errors import ErrorCode

TopicPartition = Tuple[str, int]
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: what the fetcher sent (replicas, v12+): its last fetched epoch and its own log start offset
    last_fetched_epoch: int = -1
    fetcher_log_start_offset: int = -1


@dataclass
class FetchSession:
    session_id: int
    epoch: int
    uses_topic_ids: bool
    partitions: "OrderedDict[TopicPartition, CachedPartition]" = field(default_factory=OrderedDict)
    #: monotonic ms of the session's last use (its eviction clock)
    last_used_ms: int = 0
    #: a follower's session (broker.api.fetch): the ReplicaManager's PartitionChanges number up to which its
    #: partitions' changes were taken, when it last looked at every partition (monotonic ms), and the partitions
    #: the last answer considered (they are looked at again: data left unread, errors)
    changes_seen: int = -1
    swept_ms: int = 0
    carry: Set[TopicPartition] = field(default_factory=set)


class FetchSessionCache:
    """Bounded cache of sessions (``max.incremental.fetch.session.cache.slots``, default 1000)."""

    def __init__(self, max_sessions: int = 1000, eviction_ms: int = 120_000) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._sessions: Dict[int, FetchSession] = {}
        self._rng = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def _new_id(self) -> int:
        for _ in itertools.count():
            sid = self._rng.randint(1, 2**31 - 1)
            if sid not in self._sessions:
                return sid
        raise AssertionError("unreachable")

    def _evict(self, now_ms: int) -> None:
        stale = [sid for sid, s in self._sessions.items() if now_ms - s.last_used_ms > self.eviction_ms]
        for sid in stale:
            del self._sessions[sid]
        if len(self._sessions) >= self.max_sessions:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used_ms)
            del self._sessions[oldest.session_id]

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def begin(self, session_id: int, epoch: int, uses_topic_ids: bool,
              requested: List[Tuple[TopicPartition, CachedPartition]], forgotten: List[TopicPartition],
              now_ms: int) -> Tuple[int, Optional[FetchSession], List[Tuple[TopicPartition, CachedPartition]]]:
        """Resolve a request to (error_code, session or None, partitions to read).

        With a session, the partitions to read are the whole session (updated by the
        request); without, they are exactly the requested ones.
        """
        if epoch == FINAL_EPOCH:
            if session_id:
                self.close(session_id)
            return 0, None, requested
        if epoch == INITIAL_EPOCH:
            if session_id:
                self.close(session_id)
            self._evict(now_ms)
            s = FetchSession(self._new_id(), 1, uses_topic_ids, OrderedDict(requested), now_ms)
            self._sessions[s.session_id] = s
            return 0, s, list(s.partitions.items())
        found = self._sessions.get(session_id)
        if found is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None, []
        s = found
        if s.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None, []
        if s.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, None, []
        for tp in forgotten:
            s.partitions.pop(tp, None)
        for tp, cp in requested:
            old = s.partitions.get(tp)
            if old is not None:
                old.fetch_offset = cp.fetch_offset
                old.max_bytes = cp.max_bytes
                old.current_leader_epoch = cp.current_leader_epoch
                old.last_fetched_epoch = cp.last_fetched_epoch
                old.fetcher_log_start_offset = cp.fetcher_log_start_offset
            else:
                s.partitions[tp] = cp
        s.epoch = s.epoch + 1 if s.epoch < 2**31 - 1 else 1
        s.last_used_ms = now_ms
        return 0, s, list(s.partitions.items())
