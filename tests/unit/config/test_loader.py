import logging
from pathlib import Path

import pytest

from broker.config import ConfigError, KafkaConfig, load_config
from broker.config.defs import BROKER_CONFIGS, IGNORED_KEYS

BASE = {"zookeeper.connect": "localhost:2181"}


def cfg(**kv: str) -> KafkaConfig:
    props = dict(BASE)
    props.update({k.replace("_", "."): v for k, v in kv.items()})
    return KafkaConfig(props)


def test_defaults_match_kafka() -> None:
    c = cfg()
    assert c.get("log.segment.bytes") == 1073741824
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("zookeeper.session.timeout.ms") == 18000
    assert c.get("message.max.bytes") == 1048588
    assert c.get("num.partitions") == 1
    assert c.get("log.cleanup.policy") == ["delete"]
    assert c.broker_id == -1
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.retention_ms == 168 * 3600 * 1000
    assert c.segment_ms == 168 * 3600 * 1000
    assert c.zk_connection_timeout_ms == 18000


def test_retention_precedence() -> None:
    assert cfg(**{"log.retention.hours": "1"}).retention_ms == 3600000
    assert cfg(**{"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms == 120000
    assert cfg(**{"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}).retention_ms == 5
    assert cfg(**{"log.retention.ms": "-7"}).retention_ms == -1


def test_roll_and_log_dirs_precedence() -> None:
    c = cfg(**{"log.roll.hours": "2", "log.roll.ms": "10", "log.dir": "/x", "log.dirs": "/a, /b"})
    assert c.segment_ms == 10
    assert c.log_dirs == ["/a", "/b"]
    assert cfg(**{"log.roll.hours": "2", "log.dir": "/x"}).segment_ms == 7200000
    assert cfg(**{"log.dir": "/x"}).log_dirs == ["/x"]


def test_bad_value_is_one_line_naming_key_and_value() -> None:
    with pytest.raises(ConfigError) as e:
        cfg(**{"log.segment.bytes": "abc"})
    assert str(e.value) == "Invalid value abc for configuration log.segment.bytes: Not a number of type INT"
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key,value,reason", [
    ("log.segment.bytes", "13", "Value must be at least 14"),
    ("num.partitions", "0", "Value must be at least 1"),
    ("auto.create.topics.enable", "yes", "Expected value to be either true or false"),
    ("log.message.timestamp.type", "Foo", "String must be one of: CreateTime, LogAppendTime"),
    ("compression.type", "brotli", "String must be one of"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "Value must be no more than 1"),
    ("num.partitions", "99999999999", "Not a number of type INT"),
])
def test_validators(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(**{key: value})
    assert str(e.value).startswith(f"Invalid value {value} for configuration {key}") or key in str(e.value)
    assert reason in str(e.value)


def test_cleanup_policy_list_values_checked() -> None:
    assert cfg(**{"log.cleanup.policy": "compact, delete"}).get("log.cleanup.policy") == ["compact", "delete"]
    with pytest.raises(ConfigError, match="log.cleanup.policy"):
        cfg(**{"log.cleanup.policy": "compact,bogus"})


def test_listeners_parsed_and_advertised_default() -> None:
    c = cfg(listeners="PLAINTEXT://localhost:9092,internal://[::1]:9093",
            **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert [(e.listener_name, e.host, e.port) for e in c.listeners] == [("PLAINTEXT", "localhost", 9092),
                                                                        ("INTERNAL", "::1", 9093)]
    assert c.advertised_listeners == c.listeners
    assert c.listeners[1].connection_string() == "INTERNAL://[::1]:9093"


def test_advertised_blank_host_gets_hostname_and_meta_address_refused() -> None:
    c = cfg(listeners="PLAINTEXT://:9092")
    assert c.listeners[0].host == ""
    assert c.advertised_listeners[0].host != ""
    with pytest.raises(ConfigError, match="advertised.listeners"):
        cfg(**{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})


def test_listener_without_protocol_refused() -> None:
    with pytest.raises(ConfigError, match="No security protocol defined for listener FOO"):
        cfg(listeners="FOO://h:1")


def test_zk_connect_chroot_split() -> None:
    c = cfg(**{"zookeeper.connect": "a:1,b:2/kafka/x"})
    assert (c.zk_hosts, c.zk_chroot) == ("a:1,b:2", "/kafka/x")
    assert cfg().zk_chroot is None


def test_missing_zookeeper_connect() -> None:
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        KafkaConfig({})


def test_broker_id_range() -> None:
    assert cfg(**{"broker.id": "1000"}).broker_id == 1000
    with pytest.raises(ConfigError, match="broker.id"):
        cfg(**{"broker.id": "1001"})
    assert cfg(**{"broker.id": "5000", "broker.id.generation.enable": "false"}).broker_id == 5000


def test_unknown_keys_warn_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        c = cfg(**{"some.unknown.key": "1", "num.io.threads": "8"})
    assert c.originals["some.unknown.key"] == "1"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("some.unknown.key" in w for w in warnings)
    assert not any("num.io.threads" in w for w in warnings)
    assert "num.io.threads" in IGNORED_KEYS
    assert c.ignored_keys_set == ["num.io.threads"]


def test_load_config_file_and_overrides(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text("broker.id=3\nzookeeper.connect=localhost:2181\nlog.segment.bytes=1000\n")
    c = load_config(str(p), ["log.segment.bytes=2000", "num.partitions=4"])
    assert c.broker_id == 3 and c.get("log.segment.bytes") == 2000 and c.get("num.partitions") == 4
    assert c.originals["log.segment.bytes"] == "2000"
    with pytest.raises(ConfigError, match="override"):
        load_config(str(p), ["novalue"])


def test_repo_server_properties_loads() -> None:
    root = Path(__file__).resolve().parents[3]
    c = load_config(str(root / "config" / "server.properties"))
    assert c.broker_id == 0
    assert c.get("offsets.topic.replication.factor") == 1
    assert c.get("group.initial.rebalance.delay.ms") == 0


def test_dynamic_layers_take_precedence() -> None:
    c = cfg(**{"log.retention.bytes": "10"})
    d = c.with_dynamic(per_broker={"log.retention.bytes": "30"}, cluster_default={"log.retention.bytes": "20"})
    assert c.get("log.retention.bytes") == 10
    assert d.get("log.retention.bytes") == 30
    assert c.with_dynamic(cluster_default={"log.retention.bytes": "20"}).get("log.retention.bytes") == 20


def test_every_synonym_target_is_a_topic_key() -> None:
    from broker.config.topic_defs import TOPIC_CONFIGS

    for d in BROKER_CONFIGS.values():
        if d.topic_synonym:
            assert d.topic_synonym in TOPIC_CONFIGS
    assert BROKER_CONFIGS["message.max.bytes"].topic_synonym == "max.message.bytes"


@pytest.mark.parametrize("key", ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                 "replica.alter.log.dirs.io.max.bytes.per.second"])
def test_dynamic_only_replication_throttles_in_the_file_stop_start_up(key: str) -> None:
    from broker.config.kafka_config import KafkaConfig
    with pytest.raises(ConfigError, match=f"{key} is a dynamic broker config only"):
        KafkaConfig({"zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x", key: "1048576"})
    # ... while the dynamic layer (AlterConfigs, /config/brokers/...) sets them
    cfg = KafkaConfig({"zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x"}).with_dynamic(per_broker={key: "1024"})
    assert cfg.get(key) == 1024
