"""load_config(): server.properties + `--override key=value` -> validated KafkaConfig."""
from __future__ import annotations

from typing import Iterable

from broker.config.kafka_config import KafkaConfig
from broker.config.properties import load_properties
from broker.config.types import ConfigError


def parse_override(item: str) -> tuple[str, str]:
    """`key=value` as given to --override (Kafka splits on the first '=')."""
    if "=" not in item:
        raise ConfigError("--override", item, message=f"Invalid override {item!r}: expected key=value")
    key, value = item.split("=", 1)
    return key.strip(), value


def load_config(path: str, overrides: Iterable[str] = ()) -> KafkaConfig:
    """Read a Kafka server.properties file, apply overrides, validate. Raises ConfigError (one-line message),
    FileNotFoundError if the file is missing."""
    props = load_properties(path)
    for item in overrides:
        key, value = parse_override(item)
        props[key] = value
    return KafkaConfig(props)
