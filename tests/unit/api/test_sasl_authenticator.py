"""The per-connection SASL state machine (Kafka's SaslServerAuthenticator) without sockets."""
from __future__ import annotations

import struct

from broker.api import sasl_authenticator as sa
from broker.api.dispatcher import ConnectionContext
from broker.errors import ErrorCode
from broker.protocol import api as proto
from broker.protocol.api import ApiKey, encode_request
from broker.security.credential_cache import ScramCredentialCache
from broker.security.plain import plain_client_message
from broker.security.scram import ScramClient, ScramCredential, format_credential


def make(reauth_ms: int = 0) -> tuple:
    creds = ScramCredentialCache()
    creds.update("bob", {"SCRAM-SHA-256": format_credential(ScramCredential.from_password("SCRAM-SHA-256", "pw"))})
    conf = sa.SaslListenerConfig("SASL", ["PLAIN", "SCRAM-SHA-256"], {"alice": "secret"}, reauth_ms, 0, 1 << 16)
    conn = ConnectionContext("c1", "10.0.0.1", 5000, "SASL", "SASL_PLAINTEXT")
    conn.authenticator = sa.SaslServerAuthenticator(conf, creds, None)
    return conn, conn.authenticator


def send(auth: sa.SaslServerAuthenticator, conn: ConnectionContext, key: int, version: int, body: dict) -> tuple:
    frame = memoryview(encode_request(key, version, 7, "t", body)[4:])
    header, offset = proto.decode_request_header(frame)
    out = auth.handle_request(conn, header, frame, offset)
    if isinstance(out, (sa.Respond, sa.RespondAndClose)):
        data = b"".join(bytes(p) for p in out.parts)
        return out, (proto.decode_response_with_header(key, version, data)[1] if data else None)
    return out, None


def test_plain_login_then_requests_pass() -> None:
    conn, auth = make()
    out, _ = send(auth, conn, ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert out is sa.PASS
    out, r = send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert r.error_code == 0 and list(r.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    out, r = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message("alice", "secret")})
    assert isinstance(out, sa.Respond) and r.error_code == 0 and r.session_lifetime_ms == 0
    assert conn.principal == "User:alice" and conn.sasl_mechanism == "PLAIN" and not auth.intercepts()


def test_wrong_password_answers_after_the_delay_and_closes() -> None:
    conn, auth = make()
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    out, r = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_client_message("alice", "nope")})
    assert isinstance(out, sa.RespondAndClose)
    assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert r.error_message == "Authentication failed: Invalid username or password"
    assert conn.principal == "User:ANONYMOUS"


def test_unknown_mechanism_and_early_requests() -> None:
    conn, auth = make()
    out, r = send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert isinstance(out, sa.RespondAndClose) and r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    conn, auth = make()
    out, _ = send(auth, conn, ApiKey.METADATA, 1, {"topics": None})
    assert out is sa.CLOSE
    out, _ = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""})  # before the handshake
    assert out is sa.CLOSE


def test_scram_login() -> None:
    conn, auth = make()
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    client = ScramClient("SCRAM-SHA-256", "bob", "pw")
    _, r1 = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.first_message()})
    _, r2 = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client.final_message(r1.auth_bytes)})
    client.verify_server_final(r2.auth_bytes)
    assert conn.principal == "User:bob"


def test_legacy_raw_tokens() -> None:
    conn, auth = make()
    _, r = send(auth, conn, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    assert r.error_code == 0 and auth.raw_tokens
    out = auth.handle_raw_token(conn, memoryview(plain_client_message("alice", "secret")))
    assert isinstance(out, sa.Respond) and out.parts == [struct.pack(">i", 0)] and conn.principal == "User:alice"
    conn, auth = make()
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    out = auth.handle_raw_token(conn, memoryview(plain_client_message("alice", "bad")))
    assert isinstance(out, sa.RespondAndClose) and out.parts == []  # v0 cannot carry an error: just close


def test_reauthentication_keeps_the_principal_and_sets_a_lifetime() -> None:
    conn, auth = make(reauth_ms=60_000)
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    _, r = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_client_message("alice", "secret")})
    assert r.session_lifetime_ms == 60_000 and auth.session_expiry_ns is not None
    assert auth.can_reauthenticate() and not auth.session_expired(auth.session_expiry_ns - 1)
    assert auth.session_expired(auth.session_expiry_ns)
    _, r = send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})  # another mechanism
    assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
    conn, auth = make(reauth_ms=60_000)
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    send(auth, conn, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_client_message("alice", "secret")})
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    auth.config.plain_users["mallory"] = "m"
    out, r = send(auth, conn, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain_client_message("mallory", "m")})
    assert isinstance(out, sa.RespondAndClose) and r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert conn.principal == "User:alice"


def test_no_reauthentication_with_v0_authenticate() -> None:
    conn, auth = make(reauth_ms=60_000)
    send(auth, conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    send(auth, conn, ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": plain_client_message("alice", "secret")})
    assert auth.authenticated and not auth.can_reauthenticate() and auth.session_expiry_ns is None
