"""SASL/PLAIN (RFC 4616) server side with Kafka's checks and error texts, plus the one-line client message.

Pure code: the broker passes the SaslAuthenticate bytes to :meth:`PlainServer.evaluate`; the password check itself
is the injected ``authenticate`` callable (e.g. :func:`static_authenticator` over JAAS ``user_<name>`` options).
"""
from __future__ import annotations

import hmac
from typing import Callable, Mapping

AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"


class PlainAuthenticationError(Exception):
    """The exchange failed; the message is sent to the client verbatim, as Kafka does for SASL/PLAIN."""


class PlainIllegalStateError(Exception):
    """evaluate() was called again after the single PLAIN message was handled: Kafka's ILLEGAL_SASL_STATE."""


class PlainServer:
    """One SASL/PLAIN exchange: a single client message, an empty reply on success."""

    def __init__(self, authenticate: Callable[[str, str], bool]) -> None:
        self._authenticate = authenticate
        self._done = False
        self.complete = False
        self.username: str | None = None

    def evaluate(self, message: bytes) -> bytes:
        """Check ``authzid NUL authcid NUL passwd``; returns b"" on success, raises PlainAuthenticationError."""
        if self._done:
            raise PlainIllegalStateError("SASL/PLAIN exchange already " + ("completed" if self.complete else "failed"))
        self._done = True
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise PlainAuthenticationError("Invalid SASL/PLAIN response: not valid UTF-8") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise PlainAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise PlainAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise PlainAuthenticationError("Authentication failed: password not specified")
        if not self._authenticate(username, password):
            raise PlainAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise PlainAuthenticationError(AUTHZID_MISMATCH)
        self.username, self.complete = username, True
        return b""


def static_authenticator(users: Mapping[str, str]) -> Callable[[str, str], bool]:
    """A PlainServer ``authenticate`` over fixed users (JAAS ``user_<name>`` options), comparing in constant time."""
    def authenticate(username: str, password: str) -> bool:
        expected = users.get(username)
        return expected is not None and hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))
    return authenticate


def plain_client_message(username: str, password: str, authzid: str = "") -> bytes:
    """The client's only PLAIN message; Kafka clients send an empty authzid."""
    if any("\x00" in s for s in (username, password, authzid)):
        raise ValueError("SASL/PLAIN username, password and authzid may not contain NUL")
    return f"{authzid}\x00{username}\x00{password}".encode("utf-8")
