"""The controller's configuration and inter.broker.protocol.version (IBP) parsing.

The IBP decides which request versions the controller sends and which mechanisms are used, as in Kafka 3.9:
AlterPartition (leaders ask the controller to change the ISR) from 2.7-IV2, before that leaders write the ISR
themselves and announce it under /isr_change_notification; AllocateProducerIds from 3.0-IV0, before that
brokers claim producer-id blocks in ZooKeeper directly; leader recovery state (KIP-704) from 3.2-IV0; topic
ids from 2.8-IV0; feature versioning (/feature enabled) from 2.7-IV0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from broker.config.ibp import InterBrokerProtocolVersion

@dataclass(frozen=True)
class ControllerConfig:
    """What KafkaController needs from the broker configuration (Kafka's key names in the comments)."""

    broker_id: int
    inter_broker_listener_name: str = "PLAINTEXT"      # inter.broker.listener.name
    inter_broker_protocol_version: str = "3.9"         # inter.broker.protocol.version
    auto_leader_rebalance_enable: bool = True          # auto.leader.rebalance.enable
    leader_imbalance_check_interval_seconds: int = 300  # leader.imbalance.check.interval.seconds
    leader_imbalance_per_broker_percentage: int = 10    # leader.imbalance.per.broker.percentage
    unclean_leader_election_enable: bool = False       # unclean.leader.election.enable (topic override wins)
    delete_topic_enable: bool = True                   # delete.topic.enable
    controller_socket_timeout_ms: int = 30000          # controller.socket.timeout.ms (per request)
    #: Wait before resending a controller request whose broker could not be reached (Kafka: 100 ms).
    request_retry_backoff_ms: int = 100
    #: First automatic preferred-leader check after becoming controller (Kafka: 5 s).
    auto_leader_rebalance_initial_delay_ms: int = 5000
    #: Features this broker supports, {name: (min_version, max_version)} (KIP-584); UpdateFeatures validates
    #: against these and against every live broker's registration.
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        InterBrokerProtocolVersion.parse(self.inter_broker_protocol_version)  # fail fast on a bad value

    @staticmethod
    def from_kafka_config(cfg: Any, broker_id: int | None = None) -> "ControllerConfig":
        """Build from a broker.config.kafka_config.KafkaConfig (missing keys keep Kafka's defaults)."""
        def get(name: str, default: Any) -> Any:
            try:
                v = cfg.get(name)
            except KeyError:
                return default
            return default if v is None else v

        return ControllerConfig(
            broker_id=int(broker_id if broker_id is not None else cfg.broker_id),
            inter_broker_listener_name=str(cfg.inter_broker_listener_name),
            inter_broker_protocol_version=str(get("inter.broker.protocol.version", "3.9")),
            auto_leader_rebalance_enable=bool(get("auto.leader.rebalance.enable", True)),
            leader_imbalance_check_interval_seconds=int(get("leader.imbalance.check.interval.seconds", 300)),
            leader_imbalance_per_broker_percentage=int(get("leader.imbalance.per.broker.percentage", 10)),
            unclean_leader_election_enable=bool(get("unclean.leader.election.enable", False)),
            delete_topic_enable=bool(get("delete.topic.enable", True)),
            controller_socket_timeout_ms=int(get("controller.socket.timeout.ms", 30000)),
        )

    # ------------------------------------------------------------------ what the IBP enables
    # The IBP and what it enables are read per partition in request batches: parsed once (the config is frozen).
    @cached_property
    def ibp(self) -> InterBrokerProtocolVersion:
        return InterBrokerProtocolVersion.parse(self.inter_broker_protocol_version)

    @cached_property
    def is_alter_partition_enabled(self) -> bool:
        """Leaders send AlterPartition (else they write the ISR and /isr_change_notification themselves)."""
        return self.ibp.is_at_least("2.7-IV2")

    @cached_property
    def is_allocate_producer_ids_enabled(self) -> bool:
        """Brokers ask the controller for producer-id blocks (else they claim them in ZooKeeper)."""
        return self.ibp.is_at_least("3.0-IV0")

    @cached_property
    def is_leader_recovery_supported(self) -> bool:
        return self.ibp.is_at_least("3.2-IV0")

    @cached_property
    def is_feature_versioning_supported(self) -> bool:
        return self.ibp.is_at_least("2.7-IV0")

    @cached_property
    def uses_topic_id(self) -> bool:
        return self.ibp.is_at_least("2.8-IV0")

    @cached_property
    def feature_znode_version(self) -> int:
        return 2 if self.ibp.is_at_least("3.3-IV0") else 1

    @cached_property
    def leader_and_isr_version(self) -> int:
        for ibp, v in (("3.4-IV0", 7), ("3.2-IV0", 6), ("2.8-IV1", 5), ("2.4-IV1", 4), ("2.4-IV0", 3),
                       ("2.2-IV0", 2), ("1.0-IV0", 1)):
            if self.ibp.is_at_least(ibp):
                return v
        return 0

    @cached_property
    def update_metadata_version(self) -> int:
        for ibp, v in (("3.4-IV0", 8), ("2.8-IV1", 7), ("2.4-IV1", 6), ("2.2-IV0", 5), ("1.0-IV0", 4),
                       ("0.10.2-IV0", 3), ("0.10.0-IV1", 2), ("0.9.0", 1)):
            if self.ibp.is_at_least(ibp):
                return v
        return 0

    @cached_property
    def stop_replica_version(self) -> int:
        for ibp, v in (("3.4-IV0", 4), ("2.6-IV0", 3), ("2.4-IV1", 2), ("2.2-IV0", 1)):
            if self.ibp.is_at_least(ibp):
                return v
        return 0
