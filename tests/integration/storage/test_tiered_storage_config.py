"""Tiered storage's keys on a real broker process (bin/kafka-server-start.sh): an unknown plug-in class stops start-up
with one line naming it (the system switch itself is run: tests/integration/cluster/test_tiered_storage_cluster.py);
a topic's ``remote.storage.enable=true`` and the KIP-950 keys are refused with Kafka 3.9's ZooKeeper-mode messages by
CreateTopics and AlterConfigs (confluent-kafka's AdminClient)."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.harness.broker_process import BrokerProcess
from tests.integration.broker.test_startup import assert_one_line_failure, run_to_exit

DISABLED = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
ZK_MODE = "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."


def test_unknown_storage_manager_class_ends_startup(tmp_path: Path, zk_chroot: str) -> None:
    rc, out, err = run_to_exit(tmp_path, zk_chroot, {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager"})
    assert_one_line_failure(rc, out, err, "remote.log.storage.manager.class.name",
                            "io.aiven.kafka.tieredstorage.RemoteStorageManager")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("tiered"), f"{zookeeper}/tiered-{uuid.uuid4().hex[:8]}",
                      overrides={"remote.log.manager.task.interval.ms": "1000"})  # inert while the switch is off
    b.start()
    yield b
    b.kill()


def _create_error(admin: AdminClient, configs: dict) -> KafkaError:
    name = f"t-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(name, 1, 1, config=configs)], operation_timeout=30)[name].result(30)
    return e.value.args[0]


@pytest.mark.parametrize("configs,message", [
    ({"remote.storage.enable": "true"}, DISABLED),
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, DISABLED),  # the switch is checked first
    ({"remote.log.copy.disable": "true"}, ZK_MODE),
    ({"remote.log.delete.on.disable": "true", "remote.storage.enable": "true"}, ZK_MODE),
])
def test_create_topics_refusals(broker: BrokerProcess, configs: dict, message: str) -> None:
    err = _create_error(AdminClient({"bootstrap.servers": broker.bootstrap}), configs)
    assert err.code() == KafkaError.INVALID_CONFIG and err.str() == message


def test_false_values_and_local_retention_accepted(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, config={"remote.storage.enable": "false",
                                                      "local.retention.ms": "1000"})])[name].result(30)
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    for configs, message in (({"remote.storage.enable": "true"},
                              f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): "
                              f"{DISABLED}"),
                             ({"remote.log.copy.disable": "true"}, ZK_MODE)):
        with pytest.raises(KafkaException) as e:
            admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, name,
                                                            incremental_configs=[_set(k, v) for k, v in
                                                                                 configs.items()])])[res].result(30)
        err = e.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG and err.str() == message
    described = admin.describe_configs([res])[res].result(30)
    assert described["remote.storage.enable"].value == "false"
    assert described["local.retention.ms"].value == "1000"


def _set(name: str, value: str):  # noqa: ANN202
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
