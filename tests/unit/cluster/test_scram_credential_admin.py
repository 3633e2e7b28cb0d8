"""ScramCredentialAdmin: Describe/AlterUserScramCredentials on /config/users, as Kafka's ZkAdminManager answers."""
from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from broker.cluster.scram_credential_admin import (
    ALTER_TWICE, DELETE_MISSING, DESCRIBE_MISSING, TOO_FEW_ITERATIONS, TOO_MANY_ITERATIONS, UNKNOWN_MECHANISM,
    USERNAME_EMPTY, Deletion, ScramCredentialAdmin, Upsertion, apply_alterations, credential_from_salted_password,
    plan_alterations,
)
from broker.errors import ErrorCode
from broker.security.scram import ScramClient, ScramCredential, ScramServer, format_credential, parse_credential
from broker.zk.client import KafkaZkClient
from tests.unit.zk.fake_kazoo import FakeZooKeeper

SHA256, SHA512 = 1, 2


class InlineCalls:
    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


def salted(mech: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256" if mech == "SCRAM-SHA-256" else "sha512", password.encode(), salt,
                               iterations)


def ups(name: str, mech: int = SHA256, iterations: int = 8192, password: str = "pw", salt: bytes = b"salty"
        ) -> Upsertion:
    m = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mech, "SCRAM-SHA-256")
    return Upsertion(name, mech, iterations, salt, salted(m, password, salt, iterations))


def test_credential_from_salted_password_equals_one_from_the_password() -> None:
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        from_password = ScramCredential.from_password(mech, "secret", salt=b"NaCl", iterations=4096)
        assert credential_from_salted_password(mech, b"NaCl", salted(mech, "secret", b"NaCl", 4096),
                                               4096) == from_password


def test_plan_refusals_in_kafkas_order() -> None:
    refused, valid = plan_alterations(
        [ups(""), ups("a", mech=0), ups("b", iterations=4095), ups("c", iterations=16385), ups("d", mech=SHA512),
         ups("ok"), ups("twice"), ups("twice"), ups("mixed", mech=SHA512), ups("both")],
        [Deletion("e", 9), Deletion("twice2", SHA256), Deletion("twice2", SHA256), Deletion("mixed", SHA256),
         Deletion("both", SHA256), Deletion("x", 7)])
    by_user = {u: (c, m) for u, c, m in refused}
    assert by_user[""] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
    assert by_user["a"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    assert by_user["b"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS)
    assert by_user["c"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS)
    assert by_user["e"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    assert by_user["x"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    assert by_user["twice"] == by_user["twice2"] == by_user["both"] == (ErrorCode.DUPLICATE_RESOURCE, ALTER_TWICE)
    assert valid == ["mixed", "d", "ok"]  # upsert 512 + delete 256 of one user is fine
    assert len(refused) == len(by_user)  # one result per user


def test_an_upsertion_problem_replaces_a_deletion_problem_of_the_same_user() -> None:
    refused, valid = plan_alterations([ups("u", iterations=100)], [Deletion("u", 0)])
    assert refused == [("u", ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS)] and valid == []


def test_empty_salt_or_salted_password_is_unacceptable() -> None:
    refused, _ = plan_alterations([Upsertion("u", SHA256, 4096, b"", b"x"), Upsertion("v", SHA256, 4096, b"s", b"")],
                                  [])
    assert [c for _, c, _ in refused] == [ErrorCode.UNACCEPTABLE_CREDENTIAL] * 2


def test_apply_keeps_other_keys_and_refuses_missing_deletions() -> None:
    config = {"producer_byte_rate": "1024", "SCRAM-SHA-512": "old"}
    new = apply_alterations("u", config, [ups("u"), ups("other")], [Deletion("u", SHA512)])
    assert new is not None and set(new) == {"producer_byte_rate", "SCRAM-SHA-256"}
    assert parse_credential(new["SCRAM-SHA-256"]).iterations == 8192 and config["SCRAM-SHA-512"] == "old"
    assert apply_alterations("u", config, [], [Deletion("u", SHA256)]) is None


@pytest.fixture
def fake() -> FakeZooKeeper:
    return FakeZooKeeper()


@pytest.fixture
def admin(fake: FakeZooKeeper) -> ScramCredentialAdmin:
    zk = KafkaZkClient("fake:2181", kazoo_client=fake.client())
    zk.run_in_background = lambda fn: fn()
    zk.start()
    return ScramCredentialAdmin(zk, InlineCalls())  # type: ignore[arg-type]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_alter_writes_kafkas_user_znode_and_a_change_notification(admin: ScramCredentialAdmin,
                                                                   fake: FakeZooKeeper) -> None:
    admin.zk.set_entity_config("users", "al%40ice", {"consumer_byte_rate": "2048"})  # a quota set earlier
    before = set(fake.dump("/config/changes"))
    results = run(admin.alter([ups("al@ice", SHA256, 8192, "alice-secret"), ups("al@ice", SHA512, 4096, "x")], []))
    assert results == [("al@ice", 0, None)]
    stored = json.loads(fake.data("/config/users/al%40ice"))
    assert stored["version"] == 1 and set(stored["config"]) == {"consumer_byte_rate", "SCRAM-SHA-256",
                                                                  "SCRAM-SHA-512"}
    cred = parse_credential(stored["config"]["SCRAM-SHA-256"])
    assert cred.iterations == 8192 and cred.salt == b"salty"
    new_notes = [json.loads(fake.data(p)) for p in set(fake.dump("/config/changes")) - before
                 if p != "/config/changes"]
    assert new_notes == [{"version": 2, "entity_path": "users/al%40ice"}]
    # the stored credential authenticates the password the client salted
    server = ScramServer("SCRAM-SHA-256", lambda user: cred if user == "al@ice" else None)
    client = ScramClient("SCRAM-SHA-256", "al@ice", "alice-secret")
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.complete


def test_describe_as_kafka(admin: ScramCredentialAdmin) -> None:
    run(admin.alter([ups("alice", SHA256, 8192), ups("alice", SHA512, 4096), ups("b/ob", SHA512, 10000)], []))
    admin.zk.set_entity_config("users", "quota-only", {"producer_byte_rate": "1"})
    admin.zk.set_entity_config("users", "<default>", {"producer_byte_rate": "1"})
    code, _, results = run(admin.describe(None))
    assert code == 0
    assert [(r.user, r.error_code, r.credentials) for r in results] == [
        ("alice", 0, [(SHA256, 8192), (SHA512, 4096)]), ("b/ob", 0, [(SHA512, 10000)])]
    assert [r.user for r in run(admin.describe([]))[2]] == ["alice", "b/ob"]  # empty list: all users too
    _, _, results = run(admin.describe(["b/ob", "quota-only", "nobody", "", "alice", "alice", "", "b/ob"]))
    got = {r.user: (r.error_code, r.error_message) for r in results}
    assert [r.user for r in results] == ["b/ob", "quota-only", "nobody", "", "alice"]  # distinct, request order
    assert got["quota-only"] == (ErrorCode.RESOURCE_NOT_FOUND, f"{DESCRIBE_MISSING}: quota-only")
    assert got["nobody"] == (ErrorCode.RESOURCE_NOT_FOUND, f"{DESCRIBE_MISSING}: nobody")
    assert got[""] == (ErrorCode.RESOURCE_NOT_FOUND, USERNAME_EMPTY)
    assert got["alice"][0] == got["b/ob"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert got["alice"][1] == "Cannot describe SCRAM credentials for the same user twice in a single request: alice"


def test_delete_credentials(admin: ScramCredentialAdmin, fake: FakeZooKeeper) -> None:
    run(admin.alter([ups("u", SHA256), ups("u", SHA512)], []))
    admin.zk.set_entity_config("users", "u", {**admin.zk.get_entity_config("users", "u"), "producer_byte_rate": "5"})
    assert run(admin.alter([], [Deletion("u", SHA256), Deletion("nobody", SHA256)])) == [
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING), ("u", 0, None)]
    assert set(admin.zk.get_entity_config("users", "u")) == {"SCRAM-SHA-512", "producer_byte_rate"}
    assert run(admin.alter([], [Deletion("u", SHA256)])) == [("u", ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING)]
    assert run(admin.alter([], [Deletion("u", SHA512)])) == [("u", 0, None)]
    assert admin.zk.get_entity_config("users", "u") == {"producer_byte_rate": "5"}  # quotas survive
    assert run(admin.describe(["u"]))[2][0].error_code == ErrorCode.RESOURCE_NOT_FOUND


def test_a_kafka_written_credential_is_described(admin: ScramCredentialAdmin) -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "p", iterations=12000)
    admin.zk.set_entity_config("users", "k", {"SCRAM-SHA-512": format_credential(cred)})
    assert run(admin.describe(["k"]))[2][0].credentials == [(SHA512, 12000)]
    admin.zk.set_entity_config("users", "bad", {"SCRAM-SHA-256": "garbage"})
    r = run(admin.describe(["bad"]))[2][0]
    assert r.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and r.credentials == []


def test_zookeeper_failure_fails_the_users_not_the_request(admin: ScramCredentialAdmin) -> None:
    def broken(*_a: Any) -> Any:
        raise RuntimeError("zk down")
    admin.zk.get_entity_config = broken  # type: ignore[method-assign]
    assert run(admin.alter([ups("u")], [])) == [("u", ErrorCode.UNKNOWN_SERVER_ERROR, None)]
    assert run(admin.describe(["u"]))[2][0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    admin.zk.get_children = broken  # type: ignore[method-assign]
    code, message, results = run(admin.describe(None))
    assert code == ErrorCode.UNKNOWN_SERVER_ERROR and message and results == []
