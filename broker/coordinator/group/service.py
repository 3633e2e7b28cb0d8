"""GroupCoordinator: the asyncio side of the classic group protocol.

Routes each group to its ``__consumer_offsets`` partition (Java ``String.hashCode``). The
:class:`~broker.coordinator.runtime.CoordinatorRuntime` keeps one pure :class:`GroupCoordinatorState` per
partition this broker leads (loading it on election, COORDINATOR_LOAD_IN_PROGRESS meanwhile; unloading it on
resignation) and writes the records the state asks for, applying offset commits, OffsetDelete, DeleteGroups and
offset expiry through replay once written.
This service runs the timers the state arms (session, join, sync), parks JoinGroup/SyncGroup requests on
futures until their rebalance step completes, and expires offsets every ``offsets.retention.check.interval.ms``.

At scale (a thousand groups, a million committed offsets): a load streams the log batch by batch
into the state on the loader thread (see OffsetsTopicIO.load and GroupCoordinatorState.begin_loading);
session timers move later lazily instead of being re-armed by every heartbeat and commit (_apply);
an expiry pass looks at a slice of groups at a time (expire_offsets).

Clocks: one :class:`~broker.util.clock.Clock` (the broker's; a ManualClock in tests). Deadlines (session, join,
sync) run on its monotonic reading and timers (mono_ms, call_later_ms), as Kafka's DelayedHeartbeat/DelayedJoin
(SystemTimer on hiResClockMs), so a wall-clock jump neither expires members early nor keeps them late; the
timestamps stored in ``__consumer_offsets`` and the offset expiry compared with them on its wall reading (wall_ms,
Kafka's time.milliseconds()), as Kafka does (see group/state.py). The expiry interval is the clock's sleep.

Loop affinity: everything runs on the broker's event loop; log reads and replays of a load run on the
coordinator's loader thread.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any, Dict, Iterator, List, Optional, Protocol, Set, Tuple

from broker.util.java_hash import partition_for
from broker.coordinator.group.state import (C_OFFSET, GroupConfig, GroupCoordinatorState, OffsetAndMetadata,
                                            Outcome, TimerKey, TopicPartition, join_result, sync_result,
                                            write_error_for_commit)
from broker.coordinator.offsets_topic import DEFAULT_LOAD_BUFFER_BYTES, GROUP_METADATA_TOPIC_NAME, OffsetsTopicIO
from broker.coordinator.runtime import CoordinatorRuntime, LoadSummary
from broker.errors import ErrorCode
from broker.util.clock import SYSTEM_CLOCK, Clock, Timer
from broker.util.request_time import parked

log = logging.getLogger(__name__)

#: append failures the clients are told about through their error codes, logged at DEBUG as Kafka does
_EXPECTED_APPEND_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT})
#: offsets looked at per slice of an expiry scan (see GroupCoordinator.expire_offsets)
EXPIRY_SLICE_OFFSETS = 20000


#: see GroupConfig.initial_join_min_ms (5 ms: Kafka 3.9.1's first generation forms 3-5 ms after the join that
#: armed it on this machine; the bench gave 0.085 s for 3 consumers with 5 ms, 1.0 s with 0)
INITIAL_JOIN_MIN_MS = 5


class ConfigSource(Protocol):
    def get(self, name: str) -> Any: ...


class InternalTopicCreator(Protocol):
    async def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Dict[str, str]) -> int: ...


class PartitionVerifier(Protocol):
    async def verify_partition(self, topic: str, partition: int, transactional_id: str, producer_id: int,
                               producer_epoch: int, generic_errors: bool) -> int: ...


class GroupCoordinator:
    """One per broker; registered as a leadership listener of ``__consumer_offsets``."""

    def __init__(self, config: ConfigSource, io: OffsetsTopicIO, topics: InternalTopicCreator,
                 verifier: Optional[PartitionVerifier] = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        #: deadlines and timers on mono_ms, stored timestamps and offset expiry on wall_ms (see the module doc)
        self.clock = clock
        self.io = io
        self.topics = topics
        #: KIP-890 verification of TxnOffsetCommit's partition with the transaction coordinator (None: off)
        self.verifier = verifier
        self.num_partitions = int(self._cfg("offsets.topic.num.partitions", 50))
        self.runtime: CoordinatorRuntime[GroupCoordinatorState] = CoordinatorRuntime(
            "GroupCoordinator", GROUP_METADATA_TOPIC_NAME, io, self._new_shard, self._on_loaded, self._drop_shard,
            load_buffer_bytes=lambda: int(self._cfg("offsets.load.buffer.size", DEFAULT_LOAD_BUFFER_BYTES)),
            clock=clock)
        #: the active shards by partition (the runtime's)
        self.shards: Dict[int, GroupCoordinatorState] = self.runtime.shards
        #: armed timers: (partition, key) -> (handle, the deadline it was armed for, ms)
        self._timers: Dict[Tuple[int, TimerKey], Tuple[Timer, int]] = {}
        #: the latest deadline the state asked for per timer (may be later than the armed one; see _apply)
        self._deadlines: Dict[Tuple[int, TimerKey], int] = {}
        self._waiters: Dict[int, "asyncio.Future[Any]"] = {}
        self._tokens = itertools.count(1)
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self._expiry_task: Optional["asyncio.Task[None]"] = None
        #: transaction markers that reached a partition while it was loading: (offset, producer id, committed)
        self._markers_while_loading: Dict[int, List[Tuple[int, int, bool]]] = {}
        self.active = False

    def _cfg(self, key: str, default: Any) -> Any:
        try:
            return self.config.get(key)
        except KeyError:
            return default

    def group_config(self) -> GroupConfig:
        return GroupConfig(
            min_session_timeout_ms=int(self._cfg("group.min.session.timeout.ms", 6000)),
            max_session_timeout_ms=int(self._cfg("group.max.session.timeout.ms", 1800000)),
            initial_rebalance_delay_ms=int(self._cfg("group.initial.rebalance.delay.ms", 3000)),
            initial_join_min_ms=INITIAL_JOIN_MIN_MS,
            max_size=int(self._cfg("group.max.size", 2147483647)),
            offset_metadata_max_bytes=int(self._cfg("offset.metadata.max.bytes", 4096)),
            offsets_retention_ms=int(self._cfg("offsets.retention.minutes", 10080)) * 60 * 1000)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.active = True
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    async def stop(self) -> None:
        self.active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for p in self.runtime.partitions():
            await self.on_resign(GROUP_METADATA_TOPIC_NAME, p)
        for t in list(self._tasks):
            t.cancel()

    @property
    def loading(self) -> Set[int]:
        """The partitions being loaded."""
        return self.runtime.loading

    async def on_become_leader(self, topic: str, partition: int) -> None:
        if topic == GROUP_METADATA_TOPIC_NAME:
            self.runtime.schedule_load(partition)

    async def on_resign(self, topic: str, partition: int) -> None:
        if topic == GROUP_METADATA_TOPIC_NAME:
            self.runtime.schedule_unload(partition)

    def _new_shard(self, partition: int, _epoch: int) -> GroupCoordinatorState:
        """A state to load into: it only notes each key's latest record until the end (see begin_loading)."""
        state = GroupCoordinatorState(self.group_config(), wall_clock=self.clock.wall_ms)
        state.begin_loading()
        self._markers_while_loading.setdefault(partition, [])
        return state

    def _on_loaded(self, partition: int, state: GroupCoordinatorState, load: LoadSummary) -> None:
        """The load read the log up to ``load.end_offset``: apply the markers that came later, arm the timers."""
        for offset, producer_id, committed in self._markers_while_loading.pop(partition, []):
            if offset < 0 or offset >= load.end_offset:  # -1: offset not known
                state.complete_txn(producer_id, committed)
        self._apply(partition, state.finish_loading(self.clock.mono_ms()))
        log.info("[GroupCoordinator] Loaded %d groups from %s-%d (%d records) in %d ms", len(state.groups),
                 GROUP_METADATA_TOPIC_NAME, partition, load.records, load.elapsed_ms)

    def _drop_shard(self, partition: int, state: Optional[GroupCoordinatorState]) -> None:
        """Unloaded: its timers go, its parked requests are answered NOT_COORDINATOR."""
        self._markers_while_loading.pop(partition, None)
        for key in [k for k in self._timers if k[0] == partition]:
            self._timers.pop(key)[0].cancel()
        for key in [k for k in self._deadlines if k[0] == partition]:
            del self._deadlines[key]
        if state is not None:
            n = len(state.groups)
            self._deliver(state.shutdown())
            log.log(logging.INFO if n else logging.DEBUG, "[GroupCoordinator] Unloaded %d groups of %s-%d", n,
                    GROUP_METADATA_TOPIC_NAME, partition)

    async def wait_loaded(self) -> None:
        """Wait until no partition is loading (tests and tools)."""
        await self.runtime.wait_loaded()

    # ------------------------------------------------------------------ plumbing
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def _route(self, group_id: str) -> Tuple[int, int, Optional[GroupCoordinatorState]]:
        """(error, partition, state): Kafka's validateGroupStatus without the group id check."""
        p = self.partition_for(group_id)
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, p, None
        err, state = self.runtime.route(p)
        return err, p, state

    def _new_waiter(self) -> Tuple[int, "asyncio.Future[Any]"]:
        token = next(self._tokens)
        fut: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        return token, fut

    def _deliver(self, out: Outcome) -> None:
        for token, result in out.completions:
            fut = self._waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(result)

    def _apply(self, partition: int, out: Outcome) -> None:
        """Arm the outcome's timers and answer the parked requests it completes.

        Every heartbeat and commit moves its member's session deadline later, so a timer is only re-armed when
        its new deadline comes *earlier* than the armed one; a later one is just recorded, and the armed timer,
        when it fires, sleeps again until it (Kafka's DelayedHeartbeat is likewise completed lazily)."""
        if out.timers:
            now = -1
            for key, deadline in out.timers:
                k = (partition, key)
                self._deadlines[k] = deadline
                armed = self._timers.get(k)
                if armed is not None:
                    if armed[1] <= deadline:
                        continue
                    armed[0].cancel()
                if now < 0:
                    now = self.clock.mono_ms()
                self._arm(k, deadline, now)
        self._deliver(out)

    def _arm(self, k: Tuple[int, TimerKey], deadline: int, now: int) -> None:
        handle = self.clock.call_later_ms(max(0, deadline - now), lambda: self._fire(k[0], k[1]))
        self._timers[k] = (handle, deadline)

    def _fire(self, partition: int, key: TimerKey) -> None:
        k = (partition, key)
        self._timers.pop(k, None)
        now = self.clock.mono_ms()
        deadline = self._deadlines.get(k)
        if deadline is not None and deadline > now:  # moved later since it was armed: sleep until then
            self._arm(k, deadline, now)
            return
        self._deadlines.pop(k, None)
        state = self.shards.get(partition)
        if state is None:
            return
        out = state.on_timer(now, key)
        if out.records:
            self._spawn(self._finish(partition, state, out))
        else:
            self._apply(partition, out)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, partition: int, state: GroupCoordinatorState, out: Outcome) -> Any:
        """Apply ``out``'s timers and replies, write its records through the runtime (which replays them into
        ``state`` when ``out.replay``), then complete what waited for the write; the caller's reply."""
        self._apply(partition, out)
        if not out.records:
            return out.response
        written = await self.runtime.write(partition, state, out.records, replay=out.replay,
                                           base_sequence=out.base_sequence, producer=out.producer, guard=out.guard)
        # unloaded or reloaded meanwhile: answered as leadership lost (NOT_COORDINATOR)
        code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER) if written.fenced else written.error
        if code:
            # Kafka logs the expected failures (leadership moved, replication timed out) at DEBUG: under load
            # they come by the thousand and each already reaches its client as an error code.
            log.log(logging.DEBUG if code in _EXPECTED_APPEND_ERRORS else logging.WARNING,
                    "[GroupCoordinator] Appending %d records to %s-%d failed: %s", len(out.records),
                    GROUP_METADATA_TOPIC_NAME, partition, ErrorCode(code).name)
            after = out.on_write_failed(self.clock.mono_ms(), code) if out.on_write_failed else None
        else:
            after = out.on_written(self.clock.mono_ms(), written.base_offset) if out.on_written else None
        if after is None:
            return out.response
        if after.records:  # not produced by the current state machine; kept general
            await self._finish(partition, state, after)
        else:
            self._apply(partition, after)
        return after.response if after.response is not None else out.response

    async def _parked(self, partition: int, state: GroupCoordinatorState, out: Outcome, token: int,
                      fut: "asyncio.Future[Any]") -> Any:
        response = await self._finish(partition, state, out)
        if response is not None:
            self._waiters.pop(token, None)
            return response
        with parked():  # the join/sync barrier: waiting for other members is not this request's work
            return await fut

    # ------------------------------------------------------------------ the APIs
    async def join_group(self, group_id: str, member_id: str, group_instance_id: Optional[str], client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: List[Tuple[str, bytes]], require_known_member_id: bool,
                         support_skip_assignment: bool) -> dict:
        err, p, state = self._route(group_id)
        if state is None:
            return join_result(member_id, err)
        token, fut = self._new_waiter()
        out = state.join_group(self.clock.mono_ms(), token, group_id, member_id, group_instance_id, client_id, client_host,
                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                               require_known_member_id, support_skip_assignment)
        return await self._parked(p, state, out, token, fut)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: Optional[str],
                         protocol_type: Optional[str], protocol_name: Optional[str],
                         assignments: Dict[str, bytes]) -> dict:
        err, p, state = self._route(group_id)
        if state is None:
            # Loading means the rebalance state is lost: members must rejoin (Kafka answers this way).
            return sync_result(ErrorCode.REBALANCE_IN_PROGRESS if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                               else err)
        token, fut = self._new_waiter()
        out = state.sync_group(self.clock.mono_ms(), token, group_id, generation_id, member_id, group_instance_id,
                               protocol_type, protocol_name, assignments)
        return await self._parked(p, state, out, token, fut)

    async def heartbeat(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                        generation_id: int) -> int:
        err, p, state = self._route(group_id)
        if state is None:
            return 0 if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else err
        return await self._finish(p, state, state.heartbeat(self.clock.mono_ms(), group_id, member_id, group_instance_id,
                                                     generation_id))

    async def leave_group(self, group_id: str,
                          members: List[Tuple[str, Optional[str]]]) -> Tuple[int, List[Tuple[str, Optional[str], int]]]:
        err, p, state = self._route(group_id)
        if state is None:
            return err, []
        return await self._finish(p, state, state.leave_group(self.clock.mono_ms(), group_id, members))

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                             generation_id: int,
                             offsets: Dict[TopicPartition, OffsetAndMetadata]) -> Dict[TopicPartition, int]:
        err, p, state = self._route(group_id)
        if state is None:
            return {tp: err for tp in offsets}
        out = state.commit_offsets(self.clock.mono_ms(), group_id, member_id, group_instance_id, generation_id, offsets)
        return await self._finish(p, state, out)

    async def txn_commit_offsets(self, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, group_instance_id: Optional[str], generation_id: int,
                                 offsets: Dict[TopicPartition, OffsetAndMetadata],
                                 api_version: int = 4) -> Dict[TopicPartition, int]:
        """TxnOffsetCommit: offsets pending in the producer's transaction (Kafka's handleTxnCommitOffsets).

        With ``transaction.partition.verification.enable`` the group's partition is first verified with
        the transaction coordinator (KIP-890 part 1); a failure answers every partition, TRANSACTION_ABORTABLE
        only from v4 on (older clients get INVALID_TXN_STATE).
        """
        err, p, state = self._route(group_id)
        if state is None:
            return {tp: err for tp in offsets}
        guard = self.io.start_verification(p, producer_id, producer_epoch) if self.verifier is not None else None
        if guard is not None:  # no open transaction of this producer on the partition yet: ask its coordinator
            assert self.verifier is not None
            code = await self.verifier.verify_partition(GROUP_METADATA_TOPIC_NAME, p, transactional_id, producer_id,
                                                        producer_epoch, generic_errors=api_version >= 4)
            if code:
                final = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if code == ErrorCode.NETWORK_EXCEPTION \
                    else write_error_for_commit(code)
                return {tp: final for tp in offsets}
            err, p, state = self._route(group_id)  # the verification awaited: leadership may have moved
            if state is None:
                return {tp: err for tp in offsets}
        out = state.txn_commit_offsets(self.clock.mono_ms(), group_id, producer_id, producer_epoch, member_id,
                                       group_instance_id, generation_id, offsets)
        out.guard = guard
        return await self._finish(p, state, out)

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, committed: bool,
                      offset: int = -1) -> None:
        """A transaction marker was appended to a ``__consumer_offsets`` partition this broker leads."""
        if topic != GROUP_METADATA_TOPIC_NAME:
            return
        state = self.shards.get(partition)
        if state is not None:
            state.complete_txn(producer_id, committed)
        elif self.runtime.is_loading(partition):
            self._markers_while_loading.setdefault(partition, []).append((offset, producer_id, committed))

    async def fetch_offsets(self, group_id: str, partitions: Optional[List[TopicPartition]],
                            require_stable: bool) -> Tuple[int, List[Tuple[TopicPartition, int, int, str, int]]]:
        err, _p, state = self._route(group_id)
        if state is None:
            return err, []
        return 0, state.fetch_offsets(group_id, partitions, require_stable)

    def committed_offsets(self) -> Iterator[Tuple[str, TopicPartition, int]]:
        """(group, partition, committed offset) of every group this broker coordinates (the lag metric)."""
        for state in list(self.shards.values()):
            for group_id, group in list(state.groups.items()):
                for tp, c in list(group.offsets.items()):
                    yield group_id, tp, c[C_OFFSET]

    def describe_group(self, group_id: str) -> dict:
        err, _p, state = self._route(group_id)  # the empty group id is valid here, as in Kafka
        if err or state is None:
            return {"error_code": err, "group_id": group_id, "group_state": "", "protocol_type": "",
                    "protocol_data": "", "members": []}
        return state.describe_group(group_id)

    def list_groups(self, states: Optional[Set[str]] = None) -> Tuple[int, List[dict]]:
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else 0
        groups: List[dict] = []
        for state in self.shards.values():
            groups.extend(state.list_groups(states))
        return error, groups

    async def delete_groups(self, group_ids: List[str]) -> Dict[str, int]:
        """DeleteGroups: one write of tombstones per coordinator partition, all under way at once (Kafka's
        GroupCoordinatorService.deleteGroups); a group goes when its tombstones are written and replayed, and a
        failed write answers its partition's groups with the mapped error (GroupCoordinatorState.delete_groups)."""
        result: Dict[str, int] = {}
        by_partition: Dict[int, Tuple[GroupCoordinatorState, List[str]]] = {}
        for gid in group_ids:
            err, p, state = self._route(gid)  # the empty group id is valid here, as in Kafka
            if state is None:
                result[gid] = err
            else:
                by_partition.setdefault(p, (state, []))[1].append(gid)
        writes = [self._finish(p, state, state.delete_groups(gids)) for p, (state, gids) in by_partition.items()]
        for answer in await asyncio.gather(*writes):
            result.update(answer)
        return result

    async def delete_offsets(self, group_id: str,
                             partitions: List[TopicPartition]) -> Tuple[int, Dict[TopicPartition, int]]:
        err, p, state = self._route(group_id)
        if state is None:
            return err, {}
        return await self._finish(p, state, state.delete_offsets(group_id, partitions))

    async def expire_offsets(self) -> None:
        """Kafka's cleanupGroupMetadata over every loaded group, a slice of groups at a time (about
        ``EXPIRY_SLICE_OFFSETS`` offsets each) so a coordinator holding a million offsets never stops the event
        loop for the whole scan; each slice's tombstones are appended before the next slice is looked at."""
        started = time.monotonic()
        removed = 0
        for p in list(self.shards):
            state = self.shards.get(p)
            if state is None:
                continue
            group_ids = list(state.groups)
            i = 0
            while i < len(group_ids):
                if self.shards.get(p) is not state:  # resigned meanwhile
                    break
                chunk: List[str] = []
                budget = 0
                while i < len(group_ids) and budget < EXPIRY_SLICE_OFFSETS:
                    g = state.groups.get(group_ids[i])
                    budget += 1 + (len(g.offsets) if g is not None else 0)
                    chunk.append(group_ids[i])
                    i += 1
                out = state.expire_offsets(self.clock.wall_ms(), chunk)
                if out.records:
                    removed += await self._finish(p, state, out)  # the offsets it removed (0: the write failed)
                else:
                    await asyncio.sleep(0)
        if removed:
            log.info("[GroupCoordinator] Removed %d expired offsets in %.0f milliseconds.", removed,
                     (time.monotonic() - started) * 1000)

    async def _expiry_loop(self) -> None:
        interval_ms = max(1, int(self._cfg("offsets.retention.check.interval.ms", 600000)))
        while True:
            await self.clock.sleep_ms(interval_ms)
            try:
                await self.expire_offsets()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("[GroupCoordinator] Offset expiration failed")

    # ------------------------------------------------------------------ FindCoordinator support
    async def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` on first use; 0 or COORDINATOR_NOT_AVAILABLE."""
        configs = {"cleanup.policy": "compact",
                   "segment.bytes": str(self._cfg("offsets.topic.segment.bytes", 104857600)),
                   "compression.type": "producer"}
        return int(await self.topics.ensure_internal_topic(
            GROUP_METADATA_TOPIC_NAME, self.num_partitions,
            int(self._cfg("offsets.topic.replication.factor", 3)), configs))

