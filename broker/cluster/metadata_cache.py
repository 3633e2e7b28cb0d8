"""The broker's view of the cluster: live brokers, controller, topics, partition leaders and ISRs.

As in Kafka's ZooKeeper mode (ZkMetadataCache), a broker learns this only from the controller's
UpdateMetadata requests (:meth:`MetadataCache.update_metadata`); no broker reads partition state
znodes on its own. A partition whose leader is ``LEADER_DURING_DELETE`` (-2) is being deleted and
leaves the cache. Handlers that must wait for the controller (CreateTopics until every partition
has a leader, DeleteTopics until the topic is gone) wait with :meth:`wait_until`, which is checked
after every update.

Loop affinity: the event loop only. Readers see consistent snapshots because each update replaces
whole entries (a changed topic gets a new :class:`TopicMeta`, changed brokers a new ``brokers`` dict)
and leaves unchanged ones as they were; never mutate an entry in place.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from broker.config.kafka_config import Endpoint

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
LEADER_DURING_DELETE = -2
NO_LEADER = -1
ZERO_UUID = uuid.UUID(int=0)

#: Kafka's SecurityProtocol ids, as UpdateMetadata carries them.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS = {v: k for k, v in SECURITY_PROTOCOLS.items()}

#: A broker's listener endpoint, as parsed from ``listeners`` and registered in ZooKeeper.
BrokerEndpoint = Endpoint

TopicPartition = Tuple[str, int]


@dataclass(frozen=True)
class BrokerMeta:
    broker_id: int
    endpoints: Tuple[BrokerEndpoint, ...]
    rack: Optional[str] = None

    def endpoint(self, listener_name: str) -> Optional[BrokerEndpoint]:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


class PartitionMeta(NamedTuple):
    """One partition's state as UpdateMetadata gives it (immutable; a NamedTuple because an UpdateMetadata of
    10,000 partitions builds 10,000 of them, at a quarter of a frozen dataclass's cost)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: Tuple[int, ...]
    isr: Tuple[int, ...]
    zk_version: int = 0
    controller_epoch: int = -1
    offline: Tuple[int, ...] = ()

    def offline_replicas(self, live: "set[int]") -> List[int]:
        """Replicas the controller reported offline, plus any whose broker is not alive."""
        return [r for r in self.replicas if r in self.offline or r not in live]


@dataclass(frozen=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: Dict[int, PartitionMeta] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    """Snapshot of brokers and topics, keyed the ways the APIs need."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.cluster_id: Optional[str] = None
        self.controller_id: int = -1
        #: epoch of the controller whose UpdateMetadata was applied last
        self.controller_epoch: int = -1
        self.brokers: Dict[int, BrokerMeta] = {}
        self.topics: Dict[str, TopicMeta] = {}
        #: bumped whenever ``topics`` changes (a topic added, replaced or removed): what readers derive from
        #: the whole of it (Metadata's all-topics answer) stays valid while this does not move
        self.topics_changes = 0
        self._by_id: Dict[uuid.UUID, str] = {}
        self._waiters: List[Tuple[Callable[[], bool], "asyncio.Future[bool]"]] = []
        #: set by the first UpdateMetadata: before it, this broker knows nothing of the cluster
        self.initialized = False

    async def wait_initialized(self, timeout_s: float) -> bool:
        """Wait (bounded) for the controller's first UpdateMetadata; a broker that just started has no view
        of the cluster yet, and an empty broker list would make clients (librdkafka) back off for long."""
        return await self.wait_until(lambda: self.initialized, timeout_s)

    # updates ------------------------------------------------------------------------
    def update_metadata(self, request: Any, api_version: int) -> List[TopicPartition]:
        """Apply an UpdateMetadata request (any version); returns the partitions it deleted.

        Entries the request leaves as they were stay the same objects: a topic's :class:`TopicMeta` is
        replaced only when one of its partitions (or its id) changes, and :attr:`brokers` only when a
        broker does, so readers that prepare answers from them (``broker.api.metadata_answers``) can tell
        what changed by identity. The controller resends every partition to a broker that (re)joins.
        """
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.initialized = True
        brokers: Dict[int, BrokerMeta] = {}
        for b in request.live_brokers:
            if api_version == 0:
                eps: Tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", b.v0_host, b.v0_port, "PLAINTEXT"),)
            else:
                eps = tuple(Endpoint(
                    (getattr(e, "listener", None) or SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"))
                    if api_version >= 3 else SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"),
                    e.host, e.port, SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT")) for e in b.endpoints)
            brokers[b.id] = BrokerMeta(b.id, eps, getattr(b, "rack", None) if api_version >= 2 else None)
        if brokers != self.brokers:
            self.brokers = brokers

        grouped: Iterable[Tuple[str, Optional[uuid.UUID], Iterable[Any]]]
        if api_version >= 5:
            grouped = ((t.topic_name, getattr(t, "topic_id", None) if api_version >= 7 else None, t.partition_states)
                       for t in request.topic_states)
        else:
            grouped = ((ps.topic_name, None, (ps,)) for ps in request.ungrouped_partition_states)
        deleted: List[TopicPartition] = []
        changed: Dict[str, Dict[int, Optional[PartitionMeta]]] = {}
        ids: Dict[str, uuid.UUID] = {}
        with_offline = api_version >= 4
        for topic, tid, partition_states in grouped:
            if tid is not None and tid != ZERO_UUID:
                ids[topic] = tid
            parts = changed.get(topic)
            if parts is None:
                parts = changed[topic] = {}
            for ps in partition_states:
                if ps.leader == LEADER_DURING_DELETE:
                    parts[ps.partition_index] = None
                    deleted.append((topic, ps.partition_index))
                else:
                    parts[ps.partition_index] = PartitionMeta(
                        ps.partition_index, ps.leader, ps.leader_epoch, tuple(ps.replicas), tuple(ps.isr),
                        ps.zk_version, ps.controller_epoch,
                        tuple(getattr(ps, "offline_replicas", ()) or ()) if with_offline else ())
        for topic, parts in changed.items():
            old = self.topics.get(topic)
            old_parts = old.partitions if old is not None else {}
            merged: Optional[Dict[int, PartitionMeta]] = None  # copied at the first difference
            for p, meta in parts.items():
                prev = old_parts.get(p)
                if meta is None:
                    if prev is None:
                        continue
                    if merged is None:
                        merged = dict(old_parts)
                    del merged[p]
                elif prev != meta:
                    if merged is None:
                        merged = dict(old_parts)
                    merged[p] = meta
            tid = ids.get(topic) or (old.topic_id if old is not None else ZERO_UUID)
            if merged is None:
                if old is None or tid == old.topic_id:
                    continue  # nothing changed
                merged = dict(old_parts)
            if not merged:
                self.remove_topic(topic)
                continue
            self.put_topic(TopicMeta(topic, tid, merged))
        self._check_waiters()
        return deleted

    def set_brokers(self, brokers: Dict[int, BrokerMeta]) -> None:
        self.brokers = dict(brokers)
        self._check_waiters()

    def put_topic(self, topic: TopicMeta) -> None:
        old = self.topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._by_id.pop(old.topic_id, None)
        self.topics[topic.name] = topic
        self.topics_changes += 1
        if topic.topic_id != ZERO_UUID:
            self._by_id[topic.topic_id] = topic.name
        self._check_waiters()

    def put_partition(self, topic: str, meta: PartitionMeta) -> None:
        t = self.topics.get(topic)
        if t is None:
            return
        parts = dict(t.partitions)
        parts[meta.partition] = meta
        self.topics[topic] = TopicMeta(t.name, t.topic_id, parts)
        self.topics_changes += 1
        self._check_waiters()

    def remove_topic(self, name: str) -> Optional[TopicMeta]:
        t = self.topics.pop(name, None)
        if t is not None:
            self.topics_changes += 1
            self._by_id.pop(t.topic_id, None)
        self._check_waiters()
        return t

    # waiting for the controller ---------------------------------------------------
    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds after some update (or already does); False on timeout."""
        if predicate():
            return True
        if timeout_s <= 0:
            return False
        fut: "asyncio.Future[bool]" = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except asyncio.TimeoutError:
            return predicate()
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _check_waiters(self) -> None:
        for predicate, fut in list(self._waiters):
            if not fut.done():
                try:
                    ok = predicate()
                except Exception as exc:  # a broken predicate must not break the update
                    fut.set_exception(exc)
                    continue
                if ok:
                    fut.set_result(True)

    # queries ------------------------------------------------------------------------
    def topic(self, name: str) -> Optional[TopicMeta]:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> Optional[str]:
        return self._by_id.get(topic_id)

    def topic_id(self, name: str) -> Optional[uuid.UUID]:
        t = self.topics.get(name)
        return t.topic_id if t else None

    def partition(self, topic: str, partition: int) -> Optional[PartitionMeta]:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t else None

    def live_broker_ids(self) -> Set[int]:
        return set(self.brokers)

    def has_leaders(self, topic: str, num_partitions: Optional[int] = None) -> bool:
        """True when the topic is known and every partition has a live leader (CreateTopics waits for this)."""
        t = self.topics.get(topic)
        if t is None or (num_partitions is not None and len(t.partitions) < num_partitions):
            return False
        return all(p.leader >= 0 and p.leader in self.brokers for p in t.partitions.values())

    def alive_endpoints(self, listener_name: str) -> List[Tuple[int, BrokerEndpoint, Optional[str]]]:
        out = []
        for bid in sorted(self.brokers):
            b = self.brokers[bid]
            ep = b.endpoint(listener_name)
            if ep is not None:
                out.append((bid, ep, b.rack))
        return out

    def endpoint_of(self, broker_id: int, listener_name: str) -> Optional[BrokerEndpoint]:
        b = self.brokers.get(broker_id)
        return b.endpoint(listener_name) if b is not None else None
