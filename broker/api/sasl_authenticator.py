"""SASL on a connection: Kafka's SaslServerAuthenticator, between the bytes and the request handlers.

On a SASL listener a connection starts unauthenticated. Only ApiVersions and SaslHandshake are
answered; anything else closes the connection, as Kafka does. SaslHandshake v1 is followed by
SaslAuthenticate requests carrying the mechanism's tokens; v0 (the legacy flow) by raw
size-prefixed tokens with no Kafka header. PLAIN checks the listener's JAAS users; SCRAM the
credentials in ZooKeeper (and delegation tokens with ``tokenauth=true``). A failed login is
logged, answered with SASL_AUTHENTICATION_FAILED after ``connection.failed.authentication.delay.ms``
and the connection closed; an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and the enabled
list. With ``connections.max.reauth.ms`` the session has a lifetime (SaslAuthenticate v1+);
the client re-authenticates on the same connection (KIP-368) with the same mechanism and
principal, and a connection whose session expired is closed at its next request.
"""
from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from broker.errors import ErrorCode
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.security.plain import PlainAuthenticationError, PlainIllegalStateError, PlainServer, static_authenticator
from broker.security.scram import ScramAuthenticationError, ScramIllegalStateError, ScramServer

if TYPE_CHECKING:
    from broker.api.dispatcher import ConnectionContext
    from broker.security.credential_cache import ScramCredentialCache
    from broker.security.scram import ScramCredential

log = logging.getLogger("broker.security.authentication")

_I32 = struct.Struct(">i")

#: Token lookup for SCRAM delegation-token logins: (mechanism, token id) -> (credential, owner principal).
TokenScramLookup = Callable[[str, str], Optional[Tuple["ScramCredential", str]]]


@dataclass
class SaslListenerConfig:
    """What a SASL listener authenticates with (built once per listener at start-up)."""

    listener: str
    mechanisms: List[str]
    plain_users: Dict[str, str] = field(default_factory=dict)
    reauth_ms: int = 0
    failed_delay_ms: int = 100
    max_receive_size: int = 524288


@dataclass
class Respond:
    """Send these response parts (the connection stays open)."""

    parts: list


@dataclass
class RespondAndClose:
    """Send these parts after `delay_s` (a failed login), then close the connection."""

    parts: list
    delay_s: float


class _Pending:
    """Intercept no frame: hand it to the normal request path."""


PASS = _Pending()
CLOSE = object()

Outcome = Union[Respond, RespondAndClose, _Pending, object]

_HANDSHAKE, _AUTHENTICATE, _LEGACY, _DONE, _FAILED = range(5)


class SaslServerAuthenticator:
    """One connection's SASL state."""

    def __init__(self, config: SaslListenerConfig, credentials: "ScramCredentialCache",
                 tokens: Optional[TokenScramLookup]) -> None:
        self.config = config
        self._credentials = credentials
        self._tokens = tokens
        self._state = _HANDSHAKE
        self._mechanism: Optional[str] = None
        self._server: Any = None
        self._reauthenticating = False
        self._authenticate_version = -1
        #: monotonic ns after which the session is over (None: no lifetime)
        self.session_expiry_ns: Optional[int] = None

    # ------------------------------------------------------------------ what the dispatcher asks
    @property
    def authenticated(self) -> bool:
        return self._state == _DONE

    @property
    def raw_tokens(self) -> bool:
        """Legacy flow (SaslHandshake v0): frames are raw SASL tokens without a request header."""
        return self._state == _LEGACY

    def intercepts(self) -> bool:
        return self._state != _DONE

    def session_expired(self, now_ns: int) -> bool:
        return self.session_expiry_ns is not None and now_ns >= self.session_expiry_ns

    def can_reauthenticate(self) -> bool:
        """KIP-368: re-authentication is possible once authenticated with SaslAuthenticate v1+ and a lifetime."""
        return self._state == _DONE and self.config.reauth_ms > 0 and self._authenticate_version >= 1

    # ------------------------------------------------------------------ frames
    def handle_raw_token(self, conn: "ConnectionContext", frame: memoryview) -> Outcome:
        """A legacy (unframed) token: evaluate it, answer with a raw token; a failure closes at once."""
        if len(frame) > self.config.max_receive_size:
            log.warning("Closing %s: SASL token of %d bytes exceeds sasl.server.max.receive.size %d",
                        conn.connection_id, len(frame), self.config.max_receive_size)
            return CLOSE
        try:
            challenge = self._server.evaluate(bytes(frame))
        except (ScramAuthenticationError, PlainAuthenticationError, ScramIllegalStateError,
                PlainIllegalStateError) as exc:
            self._failed(conn, str(exc), getattr(exc, "detail", ""))
            return RespondAndClose([], self.config.failed_delay_ms / 1000.0)
        if self._server.complete:
            self._succeeded(conn)
        return Respond([_I32.pack(len(challenge)) + challenge])

    def handle_request(self, conn: "ConnectionContext", header: Any, frame: memoryview, body_offset: int) -> Outcome:
        """A framed request while authentication is in progress (or a re-authentication starts)."""
        key = header.api_key
        if key == ApiKey.API_VERSIONS and self._state == _HANDSHAKE and not self._reauthenticating:
            return PASS
        if key == ApiKey.SASL_HANDSHAKE and (self._state == _HANDSHAKE or self.can_reauthenticate()):
            return self._handshake(conn, header, frame, body_offset)
        if key == ApiKey.SASL_AUTHENTICATE and self._state == _AUTHENTICATE:
            return self._authenticate(conn, header, frame, body_offset)
        log.warning("Closing %s: unexpected %s request during SASL %s (client %s)", conn.connection_id,
                    _api_name(key), "re-authentication" if self._reauthenticating else "handshake",
                    header.client_id)
        return CLOSE

    # ------------------------------------------------------------------ steps
    def _handshake(self, conn: "ConnectionContext", header: Any, frame: memoryview, body_offset: int) -> Outcome:
        try:
            request = proto.decode_request(header.api_key, header.api_version, frame, body_offset)
        except proto.MalformedMessageError:
            return CLOSE
        mechanism = request.mechanism
        enabled = self.config.mechanisms
        if self._state == _DONE:  # re-authentication
            if mechanism != self._mechanism:
                body = {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
                self._failed(conn, f"SASL mechanism changed from {self._mechanism} to {mechanism} during "
                             f"re-authentication", "")
                return RespondAndClose(_encode(header, body), self.config.failed_delay_ms / 1000.0)
            self._reauthenticating = True
        if mechanism not in enabled:
            log.info("Failed authentication with %s (%s): unsupported SASL mechanism %s (enabled: %s)",
                     conn.client_host, conn.connection_id, mechanism, ", ".join(enabled))
            self._state = _FAILED
            body = {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
            return RespondAndClose(_encode(header, body), self.config.failed_delay_ms / 1000.0)
        self._mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._state = _LEGACY if header.api_version == 0 else _AUTHENTICATE
        return Respond(_encode(header, {"error_code": 0, "mechanisms": enabled}))

    def _authenticate(self, conn: "ConnectionContext", header: Any, frame: memoryview, body_offset: int) -> Outcome:
        try:
            request = proto.decode_request(header.api_key, header.api_version, frame, body_offset)
        except proto.MalformedMessageError:
            return CLOSE
        token = bytes(request.auth_bytes or b"")
        if len(token) > self.config.max_receive_size:
            log.warning("Closing %s: SASL token of %d bytes exceeds sasl.server.max.receive.size %d",
                        conn.connection_id, len(token), self.config.max_receive_size)
            return CLOSE
        self._authenticate_version = header.api_version
        try:
            challenge = self._server.evaluate(token)
        except (ScramAuthenticationError, PlainAuthenticationError) as exc:
            self._failed(conn, str(exc), getattr(exc, "detail", ""))
            body = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc),
                    "auth_bytes": b"", "session_lifetime_ms": 0}
            return RespondAndClose(_encode(header, body), self.config.failed_delay_ms / 1000.0)
        except (ScramIllegalStateError, PlainIllegalStateError) as exc:
            self._failed(conn, str(exc), "")
            body = {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": str(exc), "auth_bytes": b"",
                    "session_lifetime_ms": 0}
            return RespondAndClose(_encode(header, body), self.config.failed_delay_ms / 1000.0)
        lifetime_ms = 0
        if self._server.complete:
            principal = self._principal_of_server()
            if self._reauthenticating and principal != conn.principal:
                message = f"Cannot change principals during re-authentication from {conn.principal}: {principal}"
                self._failed(conn, message, "")
                body = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message,
                        "auth_bytes": b"", "session_lifetime_ms": 0}
                return RespondAndClose(_encode(header, body), self.config.failed_delay_ms / 1000.0)
            self._succeeded(conn)
            if self.config.reauth_ms > 0:
                lifetime_ms = self.config.reauth_ms
        return Respond(_encode(header, {"error_code": 0, "error_message": None, "auth_bytes": challenge,
                                        "session_lifetime_ms": lifetime_ms}))

    # ------------------------------------------------------------------ helpers
    def _new_server(self, mechanism: str) -> Any:
        if mechanism == "PLAIN":
            return PlainServer(static_authenticator(self.config.plain_users))
        creds = self._credentials
        tokens = self._tokens

        def lookup(user: str) -> Optional["ScramCredential"]:
            return creds.get(mechanism, user)
        token_lookup = (lambda token_id: tokens(mechanism, token_id)) if tokens is not None else None
        return ScramServer(mechanism, lookup, token_lookup)

    def _principal_of_server(self) -> str:
        server = self._server
        if getattr(server, "token_authenticated", False):
            owner = server.principal_name or ""
            return owner if ":" in owner else f"User:{owner}"
        return f"User:{server.username}"

    def _succeeded(self, conn: "ConnectionContext") -> None:
        principal = self._principal_of_server()
        conn.principal = principal
        conn.sasl_mechanism = self._mechanism
        conn.token_authenticated = bool(getattr(self._server, "token_authenticated", False))
        self._state = _DONE
        if self.config.reauth_ms > 0 and self._authenticate_version >= 1:
            self.session_expiry_ns = time.monotonic_ns() + self.config.reauth_ms * 1_000_000
        else:
            self.session_expiry_ns = None
        log.debug("%s %s as %s with %s", conn.connection_id,
                  "re-authenticated" if self._reauthenticating else "authenticated", principal, self._mechanism)
        self._reauthenticating = False
        self._server = None

    def _failed(self, conn: "ConnectionContext", message: str, detail: str) -> None:
        self._state = _FAILED
        log.info("Failed authentication with %s (%s) using %s: %s%s", conn.client_host, conn.connection_id,
                 self._mechanism, message, f" ({detail})" if detail else "")


def _encode(header: Any, body: Dict[str, Any]) -> list:
    return proto.encode_response(header.api_key, header.api_version, header.correlation_id, body)


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"api {key}"


__all__ = ["SaslServerAuthenticator", "SaslListenerConfig", "Respond", "RespondAndClose", "PASS", "CLOSE"]
