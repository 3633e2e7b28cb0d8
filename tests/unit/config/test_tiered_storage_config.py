"""Tiered storage keys: Kafka 3.9's types, defaults, validators and dynamic scopes; the start-up refusal of the
system switch; the topic rules of LogConfig.validate in ZooKeeper mode, with Kafka's messages."""
from __future__ import annotations

import pytest

from broker.config.defs import BROKER_CONFIGS
from broker.config.dynamic_rules import KAFKA_DYNAMIC_KEYS, KAFKA_KEY_TYPES, KAFKA_ONLY_DYNAMIC
from broker.config.kafka_config import KafkaConfig
from broker.config.tiered_storage import check_topic, remote_log_enabled, rlmm_config
from broker.config.topic_defs import effective_topic_config, validate_topic_configs
from broker.config.types import ConfigError, ConfigType, Dynamic, InvalidConfigError

BASE = {"zookeeper.connect": "localhost:2181"}
T = ConfigType

#: (key, type, default) from Kafka 3.9's RemoteLogManagerConfig.configDef
KAFKA_TIERED_KEYS = [
    ("remote.log.storage.system.enable", T.BOOLEAN, False),
    ("remote.log.storage.manager.impl.prefix", T.STRING, "rsm.config."),
    ("remote.log.metadata.manager.impl.prefix", T.STRING, "rlmm.config."),
    ("remote.log.storage.manager.class.name", T.STRING, None),
    ("remote.log.storage.manager.class.path", T.STRING, None),
    ("remote.log.metadata.manager.class.name", T.STRING,
     "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"),
    ("remote.log.metadata.manager.class.path", T.STRING, None),
    ("remote.log.metadata.manager.listener.name", T.STRING, None),
    ("remote.log.metadata.custom.metadata.max.bytes", T.INT, 128),
    ("remote.log.index.file.cache.total.size.bytes", T.LONG, 1073741824),
    ("remote.log.manager.thread.pool.size", T.INT, 10),
    ("remote.log.manager.copier.thread.pool.size", T.INT, -1),
    ("remote.log.manager.expiration.thread.pool.size", T.INT, -1),
    ("remote.log.manager.task.interval.ms", T.LONG, 30000),
    ("remote.log.reader.threads", T.INT, 10),
    ("remote.log.reader.max.pending.tasks", T.INT, 100),
    ("log.local.retention.ms", T.LONG, -2),
    ("log.local.retention.bytes", T.LONG, -2),
    ("remote.log.manager.copy.max.bytes.per.second", T.LONG, 2**63 - 1),
    ("remote.log.manager.copy.quota.window.num", T.INT, 11),
    ("remote.log.manager.copy.quota.window.size.seconds", T.INT, 1),
    ("remote.log.manager.fetch.max.bytes.per.second", T.LONG, 2**63 - 1),
    ("remote.log.manager.fetch.quota.window.num", T.INT, 11),
    ("remote.log.manager.fetch.quota.window.size.seconds", T.INT, 1),
    ("remote.fetch.max.wait.ms", T.INT, 500),
]


@pytest.mark.parametrize("name,ctype,default", KAFKA_TIERED_KEYS)
def test_broker_keys_are_kafkas(name: str, ctype: ConfigType, default: object) -> None:
    d = BROKER_CONFIGS[name]
    assert (d.type, d.default) == (ctype, default)
    assert KAFKA_KEY_TYPES[name] == ctype
    # dynamic exactly where Kafka's are (DynamicConfig.Broker), cluster-wide
    assert (d.dynamic == Dynamic.CLUSTER_WIDE) == (name in KAFKA_DYNAMIC_KEYS)
    assert name not in KAFKA_ONLY_DYNAMIC


def test_dynamic_ones_are_the_issue_list() -> None:
    dynamic = {n for n, *_ in KAFKA_TIERED_KEYS if BROKER_CONFIGS[n].dynamic != Dynamic.READ_ONLY}
    assert dynamic == {"remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
                       "remote.log.manager.copy.max.bytes.per.second",
                       "remote.log.manager.fetch.max.bytes.per.second", "log.local.retention.ms",
                       "log.local.retention.bytes"}


@pytest.mark.parametrize("name,value,message", [
    ("remote.log.manager.copier.thread.pool.size", "0", "Value can be -1 or greater than 0"),
    ("remote.log.manager.expiration.thread.pool.size", "-2", "Value can be -1 or greater than 0"),
    ("remote.log.storage.manager.impl.prefix", "", "String must be non-empty"),
    ("remote.log.metadata.custom.metadata.max.bytes", "-1", "Value must be at least 0"),
    ("log.local.retention.ms", "-3", "Value must be at least -2"),
    ("remote.fetch.max.wait.ms", "0", "Value must be at least 1"),
])
def test_validators(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        KafkaConfig({**BASE, name: value})
    assert str(e.value) == f"Invalid value {value} for configuration {name}: {message}"


def test_switch_off_is_fine_and_plugins_are_inert() -> None:
    cfg = KafkaConfig({**BASE, "remote.log.storage.manager.class.name": "com.example.Anything"})
    assert cfg.get("remote.log.storage.system.enable") is False


def test_switch_on_with_a_built_in_storage_manager_is_accepted() -> None:
    props = {**BASE, "remote.log.storage.system.enable": "true",
             "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
             "rsm.config.dir": "/tmp/x"}
    assert KafkaConfig(props).get("remote.log.storage.system.enable") is True


@pytest.mark.parametrize("key,value", [
    ("remote.log.storage.manager.class.name", "io.aiven.kafka.tieredstorage.RemoteStorageManager"),
    ("remote.log.metadata.manager.class.name", "com.example.MyRlmm"),
])
def test_unknown_plugin_classes_refused_first(key: str, value: str) -> None:
    props = {**BASE, "remote.log.storage.system.enable": "true",
             "remote.log.storage.manager.class.name": "broker.storage.remote.S3RemoteStorageManager", key: value}
    with pytest.raises(ConfigError) as e:
        KafkaConfig(props)
    assert e.value.name == key and value in str(e.value)


def test_missing_storage_manager_class() -> None:
    with pytest.raises(ConfigError) as e:
        KafkaConfig({**BASE, "remote.log.storage.system.enable": "true"})
    assert e.value.name == "remote.log.storage.manager.class.name"


def test_rlmm_prefixed_keys() -> None:
    cfg = KafkaConfig({**BASE, "rlmm.config.remote.log.metadata.topic.num.partitions": "7"})
    got = rlmm_config(cfg)
    assert got["remote.log.metadata.topic.num.partitions"] == 7
    assert got["remote.log.metadata.topic.replication.factor"] == 3
    bad = KafkaConfig({**BASE, "remote.log.metadata.manager.impl.prefix": "x.",
                       "x.remote.log.metadata.topic.replication.factor": "0"})
    with pytest.raises(ConfigError) as e:
        rlmm_config(bad)
    assert "x.remote.log.metadata.topic.replication.factor" in str(e.value)


# ------------------------------------------------------------------------------------------------ topic rules
ZK_MESSAGE = "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."
DISABLED = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."


@pytest.mark.parametrize("configs", [{"remote.log.copy.disable": "true"}, {"remote.log.delete.on.disable": "true"},
                                     {"remote.log.copy.disable": "true", "remote.storage.enable": "true"}])
def test_kip950_keys_refused_as_zk_mode_kafka(configs: dict) -> None:
    with pytest.raises(InvalidConfigError) as e:
        validate_topic_configs(configs)
    assert str(e.value) == ZK_MESSAGE
    assert e.value.__cause__ is None  # an ApiException in Kafka: AlterConfigs does not prefix it


def test_false_values_accepted() -> None:
    typed = validate_topic_configs({"remote.log.copy.disable": "false", "remote.storage.enable": "false",
                                    "local.retention.ms": "1000"})
    assert typed["remote.storage.enable"] is False


def test_remote_storage_refused_while_switch_off() -> None:
    with pytest.raises(InvalidConfigError) as e:
        validate_topic_configs({"remote.storage.enable": "true"}, KafkaConfig(BASE))
    assert str(e.value) == DISABLED
    assert isinstance(e.value.__cause__, ConfigError)  # a ConfigException: AlterConfigs prefixes the resource


def test_stored_overrides_still_load() -> None:
    """A topic tiered by a Kafka broker (stored in ZooKeeper) still gets its effective config here."""
    eff = effective_topic_config(KafkaConfig(BASE), {"remote.storage.enable": "true"})
    assert eff["remote.storage.enable"] == "true"


def _check(configs: dict, broker: dict | None = None) -> None:
    from broker.config.topic_defs import _typed_topic_configs
    typed = _typed_topic_configs(configs)
    check_topic(typed, KafkaConfig({**BASE, **(broker or {})}), system_enabled=True)


def test_compacted_topic_refused_with_switch_on() -> None:
    with pytest.raises(InvalidConfigError) as e:
        _check({"remote.storage.enable": "true", "cleanup.policy": "compact,delete"})
    assert str(e.value) == "Remote log storage is unsupported for the compacted topics"
    with pytest.raises(InvalidConfigError):  # the broker's default policy counts too
        _check({"remote.storage.enable": "true"}, {"log.cleanup.policy": "compact"})
    _check({"remote.storage.enable": "true", "cleanup.policy": "delete"}, {"log.cleanup.policy": "compact"})


@pytest.mark.parametrize("configs,message", [
    ({"retention.bytes": "100", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set "
     "as 100."),
    ({"retention.bytes": "100", "local.retention.bytes": "101"},
     "Invalid value 101 for configuration local.retention.bytes: Value must not be more than retention.bytes property "
     "value: 100"),
    ({"local.retention.ms": "-1"},
     "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as "
     "604800000."),
    ({"retention.ms": "1000", "local.retention.ms": "1001"},
     "Invalid value 1001 for configuration local.retention.ms: Value must not be more than retention.ms property "
     "value: 1000"),
])
def test_local_retention_bounds(configs: dict, message: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        _check({"remote.storage.enable": "true", **configs})
    assert str(e.value) == message


def test_local_retention_within_bounds_accepted() -> None:
    _check({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "100",
            "retention.ms": "-1", "local.retention.ms": "-1"})
    _check({"remote.storage.enable": "true", "local.retention.ms": "5000"}, {"log.retention.ms": "10000"})
    with pytest.raises(InvalidConfigError):  # the broker's retention.ms is the bound
        _check({"remote.storage.enable": "true", "local.retention.ms": "20000"}, {"log.retention.ms": "10000"})


def test_internal_and_compacted_topics_never_tiered() -> None:
    assert remote_log_enabled("t", True, True, False)
    assert not remote_log_enabled("t", False, True, False)
    assert not remote_log_enabled("t", True, True, True)
    for topic in ("__consumer_offsets", "__transaction_state", "__remote_log_metadata"):
        assert not remote_log_enabled(topic, True, True, False)


def test_broker_local_retention_checked_before_the_switch_refusal() -> None:
    """LogConfig.validateBrokerLogConfigValues runs when the switch is on (Kafka's start-up), before our refusal."""
    props = {**BASE, "remote.log.storage.system.enable": "true", "log.local.retention.ms": "-1",
             "remote.log.storage.manager.class.name": "broker.storage.remote.S3RemoteStorageManager"}
    with pytest.raises(ConfigError) as e:
        KafkaConfig(props)
    assert e.value.name == "log.local.retention.ms"
    assert str(e.value) == ("Invalid value -1 for configuration local.retention.ms: Value must not be -1 as "
                            "retention.ms value is set as 604800000.")
