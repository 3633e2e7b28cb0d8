"""Tiered storage (KIP-405) configuration: Kafka 3.9's broker start-up checks and topic config rules.

Broker: ``remote.log.storage.system.enable=true`` runs tiered storage (broker/replica/tiered_storage.py). At start-up
the plug-in class names are checked as Kafka's start-up would fail on them: Kafka's own class names map to this
broker's built-in implementations, anything else is refused with one line.

Topic: LogConfig.validate's tiered-storage rules in ZooKeeper mode, in Kafka's order: ``remote.log.copy.disable``
and ``remote.log.delete.on.disable`` set to true are refused (KIP-950 is KRaft only), then, for
``remote.storage.enable=true``: the broker's system switch must be on, the topic must not be compacted, and
``local.retention.bytes``/``local.retention.ms`` must fit in ``retention.bytes``/``retention.ms``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from broker.config.types import ConfigError, ConfigType, InvalidConfigError, Validator, at_least, parse_value

if TYPE_CHECKING:
    from broker.config.kafka_config import KafkaConfig

SYSTEM_ENABLE = "remote.log.storage.system.enable"
RSM_CLASS_NAME = "remote.log.storage.manager.class.name"
RLMM_CLASS_NAME = "remote.log.metadata.manager.class.name"
RSM_PREFIX = "remote.log.storage.manager.impl.prefix"
RLMM_PREFIX = "remote.log.metadata.manager.impl.prefix"

#: Kafka's test LocalTieredStorage: same directory layout as broker.storage.remote.local_tiered_storage.
KAFKA_LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
#: This project's S3 RemoteStorageManager (no Kafka equivalent ships with Kafka).
S3_REMOTE_STORAGE_MANAGER = "broker.storage.remote.S3RemoteStorageManager"
#: remote.log.storage.manager.class.name -> module:class of the built-in implementation.
REMOTE_STORAGE_MANAGERS: Dict[str, str] = {
    KAFKA_LOCAL_TIERED_STORAGE: "broker.storage.remote.local_tiered_storage:LocalTieredStorage",
    "broker.storage.remote.LocalTieredStorage": "broker.storage.remote.local_tiered_storage:LocalTieredStorage",
    S3_REMOTE_STORAGE_MANAGER: "broker.storage.remote.s3_storage:S3RemoteStorageManager",
}
#: Kafka's default RemoteLogMetadataManager, the only one this broker implements.
TOPIC_BASED_RLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
#: remote.log.metadata.manager.class.name -> module:class (the topic-based manager comes with the RemoteLogManager).
REMOTE_LOG_METADATA_MANAGERS: Dict[str, str] = {
    TOPIC_BASED_RLMM: "broker.remote_log.metadata_manager:TopicBasedRemoteLogMetadataManager"}

#: Topic-level keys (Kafka's TopicConfig names).
REMOTE_STORAGE_ENABLE = "remote.storage.enable"
COPY_DISABLE = "remote.log.copy.disable"
DELETE_ON_DISABLE = "remote.log.delete.on.disable"
LOCAL_RETENTION_MS = "local.retention.ms"
LOCAL_RETENTION_BYTES = "local.retention.bytes"


@dataclass(frozen=True)
class PrefixedKey:
    """A key of a plug-in's own config, read under its prefix (e.g. ``rlmm.config.``)."""

    type: ConfigType
    default: Any
    validator: Optional[Validator] = None


#: TopicBasedRemoteLogMetadataManagerConfig's keys (read under remote.log.metadata.manager.impl.prefix).
RLMM_KEYS: Dict[str, PrefixedKey] = {
    "remote.log.metadata.topic.replication.factor": PrefixedKey(ConfigType.SHORT, 3, at_least(1)),
    "remote.log.metadata.topic.num.partitions": PrefixedKey(ConfigType.INT, 50, at_least(1)),
    "remote.log.metadata.topic.retention.ms": PrefixedKey(ConfigType.LONG, -1),
    "remote.log.metadata.consume.wait.ms": PrefixedKey(ConfigType.LONG, 120000, at_least(0)),
    "remote.log.metadata.initialization.retry.max.timeout.ms": PrefixedKey(ConfigType.LONG, 120000, at_least(0)),
    "remote.log.metadata.initialization.retry.interval.ms": PrefixedKey(ConfigType.LONG, 100, at_least(0)),
}


def prefixed_configs(cfg: "KafkaConfig", prefix_key: str) -> Dict[str, str]:
    """The keys of the broker's effective config under a plug-in prefix, prefix stripped (Kafka's
    ``originalsWithPrefix``): what configure() of the RemoteStorageManager or metadata manager receives."""
    prefix = str(cfg.get(prefix_key))
    layers = (cfg.originals, cfg.dynamic_cluster_default, cfg.dynamic_per_broker)
    out: Dict[str, str] = {}
    for layer in layers:
        for k, v in layer.items():
            if k.startswith(prefix) and len(k) > len(prefix):
                out[k[len(prefix):]] = str(v)
    return out


def rlmm_config(cfg: "KafkaConfig") -> Dict[str, Any]:
    """The topic-based metadata manager's typed keys (defaults filled in). Raises ConfigError naming the
    prefixed key."""
    raw = prefixed_configs(cfg, RLMM_PREFIX)
    prefix = str(cfg.get(RLMM_PREFIX))
    out: Dict[str, Any] = {}
    for name, key in RLMM_KEYS.items():
        if name in raw:
            value = parse_value(prefix + name, key.type, raw[name])
            if key.validator is not None:
                key.validator(prefix + name, value)
        else:
            value = key.default
        out[name] = value
    return out


def check_broker(cfg: "KafkaConfig") -> None:
    """Start-up check (KafkaConfig._validate): with the system switch on, the plug-in class names must name a
    built-in implementation and the metadata manager's keys and the broker's local retention must be valid. Raises
    ConfigError (one line)."""
    if not cfg.get(SYSTEM_ENABLE):
        return
    rsm = cfg.get(RSM_CLASS_NAME)
    if rsm is None:
        raise ConfigError(RSM_CLASS_NAME, None, message=f"{RSM_CLASS_NAME} must be set when {SYSTEM_ENABLE}=true "
                          f"(one of {', '.join(sorted(REMOTE_STORAGE_MANAGERS))})")
    if rsm not in REMOTE_STORAGE_MANAGERS:
        raise ConfigError(RSM_CLASS_NAME, rsm, message=f"Unsupported {RSM_CLASS_NAME} {rsm}: this broker runs only "
                          f"its built-in remote storage managers ({', '.join(sorted(REMOTE_STORAGE_MANAGERS))})")
    rlmm = cfg.get(RLMM_CLASS_NAME)
    if rlmm not in REMOTE_LOG_METADATA_MANAGERS:
        raise ConfigError(RLMM_CLASS_NAME, rlmm, message=f"Unsupported {RLMM_CLASS_NAME} {rlmm}: this broker runs "
                          f"only {TOPIC_BASED_RLMM}")
    rlmm_config(cfg)
    try:  # LogConfig.validateBrokerLogConfigValues: the broker's own defaults
        check_local_retention(_broker_defaults(cfg))
    except InvalidConfigError as exc:
        cause = exc.__cause__
        name = cause.name if isinstance(cause, ConfigError) else SYSTEM_ENABLE
        raise ConfigError(f"log.{name}" if name.startswith("local.") else name, None, message=str(exc)) from None


def _config_exception(message: str) -> InvalidConfigError:
    """Kafka's ConfigException (AlterConfigs prefixes its message with the resource; CreateTopics does not)."""
    err = InvalidConfigError(message)
    err.__cause__ = ConfigError("", None, message=message)
    return err


def _value_exception(name: str, value: Any, reason: str) -> InvalidConfigError:
    """Kafka's ConfigException(name, value, message)."""
    cause = ConfigError(name, value, reason)
    err = InvalidConfigError(str(cause))
    err.__cause__ = cause
    return err


#: Kafka's topic defaults for the keys the rules read (used when no broker config is given).
_KAFKA_TOPIC_DEFAULTS: Mapping[str, Any] = {
    "cleanup.policy": ["delete"], "retention.ms": 604800000, "retention.bytes": -1, LOCAL_RETENTION_MS: -2,
    LOCAL_RETENTION_BYTES: -2, REMOTE_STORAGE_ENABLE: False, COPY_DISABLE: False, DELETE_ON_DISABLE: False}


def _broker_defaults(cfg: Optional["KafkaConfig"]) -> Dict[str, Any]:
    if cfg is None:
        return dict(_KAFKA_TOPIC_DEFAULTS)
    from broker.config.topic_defs import _broker_derived
    return {k: _broker_derived(cfg, k) for k in _KAFKA_TOPIC_DEFAULTS}


def check_local_retention(values: Mapping[str, Any]) -> None:
    """LogConfig.validateRemoteStorageRetentionSize/Time: local.retention.bytes/ms fit in retention.bytes/ms (-2:
    follow them; -1 only when those are unlimited too). Raises InvalidConfigError with Kafka's ConfigException
    message."""
    retention_bytes, local_bytes = values["retention.bytes"], values[LOCAL_RETENTION_BYTES]
    if retention_bytes > -1 and local_bytes != -2:
        if local_bytes == -1:
            raise _value_exception(LOCAL_RETENTION_BYTES, local_bytes,
                                   f"Value must not be -1 as retention.bytes value is set as {retention_bytes}.")
        if local_bytes > retention_bytes:
            raise _value_exception(LOCAL_RETENTION_BYTES, local_bytes,
                                   f"Value must not be more than retention.bytes property value: {retention_bytes}")
    retention_ms, local_ms = values["retention.ms"], values[LOCAL_RETENTION_MS]
    if retention_ms != -1 and local_ms != -2:
        if local_ms == -1:
            raise _value_exception(LOCAL_RETENTION_MS, local_ms,
                                   f"Value must not be -1 as retention.ms value is set as {retention_ms}.")
        if local_ms > retention_ms:
            raise _value_exception(LOCAL_RETENTION_MS, local_ms,
                                   f"Value must not be more than retention.ms property value: {retention_ms}")


def check_topic(typed: Mapping[str, Any], broker_config: Optional["KafkaConfig"] = None,
                system_enabled: Optional[bool] = None) -> None:
    """LogConfig.validate's tiered-storage rules for a topic's new overrides (typed), over the broker's defaults
    (``broker_config``; Kafka's defaults when None), in ZooKeeper mode. ``system_enabled`` defaults to the broker's
    switch (false without a broker config). Raises InvalidConfigError with Kafka's message; its ``__cause__`` is a
    ConfigError for Kafka's ConfigException (AlterConfigs prefixes those with the resource)."""
    values = _broker_defaults(broker_config)
    values.update({k: v for k, v in typed.items() if k in values})
    if system_enabled is None:
        system_enabled = bool(broker_config.get(SYSTEM_ENABLE)) if broker_config is not None else False
    if values[DELETE_ON_DISABLE] or values[COPY_DISABLE]:  # validateNoInvalidRemoteStorageConfigsInZK
        raise InvalidConfigError("It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` "
                                 "under Zookeeper's mode.")
    if not values[REMOTE_STORAGE_ENABLE]:
        return
    if not system_enabled:
        raise _config_exception("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                                "with remote log storage.")
    if "compact" in ",".join(str(p) for p in values["cleanup.policy"] or []).lower():
        raise _config_exception("Remote log storage is unsupported for the compacted topics")
    check_local_retention(values)


#: Topics never tiered whatever their config says (UnifiedLog.remoteLogEnabled: Topic.isInternal, the metadata topic
#: and KRaft's metadata log).
NEVER_TIERED_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__remote_log_metadata",
                                 "__cluster_metadata"})


def remote_log_enabled(topic: str, system_enabled: bool, remote_storage_enable: bool, compact: bool) -> bool:
    """UnifiedLog.remoteLogEnabled: whether a partition of ``topic`` is tiered. Internal and compacted topics are
    not, even with ``remote.storage.enable=true`` (Kafka does not refuse the key on them; it ignores it)."""
    return system_enabled and remote_storage_enable and not compact and topic not in NEVER_TIERED_TOPICS


__all__ = ["check_broker", "check_topic", "check_local_retention", "remote_log_enabled", "NEVER_TIERED_TOPICS", "prefixed_configs", "rlmm_config", "REMOTE_STORAGE_MANAGERS",
           "REMOTE_LOG_METADATA_MANAGERS", "KAFKA_LOCAL_TIERED_STORAGE", "S3_REMOTE_STORAGE_MANAGER",
           "TOPIC_BASED_RLMM", "RLMM_KEYS"]
