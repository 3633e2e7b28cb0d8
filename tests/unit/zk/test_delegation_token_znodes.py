"""Delegation token znodes in Kafka's layout (ZkData DelegationToken*ZNode), and KafkaZkClient's token operations."""
from __future__ import annotations

import json

import pytest

from broker.security.token_cache import TokenInformation
from broker.zk.client import KafkaZkClient
from broker.zk.paths import DelegationTokenChangeNotificationZNode, DelegationTokenInfoZNode
from tests.unit.zk.fake_kazoo import FakeZooKeeper

#: What Kafka 3.9.1's DelegationTokenManagerZk.toJsonCompatibleMap + Json.encodeAsBytes wrote for this token
#: (captured with tests/integration/broker/KafkaSecurityFormats.java token-json; the integration test re-checks it).
KAFKA_JSON = (b'{"issueTimestamp":1000,"renewers":["User%3Abob","User%3Ac%2Fd"],"tokenRequester":"User%3Aadmin",'
              b'"tokenId":"tok1","owner":"User%3Aal%20ice%40x","expiryTimestamp":5000,"maxTimestamp":9000,'
              b'"version":3}')
TOKEN = TokenInformation("tok1", "User:al ice@x", "User:admin", ("User:bob", "User:c/d"), 1000, 9000, 5000)


def test_token_znode_json_is_kafkas() -> None:
    assert json.loads(DelegationTokenInfoZNode.encode(TOKEN)) == json.loads(KAFKA_JSON)
    assert DelegationTokenInfoZNode.decode(KAFKA_JSON) == TOKEN
    assert DelegationTokenInfoZNode.path("tok1") == "/delegation_token/tokens/tok1"
    assert DelegationTokenInfoZNode.decode(b"") is None


def test_older_token_versions_and_refusals() -> None:
    v1 = json.loads(KAFKA_JSON)
    v1["version"] = 1
    del v1["tokenRequester"]  # before KIP-373 the owner was the requester
    t = DelegationTokenInfoZNode.decode(json.dumps(v1).encode())
    assert t is not None and t.token_requester == "User:al ice@x" and t.owner == "User:al ice@x"
    for bad in ({**v1, "version": 4}, {**v1, "version": 0}, {**v1, "owner": "nocolon"}):
        with pytest.raises(ValueError):
            DelegationTokenInfoZNode.decode(json.dumps(bad).encode())


@pytest.fixture
def fake() -> FakeZooKeeper:
    return FakeZooKeeper()


@pytest.fixture
def zk(fake: FakeZooKeeper) -> KafkaZkClient:
    c = KafkaZkClient("fake:2181/kafka", kazoo_client=fake.client())
    c.run_in_background = lambda fn: fn()
    c.start()
    return c


def test_token_operations(zk: KafkaZkClient, fake: FakeZooKeeper) -> None:
    zk.create_delegation_token_paths()
    zk.create_delegation_token_paths()  # idempotent
    assert zk.get_delegation_token_ids() == [] and zk.get_delegation_token_info("tok1") is None
    zk.set_or_create_delegation_token(TOKEN)
    assert zk.get_delegation_token_ids() == ["tok1"] and zk.get_delegation_token_info("tok1") == TOKEN
    zk.set_or_create_delegation_token(TOKEN.with_expiry(7000))
    assert zk.get_delegation_token_info("tok1").expiry_timestamp == 7000  # type: ignore[union-attr]
    zk.create_token_change_notification("tok1")
    fake.now_ms += 1000
    zk.create_token_change_notification("tok2")
    notes = zk.get_token_change_notifications()
    assert [(s, t) for s, t, _ in notes] == [(0, "tok1"), (1, "tok2")]
    assert notes[1][2] - notes[0][2] >= 1000  # creation times, for the 15-minute purge
    assert fake.data(f"/kafka{DelegationTokenChangeNotificationZNode.path}/token_change_0000000000") == b"tok1"
    zk.delete_token_change_notification(0)
    zk.delete_token_change_notification(0)
    assert [s for s, _, _ in zk.get_token_change_notifications()] == [1]
    zk.delete_delegation_token("tok1")
    zk.delete_delegation_token("tok1")
    assert zk.get_delegation_token_info("tok1") is None


def test_notifications_are_listed_even_without_the_paths(zk: KafkaZkClient) -> None:
    assert zk.get_token_change_notifications() == [] and zk.get_delegation_token_ids() == []
