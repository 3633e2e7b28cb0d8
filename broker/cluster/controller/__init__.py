"""The ZooKeeper-mode controller (Kafka 3.9): see kafka_controller.KafkaController.

Modules, one job each (Kafka's names): config (ControllerConfig, IBP), context (ControllerContext),
event_manager (ControllerEventManager), events, election (pure election rules), partition_state_machine,
replica_state_machine, request_batch (ControllerBrokerRequestBatch), channel_manager (ControllerChannelManager),
topic_deletion_manager (TopicDeletionManager), features (UpdateFeatures rules), kafka_controller.
"""
from broker.cluster.controller.config import ControllerConfig, InterBrokerProtocolVersion
from broker.cluster.controller.kafka_controller import KafkaController

__all__ = ["ControllerConfig", "InterBrokerProtocolVersion", "KafkaController"]
