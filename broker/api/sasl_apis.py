"""SaslHandshake (17) and SaslAuthenticate (36) when they reach the request handlers.

During authentication both are handled by :mod:`broker.api.sasl_authenticator` before any
handler runs. Here they arrive only on a connection that is not authenticating: a non-SASL
listener, or one already authenticated (without re-authentication), where Kafka answers
ILLEGAL_SASL_STATE.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

HANDSHAKE_MIN, HANDSHAKE_MAX = 0, 1
AUTHENTICATE_MIN, AUTHENTICATE_MAX = 0, 2


async def handshake(ctx: "RequestContext", request: Any) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


async def authenticate(ctx: "RequestContext", request: Any) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
