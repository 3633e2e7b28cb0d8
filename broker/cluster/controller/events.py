"""The controller's events (Kafka's ControllerEvent subclasses). Producers: ZooKeeper watches, the API methods
of KafkaController, broker responses and timers. KafkaController.process dispatches on the type."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from broker.cluster.controller.context import TopicPartition
from broker.cluster.controller.event_manager import ControllerEvent
from broker.errors import ErrorCode

# election types (ElectLeaders election_type)
PREFERRED = 0
UNCLEAN = 1

# election triggers
ADMIN_CLIENT = "AdminClientTriggered"
ZK_TRIGGERED = "ZkTriggered"
AUTO_TRIGGERED = "AutoTriggered"


@dataclass(repr=False)
class Startup(ControllerEvent):
    pass


@dataclass(repr=False)
class ControllerChange(ControllerEvent):
    """/controller was created or changed."""


@dataclass(repr=False)
class Reelect(ControllerEvent):
    """/controller was deleted: run an election."""


@dataclass(repr=False)
class Expire(ControllerEvent):
    """Our ZooKeeper session expired: resign at once."""


@dataclass(repr=False)
class RegisterBrokerAndReelect(ControllerEvent):
    """A new session replaced an expired one (the ZooKeeper client re-registered the broker)."""


@dataclass(repr=False)
class BrokerChange(ControllerEvent):
    pass


@dataclass(repr=False)
class BrokerModifications(ControllerEvent):
    broker_id: int


@dataclass(repr=False)
class TopicChange(ControllerEvent):
    pass


@dataclass(repr=False)
class PartitionModifications(ControllerEvent):
    topic: str


@dataclass(repr=False)
class TopicDeletion(ControllerEvent):
    pass


@dataclass(repr=False)
class IsrChangeNotification(ControllerEvent):
    pass


@dataclass(repr=False)
class LogDirEventNotification(ControllerEvent):
    pass


@dataclass(repr=False)
class ZkPartitionReassignment(ControllerEvent):
    pass


@dataclass(repr=False)
class PartitionReassignmentIsrChange(ControllerEvent):
    tp: TopicPartition


@dataclass(repr=False)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    pass


@dataclass(repr=False)
class UncleanLeaderElectionEnable(ControllerEvent):
    pass


@dataclass(repr=False)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    topic: str


@dataclass(repr=False)
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    response: Any


@dataclass(repr=False)
class UpdateMetadataResponseReceived(ControllerEvent):
    broker_id: int
    response: Any


@dataclass(repr=False)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    broker_id: int
    response: Any
    deleted_partitions: set[TopicPartition]


# ---------------------------------------------------------------------------------------------- with replies
@dataclass(repr=False)
class ReplicaLeaderElection(ControllerEvent):
    """partitions None: read /admin/preferred_replica_election (ZooKeeper-triggered)."""

    partitions: set[TopicPartition] | None
    election_type: int
    trigger: str
    callback: Callable[[dict[TopicPartition, tuple[int, str | None, int | None]]], None] | None = None

    def preempt(self) -> None:
        if self.callback is not None:
            self.callback({tp: (int(ErrorCode.NOT_CONTROLLER), None, None) for tp in self.partitions or ()})


@dataclass(repr=False)
class ControlledShutdown(ControllerEvent):
    broker_id: int
    broker_epoch: int
    callback: Callable[[int, list[TopicPartition]], None]

    def preempt(self) -> None:
        self.callback(int(ErrorCode.NOT_CONTROLLER), [])


@dataclass(repr=False)
class AlterPartitionReceived(ControllerEvent):
    request: Any
    api_version: int
    callback: Callable[[dict], None]

    def preempt(self) -> None:
        self.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "topics": []})


@dataclass(repr=False)
class AllocateProducerIds(ControllerEvent):
    broker_id: int
    broker_epoch: int
    callback: Callable[[dict], None]

    def preempt(self) -> None:
        self.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER),
                       "producer_id_start": 0, "producer_id_len": 0})


@dataclass(repr=False)
class ApiPartitionReassignment(ControllerEvent):
    reassignments: dict[TopicPartition, list[int] | None]
    callback: Callable[[dict], None]

    def preempt(self) -> None:
        self.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                       "responses": []})


@dataclass(repr=False)
class ListPartitionReassignments(ControllerEvent):
    partitions: set[TopicPartition] | None
    callback: Callable[[dict], None]

    def preempt(self) -> None:
        self.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                       "topics": []})


@dataclass(repr=False)
class UpdateFeatures(ControllerEvent):
    request: Any
    api_version: int
    callback: Callable[[dict], None]

    def preempt(self) -> None:
        self.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                       "results": []})


@dataclass(repr=False)
class ShutdownEventThread(ControllerEvent):
    pass
