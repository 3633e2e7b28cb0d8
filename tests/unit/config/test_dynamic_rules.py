"""Dynamic broker configs as Kafka 3.9 accepts and refuses them (issue 17 point 10), and the JVM collection orders
its messages print. The JVM answers below were taken from Kafka 3.9.1's jar (DynamicBrokerConfig.validateConfigs
through jshell); tests/integration/test_differential_kafka.py compares whole answers with a running Kafka 3.9.1."""
from __future__ import annotations

import asyncio
import types
from typing import Any, Dict, List, Optional

import pytest

from broker.api import configs
from broker.config import dynamic_rules as rules
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.jvm_collections import resolved_properties_order, scala_immutable_set, scala_mutable_hash_set
from broker.config.kafka_config import KafkaConfig
from broker.config.topic_defs import describe_broker_config, describe_broker_default_config
from broker.config.types import ConfigSource, ConfigType
from broker.errors import ErrorCode

STATIC = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/tmp/none",
          "listeners": "PLAINTEXT://127.0.0.1:9092"}


def cfg(per_broker: Optional[Dict[str, str]] = None, default: Optional[Dict[str, str]] = None) -> KafkaConfig:
    return KafkaConfig(STATIC, per_broker, default, warn_unknown=False)


def refusal(props: Dict[str, str], per_broker: bool = True, current: Optional[KafkaConfig] = None) -> Any:
    try:
        rules.validate(props, per_broker, current or cfg())
    except rules.Refused as r:
        return r.code, r.message
    return None


# ------------------------------------------------------------------------------------------- JVM orders
def test_collection_orders_match_the_jvm() -> None:
    # request order -> the Properties DynamicBrokerConfig.validate iterates (resizes at 12 included)
    assert resolved_properties_order(["log.dirs", "broker.id"]) == ["broker.id", "log.dirs"]
    keys = ["client.quota.callback.class", "metadata.log.max.snapshot.interval.ms", "delegation.token.secret.key",
            "controlled.shutdown.max.retries", "replica.selector.class", "transaction.state.log.min.isr"]
    assert scala_immutable_set(resolved_properties_order(keys)) == (
        "HashSet(metadata.log.max.snapshot.interval.ms, controlled.shutdown.max.retries, "
        "transaction.state.log.min.isr, replica.selector.class, delegation.token.secret.key, "
        "client.quota.callback.class)")
    assert scala_immutable_set(resolved_properties_order(
        ["log.dirs", "broker.id", "zookeeper.connect", "num.partitions", "auto.create.topics.enable"])) == (
        "HashSet(num.partitions, broker.id, log.dirs, zookeeper.connect, auto.create.topics.enable)")
    assert scala_immutable_set(["b", "a"]) == "Set(b, a)"  # up to four: insertion order
    assert scala_mutable_hash_set(["ssl.keystore.location", "ssl.truststore.location"]) == (
        "HashSet(ssl.truststore.location, ssl.keystore.location)")
    many = [f"k{i}" for i in range(30)]
    assert sorted(resolved_properties_order(many)) == sorted(many)


def test_kafka_key_tables_cover_the_broker_table() -> None:
    from broker.config.defs import BROKER_CONFIGS
    assert set(rules.KAFKA_DYNAMIC_KEYS) - set(BROKER_CONFIGS) == set(rules.KAFKA_ONLY_DYNAMIC)
    assert len(rules.KAFKA_KEY_TYPES) == 328 and len(rules.KAFKA_DYNAMIC_KEYS) == 92  # Kafka 3.9.1
    ours = {k: d.type for k, d in BROKER_CONFIGS.items() if k in rules.KAFKA_KEY_TYPES}
    assert {k: t for k, t in ours.items() if rules.KAFKA_KEY_TYPES[k] != t} == {}


# ------------------------------------------------------------------------------------------- Kafka's refusals
def test_kafka_accepts_custom_and_kerberos_keys_per_broker() -> None:
    assert refusal({"my.custom.key": "v", "sasl.kerberos.min.time.before.relogin": "58000"}) is None
    assert refusal({"my.custom.key": "v"}, per_broker=False) is None
    assert refusal({"listener.name.external.ssl.keystore.location": "/x"}) is None  # no such listener here


def test_kafka_refusals_and_their_words() -> None:
    bad = ErrorCode.INVALID_REQUEST
    assert refusal({"broker.id": "5"}) == (bad, "Cannot update these configs dynamically: Set(broker.id)")
    assert refusal({"log.dirs": "/x", "broker.id": "5"}) == (
        bad, "Cannot update these configs dynamically: Set(broker.id, log.dirs)")
    assert refusal({"super.users": "User:a"}) == (bad, "Cannot update these configs dynamically: Set(super.users)")
    assert refusal({"ssl.keystore.location": "/x"}) == (
        bad, "These security configs can be dynamically updated only per-listener using the listener prefix: "
             "HashSet(ssl.keystore.location)")
    assert refusal({"sasl.kerberos.min.time.before.relogin": "abc"}) == (
        bad, "Invalid value abc for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG")
    assert refusal({"listener.name.x.log.cleaner.threads": "-1"}) == (  # a prefixed key is checked as its base
        bad, "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0")
    assert refusal({"compression.gzip.level": "0"}, per_broker=False) == (
        bad, "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1")
    assert refusal({"sasl.kerberos.min.time.before.relogin": "58000"}, per_broker=False) == (
        bad, "Cannot update these configs at default cluster level, broker id must be specified: "
             "Set(sasl.kerberos.min.time.before.relogin)")
    assert refusal({"listener.name.plaintext.ssl.keystore.location": "/x"}, per_broker=False) == (
        bad, "Cannot update these configs at default cluster level, broker id must be specified: "
             "Set(listener.name.plaintext.ssl.keystore.location)")
    assert refusal({"listener.name.external.max.connections": "5"}, per_broker=False) is None  # cluster level


def test_reconfigurable_components_refuse_as_kafka() -> None:
    wrap = "Invalid value org.apache.kafka.common.config.ConfigException: {} for configuration Invalid dynamic " \
           "configuration"
    assert refusal({"num.io.threads": "100"}, per_broker=False) == (ErrorCode.INVALID_REQUEST, wrap.format(
        "Dynamic thread count update validation failed for num.io.threads=100, value should not be greater than "
        "double the current value 8"))
    assert refusal({"num.replica.fetchers": "0"}, per_broker=False) == (ErrorCode.INVALID_REQUEST, wrap.format(
        "Dynamic thread count update validation failed for num.replica.fetchers=0, value should be at least 1"))
    assert refusal({"num.network.threads": "100"}, per_broker=False) == (ErrorCode.INVALID_REQUEST, wrap.format(
        "Dynamic thread count update validation failed for num.network.threads=100, value should not be greater "
        "than double the current value 3"))
    # a dynamic key of an existing listener is refused only when some listener config changes with it
    listener = wrap.format("Configs cannot be updated dynamically for existing listener ListenerName(PLAINTEXT), "
                           "restart broker or create a new listener for update")
    assert refusal({"listener.name.plaintext.foo": "1"}) is None
    assert refusal({"listener.name.plaintext.foo": "1", "sasl.kerberos.service.name": "kafka"}) == (
        ErrorCode.INVALID_REQUEST, listener)
    # ... compared with server.properties alone (Kafka reads the old side without the dynamic layers)
    current = cfg({"listener.name.plaintext.foo": "1"})
    assert refusal({"listener.name.plaintext.foo": "1", "sasl.kerberos.service.name": "k"}, current=current) == (
        ErrorCode.INVALID_REQUEST, listener)
    assert refusal({"listener.name.plaintext.ssl.keystore.location": "/x", "sasl.kerberos.service.name": "k"}) is None
    assert refusal({"listener.name.PLAINTEXT.foo": "1", "sasl.kerberos.service.name": "k"}) is None


def test_passwords_are_not_persisted_without_an_encoder() -> None:
    with pytest.raises(rules.Refused) as e:
        rules.check_persistable({"listener.name.external.ssl.keystore.password": "pw"}, True, "0")
    assert (e.value.code, e.value.message) == (ErrorCode.INVALID_CONFIG, "Invalid config value for resource "
                                               "ConfigResource(type=BROKER, name='0'): Password encoder secret not "
                                               "configured")
    with pytest.raises(rules.Refused) as e:
        rules.check_persistable({"my.ssl.key.password": "pw"}, False, "")
    assert e.value.message.endswith("(type=BROKER, name=''): Password config can be defined only at broker level")
    rules.check_persistable({"my.custom": "x"}, True, "0")


def test_incremental_operations_as_kafka() -> None:
    def op(name: str, kind: int, value: Optional[str]) -> Any:
        return types.SimpleNamespace(name=name, config_operation=kind, value=value)

    assert rules.apply_incremental({}, [op("log.cleanup.policy", 2, "compact")]) == {
        "log.cleanup.policy": "delete,compact"}  # APPEND starts from the default
    assert rules.apply_incremental({"log.cleanup.policy": "delete,compact"}, [op("log.cleanup.policy", 3, "delete")]) \
        == {"log.cleanup.policy": "compact"}
    assert rules.apply_incremental({"a": "1", "b": "2"}, [op("a", 0, "3"), op("b", 1, None), op("c", 0, "4")]) == {
        "a": "3", "c": "4"}
    for kind in (2, 3):
        with pytest.raises(rules.Refused) as e:
            rules.apply_incremental({}, [op("my.custom", kind, "x")])
        assert (e.value.code, e.value.message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    with pytest.raises(rules.Refused) as e:
        rules.apply_incremental({}, [op("log.cleaner.threads", 2, "x")])
    assert (e.value.code, e.value.message) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.cleaner.threads")


# ------------------------------------------------------------------------------------------- this broker's refusal
def test_listener_tls_and_sasl_keys_are_refused_not_ignored() -> None:
    for key in ("ssl.client.auth", "listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms",
                "principal.builder.class", "listener.name.external.ssl.keystore.location",
                "listener.name.external.plain.sasl.jaas.config", "listener.name.external.max.connections"):
        with pytest.raises(rules.Refused) as e:
            rules.check_applied_here({key: "x"}, {})
        assert e.value.code == ErrorCode.INVALID_REQUEST
        assert e.value.message.startswith(f"Cannot update these configs dynamically: Set({key}) (this broker")
    rules.check_applied_here({"listeners": "x"}, {"listeners": "x"})  # sent back unchanged
    rules.check_applied_here({}, {"listeners": "x"})  # removed
    for key in ("sasl.kerberos.min.time.before.relogin", "sasl.login.refresh.window.factor",
                "listener.name.external.sasl.kerberos.service.name", "listener.name.external.num.network.threads",
                "my.custom", "remote.fetch.max.wait.ms"):
        rules.check_applied_here({key: "1"}, {})
    assert rules.applicable({"listeners": "x", "my.custom": "1"}) == {"my.custom": "1"}


def test_stored_sets_are_filtered_as_kafka_and_this_broker_do(caplog: pytest.LogCaptureFixture) -> None:
    stored = {"broker.id": "7", "ssl.keystore.location": "/x", "listener.security.protocol.map": "PLAINTEXT:SSL",
              "listener.name.x.ssl.keystore.password": "enc", "log.cleaner.threads": "x", "my.custom": "1",
              "sasl.kerberos.min.time.before.relogin": "58000"}
    kept, errors = rules.from_persistent(stored, True)
    assert kept == {"listener.security.protocol.map": "PLAINTEXT:SSL", "my.custom": "1",
                    "sasl.kerberos.min.time.before.relogin": "58000"}
    assert "Non-dynamic configs configured in ZooKeeper will be ignored: Set(broker.id)" in errors
    assert rules.layer_to_apply(stored, True, "broker 0") == {"my.custom": "1",
                                                             "sasl.kerberos.min.time.before.relogin": "58000"}
    assert "listener.security.protocol.map" in caplog.text
    kept, _ = rules.from_persistent({"sasl.kerberos.service.name": "k", "log.cleaner.threads": "2"}, False)
    assert kept == {"log.cleaner.threads": "2"}  # per-broker keys at the default level are dropped


# ------------------------------------------------------------------------------------------- DescribeConfigs
def test_describe_lists_custom_prefixed_and_kafka_only_keys_as_kafka() -> None:
    c = cfg({"my.custom.key": "s3cret", "sasl.kerberos.min.time.before.relogin": "58000",
             "listener.name.external.max.connections": "5", "listener.name.external.ssl.keystore.location": "/y"},
            {"def.custom": "1"})
    entries = {e.name: e for e in describe_broker_config(c)}
    custom = entries["my.custom.key"]
    assert (custom.value, custom.is_sensitive, custom.read_only, custom.config_type, custom.source) == (
        None, True, True, ConfigType.UNKNOWN, ConfigSource.DYNAMIC_BROKER_CONFIG)
    kerberos = entries["sasl.kerberos.min.time.before.relogin"]
    assert (kerberos.value, kerberos.read_only, kerberos.config_type) == ("58000", False, ConfigType.LONG)
    assert [(s.value, s.source) for s in kerberos.synonyms] == [
        ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG), ("60000", ConfigSource.DEFAULT_CONFIG)]
    limit = entries["listener.name.external.max.connections"]
    assert (limit.value, limit.is_sensitive, limit.read_only, limit.config_type) == ("5", False, True, ConfigType.INT)
    assert [(s.name, s.source) for s in limit.synonyms] == [
        ("listener.name.external.max.connections", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("max.connections", ConfigSource.DEFAULT_CONFIG)]
    assert entries["sasl.kerberos.service.name"].value is None  # listed unset, as Kafka lists it
    assert [e.name for e in describe_broker_default_config(c)] == ["def.custom"]


# ------------------------------------------------------------------------------------------- the requests
class FakeAdmin:
    def __init__(self) -> None:
        self.stored: Dict[str, Dict[str, str]] = {}

    async def broker_overrides(self, entity: str) -> Dict[str, str]:
        return dict(self.stored.get(entity, {}))

    async def set_broker_overrides(self, entity: str, props: Dict[str, str]) -> None:
        self.stored[entity] = dict(props)


def _request(name: str, entries: List[tuple], validate_only: bool = False) -> Any:
    return types.SimpleNamespace(validate_only=validate_only, resources=[types.SimpleNamespace(
        resource_type=4, resource_name=name,
        configs=[types.SimpleNamespace(name=e[0], value=e[-1], config_operation=e[1] if len(e) == 3 else 0)
                 for e in entries])])


def _answer(call: Any, dyn: DynamicBrokerConfig, admin: FakeAdmin, request: Any) -> tuple:
    out = asyncio.run(call(None, request, config=dyn, metadata=None, admin=admin))
    r = out["responses"][0]
    return r["error_code"], r["error_message"]


def test_alter_configs_on_a_broker_resource() -> None:
    dyn, admin = DynamicBrokerConfig(cfg()), FakeAdmin()
    ok = (0, None)
    assert _answer(configs.alter, dyn, admin, _request("0", [("sasl.kerberos.min.time.before.relogin", "58000"),
                                                            ("my.custom", "v")])) == ok
    assert admin.stored["0"] == {"sasl.kerberos.min.time.before.relogin": "58000", "my.custom": "v"}
    assert dyn.current.dynamic_per_broker == admin.stored["0"]
    # legacy AlterConfigs replaces the whole set; validate_only stores nothing
    assert _answer(configs.alter, dyn, admin, _request("0", [("log.cleaner.threads", "2")])) == ok
    assert admin.stored["0"] == {"log.cleaner.threads": "2"} and dyn.get("log.cleaner.threads") == 2
    assert _answer(configs.alter, dyn, admin, _request("0", [("x", "1")], validate_only=True)) == ok
    assert admin.stored["0"] == {"log.cleaner.threads": "2"}
    # IncrementalAlterConfigs changes the stored set
    assert _answer(configs.incremental_alter, dyn, admin, _request("0", [("other", 0, "1")])) == ok
    assert admin.stored["0"] == {"log.cleaner.threads": "2", "other": "1"}
    assert _answer(configs.alter, dyn, admin, _request("3", [("x", "1")])) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 3")
    assert _answer(configs.incremental_alter, dyn, admin, _request("zero", [("x", 0, "1")])) == (
        ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: zero")
    assert _answer(configs.alter, dyn, admin, _request("0", [("a", None)])) == (
        ErrorCode.INVALID_REQUEST, "Null value not supported for : a")
    assert _answer(configs.alter, dyn, admin, _request("0", [("a", "1"), ("a", "2")])) == (
        ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    assert _answer(configs.incremental_alter, dyn, admin, _request("0", [("a", 7, "1")])) == (
        ErrorCode.INVALID_REQUEST, "Unknown operations type 7")
    code, message = _answer(configs.alter, dyn, admin, _request("0", [("ssl.client.auth", "required")]))
    assert code == ErrorCode.INVALID_REQUEST and "Set(ssl.client.auth)" in message
    assert admin.stored["0"] == {"log.cleaner.threads": "2", "other": "1"}
