"""The authorizer keys: Kafka's AclAuthorizer (or the project alias) loads, any other authorizer class stops
start-up with one line, and super.users must name principals."""
from __future__ import annotations

import pytest

from broker.config.kafka_config import KafkaConfig
from broker.config.types import ConfigError


def cfg(**kv: str) -> KafkaConfig:
    props = {"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x"}
    props.update(kv)
    return KafkaConfig(props)


@pytest.mark.parametrize("name", ["kafka.security.authorizer.AclAuthorizer", "broker.security.AclAuthorizer", ""])
def test_acl_authorizer_is_honoured(name: str) -> None:
    c = cfg(**{"authorizer.class.name": name, "super.users": "User:admin;User:CN=broker,O=x",
               "allow.everyone.if.no.acl.found": "true"})
    assert c.get("authorizer.class.name") == name
    assert c.get("allow.everyone.if.no.acl.found") is True


@pytest.mark.parametrize("name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer", "com.example.Mine"])
def test_other_authorizers_stop_start_up_with_one_line(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg(**{"authorizer.class.name": name})
    message = str(err.value)
    assert "\n" not in message and "authorizer.class.name" in message and "refusing to start" in message


def test_super_users_must_be_principals() -> None:
    with pytest.raises(ConfigError, match="expected a string in format principalType:principalName but got admin"):
        cfg(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:a; admin"})
