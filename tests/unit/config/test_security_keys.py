"""Security settings the broker does not honour stop start-up with one line naming the key (issue 8);
the ones it honours (TLS, SASL PLAIN/SCRAM, listener-prefixed overrides) load."""
from __future__ import annotations

import pytest

from broker.config.kafka_config import KafkaConfig
from broker.config.listener_security import resolve_listener
from broker.config.types import ConfigError

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="pw";'


def cfg(**kv: str) -> KafkaConfig:
    props = {"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x"}
    props.update(kv)
    return KafkaConfig(props)


@pytest.mark.parametrize("key,value", [
    ("principal.builder.class", "com.example.Builder"),
    ("sasl.kerberos.service.name", "kafka"),
    ("sasl.login.callback.handler.class", "com.example.Handler"),
    ("sasl.server.callback.handler.class", "com.example.Handler"),
    ("sasl.oauthbearer.jwks.endpoint.url", "https://x"),
    ("sasl.jaas.config", PLAIN_JAAS),
    ("ssl.engine.factory.class", "com.example.Factory"),
    ("ssl.allow.dn.changes", "true"),
    ("listener.name.sasl_ssl.gssapi.sasl.jaas.config", "x required;"),
    ("listener.name.sasl_ssl.plain.sasl.login.callback.handler.class", "com.example.Handler"),
    ("zookeeper.set.acl", "true"),
    ("zookeeper.ssl.client.enable", "true"),
    ("zookeeper.ssl.keystore.location", "/x"),
])
def test_security_key_refuses_start_with_one_line_naming_it(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg(**{key: value})
    message = str(err.value)
    assert "\n" not in message and key in message and "refusing to start" in message
    assert value not in message or len(value) < 12  # secrets and JAAS texts are never echoed


@pytest.mark.parametrize("key,value", [
    ("zookeeper.set.acl", "false"), ("zookeeper.ssl.client.enable", "false"), ("authorizer.class.name", ""),
    ("super.users", " "), ("principal.builder.class",
                           "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ("ssl.keystore.location", "/etc/kafka/ks.jks"), ("ssl.client.auth", "required"),
])
def test_off_or_honoured_values_are_accepted(key: str, value: str) -> None:
    assert cfg(**{key: value}).get("zookeeper.connect") == "localhost:2181"


def test_sasl_listener_with_kafkas_default_gssapi_is_refused() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        cfg(**{"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094"})


def test_sasl_mechanism_without_jaas_is_refused() -> None:
    with pytest.raises(ConfigError, match="JAAS"):
        cfg(**{"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094", "sasl.enabled.mechanisms": "PLAIN"})


def test_full_sasl_ssl_config_loads_with_listener_overrides() -> None:
    c = cfg(**{
        "listeners": "INTERNAL://:9093,EXTERNAL://:9094",
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.external.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.external.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.external.ssl.client.auth": "requested",
        "ssl.client.auth": "none",
        "ssl.keystore.location": "/ks.jks",
        "connections.max.reauth.ms": "60000",
    })
    ext = resolve_listener(c, "EXTERNAL", "SASL_SSL")
    assert ext.ssl["ssl.client.auth"] == "requested" and ext.ssl["ssl.keystore.location"] == "/ks.jks"
    assert ext.sasl_mechanisms == ["PLAIN", "SCRAM-SHA-512"] and ext.reauth_ms == 60000
    assert ext.jaas["PLAIN"][0].options["user_alice"] == "alice-secret"
    assert resolve_listener(c, "INTERNAL", "SASL_PLAINTEXT").ssl == {}


def test_inter_broker_sasl_needs_enabled_mechanism_and_credentials() -> None:
    base = {"listeners": "SASL_PLAINTEXT://:9094", "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"}
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        cfg(**base)  # default GSSAPI is not enabled there
    with pytest.raises(ConfigError, match="username and password"):
        cfg(**base, **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})


def test_inter_broker_listener_must_exist() -> None:
    with pytest.raises(ConfigError, match="No listener named"):
        cfg(**{"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"})


def test_harmless_unknown_key_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    c = cfg(**{"some.plugin.setting": "1"})
    assert c.get("zookeeper.connect") == "localhost:2181"
    assert "some.plugin.setting" in caplog.text
