"""ZkAclStore: Kafka's ACL znodes and change notifications, on the in-memory ZooKeeper (and one real-ZooKeeper test).

Two stores on one ensemble stand for two brokers; `kafka_write` writes the way Kafka's own AclAuthorizer (or
kafka-acls --authorizer-properties zookeeper.connect=...) does, to show that ACLs written elsewhere are picked up.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, List, Tuple

import pytest

from broker.cluster.acl_store import (CHANGE_EXPIRATION_MS, MAX_UPDATE_RETRIES, RETRY_BACKOFF_JITTER_MS, RETRY_BACKOFF_MS,
                                      ZkAclStore)
from broker.security.acl import (AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                                 AclOperation as Op, AclPermissionType as Perm, PatternType, ResourcePattern,
                                 ResourcePatternFilter, ResourceType as RT)
from broker.security.acl_zk_format import acl_path, change_notification, encode_acls
from broker.security.authorizer import AclCache
from broker.util.clock import ManualClock
from broker.util.executor import NamedExecutor
from broker.zk.client import KafkaZkClient
from tests.unit.replica.harness import drive
from tests.unit.zk.fake_kazoo import FakeZooKeeper

ALICE_READ = AccessControlEntry("User:alice", "*", Op.READ, Perm.ALLOW)
BOB_WRITE = AccessControlEntry("User:bob", "*", Op.WRITE, Perm.ALLOW)
ORDERS = ResourcePattern(RT.TOPIC, "orders", PatternType.LITERAL)
PREFIX = ResourcePattern(RT.TOPIC, "ord", PatternType.PREFIXED)


class InlineCalls:
    """The ZooKeeper executor, run inline (the fake ensemble is single-threaded)."""

    async def run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        return fn(*args, **kw)


def client(zk: FakeZooKeeper) -> KafkaZkClient:
    c = KafkaZkClient("fake:2181/kafka", kazoo_client=zk.client())
    c.run_in_background = lambda fn: fn()
    c.start()
    return c


class EnsembleClock(ManualClock):
    """The store's ManualClock, whose wall reading is the fake ensemble's (the ctimes the purge compares with)."""

    def __init__(self, zk: FakeZooKeeper) -> None:
        super().__init__(zk.now_ms)
        self.zk = zk

    def wall_ms(self) -> int:
        return self.zk.now_ms


def store(zk: FakeZooKeeper, **kw: Any) -> Tuple[ZkAclStore, AclCache, KafkaZkClient]:
    c = client(zk)
    cache = AclCache()
    s = ZkAclStore(c, InlineCalls(), cache, clock=EnsembleClock(zk), **kw)  # type: ignore[arg-type]
    return s, cache, c


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def kafka_write(c: KafkaZkClient, pattern: ResourcePattern, entries: List[AccessControlEntry]) -> None:
    """What a Kafka broker's AclAuthorizer writes: the pattern's znode, then a change notification."""
    path = acl_path(pattern)
    if c.get_data_and_stat(path) is None:
        c.create_if_absent(path, encode_acls(entries))
    else:
        c.kazoo.set(path, encode_acls(entries))
    parent, data = change_notification(pattern)
    c.create_sequential(f"{parent}/acl_changes_", data)


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


def binding_filter(rt: RT = RT.ANY, name: Any = None, pt: PatternType = PatternType.ANY, principal: Any = None,
                   op: Op = Op.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(rt, name, pt), AccessControlEntryFilter(principal, None, op,
                                                                                           Perm.ANY))


def test_start_creates_kafkas_paths_and_loads_every_acl() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        writer = client(zk)
        writer.ensure_paths("/kafka-acl/Unknowable")
        writer.create_if_absent(acl_path(ORDERS), encode_acls([ALICE_READ]))
        writer.create_if_absent(acl_path(PREFIX), encode_acls([BOB_WRITE]))
        writer.create_if_absent("/kafka-acl/Topic/broken", b"{not json")  # read as no ACLs, logged
        s, cache, _ = store(zk)
        await s.start()
        for p in ("/kafka/kafka-acl", "/kafka/kafka-acl-extended/prefixed", "/kafka/kafka-acl-changes",
                  "/kafka/kafka-acl-extended-changes"):
            assert p in zk.dump("/kafka")
        assert cache.acls(ORDERS) == {ALICE_READ} and cache.acls(PREFIX) == {BOB_WRITE} and len(cache) == 2
        await s.stop()
    run(main)


def test_create_writes_kafkas_znodes_and_notifications_and_updates_the_cache_at_once() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, _ = store(zk)
        await s.start()
        results = await s.create_acls([AclBinding(ORDERS, ALICE_READ), AclBinding(ORDERS, BOB_WRITE),
                                       AclBinding(PREFIX, BOB_WRITE)])
        assert results == [None, None, None]
        assert cache.acls(ORDERS) == {ALICE_READ, BOB_WRITE}  # before any notification was processed
        tree = zk.dump("/kafka")
        assert json.loads(tree["/kafka/kafka-acl/Topic/orders"]) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        assert "/kafka/kafka-acl-extended/prefixed/Topic/ord" in tree
        assert tree["/kafka/kafka-acl-changes/acl_changes_0000000000"] == b"TOPIC:orders"
        assert json.loads(tree["/kafka/kafka-acl-extended-changes/acl_changes_0000000000"]) == {
            "version": 1, "resourceType": "TOPIC", "name": "ord", "patternType": "PREFIXED"}
        # the same ACL again changes nothing and announces nothing
        assert await s.create_acls([AclBinding(ORDERS, ALICE_READ)]) == [None]
        assert sorted(p for p in zk.dump("/kafka/kafka-acl-changes") if "acl_changes_" in p) == [
            "/kafka/kafka-acl-changes/acl_changes_0000000000"]
        await s.stop()
    run(main)


def test_other_brokers_follow_the_change_notifications() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        a, cache_a, writer = store(zk)
        b, cache_b, _ = store(zk)
        await a.start()
        await b.start()
        await a.create_acls([AclBinding(ORDERS, ALICE_READ)])
        await settle()
        assert cache_b.acls(ORDERS) == {ALICE_READ}
        kafka_write(writer, PREFIX, [BOB_WRITE])  # as a Kafka broker or kafka-acls --authorizer-properties would
        await settle()
        assert cache_a.acls(PREFIX) == {BOB_WRITE} and cache_b.acls(PREFIX) == {BOB_WRITE}
        deleted = await b.delete_acls([binding_filter(RT.TOPIC, "orders", PatternType.LITERAL)])
        assert deleted == [[(AclBinding(ORDERS, ALICE_READ), None)]]
        await settle()
        assert cache_a.acls(ORDERS) == frozenset() and "/kafka/kafka-acl/Topic/orders" not in zk.dump("/kafka")
        writer.create_sequential("/kafka-acl-changes/acl_changes_", b"no colon here")  # malformed: skipped
        kafka_write(writer, ORDERS, [BOB_WRITE])
        await settle()
        assert cache_a.acls(ORDERS) == {BOB_WRITE}
        await a.stop()
        await b.stop()
    run(main)


def test_delete_attributes_each_binding_to_the_first_matching_filter_and_reaches_uncached_patterns() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, writer = store(zk)
        await s.start()
        await s.create_acls([AclBinding(ORDERS, ALICE_READ), AclBinding(ORDERS, BOB_WRITE),
                             AclBinding(PREFIX, BOB_WRITE)])
        hidden = ResourcePattern(RT.GROUP, "g", PatternType.LITERAL)
        writer.create_if_absent(acl_path(hidden), encode_acls([ALICE_READ]))  # in ZooKeeper, not announced
        results = await s.delete_acls([
            binding_filter(principal="User:bob"),  # matches orders/bob and ord*/bob
            binding_filter(RT.TOPIC, "orders", PatternType.MATCH),  # would match the same: first filter wins
            binding_filter(RT.GROUP, "g", PatternType.ANY),  # definite: reaches the uncached znode
        ])
        assert results[0] == [(AclBinding(ORDERS, BOB_WRITE), None), (AclBinding(PREFIX, BOB_WRITE), None)]
        assert results[1] == [(AclBinding(ORDERS, ALICE_READ), None)]
        assert results[2] == [(AclBinding(hidden, ALICE_READ), None)]
        assert len(cache) == 0
        tree = zk.dump("/kafka")
        assert not [p for p in (ORDERS, PREFIX, hidden) if "/kafka" + acl_path(p) in tree]  # znodes deleted
        await s.stop()
    run(main)


def test_compare_and_set_retries_when_another_broker_wrote_meanwhile() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, c = store(zk)
        other = client(zk)
        await s.start()
        await s.create_acls([AclBinding(ORDERS, ALICE_READ)])
        real_set = c.set_data_if_version
        raced = []

        def racing_set(path: str, data: bytes, version: int) -> bool:
            if not raced:  # another broker adds its ACL between our read and our write
                raced.append(True)
                other.kazoo.set(path, encode_acls([ALICE_READ, AccessControlEntry("User:carol", "*", Op.ALL,
                                                                                  Perm.DENY)]))
            return real_set(path, data, version)
        c.set_data_if_version = racing_set  # type: ignore[method-assign]
        started = s.clock.mono_ms()
        # the retry waits its back-off on the store's clock, moved by drive
        assert await drive(s.clock, s.create_acls([AclBinding(ORDERS, BOB_WRITE)])) == [None]
        assert RETRY_BACKOFF_MS <= s.clock.mono_ms() - started < RETRY_BACKOFF_MS + RETRY_BACKOFF_JITTER_MS
        assert {e.principal for e in cache.acls(ORDERS)} == {"User:alice", "User:bob", "User:carol"}
        stored = json.loads(zk.dump("/kafka")["/kafka/kafka-acl/Topic/orders"])
        assert len(stored["acls"]) == 3
        await s.stop()
    run(main)


def test_write_failure_is_reported_per_binding() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, c = store(zk)
        await s.start()
        c.create_if_absent = lambda path, data: False  # type: ignore[method-assign]  # always "exists"
        c.get_data_and_stat = lambda path: None  # type: ignore[method-assign]        # ... and never readable
        started = s.clock.mono_ms()
        assert await drive(s.clock, s.create_acls([AclBinding(ORDERS, ALICE_READ)])) == [(-1, None)]
        assert s.clock.mono_ms() - started >= MAX_UPDATE_RETRIES * RETRY_BACKOFF_MS  # every retry backed off
        assert len(cache) == 0
    run(main)


def test_notifications_older_than_fifteen_minutes_are_purged() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        a, _, writer = store(zk)
        await a.start()
        await a.create_acls([AclBinding(ORDERS, ALICE_READ), AclBinding(PREFIX, BOB_WRITE)])
        zk.now_ms += CHANGE_EXPIRATION_MS - 1000
        await a.create_acls([AclBinding(ORDERS, BOB_WRITE)])  # acl_changes_0000000001, younger
        await settle()
        zk.now_ms += 2000  # the first two notifications are now more than 15 minutes old
        kafka_write(writer, ORDERS, [ALICE_READ])  # any processing purges
        await settle()
        assert sorted(p.rsplit("/", 1)[1] for p in zk.dump("/kafka/kafka-acl-changes/")) == [
            "acl_changes_0000000001", "acl_changes_0000000002"]
        assert not [p for p in zk.dump("/kafka/kafka-acl-extended-changes/")]
        b, cache_b, _ = store(zk)  # a broker starting later purges at start-up too
        zk.now_ms += CHANGE_EXPIRATION_MS
        await b.start()
        assert zk.dump("/kafka/kafka-acl-changes/") == {}
        assert cache_b.acls(ORDERS) == {ALICE_READ}
        await a.stop()
        await b.stop()
    run(main)


def test_a_new_session_reloads_everything() -> None:
    """After a session expiry the notifications of the gap may be purged already: the store reloads every ACL."""
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, c = store(zk)
        writer = client(zk)
        await s.start()
        await s.create_acls([AclBinding(ORDERS, ALICE_READ)])
        writer.create_if_absent(acl_path(PREFIX), encode_acls([BOB_WRITE]))  # its notification "purged"
        writer.delete_if_version(acl_path(ORDERS), -1)
        zk.expire_session(c.kazoo)
        await settle()
        assert cache.acls(PREFIX) == {BOB_WRITE} and cache.acls(ORDERS) == frozenset()
        await s.stop()
    run(main)


def test_two_stores_on_real_zookeeper(zk_chroot: str) -> None:
    """The same against a real ZooKeeper: kazoo's watch thread hands notifications to the event loop."""
    async def main() -> None:
        executors = [NamedExecutor("zk-a", 2), NamedExecutor("zk-b", 2)]
        clients = [KafkaZkClient(zk_chroot, 6000) for _ in executors]
        stores = []
        for c, ex in zip(clients, executors):
            await ex.run(c.start)
            stores.append(ZkAclStore(c, ex, AclCache()))
        try:
            for s in stores:
                await s.start()
            a, b = stores
            assert await a.create_acls([AclBinding(ORDERS, ALICE_READ)]) == [None]
            deadline = time.monotonic() + 10
            while b.cache.acls(ORDERS) != {ALICE_READ} and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert b.cache.acls(ORDERS) == {ALICE_READ}
            names = clients[0].get_children("/kafka-acl-changes")
            assert len(names) == 1 and len(names[0]) == len("acl_changes_") + 10
            await b.delete_acls([binding_filter(RT.TOPIC, "orders", PatternType.LITERAL)])
            deadline = time.monotonic() + 10
            while a.cache.acls(ORDERS) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert a.cache.acls(ORDERS) == frozenset()
        finally:
            for s, c, ex in zip(stores, clients, executors):
                await s.stop()
                await ex.run(c.close)
                ex.shutdown()
    run(main)


@pytest.mark.parametrize("pattern_type", [PatternType.LITERAL, PatternType.PREFIXED])
def test_filter_to_resources(pattern_type: PatternType) -> None:
    from broker.cluster.acl_store import filter_to_resources
    assert filter_to_resources(ResourcePatternFilter(RT.TOPIC, "x", pattern_type)) == {
        ResourcePattern(RT.TOPIC, "x", pattern_type)}
    assert len(filter_to_resources(ResourcePatternFilter(RT.TOPIC, "x", PatternType.ANY))) == 2
    assert filter_to_resources(ResourcePatternFilter(RT.TOPIC, "x", PatternType.MATCH)) == set()
    assert filter_to_resources(ResourcePatternFilter(RT.ANY, "x", pattern_type)) == set()


def test_failed_notification_processing_is_retried_a_second_later_on_the_clock() -> None:
    async def main() -> None:
        zk = FakeZooKeeper()
        s, cache, c = store(zk)
        writer = client(zk)
        await s.start()
        real = c.get_children
        failures: List[str] = []

        def failing(path: str, *args: Any, **kw: Any) -> Any:
            if not failures:
                failures.append(path)
                raise RuntimeError("ZooKeeper hiccup")
            return real(path, *args, **kw)
        c.get_children = failing  # type: ignore[method-assign]
        kafka_write(writer, ORDERS, [ALICE_READ])
        await settle()
        assert failures and cache.acls(ORDERS) == frozenset()
        s.clock.advance(999)
        await settle()
        assert cache.acls(ORDERS) == frozenset()  # RETRY_PROCESSING_S has not passed on the store's clock
        s.clock.advance(1)
        await settle()
        assert cache.acls(ORDERS) == {ALICE_READ}
        await s.stop()
    run(main)
