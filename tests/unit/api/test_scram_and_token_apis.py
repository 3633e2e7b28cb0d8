"""The SCRAM credential and delegation token API handlers: Kafka's refusals, authorization and answers, with
requests decoded from real frames and the collaborators in memory."""
from __future__ import annotations

import asyncio
import hashlib
from types import SimpleNamespace
from typing import Any, Optional, Set, Tuple

import pytest

from broker.api import delegation_tokens as dt
from broker.api import user_scram_credentials as usc
from broker.api.authz import Authz
from broker.api.dispatcher import ConnectionContext, RequestContext
from broker.cluster.delegation_token_manager import DelegationTokenManager, TokenConfig
from broker.cluster.scram_credential_admin import ScramCredentialAdmin
from broker.errors import ErrorCode
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.security.acl import AclOperation, ResourceType
from broker.security.token_cache import DelegationTokenCache
from broker.zk.client import KafkaZkClient
from tests.unit.zk.fake_kazoo import FakeZooKeeper


class InlineCalls:
    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class RuleAuthz(Authz):
    """Allows exactly the (operation, resource type, name) triples given, and records every question."""

    enabled = True

    def __init__(self, allowed: Set[Tuple[AclOperation, ResourceType, str]] = frozenset()) -> None:  # type: ignore
        self.rules = set(allowed)
        self.asked: list = []

    def allowed(self, ctx: Any, operation: AclOperation, resource_type: ResourceType, name: str,
                **_kw: Any) -> bool:
        self.asked.append((operation, resource_type, name))
        return (operation, resource_type, name) in self.rules


def request(key: ApiKey, version: int, body: dict) -> Any:
    frame = memoryview(proto.encode_request(key, version, 1, "t", body))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(key, version, frame, offset)


def roundtrip(key: ApiKey, version: int, response: dict) -> Any:
    parts = proto.encode_response(key, version, 1, response)
    return proto.decode_response_with_header(key, version, b"".join(bytes(p) for p in parts))[1]


def context(key: ApiKey, version: int, protocol: str = "SASL_SSL", principal: str = "User:alice",
            token: bool = False) -> RequestContext:
    conn = ConnectionContext("c1", "127.0.0.1", 5000, "L", protocol)
    conn.principal = principal
    conn.token_authenticated = token
    return RequestContext(conn, SimpleNamespace(api_key=key, api_version=version, correlation_id=1, client_id="t"))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def zk() -> KafkaZkClient:
    c = KafkaZkClient("fake:2181", kazoo_client=FakeZooKeeper().client())
    c.run_in_background = lambda fn: fn()
    c.start()
    return c


def tokens(zk: KafkaZkClient, secret: Optional[str] = "secret") -> DelegationTokenManager:
    cache = DelegationTokenCache(lambda p: {})
    tm = DelegationTokenManager(TokenConfig(secret), zk, InlineCalls(), cache)  # type: ignore[arg-type]
    run(tm.startup())
    return tm


# ------------------------------------------------------------------------------------------------ allowTokenRequests
@pytest.mark.parametrize("protocol,principal,token,allowed", [
    ("PLAINTEXT", "User:ANONYMOUS", False, False), ("PLAINTEXT", "User:alice", False, False),
    ("SSL", "User:ANONYMOUS", False, False), ("SSL", "User:CN=alice", False, True),
    ("SASL_PLAINTEXT", "User:alice", False, True), ("SASL_SSL", "User:alice", False, True),
    ("SASL_SSL", "User:alice", True, False), ("SASL_PLAINTEXT", "User:alice", True, False)])
def test_allow_token_requests(protocol: str, principal: str, token: bool, allowed: bool) -> None:
    assert dt.allow_token_requests(context(ApiKey.CREATE_DELEGATION_TOKEN, 0, protocol, principal, token).connection) \
        is allowed


def test_every_token_api_refuses_a_plaintext_connection(zk: KafkaZkClient) -> None:
    tm = tokens(zk)
    for v in range(dt.CREATE_MAX + 1):
        ctx = context(ApiKey.CREATE_DELEGATION_TOKEN, v, "PLAINTEXT", "User:ANONYMOUS")
        r = roundtrip(ApiKey.CREATE_DELEGATION_TOKEN, v, run(dt.create(ctx, request(
            ApiKey.CREATE_DELEGATION_TOKEN, v, {"renewers": [], "max_lifetime_ms": -1}), tokens=tm, authz=Authz())))
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (r.principal_type, r.principal_name, r.token_id, r.hmac) == ("User", "ANONYMOUS", "", b"")
        assert (r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms) == (-1, -1, -1)
    for key, fn, hi in ((ApiKey.RENEW_DELEGATION_TOKEN, dt.renew, dt.RENEW_MAX),
                        (ApiKey.EXPIRE_DELEGATION_TOKEN, dt.expire, dt.EXPIRE_MAX)):
        for v in range(hi + 1):
            body = {"hmac": b"x", "renew_period_ms": 1, "expiry_time_period_ms": 1}
            r = roundtrip(key, v, run(fn(context(key, v, "PLAINTEXT"), request(key, v, body), tokens=tm)))
            assert (r.error_code, r.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    for v in range(dt.DESCRIBE_MAX + 1):
        r = roundtrip(ApiKey.DESCRIBE_DELEGATION_TOKEN, v, run(dt.describe(
            context(ApiKey.DESCRIBE_DELEGATION_TOKEN, v, "PLAINTEXT"),
            request(ApiKey.DESCRIBE_DELEGATION_TOKEN, v, {"owners": None}), tokens=tm, authz=Authz())))
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED and r.tokens == []


def test_token_auth_disabled_without_a_secret(zk: KafkaZkClient) -> None:
    tm = tokens(zk, None)
    ctx = context(ApiKey.CREATE_DELEGATION_TOKEN, 3)
    r = run(dt.create(ctx, request(ApiKey.CREATE_DELEGATION_TOKEN, 3, {"renewers": [], "max_lifetime_ms": -1}),
                      tokens=tm, authz=Authz()))
    assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED and r["principal_name"] == "alice"
    r = run(dt.describe(context(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3),
                        request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}), tokens=tm, authz=Authz()))
    assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    for key, fn in ((ApiKey.RENEW_DELEGATION_TOKEN, dt.renew), (ApiKey.EXPIRE_DELEGATION_TOKEN, dt.expire)):
        r = run(fn(context(key, 2), request(key, 2, {"hmac": b"x", "renew_period_ms": 1,
                                                     "expiry_time_period_ms": 1}), tokens=tm))
        assert (r["error_code"], r["expiry_timestamp_ms"]) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, -1)


def create(tm: DelegationTokenManager, authz: Authz, principal: str = "User:alice", owner: Optional[str] = None,
           renewers: Tuple[str, ...] = (), version: int = 3) -> Any:
    body: dict = {"renewers": [dict(zip(("principal_type", "principal_name"), r.split(":", 1))) for r in renewers],
                  "max_lifetime_ms": -1, "owner_principal_type": None, "owner_principal_name": None}
    if owner:
        body["owner_principal_type"], body["owner_principal_name"] = owner.split(":", 1)
    ctx = context(ApiKey.CREATE_DELEGATION_TOKEN, version, principal=principal)
    return roundtrip(ApiKey.CREATE_DELEGATION_TOKEN, version, run(dt.create(
        ctx, request(ApiKey.CREATE_DELEGATION_TOKEN, version, body), tokens=tm, authz=authz)))


def test_create_for_oneself_needs_no_acl_and_another_owner_needs_create_tokens(zk: KafkaZkClient) -> None:
    tm = tokens(zk)
    authz = RuleAuthz()
    r = create(tm, authz, renewers=("User:bob",))
    assert r.error_code == 0 and (r.principal_name, r.token_requester_principal_name) == ("alice", "alice")
    assert len(r.hmac) == 64 and authz.asked == []
    r = create(tm, authz, owner="User:carol")
    assert r.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED and r.principal_name == "carol"
    assert authz.asked == [(AclOperation.CREATE_TOKENS, ResourceType.USER, "User:carol")]
    authz.rules.add((AclOperation.CREATE_TOKENS, ResourceType.USER, "User:carol"))
    r = create(tm, authz, owner="User:carol")
    assert r.error_code == 0 and (r.principal_name, r.token_requester_principal_name) == ("carol", "alice")
    assert tm.cache.token(r.token_id).token_requester == "User:alice"  # type: ignore[union-attr]
    r = create(tm, authz, renewers=("Group:ops",))
    assert r.error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
    r = create(tm, authz, version=0)
    assert r.error_code == 0 and r.principal_name == "alice"


def test_renew_and_expire_through_the_handlers(zk: KafkaZkClient) -> None:
    tm = tokens(zk)
    made = create(tm, RuleAuthz(), renewers=("User:bob",))

    def call(key: ApiKey, fn: Any, principal: str, hmac: bytes, period: int, token: bool = False) -> Tuple[int, int]:
        r = run(fn(context(key, 1, principal=principal, token=token), request(key, 1, {
            "hmac": hmac, "renew_period_ms": period, "expiry_time_period_ms": period}), tokens=tm))
        return r["error_code"], r["expiry_timestamp_ms"]
    code, expiry = call(ApiKey.RENEW_DELEGATION_TOKEN, dt.renew, "User:bob", made.hmac, 1000)
    assert code == 0 and expiry > made.issue_timestamp_ms
    assert call(ApiKey.RENEW_DELEGATION_TOKEN, dt.renew, "User:eve", made.hmac, 1000)[0] == \
        ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert call(ApiKey.RENEW_DELEGATION_TOKEN, dt.renew, "User:alice", made.hmac, 1000, token=True)[0] == \
        ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert call(ApiKey.EXPIRE_DELEGATION_TOKEN, dt.expire, "User:alice", b"\x00" * 64, -1)[0] == \
        ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert call(ApiKey.EXPIRE_DELEGATION_TOKEN, dt.expire, "User:alice", made.hmac, -1)[0] == 0
    assert tm.cache.token(made.token_id) is None


def test_describe_filters_as_kafka(zk: KafkaZkClient) -> None:
    tm = tokens(zk)
    admin_authz = RuleAuthz({(AclOperation.CREATE_TOKENS, ResourceType.USER, "User:dave")})
    a = create(tm, admin_authz, renewers=("User:bob",))                 # alice's, renewable by bob
    c = create(tm, admin_authz, principal="User:carol")                 # carol's
    d = create(tm, admin_authz, owner="User:dave")                      # dave's, requested by alice

    def describe(principal: str, owners: Optional[list], authz: Authz = RuleAuthz(), version: int = 3) -> Any:
        body = {"owners": None if owners is None else [dict(zip(("principal_type", "principal_name"),
                                                                o.split(":", 1))) for o in owners]}
        r = run(dt.describe(context(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, principal=principal),
                            request(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, body), tokens=tm, authz=authz))
        return roundtrip(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, r)

    ids = lambda r: sorted(t.token_id for t in r.tokens)  # noqa: E731
    assert ids(describe("User:alice", None)) == sorted([a.token_id, d.token_id])  # owner, and requester of d
    assert ids(describe("User:bob", None)) == [a.token_id]  # renewer
    assert ids(describe("User:eve", None)) == []
    assert ids(describe("User:alice", [])) == []  # an empty owner list describes nothing
    assert ids(describe("User:alice", ["User:dave"])) == [d.token_id]
    assert ids(describe("User:eve", None, RuleAuthz({(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                                                      c.token_id)}))) == [c.token_id]
    assert ids(describe("User:eve", None, RuleAuthz({(AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                                                      "User:carol")}))) == [c.token_id]
    r = describe("User:bob", ["User:alice"])
    t = r.tokens[0]
    assert (t.principal_type, t.principal_name, t.token_requester_principal_name) == ("User", "alice", "alice")
    assert t.hmac == a.hmac and [(x.principal_type, x.principal_name) for x in t.renewers] == [("User", "bob")]
    assert (t.issue_timestamp, t.expiry_timestamp, t.max_timestamp) == (a.issue_timestamp_ms, a.expiry_timestamp_ms,
                                                                        a.max_timestamp_ms)
    assert ids(describe("User:bob", None, version=0)) == [a.token_id]


# ------------------------------------------------------------------------------------------------ SCRAM credentials
class Controller:
    def __init__(self, active: bool = True) -> None:
        self.is_active = active


def upsertion(name: str, mechanism: int = 1, iterations: int = 4096) -> dict:
    salt = b"salt-" + name.encode()
    algo = "sha256" if mechanism == 1 else "sha512"
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(algo, b"pw", salt, max(iterations, 1))}


def alter(admin: ScramCredentialAdmin, authz: Authz, upsertions: list, deletions: list,
          controller: Controller = Controller()) -> Any:
    body = {"upsertions": upsertions, "deletions": deletions}
    r = run(usc.alter(context(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0),
                      request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body), admin=admin, controller=controller,
                      authz=authz))
    return roundtrip(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, r)


def describe_users(admin: ScramCredentialAdmin, authz: Authz, users: Optional[list]) -> Any:
    body = {"users": None if users is None else [{"name": u} for u in users]}
    r = run(usc.describe(context(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
                         request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body), admin=admin, authz=authz))
    return roundtrip(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, r)


def test_scram_apis_authorization_and_controller(zk: KafkaZkClient) -> None:
    admin = ScramCredentialAdmin(zk, InlineCalls())  # type: ignore[arg-type]
    cluster = "kafka-cluster"
    deny = RuleAuthz()
    r = alter(admin, deny, [upsertion("b"), upsertion("a")], [{"name": "a", "mechanism": 2}])
    assert [(x.user, x.error_code) for x in r.results] == [("a", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                                           ("b", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    assert deny.asked == [(AclOperation.ALTER, ResourceType.CLUSTER, cluster)]
    r = alter(admin, Authz(), [upsertion("a")], [], Controller(False))
    assert [(x.user, x.error_code) for x in r.results] == [("a", ErrorCode.NOT_CONTROLLER)]
    r = alter(admin, RuleAuthz({(AclOperation.ALTER, ResourceType.CLUSTER, cluster)}),
              [upsertion("a"), upsertion("a", 2, 8192), upsertion("x", 3), upsertion("y", 1, 100)], [])
    assert {x.user: x.error_code for x in r.results} == {"a": 0, "x": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                         "y": ErrorCode.UNACCEPTABLE_CREDENTIAL}
    r = describe_users(admin, deny, ["a", "b"])
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [x.error_code for x in r.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert deny.asked[-1] == (AclOperation.DESCRIBE, ResourceType.CLUSTER, cluster)
    r = describe_users(admin, RuleAuthz({(AclOperation.DESCRIBE, ResourceType.CLUSTER, cluster)}), None)
    assert r.error_code == 0 and [(x.user, [(c.mechanism, c.iterations) for c in x.credential_infos])
                                  for x in r.results] == [("a", [(1, 4096), (2, 8192)])]
    r = describe_users(admin, Authz(), ["a", "nobody"])
    assert [(x.user, x.error_code) for x in r.results] == [("a", 0), ("nobody", ErrorCode.RESOURCE_NOT_FOUND)]
