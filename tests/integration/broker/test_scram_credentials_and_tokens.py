"""SCRAM credentials (KIP-554) and delegation tokens (KIP-48) on a real broker process, checked against Kafka 3.9.1's
own code: its ConfigCommand alters credentials through our broker, its parsers read the znodes we write, its HMAC
equals ours.

The broker has a PLAINTEXT listener (admin requests; token requests are refused there) and a SASL_PLAINTEXT
listener with SCRAM-SHA-256/512. Tests marked ``needs the SASL listener`` authenticate over SASL (the lead's
SASL authenticator) before asking for tokens: Kafka serves token requests only on authenticated channels.
"""
from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from kazoo.client import KazooClient

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.quota.entity import sanitize
from broker.security.scram import ScramClient, ScramServer, parse_credential
from tests.harness.broker_process import BrokerProcess, free_port, running_broker
from tests.harness.cluster_ops import run_kafka_tool
from tests.harness.kafka import java_program
from tests.integration.broker.wire import RawClient

SECRET = "token-secret-key"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SHA256, SHA512 = 1, 2
JAVA_HELPER = Path(__file__).with_name("KafkaSecurityFormats.java")


class Broker:
    def __init__(self, process: BrokerProcess, zk_connect: str, sasl_port: int) -> None:
        self.process = process
        self.zk_connect = zk_connect
        self.plaintext = process.bootstrap
        self.sasl = f"127.0.0.1:{sasl_port}"

    def znode(self, path: str) -> Optional[bytes]:
        zk = KazooClient(hosts=self.zk_connect)
        zk.start(timeout=10)
        try:
            return zk.get(path)[0] if zk.exists(path) else None
        finally:
            zk.stop()
            zk.close()


@pytest.fixture(scope="module")
def broker(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    plain, sasl = free_port(), free_port()
    jaas = f'{SCRAM_MODULE} required username="admin" password="admin-secret";'
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
        "connection.failed.authentication.delay.ms": "50",
        # delegation.token.* keys are accepted at start-up now that tokens work
        "delegation.token.secret.key": SECRET,
        "delegation.token.max.lifetime.ms": "3600000",
        "delegation.token.expiry.time.ms": "600000",
        "delegation.token.expiry.check.interval.ms": "1000",
    }
    zk_connect = f"{zookeeper}/scram-{uuid.uuid4().hex[:10]}"
    with running_broker(Path(tmp_path_factory.mktemp("scram")), zk_connect, broker_id=0, port=plain,
                        overrides=overrides) as b:
        yield Broker(b, zk_connect, sasl)


def java(*args: str, stdin: Optional[bytes] = None) -> str:
    r = subprocess.run(["java", "-Xshare:auto", "-Dlog4j.configuration=file:/dev/null", *java_program(JAVA_HELPER),
                        *args], input=stdin, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return r.stdout.decode()


# ------------------------------------------------------------------------------------------------ raw helpers
def upsertion(user: str, mechanism: int, password: str, iterations: int = 4096, salt: bytes = b"") -> dict:
    salt = salt or uuid.uuid4().bytes
    algo = "sha256" if mechanism == SHA256 else "sha512"
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(algo, password.encode(), salt, max(iterations, 1))}


def alter(b: Broker, upsertions: List[dict], deletions: List[Tuple[str, int]] = ()) -> Dict[str, Tuple[int, Any]]:
    """user -> (error code, message); a success carries "" (not null), as Kafka 3.9.1 sends it
    (tests/integration/test_differential_kafka.py compares with the real broker)."""
    with RawClient(b.plaintext) as c:
        r = c.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
            "upsertions": upsertions, "deletions": [{"name": n, "mechanism": m} for n, m in deletions]})
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe(b: Broker, users: Optional[List[str]]) -> Any:
    with RawClient(b.plaintext) as c:
        return c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                         {"users": None if users is None else [{"name": u} for u in users]})


def credentials_of(b: Broker, user: str) -> Dict[str, Any]:
    r = describe(b, [user])
    assert r.error_code == 0 and len(r.results) == 1
    x = r.results[0]
    return {"error": x.error_code, "creds": [(c.mechanism, c.iterations) for c in x.credential_infos]}


def sasl_client(b: Broker, mechanism: str, user: str, password: str,
                extensions: Optional[Dict[str, str]] = None) -> Tuple[Optional[RawClient], int]:
    """A RawClient authenticated over the SASL listener (SaslHandshake v1 + SaslAuthenticate v2), or (None, code)."""
    c = RawClient(b.sasl)
    hs = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert hs.error_code == 0, hs
    client = ScramClient(mechanism, user, password, extensions)
    r1 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first_message()})
    if r1.error_code:
        c.close()
        return None, r1.error_code
    r2 = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final_message(r1.auth_bytes)})
    if r2.error_code:
        c.close()
        return None, r2.error_code
    client.verify_server_final(r2.auth_bytes)
    return c, 0


def wait_login(b: Broker, mechanism: str, user: str, password: str, want_ok: bool = True,
               timeout_s: float = 15.0) -> None:
    """The change notification reaches the broker's credential cache asynchronously: poll the login."""
    deadline = time.monotonic() + timeout_s
    while True:
        c, code = sasl_client(b, mechanism, user, password)
        if c is not None:
            c.close()
        if (code == 0) == want_ok:
            return
        assert time.monotonic() < deadline, f"login of {user} with {mechanism} still {'fails' if want_ok else 'works'}"
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------------ SCRAM credentials
def test_alter_and_describe_user_scram_credentials(broker: Broker) -> None:
    user = f"al@ice-{uuid.uuid4().hex[:6]}"
    salt = b"fixed-salt-for-the-test"
    assert alter(broker, [upsertion(user, SHA256, "pw-256", 8192, salt), upsertion(user, SHA512, "pw-512")]) == {
        user: (0, "")}
    assert credentials_of(broker, user) == {"error": 0, "creds": [(SHA256, 8192), (SHA512, 4096)]}
    every = describe(broker, None)
    assert user in [x.user for x in every.results]  # describe-all names users, not their znode names
    # Kafka's refusals, each for the whole user
    got = alter(broker, [upsertion("", SHA256, "x"), upsertion("few", SHA256, "x", 1000),
                         upsertion("many", SHA512, "x", 16385), upsertion("mech", 7, "x"),
                         upsertion("twice", SHA256, "x"), upsertion("twice", SHA256, "y")])
    assert {u: c for u, (c, _) in got.items()} == {
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL, "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL, "mech": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "twice": ErrorCode.DUPLICATE_RESOURCE}
    assert got["few"][1] == "Too few iterations" and got["many"][1] == "Too many iterations"
    r = describe(broker, ["nobody-here", "", "nobody-here2", "nobody-here2"])
    assert [(x.user, x.error_code) for x in r.results] == [
        ("nobody-here", ErrorCode.RESOURCE_NOT_FOUND), ("", ErrorCode.RESOURCE_NOT_FOUND),
        ("nobody-here2", ErrorCode.DUPLICATE_RESOURCE)]
    assert r.results[0].error_message == "Attempt to describe a user credential that does not exist: nobody-here"
    # the znode is Kafka's, and Kafka's own parser reads the credential we derived from the salted password
    data = broker.znode(f"/config/users/{sanitize(user)}")
    assert data is not None
    stored = json.loads(data)
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    ours = parse_credential(stored["config"]["SCRAM-SHA-256"])
    iterations, salt_b64, stored_key, server_key = java("scram-parse", stored["config"]["SCRAM-SHA-256"]).split()
    assert (int(iterations), base64.b64decode(salt_b64)) == (8192, salt)
    assert (base64.b64decode(stored_key), base64.b64decode(server_key)) == (ours.stored_key, ours.server_key)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw-256", salt, 8192)
    assert java("scram", "SCRAM-SHA-256", base64.b64encode(salt).decode(), base64.b64encode(salted).decode(),
                "8192") == stored["config"]["SCRAM-SHA-256"]  # byte for byte what Kafka's ScramFormatter makes
    # deleting one mechanism keeps the rest of the znode, quotas included
    with RawClient(broker.plaintext) as c:
        q = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": "user", "entity_name": user}],
            "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}]})
    assert q.entries[0].error_code == 0
    assert alter(broker, [], [(user, SHA512)]) == {user: (0, "")}
    assert alter(broker, [], [(user, SHA512)])[user][0] == ErrorCode.RESOURCE_NOT_FOUND
    config = json.loads(broker.znode(f"/config/users/{sanitize(user)}") or b"{}")["config"]
    assert set(config) == {"SCRAM-SHA-256", "producer_byte_rate"}
    assert credentials_of(broker, user)["creds"] == [(SHA256, 8192)]


def test_scram_logins_follow_alterations(broker: Broker) -> None:
    """Needs the SASL listener: a credential set with AlterUserScramCredentials logs in; a deleted one no longer."""
    user = f"follow-{uuid.uuid4().hex[:6]}"
    assert alter(broker, [upsertion(user, SHA512, "first", 4096)]) == {user: (0, "")}
    wait_login(broker, "SCRAM-SHA-512", user, "first")
    assert alter(broker, [upsertion(user, SHA512, "second", 8192)]) == {user: (0, "")}
    wait_login(broker, "SCRAM-SHA-512", user, "second")
    assert sasl_client(broker, "SCRAM-SHA-512", user, "first")[1] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert alter(broker, [], [(user, SHA512)]) == {user: (0, "")}
    wait_login(broker, "SCRAM-SHA-512", user, "second", want_ok=False)


def test_kafka_config_command_manages_credentials_through_our_broker(broker: Broker) -> None:
    """Kafka 3.9.1's kafka-configs.sh (ConfigCommand --bootstrap-server) uses Describe/AlterUserScramCredentials."""
    user = f"tool-{uuid.uuid4().hex[:6]}"
    r = run_kafka_tool("kafka.admin.ConfigCommand", [
        "--bootstrap-server", broker.plaintext, "--alter", "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
        "--entity-type", "users", "--entity-name", user])
    assert r.returncode == 0, r.stdout + r.stderr
    assert credentials_of(broker, user) == {"error": 0, "creds": [(SHA256, 8192), (SHA512, 4096)]}
    r = run_kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", broker.plaintext, "--describe",
                                                     "--entity-type", "users", "--entity-name", user])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SCRAM-SHA-256=iterations=8192" in r.stdout and "SCRAM-SHA-512=iterations=4096" in r.stdout, r.stdout
    # the credential Kafka's tool salted authenticates its password (in-process check of the stored credential)
    config = json.loads(broker.znode(f"/config/users/{sanitize(user)}") or b"{}")["config"]
    cred = parse_credential(config["SCRAM-SHA-256"])
    server = ScramServer("SCRAM-SHA-256", lambda u: cred if u == user else None)
    client = ScramClient("SCRAM-SHA-256", user, "alice-secret")
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    wait_login(broker, "SCRAM-SHA-256", user, "alice-secret")  # needs the SASL listener
    r = run_kafka_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", broker.plaintext, "--alter",
                                                     "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                                                     "--entity-name", user])
    assert r.returncode == 0, r.stdout + r.stderr
    assert credentials_of(broker, user)["creds"] == [(SHA256, 8192)]


def test_confluent_kafka_admin_manages_credentials(broker: Broker) -> None:
    """librdkafka's AlterUserScramCredentials / DescribeUserScramCredentials (a stock non-Java client)."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    user = f"rdk-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000), b"rdk-secret"),
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"rdk-secret",
                                     b"some-salt")])
    futures[user].result(30)
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    infos = sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos)
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 10000), (ScramMechanism.SCRAM_SHA_512, 4096)]
    wait_login(broker, "SCRAM-SHA-256", user, "rdk-secret")  # needs the SASL listener
    with pytest.raises(Exception) as missing:
        admin.describe_user_scram_credentials(["no-such-user-here"])["no-such-user-here"].result(30)
    assert "RESOURCE_NOT_FOUND" in str(missing.value) or "does not exist" in str(missing.value)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])[user] \
        .result(30)
    assert credentials_of(broker, user)["creds"] == [(SHA512, 4096)]


# ------------------------------------------------------------------------------------------------ delegation tokens
def token_request(c: RawClient, key: ApiKey, version: int, body: dict) -> Any:
    return c.request(key, version, body)


def create_body(renewers: List[str] = (), owner: Optional[str] = None, max_lifetime_ms: int = -1) -> dict:
    return {"owner_principal_type": "User" if owner else None, "owner_principal_name": owner,
            "renewers": [{"principal_type": "User", "principal_name": r} for r in renewers],
            "max_lifetime_ms": max_lifetime_ms}


def test_token_requests_are_refused_on_plaintext(broker: Broker) -> None:
    with RawClient(broker.plaintext) as c:
        for v in range(4):
            r = c.request(ApiKey.CREATE_DELEGATION_TOKEN, v, create_body())
            assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, v
            assert (r.principal_type, r.principal_name, r.token_id, r.hmac) == ("User", "ANONYMOUS", "", b"")
            r = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, v, {"owners": None})
            assert (r.error_code, list(r.tokens)) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
        for v in range(3):
            r = c.request(ApiKey.RENEW_DELEGATION_TOKEN, v, {"hmac": b"x" * 64, "renew_period_ms": -1})
            assert (r.error_code, r.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
            r = c.request(ApiKey.EXPIRE_DELEGATION_TOKEN, v, {"hmac": b"x" * 64, "expiry_time_period_ms": -1})
            assert (r.error_code, r.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
        av = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        ranges = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
        assert ranges[ApiKey.CREATE_DELEGATION_TOKEN] == (0, 3) and ranges[ApiKey.DESCRIBE_DELEGATION_TOKEN] == (0, 3)
        assert ranges[ApiKey.RENEW_DELEGATION_TOKEN] == (0, 2) and ranges[ApiKey.EXPIRE_DELEGATION_TOKEN] == (0, 2)
        assert ranges[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
        assert ranges[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


@pytest.fixture(scope="module")
def users(broker: Broker) -> Dict[str, str]:
    """SCRAM users for the token tests (set through our own AlterUserScramCredentials)."""
    pw = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
    got = alter(broker, [upsertion(u, SHA512, p) for u, p in pw.items()])
    assert all(code == 0 for code, _ in got.values()), got
    for u, p in pw.items():
        wait_login(broker, "SCRAM-SHA-512", u, p)
    return pw


def login(b: Broker, users: Dict[str, str], user: str) -> RawClient:
    c, code = sasl_client(b, "SCRAM-SHA-512", user, users[user])
    assert c is not None, code
    return c


def test_token_lifecycle_over_sasl(broker: Broker, users: Dict[str, str]) -> None:
    """Needs the SASL listener: create, describe, renew, log in with the token, expire, as Kafka."""
    with login(broker, users, "alice") as alice:
        made = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body(renewers=["bob"]))
        assert made.error_code == 0, made
        assert (made.principal_name, made.token_requester_principal_name) == ("alice", "alice")
        assert made.expiry_timestamp_ms - made.issue_timestamp_ms == 600000
        assert made.max_timestamp_ms - made.issue_timestamp_ms == 3600000
        hmac = made.hmac
        # Kafka's own HMAC and token znode parser agree with what we answered and wrote
        assert base64.b64decode(java("hmac", made.token_id, SECRET)) == hmac
        data = broker.znode(f"/delegation_token/tokens/{made.token_id}")
        assert data is not None
        fields = java("token-parse", stdin=data).split("\n")
        assert fields[:4] == [made.token_id, "User:alice", "User:alice", "User:bob"]
        assert [int(x) for x in fields[4:7]] == [made.issue_timestamp_ms, made.max_timestamp_ms,
                                                 made.expiry_timestamp_ms]
        d = alice.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
        assert d.error_code == 0 and [t.token_id for t in d.tokens] == [made.token_id] and d.tokens[0].hmac == hmac
        assert list(alice.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": []}).tokens) == []
        r = alice.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": 120000})
        assert r.error_code == 0 and 0 < r.expiry_timestamp_ms - made.issue_timestamp_ms <= 120000 + 60000
        r = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body(renewers=["bob"]))
        assert r.error_code == 0  # owner override for oneself needs no ACL; the second token is alice's too
        second = r
    with login(broker, users, "bob") as bob:
        assert bob.request(ApiKey.RENEW_DELEGATION_TOKEN, 1, {"hmac": hmac, "renew_period_ms": -1}).error_code == 0
        assert [t.token_id for t in bob.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens
                if t.token_id == made.token_id] == [made.token_id]  # a renewer may describe
    with login(broker, users, "carol") as carol:
        r = carol.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": -1})
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        r = carol.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": b"\x01" * 64, "renew_period_ms": -1})
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        # no authorizer: every DESCRIBE check passes (Kafka's default), so carol sees others' tokens too; with
        # the ACL authorizer she would need DESCRIBE on the token or DESCRIBE_TOKENS on User:alice
        seen = {t.token_id for t in carol.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens}
        assert {made.token_id, second.token_id} <= seen
    # log in with the token: SCRAM with the token id, base64(hmac) and tokenauth=true; the principal is alice
    password = base64.b64encode(hmac).decode()
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        c, code = sasl_client(broker, mech, made.token_id, password, {"tokenauth": "true"})
        assert c is not None, code
        with c:
            r = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED  # token logins get no tokens
            r = c.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body())
            assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (r.principal_name, r.token_requester_principal_name) == ("alice", "alice")
    # the token is no user password
    assert sasl_client(broker, "SCRAM-SHA-512", made.token_id, password)[1] == ErrorCode.SASL_AUTHENTICATION_FAILED
    with login(broker, users, "alice") as alice:
        r = alice.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": -1})
        assert r.error_code == 0
        assert broker.znode(f"/delegation_token/tokens/{made.token_id}") is None
        r = alice.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": -1})
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        assert alice.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": second.hmac,
                                                                 "expiry_time_period_ms": -1}).error_code == 0
    assert sasl_client(broker, "SCRAM-SHA-512", made.token_id, password,
                       {"tokenauth": "true"})[1] == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_owner_override_needs_create_tokens(broker: Broker, users: Dict[str, str]) -> None:
    """Needs the SASL listener. Without an authorizer every ACL check passes (Kafka's default), so creating a
    token for another owner succeeds and records who requested it."""
    with login(broker, users, "alice") as alice:
        r = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body(owner="carol"))
        assert r.error_code == 0 and (r.principal_name, r.token_requester_principal_name) == ("carol", "alice")
        r2 = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, {**create_body(), "renewers": [
            {"principal_type": "Group", "principal_name": "ops"}]})
        assert r2.error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
        d = alice.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": [{"principal_type": "User",
                                                                            "principal_name": "carol"}]})
        assert [(t.token_id, t.token_requester_principal_name) for t in d.tokens] == [(r.token_id, "alice")]
    with login(broker, users, "carol") as carol:  # the owner may expire it
        assert carol.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": r.hmac,
                                                                 "expiry_time_period_ms": -1}).error_code == 0


def test_the_controller_removes_expired_tokens(broker: Broker, users: Dict[str, str]) -> None:
    """Needs the SASL listener: a token past its max lifetime disappears at the next expiry scan (1 s here)."""
    with login(broker, users, "alice") as alice:
        r = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 2, create_body(max_lifetime_ms=1500))
        assert r.error_code == 0 and r.max_timestamp_ms - r.issue_timestamp_ms == 1500
        deadline = time.monotonic() + 20
        while broker.znode(f"/delegation_token/tokens/{r.token_id}") is not None:
            assert time.monotonic() < deadline, "the expired token was never removed"
            time.sleep(0.3)
        r2 = alice.request(ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": r.hmac, "renew_period_ms": -1})
        assert r2.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert "Delegation token expired for token" in broker.process.output()


def test_kafka_delegation_token_command_and_a_java_client_with_the_token(broker: Broker, users: Dict[str, str],
                                                                        tmp_path: Path) -> None:
    """Needs the SASL listener: Kafka's kafka-delegation-tokens.sh creates and describes a token through our broker;
    Kafka's own client then authenticates with it (kafka-topics.sh --list)."""
    props = tmp_path / "alice.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                     f'sasl.jaas.config={SCRAM_MODULE} required username="alice" password="{users["alice"]}";\n')
    r = run_kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", [
        "--bootstrap-server", broker.sasl, "--command-config", str(props), "--create",
        "--max-life-time-period", "-1", "--renewer-principal", "User:bob"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    row = lines[next(i for i, x in enumerate(lines) if x.startswith("TOKENID")) + 1].split()
    token_id, hmac_b64 = row[0], row[1]
    assert f"Created delegation token with tokenId : {token_id}" in r.stdout, r.stdout
    # the 3.9 tool sends an empty owner list without --owner-principal, which Kafka answers with no tokens
    r = run_kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", [
        "--bootstrap-server", broker.sasl, "--command-config", str(props), "--describe"])
    assert r.returncode == 0 and "Total number of tokens : 0" in r.stdout, r.stdout + r.stderr
    r = run_kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", [
        "--bootstrap-server", broker.sasl, "--command-config", str(props), "--describe",
        "--owner-principal", "User:alice"])
    assert r.returncode == 0 and token_id in r.stdout and "User:bob" in r.stdout, r.stdout + r.stderr
    token_props = tmp_path / "token.properties"
    token_props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                           f'sasl.jaas.config={SCRAM_MODULE} required username="{token_id}" '
                           f'password="{hmac_b64}" tokenauth="true";\n')
    r = run_kafka_tool("org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", broker.sasl, "--command-config",
                                                    str(token_props), "--list"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", [
        "--bootstrap-server", broker.sasl, "--command-config", str(props), "--expire", "--hmac", hmac_b64,
        "--expiry-time-period", "-1"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert broker.znode(f"/delegation_token/tokens/{token_id}") is None


# ------------------------------------------------------------------------------------------------ two brokers
def two_broker_overrides(plain: int, sasl: int) -> Dict[str, str]:
    jaas = f'{SCRAM_MODULE} required username="admin" password="admin-secret";'
    return {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
            "connection.failed.authentication.delay.ms": "50", "delegation.token.secret.key": SECRET}


def test_every_broker_follows_credentials_and_tokens(zookeeper: str, tmp_path: Path) -> None:
    """Needs the SASL listener. Two brokers: AlterUserScramCredentials is answered by the controller only
    (NOT_CONTROLLER elsewhere, as Kafka in ZooKeeper mode); the credential then logs in on both brokers; a token
    created on one broker logs in on the other, and its expiry there removes it everywhere."""
    zk_connect = f"{zookeeper}/two-{uuid.uuid4().hex[:10]}"
    ports = [(free_port(), free_port()) for _ in range(2)]
    with running_broker(tmp_path / "b0", zk_connect, broker_id=0, port=ports[0][0],
                        overrides=two_broker_overrides(*ports[0])) as p0, \
            running_broker(tmp_path / "b1", zk_connect, broker_id=1, port=ports[1][0],
                           overrides=two_broker_overrides(*ports[1])) as p1:
        brokers = [Broker(p0, zk_connect, ports[0][1]), Broker(p1, zk_connect, ports[1][1])]
        controller = json.loads(brokers[0].znode("/controller") or b"{}")["brokerid"]
        active, other = brokers[controller], brokers[1 - controller]
        user = f"both-{uuid.uuid4().hex[:6]}"
        got = alter(other, [upsertion(user, SHA512, "pw")])
        assert got[user][0] == ErrorCode.NOT_CONTROLLER
        assert alter(active, [upsertion(user, SHA512, "pw")]) == {user: (0, "")}
        assert credentials_of(other, user)["creds"] == [(SHA512, 4096)]  # any broker describes
        users = {user: "pw"}
        for b in brokers:
            wait_login(b, "SCRAM-SHA-512", user, "pw")
        with login(other, users, user) as c:
            made = c.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body())
            assert made.error_code == 0
        password = base64.b64encode(made.hmac).decode()
        deadline = time.monotonic() + 15
        while True:  # the token change notification reaches the controller's broker
            c, code = sasl_client(active, "SCRAM-SHA-512", made.token_id, password, {"tokenauth": "true"})
            if c is not None:
                c.close()
                break
            assert time.monotonic() < deadline, f"token login on the other broker still fails ({code})"
            time.sleep(0.2)
        with login(active, users, user) as c:
            assert c.request(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": made.hmac,
                                                                 "expiry_time_period_ms": -1}).error_code == 0
        deadline = time.monotonic() + 15
        while True:
            c, code = sasl_client(other, "SCRAM-SHA-512", made.token_id, password, {"tokenauth": "true"})
            if c is None:
                assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
                break
            c.close()
            assert time.monotonic() < deadline, "the expired token still logs in on the other broker"
            time.sleep(0.2)


# ------------------------------------------------------------------------------------------------ with the authorizer
def test_authorization_with_the_acl_authorizer(zookeeper: str, tmp_path: Path) -> None:
    """Needs the SASL listener and the ACL authorizer. Describe/Alter SCRAM credentials need DESCRIBE/ALTER on the
    cluster; a token for another owner needs CREATE_TOKENS on that User; others' tokens are described with
    DESCRIBE_TOKENS on their owner (or DESCRIBE on the token)."""
    plain, sasl = free_port(), free_port()
    overrides = {**two_broker_overrides(plain, sasl),
                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                 "super.users": "User:ANONYMOUS;User:admin"}  # the PLAINTEXT listener is the brokers' own
    zk_connect = f"{zookeeper}/authz-{uuid.uuid4().hex[:10]}"
    with running_broker(tmp_path, zk_connect, broker_id=0, port=plain, overrides=overrides) as p:
        b = Broker(p, zk_connect, sasl)
        pw = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
        assert all(code == 0 for code, _ in alter(b, [upsertion(u, SHA512, x) for u, x in pw.items()]).values())
        for u, x in pw.items():
            wait_login(b, "SCRAM-SHA-512", u, x)

        def acl(resource_type: int, name: str, principal: str, operation: int) -> dict:
            return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": 3,
                    "principal": principal, "host": "*", "operation": operation, "permission_type": 3}
        with login(b, pw, "alice") as alice:
            r = alice.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "bob"}]})
            assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert r.error_message == "Cluster authorization failed."
            r = alice.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
                "upsertions": [upsertion("bob", SHA512, "stolen")], "deletions": []})
            assert [(x.user, x.error_code) for x in r.results] == [("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
            mine = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body())
            assert mine.error_code == 0  # a token for oneself needs no ACL
            r = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body(owner="carol"))
            assert r.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED and r.principal_name == "carol"
        with login(b, pw, "admin") as admin:
            assert admin.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}).error_code == 0
            r = admin.request(ApiKey.CREATE_ACLS, 3, {"creations": [
                acl(7, "User:carol", "User:alice", 13),      # USER carol: CREATE_TOKENS for alice
                acl(7, "User:alice", "User:bob", 14)]})      # USER alice: DESCRIBE_TOKENS for bob
            assert [x.error_code for x in r.results] == [0, 0], r
        deadline = time.monotonic() + 15
        with login(b, pw, "alice") as alice:
            while True:
                r = alice.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, create_body(owner="carol"))
                if r.error_code == 0:
                    break
                assert time.monotonic() < deadline, f"CREATE_TOKENS ACL never applied ({r.error_code})"
                time.sleep(0.2)
            assert (r.principal_name, r.token_requester_principal_name) == ("carol", "alice")
        with login(b, pw, "bob") as bob:  # DESCRIBE_TOKENS on User:alice: alice's tokens, not carol's
            seen = {t.token_id for t in bob.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens}
            assert seen == {mine.token_id}
        with login(b, pw, "carol") as carol:  # the owner sees her token (and alice, its requester, would too)
            seen = {t.token_id for t in carol.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None}).tokens}
            assert seen == {r.token_id}
