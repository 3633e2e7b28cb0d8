"""Topic-level configs (Kafka 3.9 TopicConfig names): types, validators, defaults taken from the broker synonym,
validation for CreateTopics/AlterConfigs and DescribeConfigs entries for topics and brokers.

Synonym order in DescribeConfigs follows Kafka: the topic override first, then the broker synonym keys grouped by
source (dynamic per-broker, dynamic cluster default, static file, ConfigDef default), each group in the synonym
precedence order (log.retention.ms, log.retention.minutes, log.retention.hours).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from broker.config.defs import (
    BROKER_CONFIGS, CLEANUP_POLICIES, COMPRESSION_TYPES, LONG_MAX, TIMESTAMP_TYPES, TOPIC_SYNONYMS,
)
from broker.config.types import (
    ConfigEntry, ConfigError, ConfigSource, ConfigSynonym, ConfigType, Dynamic, InvalidConfigError, Validator,
    at_least, between, list_of, one_of, parse_value, to_string,
)

if TYPE_CHECKING:
    from broker.config.kafka_config import KafkaConfig

T = ConfigType


def throttled_replica_list(name: str, value: Any) -> None:
    """Kafka's ThrottledReplicaListValidator: the literal '*' or [partitionId]:[brokerId],..."""
    items = [str(v).strip() for v in (value or [])]
    if "".join(items) == "*":
        return
    for item in items:
        part, sep, broker = item.partition(":")
        if item and not (sep and part.isdigit() and broker.isdigit() and part.isascii() and broker.isascii()):
            raise ConfigError(name, ",".join(items), f"{name} must be the literal '*' or a list of replicas in the "
                              "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    doc: str
    validator: Validator | None = None
    fixed_default: Any = None  # used only when the key has no broker synonym
    #: accepted and described (so Kafka's tools and clients see it) but not acted on by this broker
    ignored: bool = False


_TOPIC_DEFS = [
    TopicConfigDef("cleanup.policy", T.LIST, "delete and/or compact.", list_of(*CLEANUP_POLICIES)),
    TopicConfigDef("compression.type", T.STRING, "Final compression of the topic.", one_of(*COMPRESSION_TYPES)),
    TopicConfigDef("compression.gzip.level", T.INT, "gzip level (the broker compresses at gzip 6).", between(-1, 9),
                   ignored=True),
    TopicConfigDef("compression.lz4.level", T.INT, "lz4 level (the broker compresses at lz4's default).",
                   between(1, 17), ignored=True),
    TopicConfigDef("compression.zstd.level", T.INT, "zstd level (the broker compresses at zstd 3).",
                   between(-131072, 22), ignored=True),
    TopicConfigDef("delete.retention.ms", T.LONG, "How long tombstones are kept.", at_least(0)),
    TopicConfigDef("file.delete.delay.ms", T.LONG, "Delay before deleting a file.", at_least(0)),
    TopicConfigDef("flush.messages", T.LONG, "fsync after this many messages.", at_least(1)),
    TopicConfigDef("flush.ms", T.LONG, "fsync after this long.", at_least(0)),
    TopicConfigDef("follower.replication.throttled.replicas", T.LIST, "Throttled follower replicas.",
                   throttled_replica_list, []),
    TopicConfigDef("index.interval.bytes", T.INT, "Bytes between offset index entries.", at_least(0)),
    TopicConfigDef("leader.replication.throttled.replicas", T.LIST, "Throttled leader replicas.",
                   throttled_replica_list, []),
    TopicConfigDef("local.retention.bytes", T.LONG,
                   "Tiered storage: local bytes kept once tiered; -2 = retention.bytes; at most retention.bytes and not "
                   "-1 when that is set (checked only where remote.storage.enable=true is accepted).", at_least(-2),
                   -2),
    TopicConfigDef("local.retention.ms", T.LONG,
                   "Tiered storage: local retention time once tiered; -2 = retention.ms; at most retention.ms and not "
                   "-1 when that is set (checked only where remote.storage.enable=true is accepted).", at_least(-2),
                   -2),
    TopicConfigDef("max.compaction.lag.ms", T.LONG, "Max age before forced compaction.", at_least(1)),
    TopicConfigDef("max.message.bytes", T.INT, "Largest record batch accepted.", at_least(0)),
    TopicConfigDef("message.downconversion.enable", T.BOOLEAN,
                   "Down-convert for old fetch versions (the broker always does).", ignored=True),
    TopicConfigDef("message.format.version", T.STRING, "Deprecated.", None, "3.0-IV1", True),
    TopicConfigDef("message.timestamp.after.max.ms", T.LONG, "Max future skew of timestamps.", at_least(0)),
    TopicConfigDef("message.timestamp.before.max.ms", T.LONG, "Max age of timestamps.", at_least(0)),
    TopicConfigDef("message.timestamp.difference.max.ms", T.LONG,
                   "Deprecated: the before/after limit where those are left at their default.", at_least(0)),
    TopicConfigDef("message.timestamp.type", T.STRING, "CreateTime or LogAppendTime.", one_of(*TIMESTAMP_TYPES)),
    TopicConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "Dirty ratio that triggers cleaning.", between(0, 1)),
    TopicConfigDef("min.compaction.lag.ms", T.LONG, "Min age before compaction.", at_least(0)),
    TopicConfigDef("min.insync.replicas", T.INT, "Replicas needed for acks=all.", at_least(1)),
    TopicConfigDef("preallocate", T.BOOLEAN, "Preallocate segment files."),
    TopicConfigDef("remote.log.copy.disable", T.BOOLEAN,
                   "KIP-950 (KRaft only): true is refused as a ZooKeeper-mode Kafka 3.9 refuses it.", None, False,
                   True),
    TopicConfigDef("remote.log.delete.on.disable", T.BOOLEAN,
                   "KIP-950 (KRaft only): true is refused as a ZooKeeper-mode Kafka 3.9 refuses it.", None, False,
                   True),
    TopicConfigDef("remote.storage.enable", T.BOOLEAN,
                   "Tier the topic (KIP-405): rolled segments go to remote storage, local retention keeps the tail. "
                   "true is refused as Kafka refuses it on a broker whose remote.log.storage.system.enable is false "
                   "and on compacted topics; internal topics are never tiered.", None, False),
    TopicConfigDef("retention.bytes", T.LONG, "Retention size per partition; -1 = unlimited."),
    TopicConfigDef("retention.ms", T.LONG, "Retention time; -1 = forever.", at_least(-1)),
    TopicConfigDef("segment.bytes", T.INT, "Segment size before roll.", at_least(14)),
    TopicConfigDef("segment.index.bytes", T.INT, "Max index file size.", at_least(4)),
    TopicConfigDef("segment.jitter.ms", T.LONG, "Roll jitter.", at_least(0)),
    TopicConfigDef("segment.ms", T.LONG, "Roll after this long.", at_least(1)),
    TopicConfigDef("unclean.leader.election.enable", T.BOOLEAN, "Allow out-of-ISR leaders."),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}
assert all(k in TOPIC_CONFIGS for k in TOPIC_SYNONYMS), set(TOPIC_SYNONYMS) - set(TOPIC_CONFIGS)


def validate_topic_configs(configs: Mapping[str, str | None],
                           broker_config: "KafkaConfig | None" = None) -> dict[str, Any]:
    """Check topic overrides a client asks for (CreateTopics, AlterConfigs) as Kafka's LogConfig.validate does in
    ZooKeeper mode, tiered-storage rules included (broker/config/tiered_storage.py, over ``broker_config``'s
    defaults); return typed values. Raises InvalidConfigError for unknown keys or bad values."""
    typed = _typed_topic_configs(configs)
    from broker.config.tiered_storage import check_topic
    check_topic(typed, broker_config)
    return typed


def _typed_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Names, types and values of topic overrides (stored or asked for); tiered-storage rules not applied."""
    typed: dict[str, Any] = {}
    for name, raw in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
        try:
            value = parse_value(name, d.type, raw)
            if d.validator is not None:
                d.validator(name, value)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from e  # the cause tells a bad value from an unknown name
        typed[name] = value
    lo = typed.get("min.compaction.lag.ms")
    hi = typed.get("max.compaction.lag.ms")
    if lo is not None and hi is not None and lo > hi:
        raise InvalidConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                                 f"max.compaction.lag.ms ({hi})")
    return typed


def _broker_derived(broker_config: "KafkaConfig", name: str) -> Any:
    d = TOPIC_CONFIGS[name]
    if name not in TOPIC_SYNONYMS:
        return d.fixed_default
    for broker_key, factor in TOPIC_SYNONYMS[name]:
        v = broker_config.get(broker_key)
        if v is not None:
            v = v * factor if factor != 1 else v
            if name == "retention.ms" and v < 0:
                v = -1
            return v
    return None


def topic_defaults(broker_config: "KafkaConfig") -> dict[str, str]:
    """Every topic key -> string value derived from the broker config (no overrides)."""
    return effective_topic_config(broker_config, {})


def effective_topic_config(broker_config: "KafkaConfig", overrides: Mapping[str, str]) -> dict[str, str]:
    """Topic key -> effective string value: override if present, else the broker-derived default."""
    typed = _typed_topic_configs(overrides)
    out: dict[str, str] = {}
    for name, d in TOPIC_CONFIGS.items():
        value = typed[name] if name in typed else _broker_derived(broker_config, name)
        s = to_string(d.type, value)
        out[name] = "" if s is None else s
    return out


def _synonyms_for(broker_config: "KafkaConfig", keys: list[str], sensitive: bool) -> list[ConfigSynonym]:
    layers: list[tuple[Mapping[str, Any], ConfigSource]] = [
        (broker_config.dynamic_per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker_config.dynamic_cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker_config.originals, ConfigSource.STATIC_BROKER_CONFIG),
    ]
    out: list[ConfigSynonym] = []
    for layer, source in layers:
        for key in keys:
            if key in layer:
                out.append(ConfigSynonym(key, None if sensitive else str(layer[key]), source))
    for key in keys:
        d = BROKER_CONFIGS[key]
        if d.default is not None:
            out.append(ConfigSynonym(key, None if sensitive else to_string(d.type, d.default),
                                     ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic_config(broker_config: "KafkaConfig", overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs entries for a topic, sorted by name."""
    effective = effective_topic_config(broker_config, overrides)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        keys = [k for k, _ in TOPIC_SYNONYMS.get(name, [])]
        synonyms = _synonyms_for(broker_config, keys, False)
        # Kafka lists the broker synonyms from the primary broker key on (ConfigHelper.configSynonyms drops those
        # ahead of it): with only log.retention.hours set anywhere, retention.ms has no broker synonym at all
        while synonyms and synonyms[0].name != keys[0]:
            synonyms.pop(0)
        if name in overrides:
            synonyms.insert(0, ConfigSynonym(name, effective[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        value = effective[name] if (name in TOPIC_SYNONYMS and _broker_derived(broker_config, name) is not None) \
            or name in overrides or d.fixed_default is not None else None
        entries.append(ConfigEntry(name, value, source, False, False, d.type, tuple(synonyms), d.doc))
    return entries


#: Broker keys that Kafka reports as synonyms of each other (DynamicBrokerConfig.brokerConfigSynonyms).
_BROKER_SYNONYM_GROUPS = [
    ["log.roll.ms", "log.roll.hours"],
    ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
    ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
]


def _broker_synonym_keys(name: str) -> list[str]:
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return [name]


def describe_broker_config(broker_config: "KafkaConfig") -> list[ConfigEntry]:
    """DescribeConfigs entries for a broker entity, sorted by name (sensitive values are None)."""
    entries = []
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        synonyms = _synonyms_for(broker_config, _broker_synonym_keys(name), d.sensitive)
        while synonyms and synonyms[0].name != name:  # Kafka drops synonyms ahead of the key itself
            synonyms.pop(0)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        value = None if d.sensitive else to_string(d.type, broker_config.get(name))
        entries.append(ConfigEntry(name, value, source, d.sensitive, d.dynamic == Dynamic.READ_ONLY, d.type,
                                   tuple(synonyms), d.doc))
    # custom, listener-prefixed and Kafka-only keys of the broker's layers, described as Kafka describes them
    from broker.config.dynamic_rules import extra_broker_entries
    return sorted(entries + extra_broker_entries(broker_config), key=lambda e: e.name)


def describe_broker_default_config(broker_config: "KafkaConfig") -> list[ConfigEntry]:
    """DescribeConfigs entries of the cluster-default broker resource (name ""), as Kafka gives them: the keys set
    at that level, each with its value there and only its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (a per-broker
    override of the same key does not hide it)."""
    out = []
    for e in describe_broker_config(broker_config):
        synonyms = tuple(s for s in e.synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        if synonyms and synonyms[0].name == e.name:
            out.append(ConfigEntry(e.name, None if e.is_sensitive else synonyms[0].value,
                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, e.is_sensitive, e.read_only,
                                   e.config_type, synonyms, e.documentation))
    return out


__all__ = ["TOPIC_CONFIGS", "TopicConfigDef", "validate_topic_configs", "effective_topic_config",
           "describe_topic_config", "describe_broker_config", "describe_broker_default_config", "topic_defaults",
           "InvalidConfigError", "LONG_MAX"]
