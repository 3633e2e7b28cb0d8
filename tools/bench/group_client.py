"""A lightweight consumer-group member on the project's own protocol codec, for load tests of group coordinators.

confluent-kafka runs threads per client, so 3,000 members in one process are out of reach with it. Here a member
is one asyncio task speaking the classic group protocol as Kafka 3.9's Java consumer does (protocol type
``consumer``, the ``range`` assignor, the leader computing the assignment), over the broker's own codec
(``broker.protocol.api``) and its asyncio :class:`~broker.network.client.NetworkClient`. It works against our
brokers and Apache Kafka's alike.

Connections: like a real consumer, each member has its own connection to its group's coordinator; Heartbeat and
OffsetCommit may be in flight on it together (as the Java consumer's heartbeat thread and its commits are), nothing
more. Sharing connections between members would make one member's request wait for another's answer (a broker
answers a connection's requests in order), and members of one group cannot share one at all (a parked JoinGroup
blocks the connection until the other members have joined). FindCoordinator, Metadata and DescribeGroups go over
one shared bootstrap connection (:class:`ClusterClient`), which moves to the next bootstrap address when a broker
dies.

The member follows the Java consumer's reactions: MEMBER_ID_REQUIRED -> join again with the given id;
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a lost connection -> look the coordinator up again and carry on
with the same member id and generation; REBALANCE_IN_PROGRESS -> rejoin; UNKNOWN_MEMBER_ID -> rejoin as a new
member; ILLEGAL_GENERATION / FENCED -> rejoin.

Versions: FindCoordinator v4, Metadata v12, JoinGroup v9, SyncGroup v5, Heartbeat v4, OffsetCommit v8,
OffsetFetch v8, LeaveGroup v5, DescribeGroups v5 (Kafka 3.9.1 serves them all in ZooKeeper mode).
"""
from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterable, List, Optional, Set, Tuple

from broker.errors import ErrorCode
from broker.network.client import MAX_RESPONSE_BYTES, NetworkClient
from broker.protocol.api import ApiKey, decode_response_with_header, encode_request
from broker.protocol.framing import RequestFramer
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from tools.bench.group_wire import (encode_heartbeat_v4, encode_offset_commit_v8, heartbeat_v4_error,
                                    offset_commit_v8_errors)

__all__ = ["CONSUMER_PROTOCOL_TYPE", "RANGE", "encode_subscription", "decode_subscription_topics",
           "encode_assignment", "decode_assignment", "range_assign", "MemberConfig", "LoadStats", "ClusterClient",
           "GroupMember", "error_name"]

CONSUMER_PROTOCOL_TYPE = "consumer"
RANGE = "range"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: answers after which a client looks its coordinator up again
_COORDINATOR_ERRORS = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_STOPPED = "member stopped"
_REJOIN_ERRORS = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}
#: OffsetCommit errors after which the commit may still be in the log: what a coordinator answers when its append
#: to __consumer_offsets failed or was not replicated in time (Kafka's GroupMetadataManager.storeOffsets mapping:
#: NOT_ENOUGH_REPLICAS* -> COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, REQUEST_TIMED_OUT
#: as is); NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE may also mean nothing was written, which only widens
#: what the read-back accepts above the acknowledged offset, never below it
OUTCOME_UNKNOWN_ERRORS = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT,
                          ErrorCode.UNKNOWN_SERVER_ERROR}


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


# ------------------------------------------------------------------------------------------------ consumer protocol
def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def encode_subscription(topics: Iterable[str], generation_id: int = -1) -> bytes:
    """ConsumerProtocolSubscription v3 (what a 3.9 Java consumer sends): topics, no user data, no owned
    partitions, the generation, no rack."""
    ts = sorted(topics)
    return (_I16.pack(3) + _I32.pack(len(ts)) + b"".join(_string(t) for t in ts) + _I32.pack(-1)
            + _I32.pack(0) + _I32.pack(generation_id) + _I16.pack(-1))


def decode_subscription_topics(data: bytes) -> List[str]:
    """The topics of a ConsumerProtocolSubscription of any version (they all start the same way)."""
    mv = memoryview(data)
    pos = 2
    (n,) = _I32.unpack_from(mv, pos)
    pos += 4
    out = []
    for _ in range(n):
        (ln,) = _I16.unpack_from(mv, pos)
        out.append(bytes(mv[pos + 2:pos + 2 + ln]).decode("utf-8"))
        pos += 2 + ln
    return out


def encode_assignment(assignment: Dict[str, List[int]]) -> bytes:
    """ConsumerProtocolAssignment v3 (layout shared by v1-3): (topic, partitions) pairs, no user data."""
    parts = [_I16.pack(3), _I32.pack(len(assignment))]
    for topic in sorted(assignment):
        ps = assignment[topic]
        parts.append(_string(topic) + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps))
    parts.append(_I32.pack(-1))
    return b"".join(parts)


def decode_assignment(data: bytes) -> Dict[str, List[int]]:
    if not data:
        return {}
    mv = memoryview(data)
    pos = 2
    (n,) = _I32.unpack_from(mv, pos)
    pos += 4
    out: Dict[str, List[int]] = {}
    for _ in range(n):
        (ln,) = _I16.unpack_from(mv, pos)
        topic = bytes(mv[pos + 2:pos + 2 + ln]).decode("utf-8")
        pos += 2 + ln
        (m,) = _I32.unpack_from(mv, pos)
        pos += 4
        out[topic] = list(struct.unpack_from(f">{m}i", mv, pos))
        pos += 4 * m
    return out


def range_assign(subscriptions: Dict[str, List[str]], partitions: Dict[str, int]) -> Dict[str, Dict[str, List[int]]]:
    """Kafka's RangeAssignor: per topic, its members in member-id order take consecutive ranges, the first
    ``n % members`` one partition more."""
    out: Dict[str, Dict[str, List[int]]] = {m: {} for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        n = partitions.get(topic, 0)
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members or n <= 0:
            continue
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            length = per + (1 if i < extra else 0)
            if length:
                out[m][topic] = list(range(start, start + length))
            start += length
    return out


# ------------------------------------------------------------------------------------------------ statistics
@dataclass
class LoadStats:
    """What the members observed; latencies in milliseconds, times from ``time.monotonic()``."""

    #: (send time, latency ms, group index) of every OffsetCommit answered without error
    commits: List[Tuple[float, float, int]] = field(default_factory=list)
    #: (send time, latency ms, group index) of every Heartbeat answered while recording
    heartbeats: List[Tuple[float, float, int]] = field(default_factory=list)
    #: (api name, error name) -> count, transport failures included (error name BROKER_CONNECTION / TIMEOUT)
    errors: Counter = field(default_factory=Counter)
    #: group index -> time the group's every member completed SyncGroup in one generation (first time)
    stable_at: Dict[int, float] = field(default_factory=dict)
    #: the members' (group, topic, partition) -> highest offset a commit acknowledged
    acked: Dict[Tuple[str, str, int], int] = field(default_factory=dict)
    #: (group, topic, partition) -> offsets of commits whose outcome the member cannot know: no answer (the
    #: connection broke, e.g. the coordinator was killed, or the request timed out), or an error a failed append
    #: answers (OUTCOME_UNKNOWN_ERRORS). Such a commit may have been written all the same, and a coordinator
    #: that loads the log later serves it (Kafka's too): the read-back accepts these offsets above the acked one.
    unknown_outcome: Dict[Tuple[str, str, int], Set[int]] = field(default_factory=dict)
    #: whether latencies are being recorded (the warm-up is not)
    recording: bool = False

    #: (time, api, error name) of the errors met while recording
    error_times: List[Tuple[float, str, str]] = field(default_factory=list)

    def error(self, api: str, name: str) -> None:
        self.errors[(api, name)] += 1
        if self.recording:
            self.error_times.append((time.monotonic(), api, name))


# ------------------------------------------------------------------------------------------------ the cluster
class ClusterClient:
    """The shared bootstrap side: FindCoordinator (cached per group), Metadata, DescribeGroups, OffsetFetch.

    One NetworkClient for the bootstrap brokers (pseudo node ids -1, -2, ...); a request that cannot reach one
    tries the next. ``coordinator(group)`` coalesces concurrent lookups of one group.
    """

    def __init__(self, bootstrap: str, request_timeout_ms: int = 30000) -> None:
        self.bootstrap = [_host_port(s) for s in bootstrap.split(",") if s.strip()]
        self.client = NetworkClient("group-load-bootstrap", request_timeout_ms=request_timeout_ms,
                                    reconnect_backoff_max_ms=500)
        self._current = 0
        self._coordinators: Dict[str, BrokerNode] = {}
        self._lookups: Dict[str, "asyncio.Future[BrokerNode]"] = {}
        self.partition_counts: Dict[str, int] = {}
        #: node id -> one client for the checker's and preloader's requests to that broker
        self._node_clients: Dict[int, NetworkClient] = {}

    async def close(self) -> None:
        await self.client.close()
        for c in self._node_clients.values():
            await c.close()

    async def send_any(self, api_key: int, version: int, body: Any, timeout_ms: int = 30000) -> Any:
        """Send to a bootstrap broker, moving to the next one while a broker cannot be reached."""
        last: Optional[BaseException] = None
        for _ in range(3 * len(self.bootstrap)):
            i = self._current % len(self.bootstrap)
            host, port = self.bootstrap[i]
            try:
                return await self.client.send(BrokerNode(-1 - i, host, port), api_key, version, body, timeout_ms)
            except (BrokerChannelError, asyncio.TimeoutError) as exc:
                last = exc
                self._current += 1
                await asyncio.sleep(0.05)
        raise BrokerChannelError(f"no bootstrap broker answered: {last}")

    async def send_to(self, node: BrokerNode, api_key: int, version: int, body: Any, timeout_ms: int = 30000) -> Any:
        client = self._node_clients.get(node.broker_id)
        if client is None:
            client = self._node_clients[node.broker_id] = NetworkClient(
                f"group-load-{node.broker_id}", request_timeout_ms=timeout_ms, reconnect_backoff_max_ms=500)
        return await client.send(node, api_key, version, body, timeout_ms)

    def forget_coordinator(self, group: str, node: Optional[BrokerNode] = None) -> None:
        if node is None or self._coordinators.get(group) == node:
            self._coordinators.pop(group, None)

    def known_coordinator(self, group: str) -> Optional[BrokerNode]:
        return self._coordinators.get(group)

    async def coordinator(self, group: str, deadline_s: float = 120.0) -> BrokerNode:
        node = self._coordinators.get(group)
        if node is not None:
            return node
        fut = self._lookups.get(group)
        if fut is None:
            fut = self._lookups[group] = asyncio.ensure_future(self._lookup(group, deadline_s))
            fut.add_done_callback(lambda _f, g=group: self._lookups.pop(g, None))
        return await asyncio.shield(fut)

    async def _lookup(self, group: str, deadline_s: float) -> BrokerNode:
        deadline = time.monotonic() + deadline_s
        while True:
            code, message = -1, "no answer"
            try:
                r = await self.send_any(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
                c = r.coordinators[0]
                code, message = c.error_code, c.error_message
                if code == 0:
                    node = BrokerNode(c.node_id, c.host, c.port)
                    self._coordinators[group] = node
                    return node
            except (BrokerChannelError, asyncio.TimeoutError) as exc:
                message = str(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"FindCoordinator for {group} failed: {error_name(code)} {message or ''}")
            await asyncio.sleep(0.1)

    async def lookup_once(self, groups: List[str]) -> Dict[str, BrokerNode]:
        """One round of FindCoordinator v4 (100 keys a request): the groups that have a coordinator now."""
        out: Dict[str, BrokerNode] = {}
        for i in range(0, len(groups), 100):
            try:
                r = await self.send_any(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0,
                                                                     "coordinator_keys": groups[i:i + 100]})
            except (BrokerChannelError, asyncio.TimeoutError):
                continue
            for c in r.coordinators:
                if c.error_code == 0:
                    out[c.key] = self._coordinators[c.key] = BrokerNode(c.node_id, c.host, c.port)
        return out

    async def coordinators(self, groups: List[str]) -> Dict[str, BrokerNode]:
        """Every group's coordinator, with FindCoordinator v4 batches of 100 keys."""
        out: Dict[str, BrokerNode] = {}
        todo = list(groups)
        deadline = time.monotonic() + 120
        while todo:
            retry = []
            for i in range(0, len(todo), 100):
                keys = todo[i:i + 100]
                r = await self.send_any(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": keys})
                for c in r.coordinators:
                    if c.error_code == 0:
                        out[c.key] = self._coordinators[c.key] = BrokerNode(c.node_id, c.host, c.port)
                    else:
                        retry.append(c.key)
            if retry and time.monotonic() > deadline:
                raise RuntimeError(f"no coordinator for {len(retry)} groups, e.g. {retry[0]}")
            if retry:
                await asyncio.sleep(0.2)
            todo = retry
        return out

    async def partitions(self, topics: List[str]) -> Dict[str, int]:
        """Partition counts (cached); a topic not known yet is asked for again."""
        missing = [t for t in topics if t not in self.partition_counts]
        if missing:
            r = await self.send_any(ApiKey.METADATA, 12, {"topics": [{"name": t} for t in missing],
                                                          "allow_auto_topic_creation": False})
            for t in r.topics:
                if t.error_code == 0 and t.partitions:
                    self.partition_counts[t.name] = len(t.partitions)
        return {t: self.partition_counts.get(t, 0) for t in topics}


def _host_port(s: str) -> Tuple[str, int]:
    host, _, port = s.strip().rpartition(":")
    return host.strip("[]"), int(port)


# ------------------------------------------------------------------------------------------------ a connection
class MemberConnection(asyncio.Protocol):
    """A member's connection to its coordinator: frames out, response frames matched in FIFO order.

    Leaner than NetworkClient on purpose (thousands of them in one process): no timer per request; instead
    :func:`_sweep` checks every connection's oldest request twice a second and closes a connection whose
    request is overdue (a late answer must not be read as the next one's). A lost connection fails every
    pending request with ConnectionError.
    """

    _all: "Set[MemberConnection]" = set()
    _sweeper: Optional["asyncio.Task[None]"] = None
    #: why connections closed (the load report lists them: a broker closing connections is worth knowing)
    close_reasons: Counter = Counter()

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.pending: Deque[Tuple[int, float, "asyncio.Future[memoryview]"]] = deque()
        self.framer = RequestFramer(MAX_RESPONSE_BYTES)
        self.closed = False
        self.node: Optional[BrokerNode] = None

    @classmethod
    async def open(cls, node: BrokerNode, timeout_s: float) -> "MemberConnection":
        loop = asyncio.get_running_loop()
        conn = cls()
        conn.node = node
        await asyncio.wait_for(loop.create_connection(lambda: conn, node.host, node.port), timeout_s)
        cls._all.add(conn)
        if cls._sweeper is None or cls._sweeper.done():
            cls._sweeper = loop.create_task(_sweep(cls._all))
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, correlation_id: int, frame: bytes, timeout_s: float) -> "asyncio.Future[memoryview]":
        fut: "asyncio.Future[memoryview]" = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            fut.set_exception(ConnectionError("connection closed"))
            return fut
        self.pending.append((correlation_id, time.monotonic() + timeout_s, fut))
        self.transport.write(frame)
        return fut

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.framer.feed(data)
        except Exception as exc:
            self.close(f"bad response frame: {exc}")
            return
        for frame in frames:
            if not self.pending:
                self.close("unsolicited response")
                return
            cid, _deadline, fut = self.pending.popleft()
            if _I32.unpack_from(frame, 0)[0] != cid:
                self.close("correlation id out of step")
                return
            if not fut.done():
                fut.set_result(frame)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.close(f"connection lost: {exc}")

    def close(self, reason: str = "closed", timed_out: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        MemberConnection._all.discard(self)
        if self.pending and reason != _STOPPED:
            MemberConnection.close_reasons[reason.split(":")[0]] += 1
        pending, self.pending = self.pending, deque()
        for _cid, _d, fut in pending:
            if not fut.done():
                fut.set_exception(asyncio.TimeoutError(reason) if timed_out else ConnectionError(reason))
        if self.transport is not None:
            self.transport.abort()


async def _sweep(conns: "Set[MemberConnection]") -> None:
    """Close connections whose oldest request is overdue (see MemberConnection)."""
    while conns:
        await asyncio.sleep(0.5)
        now = time.monotonic()
        for c in [c for c in conns if c.pending and c.pending[0][1] < now]:
            c.close("request timed out", timed_out=True)


# ------------------------------------------------------------------------------------------------ a member
@dataclass
class MemberConfig:
    """The Java consumer's defaults (retry backoff 100 ms growing to 1 s), except the commit interval."""

    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000
    heartbeat_interval_ms: int = 3000
    commit_interval_ms: int = 1000
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000


class GroupMember:
    """One member of ``group``: joins, syncs, heartbeats and commits its partitions until :meth:`stop`.

    ``on_stable(member)`` is called after each successful SyncGroup. Commits move every assigned partition's
    offset one further each time, so a later read-back can tell a lost commit from a kept one.
    """

    def __init__(self, cluster: ClusterClient, group: str, group_index: int, topics: List[str], client_id: str,
                 stats: LoadStats, config: Optional[MemberConfig] = None, commit: bool = True,
                 on_stable: Any = None) -> None:
        self.cluster = cluster
        self.group = group
        self.group_index = group_index
        self.topics = topics
        self.client_id = client_id
        self.stats = stats
        self.config = config or MemberConfig()
        self.commit_enabled = commit
        self.on_stable = on_stable
        self.conn: Optional[MemberConnection] = None
        self._cid = 0
        self._failures = 0
        self.member_id = ""
        self.generation = -1
        self.assignment: Dict[str, List[int]] = {}
        self.stable = False
        self.rejoin = asyncio.Event()
        self.positions: Dict[Tuple[str, int], int] = {}
        self._stopping = False
        self._task: Optional["asyncio.Task[None]"] = None
        #: set while no OffsetCommit of this member is in flight (stop waits for it: the broker would apply a
        #: commit whose sender was cancelled, and the read-back would then find more than was acknowledged)
        self._commit_idle = asyncio.Event()
        self._commit_idle.set()

    # ---------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"member-{self.client_id}")

    async def stop(self, leave: bool = True) -> None:
        self._stopping = True
        try:
            await asyncio.wait_for(self._commit_idle.wait(), self.config.request_timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            pass
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if leave and self.member_id:
            try:
                await self._request("LeaveGroup", ApiKey.LEAVE_GROUP, 5, {"group_id": self.group, "members": [
                    {"member_id": self.member_id, "group_instance_id": None, "reason": "load done"}]}, 5000)
            except Exception:
                pass
        if self.conn is not None:
            self.conn.close(_STOPPED)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._join_and_sync()
                self._failures = 0
                await self._stable_phase()
            except asyncio.CancelledError:
                raise
            except _Retry:
                await self._backoff()
            except Exception as exc:  # the tool must keep going; count it
                self.stats.error("member", type(exc).__name__)
                await self._backoff()

    async def _backoff(self) -> None:
        """Kafka's retry backoff: retry.backoff.ms doubling up to retry.backoff.max.ms, with 20 % jitter."""
        self._failures += 1
        ms = min(self.config.retry_backoff_ms * 2 ** min(self._failures - 1, 10), self.config.retry_backoff_max_ms)
        await asyncio.sleep(ms * random.uniform(0.8, 1.2) / 1000.0)

    # ---------------------------------------------------------------------------- requests
    async def _connection(self) -> MemberConnection:
        node = await self.cluster.coordinator(self.group)
        conn = self.conn
        if conn is not None and not conn.closed and conn.node == node:
            return conn
        if conn is not None:
            conn.close("coordinator moved")
            self.conn = None
        try:
            self.conn = await MemberConnection.open(node, self.config.request_timeout_ms / 1000.0)
        except (OSError, asyncio.TimeoutError):
            self.stats.error("connect", "BROKER_CONNECTION")
            self.cluster.forget_coordinator(self.group, node)
            raise _Retry() from None
        return self.conn

    async def _exchange(self, api: str, frame_of: Any, timeout_ms: Optional[int] = None) -> Tuple[memoryview, float]:
        """(response frame without size prefix, latency ms); a transport failure forgets the coordinator."""
        conn = await self._connection()
        self._cid = (self._cid + 1) & 0x7FFFFFFF
        t0 = time.monotonic()
        try:
            frame = await conn.send(self._cid, frame_of(self._cid),
                                    (timeout_ms or self.config.request_timeout_ms) / 1000.0)
        except (ConnectionError, asyncio.TimeoutError) as exc:
            self.stats.error(api, "TIMEOUT" if isinstance(exc, asyncio.TimeoutError) else "BROKER_CONNECTION")
            self.cluster.forget_coordinator(self.group, conn.node)
            conn.close("request failed")
            raise _Retry() from None
        return frame, (time.monotonic() - t0) * 1000.0

    async def _request(self, api: str, api_key: int, version: int, body: Any, timeout_ms: Optional[int] = None
                       ) -> Any:
        """A request through the project's codec (the rare ones: join, sync, leave)."""
        frame, _ms = await self._exchange(
            api, lambda cid: encode_request(api_key, version, cid, self.client_id, body), timeout_ms)
        return decode_response_with_header(api_key, version, frame, has_size_prefix=False)[1]

    def _coordinator_error(self, api: str, code: int) -> None:
        self.stats.error(api, error_name(code))
        if code in _COORDINATOR_ERRORS:
            self.cluster.forget_coordinator(self.group, self.conn.node if self.conn is not None else None)
            if self.conn is not None:
                self.conn.close("coordinator error")

    # ---------------------------------------------------------------------------- join / sync
    async def _join_and_sync(self) -> None:
        self.stable = False
        self.rejoin.clear()
        meta = encode_subscription(self.topics, self.generation)
        join_timeout = self.config.rebalance_timeout_ms + 5000
        while True:
            r = await self._request("JoinGroup", ApiKey.JOIN_GROUP, 9, {
                "group_id": self.group, "session_timeout_ms": self.config.session_timeout_ms,
                "rebalance_timeout_ms": self.config.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": CONSUMER_PROTOCOL_TYPE,
                "protocols": [{"name": RANGE, "metadata": meta}], "reason": None}, join_timeout)
            if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                continue
            if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.stats.error("JoinGroup", error_name(r.error_code))
                self.member_id = ""
                continue
            if r.error_code:
                self._coordinator_error("JoinGroup", r.error_code)
                raise _Retry()
            break
        self.member_id, self.generation = r.member_id, r.generation_id
        assignments: List[Dict[str, Any]] = []
        if r.leader == self.member_id:
            subs = {m.member_id: decode_subscription_topics(bytes(m.metadata)) for m in r.members}
            counts = await self.cluster.partitions(sorted({t for ts in subs.values() for t in ts}))
            plan = range_assign(subs, counts)
            assignments = [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]
        s = await self._request("SyncGroup", ApiKey.SYNC_GROUP, 5, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": RANGE,
            "assignments": assignments}, join_timeout)
        if s.error_code:
            if s.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self._coordinator_error("SyncGroup", s.error_code)
            raise _Retry()
        self.assignment = decode_assignment(bytes(s.assignment))
        await self._fetch_positions()
        self.stable = True
        if self.on_stable is not None:
            self.on_stable(self)

    async def _fetch_positions(self) -> None:
        """Start from the committed offsets of the assigned partitions, as a consumer does after an assignment
        (another member may have committed them since this one last held them)."""
        if not self.assignment or not self.commit_enabled:
            self.positions = {}
            return
        r = await self._request("OffsetFetch", ApiKey.OFFSET_FETCH, 8, {"groups": [{
            "group_id": self.group, "topics": [{"name": t, "partition_indexes": ps}
                                               for t, ps in sorted(self.assignment.items())]}],
            "require_stable": False})
        g = r.groups[0]
        codes = {g.error_code} | {p.error_code for t in g.topics for p in t.partitions}
        if codes != {0}:
            for code in codes - {0}:
                self._coordinator_error("OffsetFetch", code)
            raise _Retry()
        self.positions = {(t.name, p.partition_index): max(0, p.committed_offset) for t in g.topics
                          for p in t.partitions}

    # ---------------------------------------------------------------------------- stable: heartbeat + commit
    async def _stable_phase(self) -> None:
        tasks = [asyncio.ensure_future(self._heartbeat_loop())]
        if self.commit_enabled and self.assignment:
            tasks.append(asyncio.ensure_future(self._commit_loop()))
        waiter = asyncio.ensure_future(self.rejoin.wait())
        try:
            done, _ = await asyncio.wait(tasks + [waiter], return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t is not waiter and t.exception() is not None and not isinstance(t.exception(), _Retry):
                    raise t.exception()  # type: ignore[misc]
        finally:
            # A commit in flight is answered before the rejoin goes out (the broker serves a connection in
            # order anyway); waiting for it keeps the acknowledged offsets exact, as a consumer's commit on revoke.
            try:
                await asyncio.wait_for(self._commit_idle.wait(), self.config.request_timeout_ms / 1000.0)
            except asyncio.TimeoutError:
                pass
            for t in tasks + [waiter]:
                t.cancel()
            await asyncio.gather(*tasks, waiter, return_exceptions=True)

    def _handle_group_error(self, api: str, code: int) -> None:
        """A heartbeat's or commit's error: decide between rediscovery and rejoining."""
        if code in _COORDINATOR_ERRORS:
            self._coordinator_error(api, code)
            return
        self.stats.error(api, error_name(code))
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
        if code == ErrorCode.UNKNOWN_MEMBER_ID or code in _REJOIN_ERRORS:
            self.rejoin.set()

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                frame, ms = await self._exchange("Heartbeat", lambda cid: encode_heartbeat_v4(
                    cid, self.client_id, self.group, self.generation, self.member_id))
            except _Retry:
                await self._backoff()
                continue
            self._failures = 0
            if self.stats.recording:
                self.stats.heartbeats.append((time.monotonic() - ms / 1000.0, ms, self.group_index))
            code = heartbeat_v4_error(frame)
            if code:
                self._handle_group_error("Heartbeat", code)
                if self.rejoin.is_set():
                    return

    async def _commit_loop(self) -> None:
        interval = self.config.commit_interval_ms / 1000.0
        await asyncio.sleep(random.random() * interval)  # real consumers are not in phase
        next_at = time.monotonic()
        while not self._stopping:
            next_at += interval
            offsets = []
            pending: Dict[Tuple[str, int], int] = {}
            for topic, parts in sorted(self.assignment.items()):
                ps = []
                for p in parts:
                    offset = self.positions.get((topic, p), 0) + 1
                    pending[(topic, p)] = offset
                    ps.append((p, offset))
                offsets.append((topic, ps))
            sent_at = time.monotonic()
            codes: Optional[Dict[int, int]] = None
            self._commit_idle.clear()
            try:
                frame, ms = await self._exchange("OffsetCommit", lambda cid: encode_offset_commit_v8(
                    cid, self.client_id, self.group, self.generation, self.member_id, offsets))
                codes = offset_commit_v8_errors(frame)
            except _Retry:
                pass
            finally:
                self._commit_idle.set()
            if codes is None or OUTCOME_UNKNOWN_ERRORS.intersection(codes):
                unknown = self.stats.unknown_outcome
                for (topic, p), offset in pending.items():
                    unknown.setdefault((self.group, topic, p), set()).add(offset)
            if codes is not None:
                if list(codes) == [0]:
                    if self.stats.recording:
                        self.stats.commits.append((sent_at, ms, self.group_index))
                    self.positions.update(pending)
                    acked = self.stats.acked
                    for (topic, p), offset in pending.items():
                        key = (self.group, topic, p)
                        if acked.get(key, -1) < offset:
                            acked[key] = offset
                else:
                    for code in codes:
                        if code:
                            self._handle_group_error("OffsetCommit", code)
                    if self.rejoin.is_set():
                        return
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


class _Retry(Exception):
    """The request failed in a way already counted; back off and go round again."""
