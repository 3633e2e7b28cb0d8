"""Shared pytest fixtures.

`zookeeper`: a real ZooKeeper (Debian's package) for the whole session, started only if a test asks for it; it
fails loudly (never skips) when Java or the ZooKeeper jar is missing.
`zk_chroot`: a connect string with a fresh chroot per test (`127.0.0.1:port/t-<hex>`), so tests never see each
other's znodes.
"""
from __future__ import annotations

import os

# Every Log command asserts it runs on its partition's owner (broker/storage/log_owner.py), in this process and in the
# brokers the tests start (they inherit the environment): a path that reaches a log from another thread fails its test.
os.environ.setdefault("BROKER_CHECK_LOG_OWNER", "1")

import uuid
from typing import Iterator

import pytest
from hypothesis import settings

# Property tests check values, never time: hypothesis' default 200 ms deadline per example fails them at random on a
# shared 2-core machine (CI runs the process tests beside the unit lane).
settings.register_profile("broker", deadline=None)
settings.load_profile("broker")

from tests.harness.zookeeper import ZooKeeperServer, ZooKeeperUnavailable


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[str]:
    """Connect string (host:port) of a real ZooKeeper server shared by the test session."""
    server = ZooKeeperServer()
    try:
        server.start()
    except ZooKeeperUnavailable as e:
        pytest.fail(f"cannot start ZooKeeper for integration tests: {e}", pytrace=False)
    try:
        yield server.connect_string
    finally:
        server.stop()


@pytest.fixture
def zk_chroot(zookeeper: str) -> Iterator[str]:
    """A connect string with a chroot unique to this test; the chroot is removed afterwards."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    yield zookeeper + chroot
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper)
    try:
        zk.start(timeout=10)
        zk.delete(chroot, recursive=True)
    except Exception:
        pass
    finally:
        zk.stop()
        zk.close()
