"""Fixtures for compatibility tests: a real ZooKeeper and a real broker process per test module."""
from __future__ import annotations

import os

# Every Log command asserts it runs on its partition's owner (broker/storage/log_owner.py), in this process and in the
# brokers the tests start (they inherit the environment): a path that reaches a log from another thread fails its test.
os.environ.setdefault("BROKER_CHECK_LOG_OWNER", "1")

import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import zookeeper  # noqa: F401  (re-exported fixture)
from tests.harness.broker_process import BrokerProcess, running_broker


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:  # noqa: F811
    """One broker started from bin/kafka-server-start.sh, with its own ZooKeeper chroot."""
    with running_broker(Path(tmp_path_factory.mktemp("broker")), f"{zookeeper}/c-{uuid.uuid4().hex[:10]}",
                        broker_id=0, overrides={"num.partitions": "3"}) as b:
        yield b
