"""Test harness for the replica layer: real Logs in temp dirs, a manual clock (broker.util.clock.ManualClock), a fake
controller (AlterPartition) and a fake network whose channels route Fetch / OffsetForLeaderEpoch / ListOffsets
to another broker's real ReplicaManager, through the real wire codecs (request encoded, decoded,
answered, response encoded with its FileSlices read, decoded)."""
from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar

from broker.errors import ErrorCode
from broker.protocol.api import decode_request, decode_request_header, decode_response, encode_request, encode_response
from broker.protocol.codec import join_parts
from broker.protocol.records.builder import build_batch
from broker.replica.config import ReplicaConfig
from broker.replica.manager import FetchPartitionInfo, ReplicaManager, fetch_request_replica
from broker.replica.partition import AlterPartitionError, LeaderAndIsr, LeaderAndIsrPartitionState
from broker.storage.config import LogConfig
from broker.storage.log_manager import LogManager
from broker.storage.scheduler import Scheduler
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from broker.util.clock import Clock, ManualClock

TOPIC = "t"
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
TP = (TOPIC, 0)
T = TypeVar("T")


def records(*values: bytes, ts: int = 1_700_000_000_000) -> bytearray:
    """One batch with one record per value."""
    return bytearray(build_batch([(b"k", v, [], ts + i) for i, v in enumerate(values)]))


async def wait_until(cond: Callable[[], bool], clock: Optional[ManualClock] = None, *, max_ms: int = 30_000,
                     turns: int = 50, what: str = "condition") -> None:
    """Wait for ``cond`` without real time: loop turns first (an outcome that only needs other tasks to run, as with
    inline I/O, is there without any timer); then, given the cluster's ``clock``, move it to its next timer's
    deadline (a fetcher's backoff or idle wait, a Fetch long poll, a purgatory expiry, a periodic task) and take
    the loop turns again, up to ``max_ms`` of fake time. Fails when ``cond`` never holds."""
    start = clock.mono_ms() if clock is not None else 0
    while True:
        for _ in range(turns):
            if cond():
                return
            await asyncio.sleep(0)
        if cond():
            return
        deadline = clock.next_deadline_ms() if clock is not None else None
        if clock is None or deadline is None or deadline - start > max_ms:
            raise AssertionError("never happened: " + what)
        clock.advance(max(deadline - clock.mono_ms(), 0))


async def drive(rm: Any, aw: Awaitable[T], *, max_ms: int = 60_000, what: str = "the call") -> T:
    """Await ``aw`` (a call on ``rm``: a ReplicaManager, or a ManualClock itself) while moving the ManualClock
    whenever the loop has nothing else to do: a call that waits on a timer (an acks=all produce for its followers'
    next fetch, a Fetch long poll, a retry backoff, a timeout) completes when the fake time reaches it, without real
    time."""
    clock = getattr(rm, "time", rm)
    task = asyncio.ensure_future(aw)
    if not isinstance(clock, ManualClock):
        return await task
    try:
        await wait_until(task.done, clock, max_ms=max_ms, what=what)
    finally:
        if not task.done():
            task.cancel()
    return task.result()


class FakeAlterPartition:
    """A controller that commits every AlterPartition (partition epoch + 1), or fails / holds them on demand."""

    def __init__(self, broker_id: int, auto: bool = True) -> None:
        self.broker_id = broker_id
        self.auto = auto
        self.error: Optional[int] = None
        self.submissions: List[Tuple[Any, ...]] = []
        self.held: List[Tuple[Tuple[Any, ...], "asyncio.Future[LeaderAndIsr]"]] = []

    async def submit(self, tp, topic_id, leader_epoch, new_isr_with_epochs, leader_recovery_state, partition_epoch):
        sub = (tp, topic_id, leader_epoch, [b for b, _ in new_isr_with_epochs], leader_recovery_state,
               partition_epoch)
        self.submissions.append(sub)
        if self.error is not None:
            raise AlterPartitionError(self.error)
        if self.auto:
            return LeaderAndIsr(self.broker_id, leader_epoch, tuple(sub[3]), leader_recovery_state, partition_epoch + 1)
        fut: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        self.held.append((sub, fut))
        return await fut

    def fail_held(self, error: int) -> None:
        held, self.held = self.held, []
        for _sub, fut in held:
            if not fut.done():
                fut.set_exception(AlterPartitionError(error))

    def commit_held(self) -> None:
        held, self.held = self.held, []
        for sub, fut in held:
            if not fut.done():
                fut.set_result(LeaderAndIsr(self.broker_id, sub[2], tuple(sub[3]), sub[4], sub[5] + 1))


def state(leader: int, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int] = (1, 2, 3), *,
          partition_epoch: int = 0, controller_epoch: int = 1, tp: Tuple[str, int] = TP) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(tp[0], tp[1], controller_epoch, leader, leader_epoch, list(isr), partition_epoch,
                                      list(replicas))


# ---------------------------------------------------------------------- a minimal API layer for the fake network
def _topic_name(rm: ReplicaManager, topic_id: uuid.UUID) -> Optional[str]:
    for (t, _), p in rm.partitions.items():
        if p.topic_id == topic_id:
            return t
    return None


async def handle_fetch(rm: ReplicaManager, req: Any, version: int) -> dict:
    replica_id, replica_epoch = fetch_request_replica(req, version)
    reads: List[Tuple[Tuple[str, int], FetchPartitionInfo]] = []
    unknown = []
    for t in req.topics:
        name = _topic_name(rm, t.topic_id) if version >= 13 else t.topic
        if name is None:
            unknown.append(t)
            continue
        for p in t.partitions:
            reads.append(((name, p.partition), FetchPartitionInfo(
                p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch, p.last_fetched_epoch,
                p.log_start_offset, t.topic_id if version >= 13 else None)))
    results = await rm.fetch_messages(reads, req.max_bytes, req.min_bytes, req.max_wait_ms, req.isolation_level,
                                      replica_id=replica_id, replica_epoch=replica_epoch,
                                      request_version=version) if reads else {}
    by_topic: Dict[str, List[dict]] = {}
    for tp, _ in reads:
        r = results[tp]
        entry = {"partition_index": tp[1], "error_code": r.error_code, "high_watermark": r.high_watermark,
                 "last_stable_offset": r.last_stable_offset, "log_start_offset": r.log_start_offset,
                 "aborted_transactions": None, "preferred_read_replica": r.preferred_read_replica,
                 "records": r.records if r.records is not None else b""}
        if r.diverging_epoch is not None:
            entry["diverging_epoch"] = {"epoch": r.diverging_epoch[0], "end_offset": r.diverging_epoch[1]}
        by_topic.setdefault(tp[0], []).append(entry)
    responses = []
    for name, parts in by_topic.items():
        p = rm.get_partition((name, parts[0]["partition_index"]))
        responses.append({"topic": name, "topic_id": p.topic_id if p is not None and p.topic_id else uuid.UUID(int=0),
                          "partitions": parts})
    for t in unknown:
        responses.append({"topic": "", "topic_id": t.topic_id, "partitions": [
            {"partition_index": p.partition, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "high_watermark": -1,
             "records": b""} for p in t.partitions]})
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


async def handle_offset_for_leader_epoch(rm: ReplicaManager, req: Any, version: int) -> dict:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, epoch, end = await rm.end_offset_for_epoch((t.topic, p.partition), p.current_leader_epoch,
                                                             p.leader_epoch)
            parts.append({"error_code": code, "partition": p.partition, "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def handle_list_offsets(rm: ReplicaManager, req: Any, version: int) -> dict:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, ts, offset, epoch = await rm.list_offset((t.name, p.partition_index), p.timestamp,
                                                           req.isolation_level, replica_id=req.replica_id,
                                                           current_leader_epoch=p.current_leader_epoch)
            parts.append({"partition_index": p.partition_index, "error_code": code, "timestamp": ts, "offset": offset,
                          "leader_epoch": epoch})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


class _FakeMetadata:
    """What broker.api.fetch.handle asks of the MetadataCache, answered from the broker's own partitions."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.brokers: Dict[int, Any] = {}

    def topic_name(self, topic_id: uuid.UUID) -> Optional[str]:
        return _topic_name(self.rm, topic_id)

    def topic_id(self, name: str) -> Optional[uuid.UUID]:
        for (t, _), p in self.rm.partitions.items():
            if t == name and p.topic_id is not None:
                return p.topic_id
        return None

    def partition(self, topic: str, partition: int) -> Any:
        return None

    def endpoint_of(self, broker_id: int, listener: str) -> Any:
        return None


class _FakeRequestContext:
    def __init__(self, version: int, client_id: str) -> None:
        self.api_version = version
        self.client_id = client_id
        self.listener_name = "PLAINTEXT"


async def handle_fetch_in_session(rm: ReplicaManager, req: Any, version: int) -> dict:
    """The broker's own Fetch handler (broker.api.fetch.handle) with the broker's fetch session cache, so
    followers here fetch in incremental sessions (KIP-227) as they do against a real broker."""
    from broker.api import fetch
    from broker.api.fetch_session import FetchSessionCache
    sessions = getattr(rm, "_test_fetch_sessions", None)
    if sessions is None:
        sessions = rm._test_fetch_sessions = FetchSessionCache()  # type: ignore[attr-defined]
    return await fetch.handle(_FakeRequestContext(version, "fetcher"), req, replica_manager=rm,  # type: ignore[arg-type]
                              metadata=_FakeMetadata(rm), fetch_sessions=sessions)  # type: ignore[arg-type]


HANDLERS = {1: handle_fetch_in_session, 23: handle_offset_for_leader_epoch, 2: handle_list_offsets}


class FakeChannel:
    """A BrokerChannel that calls the target broker's ReplicaManager in-process."""

    _cid = itertools.count(1)

    def __init__(self, cluster: "FakeCluster", src: int, client_id: str) -> None:
        self.cluster = cluster
        self.src = src
        self.client_id = client_id
        self.closed = False

    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        if self.closed:
            raise BrokerChannelError("channel closed")
        cl = self.cluster
        cl.requests.append((self.src, node.broker_id, api_key, body))
        if node.broker_id in cl.down or self.src in cl.down or node.broker_id not in cl.brokers:
            await asyncio.sleep(0)
            raise BrokerChannelError("broker %d unreachable" % node.broker_id)
        cid = next(self._cid)
        frame = encode_request(api_key, api_version, cid, self.client_id, body)
        hdr, off = decode_request_header(memoryview(frame)[4:])
        req = decode_request(api_key, api_version, memoryview(frame)[4:], off)
        hook = cl.intercept
        resp = await hook(self.src, node.broker_id, api_key, req) if hook is not None else None
        if resp is None:
            handler = HANDLERS[api_key] if api_key != 1 or cl.fetch_sessions else handle_fetch
            resp = await handler(cl.brokers[node.broker_id].rm, req, api_version)
        parts = encode_response(api_key, api_version, cid, resp)
        return decode_response(api_key, api_version, join_parts(parts, True))

    def disconnect(self, broker_id: int) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


class Broker:
    def __init__(self, cluster: "FakeCluster", broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.dir = os.path.join(cluster.root, "broker-%d" % broker_id)
        self.log_manager = LogManager([self.dir], cluster.log_config, broker_id=broker_id, cluster_id="c",
                                      scheduler=cluster.scheduler, clock=cluster.clock)
        self.apm = FakeAlterPartition(broker_id)
        self.rm = ReplicaManager(broker_id, self.log_manager, io_threads=cluster.io_threads, config=cluster.config,
                                 clock=cluster.clock,
                                 alter_partition_manager=self.apm, channel_factory=cluster.channel_factory(broker_id),
                                 broker_node=cluster.node, broker_epoch=lambda: 100 + broker_id,
                                 is_broker_alive=lambda b: b not in cluster.not_alive)

    @property
    def log(self) -> Any:
        return self.rm.get_partition(TP).log

    async def stop(self) -> None:
        await self.rm.stop()
        self.log_manager.shutdown()
        self.rm.shutdown()


class FakeCluster:
    def __init__(self, root: str, config: Optional[ReplicaConfig] = None, log_config: Optional[LogConfig] = None,
                 io_threads: int = 0, clock: Optional[Clock] = None) -> None:
        """``io_threads``: 0 (the default) runs each broker's disk jobs inline on the loop (the test's outcomes are
        there when a call returns); a test of the worker threads themselves asks for some. ``clock``: a ManualClock
        by default; the clock-jump tests pass the real one (what they test is the system clock's readings)."""
        self.root = root
        self.io_threads = io_threads
        self.clock: Any = clock if clock is not None else ManualClock()
        self.config = config or ReplicaConfig(replica_fetch_wait_max_ms=200, replica_fetch_backoff_ms=20)
        self.log_config = log_config or LogConfig(file_delete_delay_ms=0)
        self.scheduler = Scheduler(threaded=False, clock=self.clock)  # no thread: deletions run at shutdown
        self.brokers: Dict[int, Broker] = {}
        self.down: set[int] = set()
        #: brokers every broker's metadata cache no longer lists as alive (is_broker_alive)
        self.not_alive: set[int] = set()
        self.requests: List[Tuple[int, int, int, Any]] = []
        self.intercept: Optional[Callable[[int, int, int, Any], Awaitable[Optional[dict]]]] = None
        #: leaders keep incremental fetch sessions (broker.api.fetch); False: sessionless answers (session id 0)
        self.fetch_sessions = True

    async def wait_until(self, cond: Callable[[], bool], *, max_ms: int = 30_000, what: str = "condition") -> None:
        """:func:`wait_until` on this cluster's clock (real time in steps of a millisecond on the real one)."""
        if not isinstance(self.clock, ManualClock):
            await self.wait_real(cond, max_ms / 1000.0, what)
            return
        await wait_until(cond, self.clock, max_ms=max_ms, what=what)

    async def wait_real(self, cond: Callable[[], bool], timeout_s: float, what: str = "condition") -> None:
        """Poll ``cond`` in real time without moving the clock: for what a real worker thread (``io_threads``) makes
        true, while the fake time must stand still (a parked Fetch must not expire meanwhile)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not cond():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("never happened: " + what)
            await asyncio.sleep(0.001)

    async def wait_mixed(self, cond: Callable[[], bool], timeout_s: float = 30.0, what: str = "condition",
                         fake_ms_per_step: int = 10) -> None:
        """Poll ``cond`` in real time while moving the clock ``fake_ms_per_step`` per real millisecond: for what needs
        both a real thread (a RemoteLogManager task, a remote read on its pool) and the replica layer's timers (a
        fetcher's backoff, a long poll)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not cond():
            if loop.time() > deadline:
                raise AssertionError("never happened: " + what)
            await asyncio.sleep(0.001)
            self.clock.advance(fake_ms_per_step)

    async def run_mixed(self, aw: Awaitable[T], timeout_s: float = 30.0, what: str = "the call",
                        fake_ms_per_step: int = 10) -> T:
        """Await ``aw`` under :meth:`wait_mixed`: a call that waits on real threads and on the clock's timers."""
        task = asyncio.ensure_future(aw)
        try:
            await self.wait_mixed(task.done, timeout_s, what, fake_ms_per_step)
        finally:
            if not task.done():
                task.cancel()
        return task.result()

    async def run(self, aw: Awaitable[T], what: str = "the call") -> T:
        """Await ``aw`` while moving the clock: a call that waits on a timer (a Fetch long poll, an acks=all produce
        timing out) completes when the fake time reaches it (:func:`drive` on this cluster's clock)."""
        return await drive(self.clock, aw, what=what)

    def node(self, broker_id: int) -> BrokerNode:
        return BrokerNode(broker_id, "broker%d" % broker_id, 9092)

    def channel_factory(self, src: int) -> Callable[[str], FakeChannel]:
        return lambda client_id: FakeChannel(self, src, client_id)

    def start(self, broker_id: int) -> Broker:
        b = self.brokers[broker_id] = Broker(self, broker_id)
        self.down.discard(broker_id)
        return b

    async def crash(self, broker_id: int) -> None:
        """Take a broker away: its fetchers stop, it is unreachable; its logs are closed (files stay)."""
        self.down.add(broker_id)
        b = self.brokers.pop(broker_id)
        await b.stop()

    async def leader_and_isr(self, broker_id: int, *states_: LeaderAndIsrPartitionState,
                             controller_epoch: int = 1) -> Tuple[int, Dict[Tuple[str, int], int]]:
        b = self.brokers[broker_id]

        async def cfg(_topic: str) -> LogConfig:
            return self.log_config

        return await b.rm.become_leader_or_follower(0, controller_epoch, list(states_), {TOPIC: TOPIC_ID},
                                                    {i: self.node(i) for i in self.brokers}, cfg)

    async def close(self) -> None:
        for bid in list(self.brokers):
            await self.brokers.pop(bid).stop()
        self.scheduler.shutdown()


def read_all_bytes(plog: Any) -> bytes:
    """The log's batches from its start offset, as stored (for byte-identity checks)."""
    info = plog.read(plog.log_start_offset, 1 << 30, None, True)
    return info.records.read() if info.records is not None else b""


def values_of(plog: Any) -> List[bytes]:
    from broker.accel import record_batch
    from broker.storage.cleaner_batch import iter_stored_records
    data = read_all_bytes(plog)
    infos, _ = record_batch.scan_batches(data)
    out: List[bytes] = []
    for bi in infos:
        out.extend(bytes(r.value) for r in iter_stored_records(data[bi.position:bi.position + bi.size]))
    return out
