"""ControllerContext: the active controller's in-memory view of the cluster.

Only the controller's event thread reads or changes it. It holds what ZooKeeper says (live brokers with their
epochs, topics, replica assignments, partition leadership) plus the controller's own bookkeeping (partition and
replica states, brokers shutting down, topics queued for deletion, reassignments in progress).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable

from broker.zk.paths import BrokerInfo, LeaderAndIsr

TopicPartition = tuple[str, int]
#: (partition, broker id) - one replica.
PartitionReplica = tuple[TopicPartition, int]

#: LeaderAndIsr / UpdateMetadata sentinels (Kafka's LeaderAndIsr object).
NO_LEADER = -1
NO_EPOCH = -1
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2

#: leader_recovery_state values (KIP-704).
RECOVERED = 0
RECOVERING = 1


class PartitionState(Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


#: target state -> states it may be entered from (Kafka's PartitionState.validPreviousStates)
PARTITION_VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_RS = ReplicaState
REPLICA_VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _RS.NEW: frozenset({_RS.NON_EXISTENT}),
    _RS.ONLINE: frozenset({_RS.NEW, _RS.ONLINE, _RS.OFFLINE, _RS.DELETION_INELIGIBLE}),
    _RS.OFFLINE: frozenset({_RS.NEW, _RS.ONLINE, _RS.OFFLINE, _RS.DELETION_INELIGIBLE}),
    _RS.DELETION_STARTED: frozenset({_RS.OFFLINE}),
    _RS.DELETION_SUCCESSFUL: frozenset({_RS.DELETION_STARTED}),
    _RS.DELETION_INELIGIBLE: frozenset({_RS.OFFLINE, _RS.DELETION_STARTED}),
    _RS.NON_EXISTENT: frozenset({_RS.DELETION_SUCCESSFUL}),
}


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas; during a reassignment (KIP-455) `replicas` = target + original replicas, with
    `adding` = target - original and `removing` = original - target."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @staticmethod
    def of(replicas: Iterable[int], adding: Iterable[int] = (), removing: Iterable[int] = ()) -> "ReplicaAssignment":
        return ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing))

    @property
    def origin_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Iterable[int]) -> "ReplicaAssignment":
        """The in-progress assignment moving from this one's original replicas to `target`."""
        target = list(target)
        origin = self.origin_replicas
        full = list(dict.fromkeys(target + origin))
        return ReplicaAssignment(tuple(full), tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def remove_replica(self, replica: int) -> "ReplicaAssignment":
        return ReplicaAssignment(tuple(r for r in self.replicas if r != replica),
                                 tuple(r for r in self.adding if r != replica),
                                 tuple(r for r in self.removing if r != replica))


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    #: topic -> Kafka topic id (22-char base64url, as stored in ZooKeeper)
    topic_ids: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    #: partition -> its state znode contents (zk_version = partition epoch)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """Forget everything (on resignation)."""
        fresh = ControllerContext()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    # ------------------------------------------------------------------ brokers
    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers that are not shutting down (eligible leaders and ISR members)."""
        return set(self.live_broker_epochs) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_broker_epochs)

    def is_live_broker(self, broker_id: int) -> bool:
        return broker_id in self.live_broker_epochs and broker_id not in self.shutting_down_broker_ids

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        for bid, (info, epoch) in brokers.items():
            self.live_brokers[bid] = info
            self.live_broker_epochs[bid] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for bid in broker_ids:
            self.live_brokers.pop(bid, None)
            self.live_broker_epochs.pop(bid, None)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        online = (broker_id in self.live_broker_epochs if include_shutting_down
                  else self.is_live_broker(broker_id))
        return online and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    # ------------------------------------------------------------------ topics and assignments
    def partition_replica_assignment(self, tp: TopicPartition) -> list[int]:
        a = self.assignments.get(tp[0], {}).get(tp[1])
        return list(a.replicas) if a is not None else []

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.assignments.get(tp[0], {}).get(tp[1]) or ReplicaAssignment(())

    def update_partition_full_replica_assignment(self, tp: TopicPartition, a: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp[0], {})[tp[1]] = a

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t in sorted(self.assignments) for p in sorted(self.assignments[t])]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.partition_replica_assignment(tp)]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionReplica]:
        return [(tp, r) for tp in self.all_partitions() for r in self.partition_replica_assignment(tp)
                if r in broker_ids]

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        return [(tp, r) for tp in self.partitions_for_topic(topic) for r in self.partition_replica_assignment(tp)]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)]

    def remove_topic(self, topic: str) -> None:
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for p in self.assignments.pop(topic, {}):
            tp = (topic, p)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        for key in [k for k in self.replica_states if k[0][0] == topic]:
            del self.replica_states[key]

    def topic_name(self, topic_id: str) -> str | None:
        for name, tid in self.topic_ids.items():
            if tid == topic_id:
                return name
        return None

    # ------------------------------------------------------------------ leadership
    def leader_epoch(self, tp: TopicPartition) -> int:
        """The epoch StopReplica carries: -2 while the topic is being deleted, -1 when unknown."""
        if self.is_topic_queued_for_deletion(tp[0]):
            return EPOCH_DURING_DELETE
        s = self.leadership.get(tp)
        return s.leader_epoch if s is not None else NO_EPOCH

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self.leadership if not self.is_topic_queued_for_deletion(tp[0])]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        return [tp for tp, s in self.leadership.items()
                if not self.is_replica_online(s.leader, tp) and not self.is_topic_queued_for_deletion(tp[0])]

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """Partitions (RF > 1, not being deleted) that `broker_id` still leads: what a controlled shutdown
        reports as remaining."""
        return sorted(tp for tp, s in self.leadership.items()
                      if s.leader == broker_id and not self.is_topic_queued_for_deletion(tp[0])
                      and len(self.partition_replica_assignment(tp)) > 1)

    # ------------------------------------------------------------------ states
    def partitions_in_states(self, states: set[PartitionState], topic: str | None = None) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.partition_states.items()
                      if s in states and (topic is None or tp[0] == topic))

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [r for r in self.replicas_for_topic(topic) if self.replica_states.get(r) == state]

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_states.get(r) == state for r in self.replicas_for_topic(topic))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_states.get(r) == state for r in self.replicas_for_topic(topic))

    # ------------------------------------------------------------------ deletion
    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def partition_count(self) -> int:
        return sum(len(ps) for ps in self.assignments.values())
