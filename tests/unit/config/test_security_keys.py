"""Security settings the broker does not honour stop start-up with one line naming the key (issue 8)."""
from __future__ import annotations

import pytest

from broker.config.kafka_config import KafkaConfig
from broker.config.types import ConfigError


def cfg(**kv: str) -> KafkaConfig:
    props = {"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x"}
    props.update(kv)
    return KafkaConfig(props)


@pytest.mark.parametrize("key,value", [
    ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
    ("super.users", "User:admin"),
    ("principal.builder.class", "com.example.Builder"),
    ("ssl.keystore.location", "/etc/kafka/ks.jks"),
    ("ssl.client.auth", "required"),
    ("ssl.keystore.password", "secret"),
    ("sasl.enabled.mechanisms", "PLAIN"),
    ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
    ("listener.name.sasl_ssl.plain.sasl.jaas.config", "x required;"),
    ("zookeeper.set.acl", "true"),
    ("zookeeper.ssl.client.enable", "true"),
    ("zookeeper.ssl.keystore.location", "/x"),
    ("delegation.token.secret.key", "k"),
])
def test_security_key_refuses_start_with_one_line_naming_it(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg(**{key: value})
    message = str(err.value)
    assert "\n" not in message and key in message and "refusing to start" in message
    if "password" in key:
        assert value not in message  # a secret is never echoed


@pytest.mark.parametrize("key,value", [
    ("zookeeper.set.acl", "false"), ("zookeeper.ssl.client.enable", "false"), ("authorizer.class.name", ""),
    ("super.users", " "),
])
def test_off_values_are_accepted(key: str, value: str) -> None:
    assert cfg(**{key: value}).get("zookeeper.connect") == "localhost:2181"


@pytest.mark.parametrize("listeners,pmap", [
    ("SSL://:9093", None),
    ("PLAINTEXT://:9092,SASL_PLAINTEXT://:9094", None),
    ("CLIENT://:9095", "CLIENT:SASL_SSL"),
])
def test_listener_with_unimplemented_protocol_refused_before_binding(listeners: str, pmap: str | None) -> None:
    kv = {"listeners": listeners}
    if pmap:
        kv["listener.security.protocol.map"] = pmap
    with pytest.raises(ConfigError) as err:
        cfg(**kv)
    assert "\n" not in str(err.value) and "security protocol" in str(err.value)


def test_harmless_unknown_key_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    c = cfg(**{"some.plugin.setting": "1"})
    assert c.get("zookeeper.connect") == "localhost:2181"
    assert "some.plugin.setting" in caplog.text
