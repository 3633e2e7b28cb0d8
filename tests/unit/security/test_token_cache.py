"""DelegationTokenCache: token information, HMAC lookups and the SCRAM credentials a token login checks."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker.security.scram import ScramClient, ScramServer
from broker.security.token_cache import (DelegationTokenCache, TokenInformation, create_hmac, hmac_b64,
                                         parse_principal, token_scram_credentials)

SECRET = "cluster-secret"


def token(token_id: str = "tok1", owner: str = "User:alice", requester: str = "", renewers=("User:bob",),
          issue: int = 1000, max_ts: int = 10_000, expiry: int = 5000) -> TokenInformation:
    return TokenInformation(token_id, owner, requester or owner, tuple(renewers), issue, max_ts, expiry)


def test_hmac_is_hmac_sha512_of_the_token_id_keyed_with_the_secret() -> None:
    expected = hmac.new(SECRET.encode(), b"tok1", hashlib.sha512).digest()
    assert create_hmac("tok1", SECRET) == expected and len(expected) == 64
    assert hmac_b64(expected) == base64.b64encode(expected).decode()  # standard, padded: Kafka's Base64.getEncoder


def test_principal_parsing_as_kafka() -> None:
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:a:b") == ("User", "a:b")
    for bad in ("", "alice"):
        with pytest.raises(ValueError):
            parse_principal(bad)


def test_owner_renewer_requester_and_expiry_rules() -> None:
    t = token(requester="User:admin")
    assert t.owner_or_renewer("User:alice") and t.owner_or_renewer("User:bob") and t.owner_or_renewer("User:admin")
    assert not t.owner_or_renewer("User:carol")
    assert t.allowed_to_renew("User:alice") and t.allowed_to_renew("User:bob")
    assert not t.allowed_to_renew("User:admin")  # the requester may describe, not renew (Kafka's allowedToRenew)
    assert not t.expired(5000) and t.expired(5001)
    assert token(max_ts=4000, expiry=9000).expired(4001)
    assert t.with_expiry(7000).expiry_timestamp == 7000 and t.expiry_timestamp == 5000


def test_update_lookup_remove() -> None:
    cache = DelegationTokenCache()
    t, h = token(), create_hmac("tok1", SECRET)
    cache.update(t, h)
    assert cache.token("tok1") == t and cache.token_for_hmac(h) == t and cache.tokens() == [t]
    assert cache.token_for_hmac(create_hmac("tok1", "other")) is None
    renewed = t.with_expiry(9000)
    cache.update(renewed, h)
    assert cache.token_for_hmac(h) == renewed
    cred, owner = cache.scram_credential("SCRAM-SHA-512", "tok1")  # type: ignore[misc]
    assert owner == "User:alice" and cred.iterations == 4096
    assert cache.scram_credential("SCRAM-SHA-1", "tok1") is None and cache.scram_credential("PLAIN", "tok1") is None
    cache.remove("tok1")
    assert cache.token("tok1") is None and cache.token_for_hmac(h) is None
    assert cache.scram_credential("SCRAM-SHA-256", "tok1") is None
    cache.remove("tok1")  # twice: harmless


def test_credentials_are_derived_once_per_hmac() -> None:
    calls = []

    def factory(password: str):
        calls.append(password)
        return token_scram_credentials(password)
    cache = DelegationTokenCache(factory)
    h = create_hmac("tok1", SECRET)
    cache.update(token(), h)
    cache.update(token().with_expiry(6000), h)  # a renewal: same HMAC, no new PBKDF2
    assert calls == [hmac_b64(h)]


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_with_scram_tokenauth(mech: str) -> None:
    """The holder authenticates as user=<token id>, password=base64(hmac), tokenauth=true; the principal is the
    token owner (what the SASL authenticator then puts on the connection)."""
    cache = DelegationTokenCache()
    h = create_hmac("tok1", SECRET)
    cache.update(token(), h)
    server = ScramServer(mech, lambda user: None, lambda tid: cache.scram_credential(mech, tid))
    client = ScramClient(mech, "tok1", hmac_b64(h), extensions={"tokenauth": "true"})
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.complete and server.token_authenticated and server.principal_name == "User:alice"
    # a removed (expired) token no longer logs in
    cache.remove("tok1")
    server = ScramServer(mech, lambda user: None, lambda tid: cache.scram_credential(mech, tid))
    client = ScramClient(mech, "tok1", hmac_b64(h), extensions={"tokenauth": "true"})
    with pytest.raises(Exception):
        server.evaluate(client.final_message(server.evaluate(client.first_message())))
