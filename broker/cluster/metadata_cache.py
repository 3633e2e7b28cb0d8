"""The broker's view of the cluster: live brokers, topics, partition leaders and ISRs.

Filled from ZooKeeper (by :mod:`broker.cluster.zk_sync`) and read by the API handlers.
Only the event loop mutates it; readers on the loop see consistent snapshots because each
update replaces whole entries.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from broker.config.kafka_config import Endpoint

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


#: A broker's listener endpoint, as parsed from ``listeners`` and registered in ZooKeeper.
BrokerEndpoint = Endpoint


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


@dataclass(frozen=True)
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    replicas: Tuple[int, ...]
    isr: Tuple[int, ...]
    zk_version: int = 0

    def offline_replicas(self, live: "set[int]") -> List[int]:
        return [r for r in self.replicas if r not in live]


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
        self.brokers: Dict[int, BrokerMeta] = {}
        self.topics: Dict[str, TopicMeta] = {}
        self._by_id: Dict[uuid.UUID, str] = {}

    # updates ------------------------------------------------------------------------
    def set_brokers(self, brokers: Dict[int, BrokerMeta]) -> None:
        self.brokers = dict(brokers)

    def put_topic(self, topic: TopicMeta) -> None:
        old = self.topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._by_id.pop(old.topic_id, None)
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic.name

    def put_partition(self, topic: str, meta: PartitionMeta) -> None:
        t = self.topics.get(topic)
        if t is None:
            return
        parts = dict(t.partitions)
        parts[meta.partition] = meta
        self.topics[topic] = TopicMeta(t.name, t.topic_id, parts)

    def remove_topic(self, name: str) -> Optional[TopicMeta]:
        t = self.topics.pop(name, None)
        if t is not None:
            self._by_id.pop(t.topic_id, None)
        return t

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

    def live_broker_ids(self) -> "set[int]":
        return set(self.brokers)

    def alive_endpoints(self, listener_name: str) -> List[Tuple[int, BrokerEndpoint, Optional[str]]]:
        out = []
        for bid in sorted(self.brokers):
            b = self.brokers[bid]
            ep = b.endpoint(listener_name)
            if ep is not None:
                out.append((bid, ep, b.rack))
        return out
