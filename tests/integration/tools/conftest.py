"""Fixtures of the tool tests: one project broker per module (bin/kafka-server-start.sh on the session's real
ZooKeeper) and, for the comparison tests, one real Apache Kafka 3.9.1 broker, each in its own chroot."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.broker_process import BrokerProcess, running_broker
from tests.harness.kafka import RealKafkaBroker

#: the same settings for both brokers, so that their answers can be compared
BROKER_SETTINGS = {"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3",
                   "group.initial.rebalance.delay.ms": "0", "transaction.state.log.replication.factor": "1",
                   "transaction.state.log.min.isr": "1", "transaction.state.log.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("tools")), f"{zookeeper}/tools-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides=dict(BROKER_SETTINGS)) as b:
        yield b


@pytest.fixture(scope="module")
def kafka(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKafkaBroker]:
    """A real Kafka 3.9.1 broker (ZooKeeper mode) with the project broker's settings."""
    k = RealKafkaBroker(Path(tmp_path_factory.mktemp("kafka")), f"{zookeeper}/kafka-{uuid.uuid4().hex[:10]}", 0,
                        overrides=dict(BROKER_SETTINGS))
    try:
        k.start()
        yield k
    finally:
        k.stop()
