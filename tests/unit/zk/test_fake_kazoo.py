"""The in-memory ZooKeeper behaves as ZooKeeper and kazoo do for everything the broker relies on."""
from __future__ import annotations

import pytest
from kazoo.exceptions import (BadVersionError, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
                              NotEmptyError, RolledBackError, RuntimeInconsistency)
from kazoo.protocol.states import EventType, KazooState

from tests.unit.zk.fake_kazoo import FakeZooKeeper


@pytest.fixture
def zk() -> FakeZooKeeper:
    return FakeZooKeeper()


def started(zk: FakeZooKeeper):
    c = zk.client()
    c.start()
    return c


def test_create_get_set_versions_and_stats(zk: FakeZooKeeper) -> None:
    c = started(zk)
    assert c.create("/a", b"x") == "/a"
    data, st = c.get("/a")
    assert data == b"x" and st.version == 0 and st.czxid == st.mzxid and st.ephemeralOwner == 0
    st2 = c.set("/a", b"y", version=0)
    assert st2.version == 1 and st2.czxid == st.czxid and st2.mzxid > st.mzxid
    with pytest.raises(BadVersionError):
        c.set("/a", b"z", version=0)
    with pytest.raises(NodeExistsError):
        c.create("/a")
    with pytest.raises(NoNodeError):
        c.create("/missing/child")
    assert c.create("/p/q/r", b"1", makepath=True) == "/p/q/r"
    assert c.get_children("/p") == ["q"]
    assert c.exists("/nope") is None


def test_sequence_numbers_come_from_the_parent_cversion(zk: FakeZooKeeper) -> None:
    c = started(zk)
    c.create("/n")
    assert c.create("/n/x_", b"", sequence=True) == "/n/x_0000000000"
    c.create("/n/other")
    assert c.create("/n/x_", b"", sequence=True) == "/n/x_0000000002"


def test_delete_rules(zk: FakeZooKeeper) -> None:
    c = started(zk)
    c.create("/d/e/f", makepath=True)
    with pytest.raises(NotEmptyError):
        c.delete("/d")
    with pytest.raises(BadVersionError):
        c.delete("/d/e/f", version=3)
    c.delete("/d", recursive=True)
    assert c.exists("/d") is None
    with pytest.raises(NoNodeError):
        c.delete("/d")


def test_ephemerals_belong_to_the_session(zk: FakeZooKeeper) -> None:
    a, b = started(zk), started(zk)
    a.create("/eph", b"", ephemeral=True)
    assert b.exists("/eph").ephemeralOwner == a.client_id[0]
    with pytest.raises(NoChildrenForEphemeralsError):
        a.create("/eph/child")
    old = a.client_id[0]
    states = []
    a.add_listener(states.append)
    zk.expire_session(a)
    assert b.exists("/eph") is None
    assert states == [KazooState.LOST, KazooState.CONNECTED] and a.client_id[0] != old
    a.create("/eph", b"", ephemeral=True)
    a.stop()
    assert b.exists("/eph") is None


def test_failed_transaction_results_and_rollback(zk: FakeZooKeeper) -> None:
    c = started(zk)
    c.create("/v", b"0")
    tx = c.transaction()
    tx.create("/new", b"")
    tx.set_data("/v", b"1", version=5)
    tx.delete("/v")
    results = tx.commit()
    assert isinstance(results[0], RolledBackError)
    assert isinstance(results[1], BadVersionError)
    assert isinstance(results[2], RuntimeInconsistency)
    assert c.exists("/new") is None and c.get("/v")[0] == b"0"
    tx = c.transaction()
    tx.check("/v", 0)
    tx.create("/new", b"n")
    tx.set_data("/v", b"1")
    tx.delete("/new")
    ok = tx.commit()
    assert ok[0] is True and ok[1] == "/new" and ok[2].version == 1 and ok[3] is True


def test_one_shot_watches(zk: FakeZooKeeper) -> None:
    a, b = started(zk), started(zk)
    events = []
    assert a.exists("/w", watch=events.append) is None
    b.create("/w", b"1")
    a.get("/w", watch=events.append)
    b.set("/w", b"2")
    b.set("/w", b"3")  # no watch left: not seen
    a.get_children("/", watch=events.append)
    b.create("/w2")
    assert [(e.type, e.path) for e in events] == [(EventType.CREATED, "/w"), (EventType.CHANGED, "/w"),
                                                  (EventType.CHILD, "/")]


def test_kazoo_recipes_run_on_the_fake(zk: FakeZooKeeper) -> None:
    a, b = started(zk), started(zk)
    a.create("/kids")
    seen: list = []
    a.ChildrenWatch("/kids", lambda children: seen.append(sorted(children)))
    data_seen: list = []
    a.DataWatch("/thing", lambda data, stat: data_seen.append(data))
    b.create("/kids/x")
    b.create("/kids/y")
    b.delete("/kids/x")
    b.create("/thing", b"1")
    b.set("/thing", b"2")
    b.delete("/thing")
    assert seen == [[], ["x"], ["x", "y"], ["y"]]
    assert data_seen == [None, b"1", b"2", None]
    # the recipes re-arm after a session expiry
    zk.expire_session(a)
    b.create("/kids/z")
    assert seen[-1] == ["y", "z"]


def test_chroot(zk: FakeZooKeeper) -> None:
    c = started(zk)
    c.ensure_path("/root")
    c.chroot = "/root"
    assert c.create("/x", b"1") == "/x"
    assert zk.data("/root/x") == b"1"
    tx = c.transaction()
    tx.create("/y", b"")
    assert tx.commit() == ["/y"]
    assert c.get_children("/") == ["x", "y"]
