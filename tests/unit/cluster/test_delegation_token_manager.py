"""DelegationTokenManager on an in-memory ZooKeeper: Kafka's token lifecycle, notifications between brokers, the
controller's expiry scan and the 15-minute notification purge."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, List, Optional

import pytest

from broker.cluster.delegation_token_manager import CHANGE_EXPIRATION_MS, DelegationTokenManager, TokenConfig
from broker.config.kafka_config import KafkaConfig
from broker.errors import ErrorCode
from broker.security.token_cache import DelegationTokenCache, create_hmac
from broker.util.clock import ManualClock
from broker.zk.client import KafkaZkClient
from tests.unit.zk.fake_kazoo import FakeZooKeeper

SECRET = "s3cret"
CONFIG = TokenConfig(SECRET, max_lifetime_ms=100_000, expiry_time_ms=10_000, expiry_check_interval_ms=3_600_000)


class InlineCalls:
    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class FakeController:
    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.listeners: List[Callable[[int], None]] = []

    def add_controller_change_listener(self, listener: Callable[[int], None]) -> None:
        self.listeners.append(listener)


def cheap_credentials(password: str) -> dict:
    """The real derivation costs two PBKDF2 runs per token; the tests here do not log in."""
    return {}


class Broker:
    def __init__(self, fake: FakeZooKeeper, clock: ManualClock, config: TokenConfig = CONFIG,
                 controller: Optional[FakeController] = None) -> None:
        self.zk = KafkaZkClient("fake:2181/k", kazoo_client=fake.client())
        self.zk.run_in_background = lambda fn: fn()
        self.zk.start()
        self.cache = DelegationTokenCache(cheap_credentials)
        self.tm = DelegationTokenManager(config, self.zk, InlineCalls(), self.cache,  # type: ignore[arg-type]
                                         controller, clock=clock)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
def fake() -> FakeZooKeeper:
    return FakeZooKeeper()


def test_config_from_broker_config() -> None:
    base = {"broker.id": "0", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x"}

    def cfg(**extra: str) -> TokenConfig:
        return TokenConfig.from_config(KafkaConfig({**base, **extra}, warn_unknown=False).get)
    assert not cfg().enabled and cfg().max_lifetime_ms == 604800000 and cfg().expiry_time_ms == 86400000
    assert cfg().expiry_check_interval_ms == 3600000
    assert cfg(**{"delegation.token.secret.key": "k"}).secret_key == "k"
    assert cfg(**{"delegation.token.master.key": "m"}).secret_key == "m"  # the deprecated name
    assert cfg(**{"delegation.token.secret.key": "k", "delegation.token.master.key": "m"}).secret_key == "k"
    assert not cfg(**{"delegation.token.secret.key": "", "delegation.token.master.key": "m"}).enabled
    c = cfg(**{"delegation.token.secret.key": "k", "delegation.token.max.lifetime.ms": "5",
               "delegation.token.expiry.time.ms": "6", "delegation.token.expiry.check.interval.ms": "7"})
    assert (c.max_lifetime_ms, c.expiry_time_ms, c.expiry_check_interval_ms) == (5, 6, 7)


def test_disabled_without_a_secret(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        b = Broker(fake, ManualClock(1_000_000), TokenConfig(None))
        await b.tm.startup()
        assert "/k/delegation_token" not in fake.dump("/k")  # Kafka creates the paths only when enabled
        r = await b.tm.create_token("User:a", "User:a", [], -1)
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED and r.token_id == "" and r.hmac == b""
        assert await b.tm.renew_token("User:a", b"x", -1) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)
        assert await b.tm.expire_token("User:a", b"x", -1) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)
        await b.tm.shutdown()
    asyncio.run(main())


def test_create_renew_expire_as_kafka(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        clock = ManualClock(1_000_000)
        b = Broker(fake, clock)
        await b.tm.startup()
        r = await b.tm.create_token("User:alice", "User:admin", ["User:bob"], -1)
        assert r.error_code == 0 and len(r.token_id) == 22 and r.hmac == create_hmac(r.token_id, SECRET)
        assert (r.issue_timestamp, r.max_timestamp, r.expiry_timestamp) == (1_000_000, 1_100_000, 1_010_000)
        stored = json.loads(fake.data(f"/k/delegation_token/tokens/{r.token_id}"))
        assert stored == {"version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aadmin",
                          "renewers": ["User%3Abob"], "issueTimestamp": 1_000_000, "maxTimestamp": 1_100_000,
                          "expiryTimestamp": 1_010_000, "tokenId": r.token_id}
        notes = b.zk.get_token_change_notifications()
        assert [t for _, t, _ in notes] == [r.token_id]
        # the requested lifetime is capped by delegation.token.max.lifetime.ms, the expiry by the lifetime
        short = await b.tm.create_token("User:alice", "User:alice", [], 5_000)
        assert short.max_timestamp - short.issue_timestamp == 5_000 and short.expiry_timestamp == short.max_timestamp
        long = await b.tm.create_token("User:alice", "User:alice", [], 10**9)
        assert long.max_timestamp - long.issue_timestamp == 100_000

        h = r.hmac
        clock.advance(1_000)
        assert await b.tm.renew_token("User:bob", h, 50_000) == (0, 1_051_000)  # a renewer may renew
        assert b.cache.token(r.token_id).expiry_timestamp == 1_051_000  # type: ignore[union-attr]
        assert await b.tm.renew_token("User:alice", h, -1) == (0, 1_011_000)  # negative: expiry.time.ms
        assert await b.tm.renew_token("User:alice", h, 10**9) == (0, 1_100_000)  # never past the max
        assert await b.tm.renew_token("User:admin", h, 1) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
        assert await b.tm.renew_token("User:alice", b"nope", 1) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)
        assert await b.tm.expire_token("User:carol", h, 1) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
        assert await b.tm.expire_token("User:alice", h, 2_000) == (0, 1_003_000)
        clock.advance(2_001)  # at 1_003_001
        assert await b.tm.renew_token("User:alice", h, 1) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
        assert await b.tm.expire_token("User:alice", h, 1) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
        assert await b.tm.expire_token("User:bob", h, -1) == (0, 1_003_001)  # negative: removed at once
        assert b.cache.token(r.token_id) is None and b.zk.get_delegation_token_info(r.token_id) is None
        assert await b.tm.expire_token("User:bob", h, -1) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)
        await b.tm.shutdown()
    asyncio.run(main())


def test_every_broker_follows_the_notifications(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        clock = ManualClock(1_000_000)
        a, b = Broker(fake, clock), Broker(fake, clock)
        await a.tm.startup()
        await b.tm.startup()
        r = await a.tm.create_token("User:alice", "User:alice", [], -1)
        await settle()
        assert b.cache.token(r.token_id) == a.cache.token(r.token_id)
        assert b.cache.token_for_hmac(r.hmac) is not None  # b recomputed the HMAC from the shared secret
        assert await b.tm.renew_token("User:alice", r.hmac, 5_000) == (0, clock.wall_ms() + 5_000)
        await settle()
        assert a.cache.token(r.token_id).expiry_timestamp == clock.wall_ms() + 5_000  # type: ignore[union-attr]
        assert await a.tm.expire_token("User:alice", r.hmac, -1) == (0, clock.wall_ms())
        await settle()
        assert b.cache.token(r.token_id) is None
        await a.tm.shutdown()
        await b.tm.shutdown()
    asyncio.run(main())


def test_start_up_loads_existing_tokens_and_skips_unreadable_ones(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        clock = ManualClock(1_000_000)
        a = Broker(fake, clock)
        await a.tm.startup()
        r = await a.tm.create_token("User:alice", "User:alice", ["User:bob"], -1)
        a.zk.kazoo.create("/delegation_token/tokens/corrupt", b'{"version":99}')
        b = Broker(fake, clock)
        await b.tm.startup()
        assert b.cache.token_ids() == [r.token_id] and b.cache.token(r.token_id) == a.cache.token(r.token_id)
        # a token written by another broker with a different secret key does not authenticate here
        other = Broker(fake, clock, TokenConfig("other-secret"))
        await other.tm.startup()
        assert other.cache.token_for_hmac(r.hmac) is None
        for x in (a, b, other):
            await x.tm.shutdown()
    asyncio.run(main())


def test_old_notifications_are_purged(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        clock = ManualClock(fake.now_ms)
        a = Broker(fake, clock)
        await a.tm.startup()
        r = await a.tm.create_token("User:alice", "User:alice", [], -1)
        await settle()
        assert len(a.zk.get_token_change_notifications()) == 1
        fake.now_ms += CHANGE_EXPIRATION_MS + 1000
        clock.advance(CHANGE_EXPIRATION_MS + 1000)
        await a.tm.renew_token("User:alice", r.hmac, 1000)
        await settle()
        assert [t for _, t, _ in a.zk.get_token_change_notifications()] == [r.token_id]  # only the new one
        await a.tm.shutdown()
    asyncio.run(main())


def test_the_controller_removes_expired_tokens(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        clock = ManualClock(1_000_000)
        ctl, other = FakeController(False), FakeController(False)
        a, b = Broker(fake, clock, controller=ctl), Broker(fake, clock, controller=other)
        await a.tm.startup()
        await b.tm.startup()
        keep = await a.tm.create_token("User:alice", "User:alice", [], -1)
        clock.advance(1)
        gone = await a.tm.create_token("User:alice", "User:alice", [], 500)
        clock.advance(1_000)
        await settle()
        assert sorted(b.cache.token_ids()) == sorted([keep.token_id, gone.token_id])  # not the controller: kept
        ctl.is_active = True
        for listener in ctl.listeners:  # becoming controller scans at once, as Kafka's failover
            listener(0)
        await settle()
        assert a.cache.token_ids() == [keep.token_id] and a.zk.get_delegation_token_ids() == [keep.token_id]
        await settle()
        assert b.cache.token_ids() == [keep.token_id]
        clock.advance(20_000)
        assert await a.tm.expire_tokens() == 1 and a.zk.get_delegation_token_ids() == []
        await a.tm.shutdown()
        await b.tm.shutdown()
    asyncio.run(main())


def test_describe_filter_returns_hmacs(fake: FakeZooKeeper) -> None:
    async def main() -> None:
        b = Broker(fake, ManualClock(1_000_000))
        await b.tm.startup()
        r1 = await b.tm.create_token("User:alice", "User:alice", [], -1)
        await b.tm.create_token("User:bob", "User:bob", [], -1)
        got = b.tm.get_tokens(lambda t: t.owner == "User:alice")
        assert [(t.token_id, h) for t, h in got] == [(r1.token_id, r1.hmac)]
        await b.tm.shutdown()
    asyncio.run(main())


def test_token_keys_pass_the_start_up_security_check() -> None:
    from broker.config.security_keys import unsupported_security_key
    keys = {"delegation.token.secret.key": "k", "delegation.token.master.key": "m",
            "delegation.token.max.lifetime.ms": "1", "delegation.token.expiry.time.ms": "1",
            "delegation.token.expiry.check.interval.ms": "1"}
    assert unsupported_security_key(keys) is None
    assert unsupported_security_key({"delegation.token.unknown": "1"}) == "delegation.token.unknown"
    assert unsupported_security_key({"listener.name.x.delegation.token.secret.key": "k"}) is not None
