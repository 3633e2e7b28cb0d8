"""CoordinatorRuntime: what the group and transaction coordinators share, per coordinator partition.

Named after Kafka's ``org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime``. One runtime serves one
coordinator topic (``__consumer_offsets`` or ``__transaction_state``); for each partition of it this broker leads it
owns a context: the shard (the coordinator's pure state machine of that partition), the leader epoch the shard was
loaded at, whether it is loading or active, and the appends under way. It does:

- loading on election: a fresh shard is built and every record of the partition's log, up to its log end, is fed
  to the shard's ``replay_batch`` (on the loader thread: the shard is not visible to anyone yet), then
  ``end_replay``; the coordinator's ``on_loaded`` hook runs once the shard is active (timers, resumed markers);
- unloading on resignation (or before a reload at a new epoch): the context goes, a load under way is cancelled,
  the coordinator's ``on_unloaded`` hook answers what waits on the shard;
- routing: :meth:`route` answers COORDINATOR_LOAD_IN_PROGRESS while loading and NOT_COORDINATOR when the
  partition is not led here (Kafka's runtime answers the same);
- writing: :meth:`write` appends a state machine's records through the coordinator log (acks and
  ``min.insync.replicas`` as that log's appends are configured: ``offsets.commit.required.acks``, acks=all for
  ``__transaction_state``), then, if the shard is still the partition's current one, replays the same records
  into it (``replay_written``) and reports success; a failed append applies nothing and reports the append's
  error; a write that ends after the partition was unloaded or reloaded (the epoch check) is fenced with
  NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while the new load runs.

Replay is the write path, applied after the write, not speculatively. Kafka's runtime replays at once into
timeline data structures and reverts them to a snapshot when the write fails; here the shards hold plain dicts
and objects, so a rollback would mean an undo log per operation, and a reader (OffsetFetch, DescribeGroups)
between the replay and the end of the append would see state that may yet be reverted. Applying after the write
needs neither: what the state holds is always what the log holds, and operations that must see a write in
flight (a second commit of the same partition, a transaction's next transition) are serialized by the shard's
own pending markers (pending commits, a transaction's pending state), which are in-memory state, not records.

A load waits for the appends still under way on its partition, so it reads every record they wrote (Kafka's
runtime serializes a partition's events the same way).

Loop affinity: everything runs on the event loop, except the replay of a load, which runs on the loader thread.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Optional, Protocol, Sequence, Set, Tuple, TypeVar

from broker.errors import ErrorCode, KafkaError
from broker.util.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

#: a record a state machine asks to append: (key, value); value None is a tombstone
Record = Tuple[bytes, Optional[bytes]]


class CoordinatorShard(Protocol):
    """The state machine of one coordinator partition, as the runtime drives it."""

    def replay_batch(self, records: Sequence[Any], producer_id: int, marker: Optional[bool]) -> None:
        """Apply one loaded batch (records with offset, key, value) or transaction marker (loader thread)."""

    def end_replay(self) -> None:
        """The load read the whole log (loader thread)."""

    def replay_written(self, records: Sequence[Record], base_offset: int, producer_id: int) -> None:
        """Apply records this broker just wrote at ``base_offset`` (the event loop)."""


S = TypeVar("S", bound=CoordinatorShard)


class CoordinatorLog(Protocol):
    """Reads and appends a coordinator topic's partitions (``broker.coordinator.offsets_topic.OffsetsTopicIO``)."""

    async def load(self, partition: int, on_batch: Any, buffer_bytes: int,
                   on_end: Optional[Callable[[], None]] = None) -> Tuple[int, int]: ...

    async def append(self, partition: int, records: Sequence[Record], base_sequence: int = -1) -> int: ...

    async def append_transactional(self, partition: int, records: Sequence[Record], producer_id: int,
                                   producer_epoch: int, guard: Optional[object] = None) -> int: ...

    def is_leader(self, partition: int) -> bool: ...


@dataclass(frozen=True)
class WriteResult:
    """How a write ended: ``error`` 0 and the offset of its first record, or the append's error code; ``fenced``
    when the partition was unloaded or reloaded meanwhile (``error`` is then NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS and nothing was applied)."""
    error: int
    base_offset: int = -1
    fenced: bool = False


@dataclass(eq=False)
class _Context(Generic[S]):
    """One coordinator partition led here."""
    partition: int
    epoch: int
    shard: Optional[S] = None
    load_task: Optional["asyncio.Task[None]"] = None

    @property
    def active(self) -> bool:
        return self.shard is not None


@dataclass
class LoadSummary:
    """What a load read, for the coordinator's log line."""
    records: int
    end_offset: int
    elapsed_ms: int
    epoch: int


@dataclass
class _Hooks(Generic[S]):
    new_shard: Callable[[int, int], S]
    on_loaded: Callable[[int, S, LoadSummary], None]
    on_unloaded: Callable[[int, Optional[S]], None]


class CoordinatorRuntime(Generic[S]):
    """The partitions of one coordinator topic led here, their shards, loads and writes (see the module doc)."""

    def __init__(self, name: str, topic: str, log_io: CoordinatorLog, new_shard: Callable[[int, int], S],
                 on_loaded: Callable[[int, S, LoadSummary], None], on_unloaded: Callable[[int, Optional[S]], None],
                 leader_epoch: Optional[Callable[[int], int]] = None,
                 load_buffer_bytes: Callable[[], int] = lambda: 5 * 1024 * 1024,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.name = name
        self.topic = topic
        self.log = log_io
        self._hooks: _Hooks[S] = _Hooks(new_shard, on_loaded, on_unloaded)
        self._leader_epoch = leader_epoch
        self._load_buffer_bytes = load_buffer_bytes
        #: the coordinator's clock (the load's elapsed ms in its LoadSummary)
        self.clock = clock
        self._contexts: Dict[int, _Context[S]] = {}
        #: the active shards by partition (the view the coordinators read)
        self.shards: Dict[int, S] = {}
        #: appends under way per partition: a (re)load waits for them
        self._appending: Dict[int, Set["asyncio.Future[Any]"]] = {}

    # ------------------------------------------------------------------ lifecycle
    def epoch_of(self, partition: int) -> int:
        return int(self._leader_epoch(partition)) if self._leader_epoch is not None else -1

    def schedule_load(self, partition: int) -> None:
        """Elected leader of ``partition``: (re)load its shard. A second election at the same epoch while the
        first load runs is ignored."""
        epoch = self.epoch_of(partition)
        ctx = self._contexts.get(partition)
        if ctx is not None and not ctx.active and ctx.epoch == epoch:
            return
        self.schedule_unload(partition)
        ctx = _Context(partition, epoch)
        self._contexts[partition] = ctx
        ctx.load_task = asyncio.get_running_loop().create_task(self._load(ctx))

    def schedule_unload(self, partition: int) -> None:
        """Resigned (or about to reload): drop the partition's context; a load under way is cancelled."""
        ctx = self._contexts.pop(partition, None)
        self.shards.pop(partition, None)
        if ctx is None:
            return
        if ctx.load_task is not None and not ctx.load_task.done():
            ctx.load_task.cancel()
        self._hooks.on_unloaded(partition, ctx.shard)

    async def _load(self, ctx: _Context[S]) -> None:
        p = ctx.partition
        started = self.clock.mono_ms()
        try:
            in_flight = list(self._appending.get(p, ()))
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
            shard = self._hooks.new_shard(p, ctx.epoch)
            records, end = await self.log.load(p, shard.replay_batch, self._load_buffer_bytes(), shard.end_replay)
            if self._contexts.get(p) is not ctx:
                return
            ctx.shard = shard
            self.shards[p] = shard
            self._hooks.on_loaded(p, shard, LoadSummary(records, end, self.clock.mono_ms() - started, ctx.epoch))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("[%s] Loading %s-%d failed", self.name, self.topic, p)
            if self._contexts.get(p) is ctx and not ctx.active:
                del self._contexts[p]
                self._hooks.on_unloaded(p, None)

    def is_loading(self, partition: int) -> bool:
        ctx = self._contexts.get(partition)
        return ctx is not None and not ctx.active

    @property
    def loading(self) -> Set[int]:
        """The partitions being loaded."""
        return {p for p, ctx in self._contexts.items() if not ctx.active}

    def partitions(self) -> Set[int]:
        """Every partition with a context (loading or active)."""
        return set(self._contexts)

    async def wait_loaded(self) -> None:
        """Wait until no partition is loading (tests and tools)."""
        while True:
            tasks = [c.load_task for c in self._contexts.values() if not c.active and c.load_task is not None]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ routing
    def route(self, partition: int) -> Tuple[int, Optional[S]]:
        """(error, shard): COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when not led here."""
        ctx = self._contexts.get(partition)
        if ctx is not None and not ctx.active:
            return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), None
        if ctx is None or ctx.shard is None or not self.log.is_leader(partition):
            return int(ErrorCode.NOT_COORDINATOR), None
        return 0, ctx.shard

    def _fence_error(self, partition: int) -> int:
        return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading(partition)
                   else ErrorCode.NOT_COORDINATOR)

    # ------------------------------------------------------------------ writes
    async def write(self, partition: int, shard: S, records: Sequence[Record], *, replay: bool = True,
                    base_sequence: int = -1, producer: Optional[Tuple[int, int]] = None,
                    guard: Optional[object] = None) -> WriteResult:
        """Append ``records`` for ``shard``; once the append succeeded and ``shard`` is still current, replay them
        into it (``replay`` False: the caller changed the state itself, e.g. a classic group's metadata).

        ``producer`` (id, epoch): the records are one transactional batch of that producer (TxnOffsetCommit),
        verified by ``guard`` (KIP-890). The append outlives a cancelled caller, so its error is never lost and
        a later load still waits for it."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.shard is not shard:
            return WriteResult(int(ErrorCode.NOT_COORDINATOR), fenced=True)
        if not records:
            return WriteResult(0)
        if producer is not None:
            coro = self.log.append_transactional(partition, records, producer[0], producer[1], guard)
        else:
            coro = self.log.append(partition, records, base_sequence)
        append = asyncio.ensure_future(coro)
        append.add_done_callback(_retrieve)
        appending = self._appending.setdefault(partition, set())
        appending.add(append)
        try:
            last = await asyncio.shield(append)
            code = 0
        except KafkaError as exc:
            code = int(exc.error_code)
        except Exception:
            log.exception("[%s] Appending to %s-%d failed", self.name, self.topic, partition)
            code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            appending.discard(append)
            if not appending:
                self._appending.pop(partition, None)
        if self._contexts.get(partition) is not ctx:
            return WriteResult(self._fence_error(partition), fenced=True)
        if code:
            return WriteResult(code)
        base = last - len(records) + 1
        if replay:
            shard.replay_written(records, base, producer[0] if producer is not None else -1)
        return WriteResult(0, base)


def _retrieve(fut: "asyncio.Future[Any]") -> None:
    if not fut.cancelled():
        fut.exception()
