import pytest

from broker.config import (
    ConfigSource, ConfigType, InvalidConfigError, KafkaConfig, describe_broker_config, describe_topic_config,
    effective_topic_config, validate_topic_configs,
)
from broker.config.topic_defs import TOPIC_CONFIGS


def broker(**kv: str) -> KafkaConfig:
    props = {"zookeeper.connect": "localhost:2181"}
    props.update(kv)
    return KafkaConfig(props)


def by_name(entries: list) -> dict:
    return {e.name: e for e in entries}


def test_validate_accepts_and_types() -> None:
    typed = validate_topic_configs({"segment.bytes": "1024", "cleanup.policy": "compact,delete",
                                    "min.cleanable.dirty.ratio": "0.1", "preallocate": "true"})
    assert typed == {"segment.bytes": 1024, "cleanup.policy": ["compact", "delete"],
                     "min.cleanable.dirty.ratio": 0.1, "preallocate": True}


@pytest.mark.parametrize("configs,message", [
    ({"segment.byte": "1"}, "Unknown topic config name: segment.byte"),
    ({"segment.bytes": "x"}, "Invalid value x for configuration segment.bytes: Not a number of type INT"),
    ({"segment.bytes": "10"}, "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
    ({"cleanup.policy": "zap"}, "Invalid value zap for configuration cleanup.policy"),
    ({"retention.ms": "-2"}, "Value must be at least -1"),
    ({"compression.type": "brotli"}, "String must be one of"),
    ({"message.timestamp.type": "createtime"}, "String must be one of: CreateTime, LogAppendTime"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
])
def test_validate_rejects(configs: dict, message: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        validate_topic_configs(configs)
    assert message in str(e.value)


def test_effective_config_from_broker_synonyms() -> None:
    b = broker(**{"log.retention.minutes": "3", "message.max.bytes": "2000", "log.roll.hours": "1",
                  "log.cleanup.policy": "compact"})
    eff = effective_topic_config(b, {"retention.bytes": "77"})
    assert eff["retention.ms"] == "180000"
    assert eff["max.message.bytes"] == "2000"
    assert eff["segment.ms"] == "3600000"
    assert eff["cleanup.policy"] == "compact"
    assert eff["retention.bytes"] == "77"
    assert eff["segment.bytes"] == "1073741824"
    assert set(eff) == set(TOPIC_CONFIGS)
    assert b.log_config_defaults()["retention.ms"] == "180000"


def test_effective_config_validates_overrides() -> None:
    with pytest.raises(InvalidConfigError):
        effective_topic_config(broker(), {"nope": "1"})


def test_describe_topic_override_then_broker_synonyms() -> None:
    b = broker(**{"log.retention.hours": "24"})
    e = by_name(describe_topic_config(b, {"retention.ms": "1000"}))["retention.ms"]
    assert e.value == "1000"
    assert e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert e.config_type == ConfigType.LONG
    assert not e.read_only and not e.is_sensitive
    # Kafka drops the broker synonyms ahead of the primary key log.retention.ms (ConfigHelper.configSynonyms):
    # with only log.retention.hours set, the override is the only synonym (what Kafka 3.9.1 answers, see
    # tests/integration/tools/test_kafka_tools_judge.py)
    assert [(s.name, s.value, s.source) for s in e.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    ]
    b = broker(**{"log.retention.hours": "24", "log.retention.ms": "5000"})
    e = by_name(describe_topic_config(b, {}))["retention.ms"]
    assert [(s.name, s.value, s.source) for s in e.synonyms] == [
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert by_name(describe_topic_config(broker(**{"log.retention.hours": "24"}), {}))["retention.ms"].source == \
        ConfigSource.DEFAULT_CONFIG


def test_describe_cluster_default_broker_resource() -> None:
    """The "" broker resource lists what is set at the cluster-default level, even where a per-broker override
    wins, with only its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (Kafka's ConfigHelper.createBrokerConfigEntry)."""
    from broker.config.topic_defs import describe_broker_default_config

    b = broker().with_dynamic(cluster_default={"log.cleaner.threads": "2"}, per_broker={"log.cleaner.threads": "3",
                                                                                        "num.io.threads": "9"})
    entries = describe_broker_default_config(b)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert [(s.name, s.value, s.source) for s in entries[0].synonyms] == [
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_describe_topic_default_and_dynamic_broker_sources() -> None:
    b = broker(**{"log.segment.bytes": "5000"}).with_dynamic(cluster_default={"log.segment.bytes": "6000"})
    entries = by_name(describe_topic_config(b, {}))
    seg = entries["segment.bytes"]
    assert seg.value == "6000"
    assert seg.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [s.source for s in seg.synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
    pol = entries["cleanup.policy"]
    assert (pol.value, pol.source) == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert pol.config_type == ConfigType.LIST
    thr = entries["leader.replication.throttled.replicas"]
    assert thr.source == ConfigSource.DEFAULT_CONFIG and thr.synonyms == ()


def test_describe_broker_entries() -> None:
    b = broker(**{"log.retention.minutes": "5"}).with_dynamic(per_broker={"ssl.keystore.password": "secret"})
    entries = by_name(describe_broker_config(b))
    mins = entries["log.retention.minutes"]
    assert (mins.value, mins.source, mins.read_only) == ("5", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert [(s.name, s.source) for s in mins.synonyms] == [
        ("log.retention.minutes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)]
    ms = entries["log.retention.ms"]
    assert ms.value is None and ms.source == ConfigSource.DEFAULT_CONFIG and not ms.read_only
    pw = entries["ssl.keystore.password"]
    assert pw.is_sensitive and pw.value is None and all(s.value is None for s in pw.synonyms)
    assert pw.config_type == ConfigType.PASSWORD
    assert entries["broker.id"].read_only
    assert not entries["message.max.bytes"].read_only
