"""Replica fetchers: followers copy their leaders' logs (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One :class:`ReplicaFetcher` task per (leader broker, fetcher id = hash(topic-partition) %
num.replica.fetchers) sends one Fetch v17 (replica_state = this broker) for all its partitions,
long-polled at the leader (replica.fetch.wait.max.ms), appends what comes back with
``Log.append_as_follower`` on the partition's I/O worker, then sets the follower's high watermark
to min(leader HW, own LEO) and raises its log start offset to the leader's.

Each partition is Truncating or Fetching:
- Truncating: with leader epochs in the local log, OffsetForLeaderEpoch v4 asks the leader where
  our latest epoch ended and we truncate to min(that, our LEO) (KIP-101/KIP-279; an epoch the
  leader does not know makes us step back one epoch and ask again); without epochs, truncate
  to the high watermark.
- Fetching: from IBP 2.7 (the default) a follower with epochs starts here at its LEO and sends
  its last fetched epoch; the leader answers ``diverging_epoch`` when our log diverged, and we
  truncate the same way without the extra round trip (KIP-320 style).
- OFFSET_OUT_OF_RANGE: ListOffsets v9 for the leader's LEO; above ours -> ask for its log start
  offset and restart empty there if our log ends before it; below ours -> truncate to it.
- FENCED_LEADER_EPOCH (with our current epoch): the partition stops and waits for the next
  LeaderAndIsr. Other errors (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID,
  disconnects, ...) back off replica.fetch.backoff.ms and retry, as Kafka does.

Responses are processed under the fetcher's lock, and ReplicaManager removes partitions through
the same lock, so after ``remove_fetcher_for_partitions`` returns no fetcher touches them.

Loop affinity: event loop; disk work on the ReplicaManager's I/O workers.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, Union

from broker.accel import record_batch
from broker.errors import ErrorCode
from broker.replica.config import ReplicaConfig
from broker.replica.fetch_session_handler import FetchSessionHandler
from broker.replica.io_workers import NOT_RUN, NotRun
from broker.storage.config import LONG_MAX
from broker.storage.errors import LogBusyError
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerChannelFactory, BrokerNode

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager
    from broker.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

#: the wall time one fetch response's appends may take on the event loop (the rest go to the workers)
_INLINE_BUDGET_S = 0.005

TopicPartition = Tuple[str, int]
#: a fetched partition's records: the decoder's zero-copy slice of the response (None when the leader sent none)
FetchedRecords = Optional[Union[bytes, bytearray, memoryview]]
ZERO_UUID = uuid.UUID(int=0)

FETCH = 1
LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
FETCH_VERSION = 17
FETCH_VERSION_WITHOUT_TOPIC_IDS = 12
LIST_OFFSETS_VERSION = 9
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
#: how often a fetcher looks at every partition it fetches, not only at those whose fetch state changed (s)
SWEEP_MS = 1000

#: top-level Fetch errors about the session itself (KIP-227): answered by a full request, not a backoff
_SESSION_ERRORS = frozenset({int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                             int(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)})

TRUNCATING = "Truncating"
FETCHING = "Fetching"


@dataclass(frozen=True)
class InitialFetchState:
    """Where a new follower partition starts: its leader, the leader epoch, and the fetch offset (-1 = ask
    the leader)."""

    topic_id: Optional[uuid.UUID]
    leader: BrokerNode
    leader_epoch: int
    fetch_offset: int


@dataclass(frozen=True)
class PartitionFetchState:
    """A partition's fetch position; replaced (never mutated) on every change."""

    topic_id: Optional[uuid.UUID]
    fetch_offset: int
    current_leader_epoch: int
    state: str
    last_fetched_epoch: Optional[int]
    lag: Optional[int] = None
    delayed_until: int = 0  # the replica manager's clock, mono_ms()
    reset_offset: bool = False  # the fetch offset must come from the leader (ListOffsets)

    def is_delayed(self, now: int) -> bool:
        return self.delayed_until > now

    def is_ready_for_fetch(self, now: int) -> bool:
        return self.state == FETCHING and not self.reset_offset and not self.is_delayed(now)

    def is_truncating(self, now: int) -> bool:
        return self.state == TRUNCATING and not self.is_delayed(now)

    @property
    def is_replica_in_sync(self) -> bool:
        """Caught up with the leader's HW at the last fetch (never throttled, as in Kafka)."""
        return self.lag is not None and self.lag <= 0


class FetchStates(Dict[TopicPartition, PartitionFetchState]):
    """A fetcher's partitions, remembering which changed since the last Fetch was built (``changed``) and which
    are not simply fetching (``special``: truncating, resetting their offset, or backing off at some point), so
    that building an incremental Fetch and the fetch loop's other passes cost what changed, not the thousands of
    partitions a follower fetches from one leader. Every write goes through item assignment, ``pop``, ``del`` or
    ``clear``."""

    def __init__(self) -> None:
        super().__init__()
        self.changed: Set[TopicPartition] = set()
        self.special: Set[TopicPartition] = set()

    def __setitem__(self, tp: TopicPartition, st: PartitionFetchState) -> None:
        super().__setitem__(tp, st)
        self.changed.add(tp)
        if st.state != FETCHING or st.reset_offset or st.delayed_until:
            self.special.add(tp)
        else:
            self.special.discard(tp)

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        self.changed.add(tp)
        self.special.discard(tp)

    def pop(self, tp: TopicPartition, *default: Any) -> Any:
        if tp in self:
            self.changed.add(tp)
            self.special.discard(tp)
        return super().pop(tp, *default)

    def clear(self) -> None:
        self.changed.update(self)
        self.special.clear()
        super().clear()


class _LeaderError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(_name(code))
        self.code = int(code)


class _AppendOutcome(NamedTuple):
    last_offset: int
    valid_bytes: int
    last_batch_epoch: Optional[int]
    hw_changed: bool


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (int32), so the fetcher for a partition is the one Kafka would pick."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def fetcher_id_for(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka: abs(31 * topic.hashCode + partition) % num.replica.fetchers."""
    v = (31 * java_string_hash(tp[0]) + tp[1]) & 0xFFFFFFFF
    v = v - (1 << 32) if v >= (1 << 31) else v
    v = 0 if v == -(1 << 31) else abs(v)
    return v % max(1, num_fetchers)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (for one fetcher id)."""

    def __init__(self, manager: "ReplicaFetcherManager", fetcher_id: int, leader: BrokerNode,
                 channel: BrokerChannel) -> None:
        self.manager = manager
        self.fetcher_id = fetcher_id
        self.leader = leader
        self.channel = channel
        self.config = manager.config
        self.rm = manager.replica_manager
        #: the replica manager's clock: backoffs and the idle wait run on its timers
        self.clock = manager.replica_manager.time
        self.partitions = FetchStates()
        #: what the next Fetch asks for each partition ready to fetch (fetch offset, leader epoch, last fetched
        #: epoch, log start offset, max bytes, topic id) and the state it was built from; kept up to date from
        #: ``partitions.changed`` (and rebuilt by a sweep each SWEEP_MS)
        self._wanted: Dict[TopicPartition, Tuple[Any, ...]] = {}
        self._wanted_states: Dict[TopicPartition, PartitionFetchState] = {}
        self._without_topic_id: Set[TopicPartition] = set()
        self._names: Dict[uuid.UUID, str] = {}
        self._next_sweep = 0
        self._throttling = False
        self.lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._task: Optional["asyncio.Task[None]"] = None
        self._running = False
        self.name = "ReplicaFetcher-%d-%d" % (fetcher_id, leader.broker_id)
        #: the incremental fetch session with the leader (KIP-227), and the Fetch version it was opened with
        self.fetch_session = FetchSessionHandler()
        self._session_version = -1
        #: (partition, leader epoch, leader's log start offset) answered OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405)
        self._tiered_pending: List[Tuple[TopicPartition, int, int]] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def shutdown(self) -> None:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            await self.channel.close()
        except Exception:
            log.debug("%s: closing the channel failed", self.name, exc_info=True)

    @property
    def is_running(self) -> bool:
        return self._running and self._task is not None and not self._task.done()

    # ------------------------------------------------------------------ partitions
    def _put(self, tp: TopicPartition, st: PartitionFetchState) -> None:
        """Update and move to the end (partitions fetched last come first next time)."""
        self.partitions.pop(tp, None)
        self.partitions[tp] = st

    def _latest_epoch(self, tp: TopicPartition) -> Optional[int]:
        p = self.rm.get_partition(tp)
        if p is None or p.log is None:
            return None
        return p.log.latest_epoch

    def _initial_state(self, tp: TopicPartition, init: InitialFetchState,
                       current: Optional[PartitionFetchState]) -> PartitionFetchState:
        if current is not None and current.current_leader_epoch == init.leader_epoch:
            return current
        if init.fetch_offset < 0:
            return PartitionFetchState(init.topic_id, -1, init.leader_epoch, FETCHING, None, reset_offset=True)
        if self.config.truncation_on_fetch:
            latest = self._latest_epoch(tp)
            return PartitionFetchState(init.topic_id, init.fetch_offset, init.leader_epoch,
                                       FETCHING if latest is not None else TRUNCATING, latest)
        return PartitionFetchState(init.topic_id, init.fetch_offset, init.leader_epoch, TRUNCATING, None)

    async def add_partitions(self, states: Dict[TopicPartition, InitialFetchState]) -> None:
        async with self.lock:
            for tp, init in states.items():
                self._put(tp, self._initial_state(tp, init, self.partitions.get(tp)))
            self._wakeup.set()

    async def remove_partitions(self, tps: Iterable[TopicPartition]) -> Dict[TopicPartition, PartitionFetchState]:
        async with self.lock:
            out = {}
            for tp in tps:
                st = self.partitions.pop(tp, None)
                if st is not None:
                    out[tp] = st
            return out

    async def remove_all_partitions(self) -> Dict[TopicPartition, PartitionFetchState]:
        async with self.lock:
            out = dict(self.partitions)
            self.partitions.clear()
            return out

    def _delay(self, tps: Iterable[TopicPartition], delay_ms: Optional[int] = None) -> None:
        """Back off these partitions (only the ones not already backing off)."""
        now = self.clock.mono_ms()
        until = now + (self.config.replica_fetch_backoff_ms if delay_ms is None else delay_ms)
        for tp in tps:
            st = self.partitions.get(tp)
            if st is not None and not st.is_delayed(now):
                self._put(tp, dataclasses.replace(st, delayed_until=until))
        self._wakeup.set()

    def _mark_failed(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` until the next LeaderAndIsr re-adds it."""
        self.partitions.pop(tp, None)
        self.manager.failed_partitions.add(tp)
        log.warning("%s: partition %s-%d marked as failed", self.name, *tp)

    async def _leader_step_failed(self, tp: TopicPartition, request_epoch: int, exc: Exception, what: str,
                                  other_level: int) -> bool:
        """A step's request to the leader for ``tp`` failed: a fenced epoch is answered as ``_on_partition_fenced``
        decides; any other error is logged (a leader's error code at INFO, anything else at ``other_level``) and the
        step is retried after the backoff (False)."""
        if isinstance(exc, _LeaderError):
            if exc.code == ErrorCode.FENCED_LEADER_EPOCH:
                async with self.lock:
                    return not self._on_partition_fenced(tp, request_epoch)
            other_level = logging.INFO
        log.log(other_level, "%s: could not %s for %s-%d: %s", self.name, what, *tp, exc or type(exc).__name__)
        return False

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: Optional[int]) -> bool:
        """The leader has a newer epoch. If ours is the one we sent, wait for LeaderAndIsr (False); if our
        state moved on meanwhile, just retry later (True)."""
        st = self.partitions.get(tp)
        if st is None:
            return False
        if request_epoch is not None and request_epoch == st.current_leader_epoch:
            log.info("%s: %s-%d has an older epoch (%d) than the current leader; awaiting the new LeaderAndIsr "
                     "state before resuming fetching", self.name, *tp, st.current_leader_epoch)
            self._mark_failed(tp)
            return False
        return True

    # ------------------------------------------------------------------ main loop
    async def _run(self) -> None:
        while self._running:
            try:
                await self._maybe_truncate()
                await self._maybe_reset_offsets()
                await self._maybe_fetch()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: unexpected error; backing off", self.name)
                await self.clock.sleep_ms(self.config.replica_fetch_backoff_ms)

    async def _idle_wait(self) -> None:
        """Nothing to fetch: sleep until a partition is added or a backoff ends (at most the backoff)."""
        now = self.clock.mono_ms()
        timeout = self.config.replica_fetch_backoff_ms
        states = self.partitions
        for st in [states[tp] for tp in states.special]:  # backing off, truncating, resetting: all special
            if st.is_delayed(now):
                timeout = min(timeout, st.delayed_until - now)
            elif st.state == TRUNCATING or st.reset_offset:
                await asyncio.sleep(0)
                return  # more truncation / offset lookups to do right away
        try:
            await self.clock.wait_for_ms(self._wakeup.wait(), max(timeout, 1))
        except asyncio.TimeoutError:
            pass

    # ------------------------------------------------------------------ fetch
    def _build_fetch(self, now: int) -> Tuple[Optional[dict], int, Dict[TopicPartition, PartitionFetchState],
                                                Dict[uuid.UUID, str]]:
        """The next Fetch: (body or None when nothing is ready, version, the fetch state of every partition this
        fetch covers, topic id -> name). Within the fetch session only the partitions whose position changed
        are sent (the leader keeps the others); see fetch_session_handler. Only the partitions that changed
        since the last Fetch (and those not simply fetching) are looked at, except for a full request, while
        the follower quota is exceeded, and once every SWEEP_MS (the log start offset this follower sends
        moves without its fetch state changing)."""
        states = self.partitions
        quota = self._follower_quota()
        throttling = quota is not None and quota.is_quota_exceeded()
        # while throttling, and once after (the partitions it left out come back), every partition is looked at
        was_throttling, self._throttling = self._throttling, throttling
        if self.fetch_session.is_full or throttling or was_throttling or now >= self._next_sweep:
            self._next_sweep = now + SWEEP_MS
            look: Iterable[TopicPartition] = list(states)
            for tp in list(self._wanted):
                if tp not in states:
                    self._unwant(tp)
            changed: Optional[Set[TopicPartition]] = None
        else:
            changed = set(states.changed)
            changed.update(states.special)
            look = changed
        states.changed = set()
        errors = []
        for tp in look:
            st = states.get(tp)
            if st is None:
                self._unwant(tp)
                continue
            if st.state == FETCHING and not st.reset_offset and st.delayed_until <= now:
                states.special.discard(tp)  # backed off once, fetching again
            if not st.is_ready_for_fetch(now) or (throttling and not st.is_replica_in_sync
                                                 and quota.is_throttled(tp)):
                self._unwant(tp)  # Kafka's shouldFollowerThrottle: left out of this fetch
                continue
            p = self.rm.get_partition(tp)
            if p is None or p.log is None:
                errors.append(tp)
                self._unwant(tp)
                continue
            self._want(tp, st, p.log.log_start_offset)
        if errors:
            self._delay(errors)
            states.changed.difference_update(errors)  # looked at again once their backoff ends (special)
        wanted = self._wanted
        if wanted:
            version = FETCH_VERSION if not self._without_topic_id else FETCH_VERSION_WITHOUT_TOPIC_IDS
            if version != self._session_version:
                self.fetch_session.handle_error()  # a session keeps the topic-id mode it was opened with
                self._session_version = version
        else:
            version = self._session_version
        # A partition not ready now (backing off after an error, truncating) leaves the session and is sent in
        # full when it is back, as Kafka's session builder does: its state at the leader may be gone.
        send, forget = self.fetch_session.build(wanted, None if self.fetch_session.is_full else changed)
        if not send and not forget and not wanted:
            return None, 0, self._wanted_states, {}
        topic_ids: Dict[str, Optional[uuid.UUID]] = {}
        topics: Dict[str, List[dict]] = {}
        for tp in send:
            offset, leader_epoch, last_epoch, log_start, max_bytes, tid = wanted[tp]
            topic_ids[tp[0]] = tid
            topics.setdefault(tp[0], []).append({
                "partition": tp[1], "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": last_epoch, "log_start_offset": log_start, "partition_max_bytes": max_bytes})
        forgotten: Dict[str, List[int]] = {}
        for tp in forget:
            forgotten.setdefault(tp[0], []).append(tp[1])
        forgotten_ids: Dict[str, Optional[uuid.UUID]] = {}
        for tp in forget:
            sent = self.fetch_session.sent(tp)
            forgotten_ids[tp[0]] = sent[5] if sent is not None else None  # type: ignore[index]
        body = {
            "replica_id": self.manager.broker_id,
            "replica_state": {"replica_id": self.manager.broker_id, "replica_epoch": self.manager.broker_epoch()},
            "max_wait_ms": self.config.replica_fetch_wait_max_ms, "min_bytes": self.config.replica_fetch_min_bytes,
            "max_bytes": self.config.replica_fetch_response_max_bytes, "isolation_level": 0,
            "session_id": self.fetch_session.session_id, "session_epoch": self.fetch_session.epoch,
            "topics": [{"topic": name, "topic_id": topic_ids[name] or ZERO_UUID, "partitions": parts}
                       for name, parts in topics.items()],
            "forgotten_topics_data": [{"topic": name, "topic_id": forgotten_ids.get(name) or ZERO_UUID,
                                       "partitions": parts} for name, parts in forgotten.items()],
            "rack_id": "",
        }
        names = self._names
        for name, tid in forgotten_ids.items():
            if tid is not None:
                names[tid] = name
        return body, version, self._wanted_states, names

    def _want(self, tp: TopicPartition, st: PartitionFetchState, log_start: int) -> None:
        cfg = self.config
        last_epoch = st.last_fetched_epoch if cfg.truncation_on_fetch and st.last_fetched_epoch is not None else -1
        tid = st.topic_id if st.topic_id is not None and st.topic_id != ZERO_UUID else None
        self._wanted[tp] = (st.fetch_offset, st.current_leader_epoch, last_epoch, log_start,
                            cfg.replica_fetch_max_bytes, tid)
        self._wanted_states[tp] = st
        if tid is None:
            self._without_topic_id.add(tp)
        else:
            self._without_topic_id.discard(tp)
            self._names[tid] = tp[0]

    def _unwant(self, tp: TopicPartition) -> None:
        self._wanted.pop(tp, None)
        self._wanted_states.pop(tp, None)
        self._without_topic_id.discard(tp)

    def _follower_quota(self) -> Any:
        quotas = getattr(self.rm, "quotas", None)
        return quotas.follower if quotas is not None else None

    async def _maybe_fetch(self) -> None:
        async with self.lock:
            self._wakeup.clear()
            body, version, session, names = self._build_fetch(self.clock.mono_ms())
        if body is None:
            await self._idle_wait()
            return
        try:
            resp = await self.channel.send(self.leader, FETCH, version, body, self.config.replica_socket_timeout_ms)
        except asyncio.CancelledError:
            raise
        except (BrokerChannelError, asyncio.TimeoutError, OSError) as e:
            self.fetch_session.handle_error()
            if self._running:
                log.info("%s: error in response for fetch request (%s); backing off", self.name,
                         e or type(e).__name__)
                async with self.lock:
                    self._delay(session)
            return
        except BaseException:
            self.fetch_session.handle_error()
            raise
        self.fetch_session.handle_response(int(getattr(resp, "error_code", 0) or 0),
                                           int(getattr(resp, "session_id", 0) or 0))
        async with self.lock:
            out_of_range = await self._process_fetch_response(resp, version, session, names)
        for tp, epoch in out_of_range:
            if not await self._handle_out_of_range(tp, epoch):
                async with self.lock:
                    self._delay([tp])
        pending, self._tiered_pending = self._tiered_pending, []
        for tp, epoch, leader_start in pending:
            if not await self._build_remote_log_aux_state(tp, epoch, leader_start):
                async with self.lock:
                    self._delay([tp])

    async def _build_remote_log_aux_state(self, tp: TopicPartition, request_epoch: int, leader_log_start: int) -> bool:
        """Kafka's TierStateMachine: the leader's local log start (ListOffsets -4) and its epoch, the epoch of the
        offset before it (OffsetsForLeaderEpoch of the previous epoch), the remote segment holding that offset; only
        that segment's leader-epoch checkpoint and producer snapshot are downloaded, the log is truncated fully and
        starts after the segment, and fetching goes on from there. False = retry after the backoff."""
        st = self.partitions.get(tp)
        p = self.rm.get_partition(tp)
        if st is None or st.current_leader_epoch != request_epoch:
            return True
        tiered = self.rm.tiered
        if tiered is None or p is None or p.log is None or not p.log.remote_log_enabled or p.topic_id is None:
            log.warning("%s: cannot build the state of %s-%d from remote storage: tiered storage is not enabled "
                        "for it here (retried)", self.name, *tp)
            return False
        from broker.storage.remote.metadata import TopicIdPartition
        from broker.storage.remote.storage_manager import IndexType
        from broker.storage.tiered_log import parse_leader_epoch_checkpoint
        stats = tiered.rlm.stats  # Kafka's TierStateMachine marks these after the leader's ListOffsets (-4)
        counted = False
        try:
            local_start, epoch = await self._list_offset_entry(tp, request_epoch, -4)
            stats.record_build_aux_state_request(tp[0])
            counted = True
            previous = local_start - 1
            target = epoch
            if epoch > 0:
                err, earlier_epoch, earlier_end = (await self._fetch_epoch_end_offsets(
                    {tp: (request_epoch, epoch - 1)}))[tp]
                if err:
                    raise _LeaderError(err)
                if earlier_end > previous:  # the offset lies in the earlier epoch (end offsets are exclusive)
                    target = earlier_epoch
            tip = TopicIdPartition(p.topic_id, tp[0], tp[1])
            loop = asyncio.get_running_loop()

            def download() -> Tuple[int, List[Tuple[int, int]], bytes]:
                md = tiered.rlmm.remote_log_segment_metadata(tip, target, previous)
                if md is None:
                    raise LookupError(f"no remote segment of epoch {target} holds offset {previous}")
                rsm = tiered.rlm.rsm
                with rsm.fetch_index(md, IndexType.LEADER_EPOCH) as f:
                    epochs = parse_leader_epoch_checkpoint(f.read())
                with rsm.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) as f:
                    snapshot = f.read()
                return md.end_offset + 1, epochs, snapshot
            next_offset, epochs, snapshot = await loop.run_in_executor(None, download)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - retried after the backoff, as Kafka's fetcher does
            if counted:
                stats.record_build_aux_state_error(tp[0])
            return await self._leader_step_failed(tp, request_epoch, e, "build the state from remote storage",
                                                  logging.WARNING)
        async with self.lock:
            cur = self.partitions.get(tp)
            if cur is None or cur.current_leader_epoch != request_epoch:
                return True
            try:
                await self.rm.run_io(p.log.restore_remote_aux_state, next_offset, leader_log_start, epochs, snapshot,
                                     key=tp)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("%s: rebuilding %s-%d from remote storage failed: %s", self.name, *tp, exc)
                self._mark_failed(tp)
                return True
            log.info("%s: built the state of %s-%d from remote storage up to offset %d (leader's local log start "
                     "%d); fetching from %d", self.name, *tp, next_offset - 1, local_start, next_offset)
            cur = self.partitions.get(tp)
            if cur is not None:
                self._put(tp, dataclasses.replace(cur, fetch_offset=next_offset, state=FETCHING,
                                                  last_fetched_epoch=p.log.latest_epoch, reset_offset=False))
            return True

    async def _process_fetch_response(self, resp: Any, version: int,
                                      session: Dict[TopicPartition, PartitionFetchState],
                                      names: Dict[uuid.UUID, str]) -> List[Tuple[TopicPartition, int]]:
        """Under the lock. Returns the partitions whose offset was out of range (handled after the lock)."""
        top = int(getattr(resp, "error_code", 0) or 0)
        if top in _SESSION_ERRORS:
            # The leader lost our fetch session (restarted, evicted it): the next request opens a new one at once,
            # as Kafka's fetcher does, without backing off.
            log.info("%s: fetch session %s; opening a new one", self.name, _name(top))
            return []
        if top:
            log.info("%s: fetch failed with %s; backing off", self.name, _name(top))
            self._delay(session)
            return []
        now = self.clock.mono_ms()
        # appends made on the loop stop after this much wall time of one response; the rest go to the workers, so a
        # response covering thousands of partitions does not hold the loop for all of them
        inline_until = time.monotonic() + _INLINE_BUDGET_S
        errors: Set[TopicPartition] = set()
        diverging: Dict[TopicPartition, Tuple[int, int, int]] = {}
        out_of_range: List[Tuple[TopicPartition, int]] = []
        for topic in resp.responses:
            name = names.get(topic.topic_id) if version >= 13 else topic.topic
            if not name:
                continue
            for pd in topic.partitions:
                tp = (name, pd.partition_index)
                st = self.partitions.get(tp)
                sent = session.get(tp)
                # Only if nothing changed since the request: same offset, same epoch, still fetching.
                if (st is None or sent is None or sent.fetch_offset != st.fetch_offset
                        or sent.current_leader_epoch != st.current_leader_epoch or not st.is_ready_for_fetch(now)):
                    continue
                err = int(pd.error_code)
                if err == 0:
                    div = getattr(pd, "diverging_epoch", None)
                    if (self.config.truncation_on_fetch and div is not None
                            and (div.epoch != -1 or div.end_offset != -1)):
                        # Truncate first; watermarks come with the next fetch.
                        diverging[tp] = (0, int(div.epoch), int(div.end_offset))
                    elif not await self._process_partition_data(tp, st, pd, time.monotonic() < inline_until):
                        errors.add(tp)
                elif err == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, sent.current_leader_epoch))
                elif err == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                    self._tiered_pending.append((tp, sent.current_leader_epoch, int(pd.log_start_offset)))
                elif err == ErrorCode.FENCED_LEADER_EPOCH:
                    if self._on_partition_fenced(tp, sent.current_leader_epoch):
                        errors.add(tp)
                else:
                    if err == ErrorCode.UNKNOWN_LEADER_EPOCH:
                        log.debug("%s: leader has a smaller leader epoch for %s-%d than our %d", self.name, *tp,
                                  st.current_leader_epoch)
                    elif err == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        log.debug("%s: broker %d is not the leader of %s-%d (yet)", self.name, self.leader.broker_id,
                                  *tp)
                    else:
                        log.warning("%s: error %s for %s-%d at offset %d", self.name, _name(err), *tp,
                                    st.fetch_offset)
                    errors.add(tp)
        if diverging:
            await self._truncate_to_epoch_end_offsets(diverging, {})
        if errors:
            self._delay(errors)
        return out_of_range

    async def _process_partition_data(self, tp: TopicPartition, st: PartitionFetchState, pd: Any,
                                      on_loop: bool = True) -> bool:
        """Append the records and move the watermarks; False = back off (the partition stays). ``on_loop``: the
        append may be made here when the partition's owner is idle (else always on the owner's worker)."""
        p = self.rm.get_partition(tp)
        if p is None or p.log is None:
            return False
        args = (p.log, pd.records, st.fetch_offset, st.current_leader_epoch, int(pd.high_watermark),
                int(pd.log_start_offset))
        try:
            done: "_AppendOutcome | NotRun" = NOT_RUN
            if on_loop and p.log.config.flush_messages == LONG_MAX:  # the append cannot fsync
                # the owner idle: append here, as the borrowed owner (io_workers.py's run_if_idle), not through
                # two thread wake-ups per partition of the response
                try:
                    done = self.rm.run_here_if_owner_idle(tp, _append_fetched_without_waiting, *args)
                except LogBusyError:  # the Log's lock held elsewhere: the worker waits for it, not the loop
                    done = NOT_RUN
            out: _AppendOutcome = (done if not isinstance(done, NotRun)
                                   else await self.rm.run_io(_append_fetched, *args, key=tp))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            kind = type(exc).__name__
            if kind in ("CorruptRecordError", "InvalidRecordError"):
                # Possibly transient (e.g. a partial write at the leader): retry after the backoff.
                log.error("%s: invalid records fetched for %s-%d at offset %d: %s", self.name, *tp, st.fetch_offset,
                          exc)
                return False
            log.error("%s: error processing data of %s-%d at offset %d: %s", self.name, *tp, st.fetch_offset,
                      exc, exc_info=kind != "KafkaStorageError")
            self._mark_failed(tp)
            return True
        quota = self._follower_quota()
        if quota is not None and pd.records is not None and quota.is_throttled(tp):
            quota.record(len(pd.records))
        next_offset = out.last_offset + 1 if out.valid_bytes > 0 else st.fetch_offset
        lag = max(0, int(pd.high_watermark) - next_offset)
        if self.partitions.get(tp) is st:
            # its log start offset may have followed the leader's: the next Fetch sends it (if it moved)
            self.partitions.changed.add(tp)
        if (out.valid_bytes > 0 or st.lag is None) and self.partitions.get(tp) is st:
            last_epoch = out.last_batch_epoch if out.last_batch_epoch is not None else st.last_fetched_epoch
            self._put(tp, dataclasses.replace(st, fetch_offset=next_offset, lag=lag, state=FETCHING,
                                              last_fetched_epoch=last_epoch))
        if out.hw_changed:
            self.rm.on_follower_high_watermark_advanced(tp)
        return True

    # ------------------------------------------------------------------ truncation
    async def _maybe_truncate(self) -> None:
        with_epochs: Dict[TopicPartition, Tuple[int, int]] = {}
        async with self.lock:
            now = self.clock.mono_ms()
            without: List[TopicPartition] = []
            states = self.partitions  # a truncating partition is one of states.special
            for tp in [tp for tp in states.special if states[tp].is_truncating(now)]:
                latest = self._latest_epoch(tp)
                if latest is not None:
                    with_epochs[tp] = (states[tp].current_leader_epoch, latest)
                else:
                    without.append(tp)
            if without:
                await self._truncate_to_high_watermark(without)
        if not with_epochs:
            return
        fetched = await self._fetch_epoch_end_offsets(with_epochs)
        async with self.lock:
            # Ignore answers for partitions whose leader epoch changed while we asked.
            current = {tp: eo for tp, eo in fetched.items()
                       if tp in self.partitions and self.partitions[tp].current_leader_epoch == with_epochs[tp][0]}
            await self._truncate_to_epoch_end_offsets(current, with_epochs)

    async def _fetch_epoch_end_offsets(self, epochs: Dict[TopicPartition, Tuple[int, int]]
                                       ) -> Dict[TopicPartition, Tuple[int, int, int]]:
        """OffsetForLeaderEpoch v4: {tp: (error, epoch, end_offset)}."""
        topics: Dict[str, List[dict]] = {}
        for (topic, part), (current, latest) in epochs.items():
            topics.setdefault(topic, []).append({"partition": part, "current_leader_epoch": current,
                                                 "leader_epoch": latest})
        body = {"replica_id": self.manager.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        try:
            resp = await self.channel.send(self.leader, OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION,
                                           body, self.config.replica_socket_timeout_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("%s: error sending OffsetForLeaderEpoch (%s)", self.name, e or type(e).__name__)
            return {tp: (int(ErrorCode.NETWORK_EXCEPTION), -1, -1) for tp in epochs}
        out: Dict[TopicPartition, Tuple[int, int, int]] = {}
        for t in resp.topics:
            for pr in t.partitions:
                tp = (t.topic, pr.partition)
                if tp in epochs:
                    out[tp] = (int(pr.error_code), int(pr.leader_epoch), int(pr.end_offset))
        for tp in epochs:
            out.setdefault(tp, (int(ErrorCode.UNKNOWN_SERVER_ERROR), -1, -1))
        return out

    async def _truncate_to_epoch_end_offsets(self, fetched: Dict[TopicPartition, Tuple[int, int, int]],
                                             requested: Dict[TopicPartition, Tuple[int, int]]) -> None:
        """Under the lock: truncate each partition per the leader's epoch end offset."""
        errors: List[TopicPartition] = []
        for tp, (err, epoch, end) in fetched.items():
            st = self.partitions.get(tp)
            if st is None:
                continue
            if err == 0:
                p = self.rm.get_partition(tp)
                if p is None or p.log is None:
                    errors.append(tp)
                    continue
                try:
                    offset, completed, latest = await self.rm.run_io(_truncate_for_epoch, p.log, epoch, end,
                                                                     st.fetch_offset, key=tp)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.error("%s: truncation of %s-%d failed: %s", self.name, *tp, exc)
                    self._mark_failed(tp)
                    continue
                log.info("%s: truncated %s-%d to %d (leader epoch %d ends at %d)", self.name, *tp, offset, epoch, end)
                cur = self.partitions.get(tp)
                if cur is not None:
                    state = FETCHING if (self.config.truncation_on_fetch or completed) else TRUNCATING
                    self._put(tp, dataclasses.replace(cur, fetch_offset=offset, state=state,
                                                      last_fetched_epoch=latest))
            elif err == ErrorCode.FENCED_LEADER_EPOCH:
                req = requested.get(tp)
                if self._on_partition_fenced(tp, req[0] if req is not None else None):
                    errors.append(tp)
            else:
                log.info("%s: retrying the leader epoch request for %s-%d: the leader reported %s", self.name, *tp,
                         _name(err))
                errors.append(tp)
        if errors:
            self._delay(errors)

    async def _truncate_to_high_watermark(self, tps: List[TopicPartition]) -> None:
        """Under the lock: no leader epochs in the log, so the only safe point is our HW (the fetch offset)."""
        missing = []
        for tp in tps:
            st = self.partitions.get(tp)
            p = self.rm.get_partition(tp)
            if st is None:
                continue
            if p is None or p.log is None:
                missing.append(tp)
                continue
            try:
                latest = await self.rm.run_io(_truncate_to, p.log, st.fetch_offset, key=tp)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("%s: truncation of %s-%d failed: %s", self.name, *tp, exc)
                self._mark_failed(tp)
                continue
            log.info("%s: truncated %s-%d to its high watermark %d", self.name, *tp, st.fetch_offset)
            cur = self.partitions.get(tp)
            if cur is not None:
                self._put(tp, dataclasses.replace(cur, state=FETCHING, last_fetched_epoch=latest))
        if missing:
            self._delay(missing)

    # ------------------------------------------------------------------ out of range
    async def _maybe_reset_offsets(self) -> None:
        """Partitions added without a fetch offset ask the leader where to start."""
        now = self.clock.mono_ms()
        states = self.partitions  # a partition resetting its offset is one of states.special
        todo = [(tp, states[tp].current_leader_epoch) for tp in states.special
                if states[tp].reset_offset and not states[tp].is_delayed(now)]
        for tp, epoch in todo:
            if not await self._handle_out_of_range(tp, epoch):
                async with self.lock:
                    self._delay([tp])

    async def _list_offset(self, tp: TopicPartition, leader_epoch: int, timestamp: int) -> int:
        return (await self._list_offset_entry(tp, leader_epoch, timestamp))[0]

    async def _list_offset_entry(self, tp: TopicPartition, leader_epoch: int, timestamp: int) -> Tuple[int, int]:
        """ListOffsets to the leader: (offset, leader epoch)."""
        body = {"replica_id": self.manager.broker_id, "isolation_level": 0,
                "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1],
                                                            "current_leader_epoch": leader_epoch,
                                                            "timestamp": timestamp}]}]}
        resp = await self.channel.send(self.leader, LIST_OFFSETS, LIST_OFFSETS_VERSION, body,
                                       self.config.replica_socket_timeout_ms)
        for t in resp.topics:
            if t.name != tp[0]:
                continue
            for pr in t.partitions:
                if pr.partition_index == tp[1]:
                    if pr.error_code:
                        raise _LeaderError(pr.error_code)
                    return int(pr.offset), int(pr.leader_epoch)
        raise _LeaderError(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def _handle_out_of_range(self, tp: TopicPartition, request_epoch: int) -> bool:
        """Find a valid fetch offset from the leader's log range; False = retry after the backoff."""
        st = self.partitions.get(tp)
        p = self.rm.get_partition(tp)
        if st is None or st.current_leader_epoch != request_epoch:
            return True
        if p is None or p.log is None:
            return False
        replica_end = p.log.log_end_offset
        try:
            leader_end = await self._list_offset(tp, request_epoch, -1)
            leader_start = -1
            if leader_end >= replica_end:
                leader_start = await self._list_offset(tp, request_epoch, -2)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - retried after the backoff
            return await self._leader_step_failed(tp, request_epoch, e, "fetch the offsets", logging.INFO)
        async with self.lock:
            cur = self.partitions.get(tp)
            if cur is None or cur.current_leader_epoch != request_epoch:
                return True
            try:
                if leader_end < replica_end:
                    # Typically after an unclean election: the new leader's log ends before ours.
                    log.warning("%s: reset fetch offset of %s-%d from %d to the leader's end offset %d", self.name,
                                *tp, replica_end, leader_end)
                    latest = await self.rm.run_io(_truncate_to, p.log, leader_end, key=tp)
                    offset, lag = leader_end, 0
                else:
                    offset = max(leader_start, replica_end)
                    if leader_start > replica_end:
                        log.warning("%s: truncate %s-%d fully and restart at the leader's start offset %d (our end "
                                    "offset %d is below it)", self.name, *tp, leader_start, replica_end)
                        latest = await self.rm.run_io(_truncate_fully, p.log, leader_start, key=tp)
                    else:
                        log.info("%s: reset fetch offset of %s-%d to our end offset %d", self.name, *tp, offset)
                        latest = p.log.latest_epoch
                    lag = leader_end - offset
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("%s: truncation of %s-%d failed: %s", self.name, *tp, exc)
                self._mark_failed(tp)
                return True
            cur = self.partitions.get(tp)
            if cur is not None:
                self._put(tp, dataclasses.replace(cur, fetch_offset=offset, lag=lag, state=FETCHING,
                                                  last_fetched_epoch=latest, reset_offset=False))
            return True


# ---------------------------------------------------------------------- worker-thread jobs
def _usable_batches(records: FetchedRecords, leader_epoch: int) -> Tuple[bytes, Optional[int]]:
    """Whole batches only, and none from an epoch above the one we fetched in (KAFKA-18723); also the
    partition leader epoch of the last batch kept."""
    if records is None:
        return b"", None
    mv = memoryview(records) if not isinstance(records, memoryview) else records
    if len(mv) == 0:
        return b"", None
    infos, end = record_batch.scan_batches(mv)
    cut = end
    last_epoch: Optional[int] = None
    for info in infos:
        if info.magic >= 2 and info.partition_leader_epoch > leader_epoch:
            cut = info.position
            break
        last_epoch = info.partition_leader_epoch if info.partition_leader_epoch >= 0 else None
    return bytes(mv[:cut]), last_epoch


def _append_fetched(plog: PartitionLog, records: FetchedRecords, fetch_offset: int, leader_epoch: int, leader_hw: int,
                    leader_log_start: int) -> _AppendOutcome:
    """Worker thread (the partition's): append what the leader sent, then follow its HW and log start."""
    from broker.storage.errors import UnexpectedAppendOffsetError
    if fetch_offset != plog.log_end_offset:
        raise RuntimeError("offset mismatch: fetched offset %d, log end offset %d" % (fetch_offset, plog.log_end_offset))
    buf, last_epoch = _usable_batches(records, leader_epoch)
    last, valid = -1, 0
    if buf:
        try:
            info = plog.append_as_follower(buf)
        except UnexpectedAppendOffsetError as e:
            leo = plog.log_end_offset
            if leo == plog.log_start_offset and e.first_offset < leo <= e.last_offset:
                # The leader's log start offset falls inside this first batch (DeleteRecords): start there.
                plog.truncate_fully_and_start_at(e.first_offset)
                info = plog.append_as_follower(buf)
            else:
                raise
        last, valid = info.last_offset, info.valid_bytes
    else:
        last_epoch = None
    old_hw = plog.high_watermark
    new_hw = plog.update_high_watermark(leader_hw)
    if leader_log_start > plog.log_start_offset:
        target = min(leader_log_start, plog.high_watermark)
        if target > plog.log_start_offset:
            plog.delete_records_before(target)
    return _AppendOutcome(last, valid, last_epoch, new_hw != old_hw)


def _append_fetched_without_waiting(plog: PartitionLog, records: FetchedRecords, fetch_offset: int,
                                    leader_epoch: int, leader_hw: int, leader_log_start: int) -> _AppendOutcome:
    """:func:`_append_fetched` on the event loop as the borrowed owner: the Log's commands as one step under its
    lock, taken without waiting (LogBusyError, nothing done, where another thread holds it)."""
    if not plog.try_hold():
        raise LogBusyError("the log of %s-%d is locked by another thread" % plog.topic_partition)
    try:
        return _append_fetched(plog, records, fetch_offset, leader_epoch, leader_hw, leader_log_start)
    finally:
        plog.release_hold()


def _truncate_for_epoch(plog: PartitionLog, leader_epoch: int, leader_end_offset: int, fetch_offset: int
                        ) -> Tuple[int, bool, Optional[int]]:
    """Where to truncate given the leader's (epoch, end offset) for our epoch; truncate; returns
    (offset, truncation complete, latest epoch after)."""
    leo = plog.log_end_offset
    if leader_end_offset < 0:
        # The leader knows no such epoch (or no epochs): our fetch offset (the HW) is the safe point.
        offset, completed = fetch_offset, True
    elif leader_epoch < 0:
        offset, completed = min(leader_end_offset, leo), True
    else:
        epoch, end = plog.end_offset_for_epoch(leader_epoch)
        if end < 0:
            # We have no epoch at or below the leader's: its end offset is the best bound.
            offset, completed = min(leader_end_offset, leo), True
        elif epoch != leader_epoch:
            # We do not know the leader's epoch: step back to the end of our largest smaller one and ask again.
            offset, completed = min(end, leo), False
        else:
            offset, completed = min(end, leader_end_offset, leo), True
    plog.truncate_to(offset)
    return offset, completed, plog.latest_epoch


def _truncate_to(plog: PartitionLog, offset: int) -> Optional[int]:
    plog.truncate_to(offset)
    return plog.latest_epoch


def _truncate_fully(plog: PartitionLog, offset: int) -> Optional[int]:
    plog.truncate_fully_and_start_at(offset)
    return plog.latest_epoch


# ---------------------------------------------------------------------- manager
class ReplicaFetcherManager:
    """The fetchers of this broker, one per (leader, fetcher id)."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], channel_factory: BrokerChannelFactory,
                 replica_manager: ReplicaManager, config: Optional[ReplicaConfig] = None) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.channel_factory = channel_factory
        self.replica_manager = replica_manager
        self.config = config if config is not None else ReplicaConfig()
        self.num_fetchers = max(1, self.config.num_replica_fetchers)
        self.fetchers: Dict[Tuple[int, int], ReplicaFetcher] = {}
        #: partitions that stopped on a fenced epoch or a storage error, until LeaderAndIsr re-adds them
        self.failed_partitions: Set[TopicPartition] = set()
        self._lock: Optional[asyncio.Lock] = None

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def fetcher_id(self, tp: TopicPartition) -> int:
        return fetcher_id_for(tp, self.num_fetchers)

    def _new_fetcher(self, fetcher_id: int, leader: BrokerNode) -> ReplicaFetcher:
        channel = self.channel_factory("fetcher-%d" % fetcher_id)  # sent as "broker-<id>-fetcher-<n>", as Kafka
        f = ReplicaFetcher(self, fetcher_id, leader, channel)
        f.start()
        return f

    async def add_fetcher_for_partitions(self, states: Dict[TopicPartition, InitialFetchState]) -> None:
        """Fetch these partitions from their leaders (a leader whose address changed gets a new fetcher)."""
        async with self.lock:
            groups: Dict[Tuple[BrokerNode, int], Dict[TopicPartition, InitialFetchState]] = {}
            for tp, init in states.items():
                groups.setdefault((init.leader, self.fetcher_id(tp)), {})[tp] = init
            for (node, fid), group in groups.items():
                key = (node.broker_id, fid)
                f = self.fetchers.get(key)
                if f is not None and f.leader != node:
                    moved = await f.remove_all_partitions()
                    await f.shutdown()
                    del self.fetchers[key]
                    f = None
                    for tp, st in moved.items():
                        if tp not in group and st.fetch_offset >= 0:
                            group[tp] = InitialFetchState(st.topic_id, node, st.current_leader_epoch, st.fetch_offset)
                if f is None:
                    f = self.fetchers[key] = self._new_fetcher(fid, node)
                self.failed_partitions.difference_update(group)
                await f.add_partitions(group)
                log.info("Added fetcher to broker %d for partitions %s", node.broker_id,
                         ", ".join("%s-%d" % tp for tp in group))

    async def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]
                                            ) -> Dict[TopicPartition, PartitionFetchState]:
        """Stop fetching ``tps``; when this returns no fetcher is processing them any more."""
        tps = list(tps)
        out: Dict[TopicPartition, PartitionFetchState] = {}
        if not tps:
            return out
        async with self.lock:
            for f in list(self.fetchers.values()):
                out.update(await f.remove_partitions(tps))
            self.failed_partitions.difference_update(tps)
        if out:
            log.info("Removed fetcher for partitions %s", ", ".join("%s-%d" % tp for tp in out))
        return out

    async def shutdown_idle_fetchers(self) -> None:
        async with self.lock:
            for key, f in list(self.fetchers.items()):
                if not f.partitions:
                    await f.shutdown()
                    del self.fetchers[key]

    async def shutdown(self) -> None:
        async with self.lock:
            fetchers = list(self.fetchers.values())
            self.fetchers.clear()
        await asyncio.gather(*(f.shutdown() for f in fetchers), return_exceptions=True)

    def fetch_state(self, tp: TopicPartition) -> Optional[PartitionFetchState]:
        for f in self.fetchers.values():
            st = f.partitions.get(tp)
            if st is not None:
                return st
        return None

    def fetcher_for(self, tp: TopicPartition) -> Optional[ReplicaFetcher]:
        for f in self.fetchers.values():
            if tp in f.partitions:
                return f
        return None


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
