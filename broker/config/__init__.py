"""Broker configuration: key definitions (defs), .properties loading, KafkaConfig, topic-level configs."""
from broker.config.kafka_config import Endpoint, KafkaConfig
from broker.config.loader import load_config
from broker.config.topic_defs import (
    describe_broker_config, describe_topic_config, effective_topic_config, validate_topic_configs,
)
from broker.config.types import ConfigEntry, ConfigError, ConfigSource, ConfigSynonym, ConfigType, InvalidConfigError

__all__ = [
    "ConfigEntry", "ConfigError", "ConfigSource", "ConfigSynonym", "ConfigType", "Endpoint", "InvalidConfigError",
    "KafkaConfig", "describe_broker_config", "describe_topic_config", "effective_topic_config", "load_config",
    "validate_topic_configs",
]
