"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40), DescribeDelegationToken (41).

As Kafka 3.9 in ZooKeeper mode answers them (KafkaApis): tokens may be requested only over an
authenticated channel that did not itself authenticate with a token, so PLAINTEXT, TLS without a
client certificate (User:ANONYMOUS) and token-authenticated connections get
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Creating a token for another owner (KIP-373, v3) needs
CREATE_TOKENS on that owner's USER resource (else DELEGATION_TOKEN_AUTHORIZATION_FAILED);
renewers must be User principals (else INVALID_PRINCIPAL_TYPE). Only the owner or a renewer may
renew or expire a token. Describe lists the tokens the requester owns, requested or may renew,
plus those it may DESCRIBE (DELEGATION_TOKEN resource) or whose owner it may DESCRIBE_TOKENS (USER
resource); an empty owner list describes nothing, a null one every owner.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType
from broker.security.token_cache import TokenInformation

if TYPE_CHECKING:
    from broker.api.authz import Authz
    from broker.api.dispatcher import ConnectionContext, RequestContext
    from broker.cluster.delegation_token_manager import DelegationTokenManager

log = logging.getLogger(__name__)

CREATE_MIN, CREATE_MAX = 0, 3
RENEW_MIN, RENEW_MAX = 0, 2
EXPIRE_MIN, EXPIRE_MAX = 0, 2
DESCRIBE_MIN, DESCRIBE_MAX = 0, 3

ANONYMOUS = "User:ANONYMOUS"
USER_TYPE = "User"


def allow_token_requests(conn: "ConnectionContext") -> bool:
    """Kafka's allowTokenRequests: not token-authenticated, not PLAINTEXT, not one-way TLS."""
    if conn.token_authenticated or conn.security_protocol == "PLAINTEXT":
        return False
    return not (conn.security_protocol == "SSL" and conn.principal == ANONYMOUS)


def _split(principal: str) -> Tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _create_response(code: int, owner: str, requester: str, issue: int = -1, expiry: int = -1, max_ts: int = -1,
                     token_id: str = "", hmac: bytes = b"") -> dict:
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(requester)
    return {"error_code": code, "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": issue, "expiry_timestamp_ms": expiry, "max_timestamp_ms": max_ts,
            "token_id": token_id, "hmac": hmac, "throttle_time_ms": 0}


async def create(ctx: "RequestContext", request: Any, *, tokens: "DelegationTokenManager", authz: "Authz") -> dict:
    conn = ctx.connection
    requester = conn.principal
    owner_name: Optional[str] = getattr(request, "owner_principal_name", None)
    owner_type: Optional[str] = getattr(request, "owner_principal_type", None)
    if owner_name and owner_type is None:  # Kafka: KafkaPrincipal(null, name) throws; the error response names nobody
        return _create_response(ErrorCode.UNKNOWN_SERVER_ERROR, ANONYMOUS, ANONYMOUS)
    owner = f"{owner_type}:{owner_name}" if owner_name else requester
    if not allow_token_requests(conn):
        return _create_response(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if owner != requester and not authz.allowed(ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
        return _create_response(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    if any(r.principal_type != USER_TYPE for r in request.renewers):
        return _create_response(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in request.renewers]
    try:
        r = await tokens.create_token(owner, requester, renewers, int(request.max_lifetime_ms))
    except Exception:
        log.exception("Creating a delegation token for %s failed", owner)
        return _create_response(ErrorCode.UNKNOWN_SERVER_ERROR, owner, requester)
    return _create_response(r.error_code, r.owner, r.token_requester, r.issue_timestamp, r.expiry_timestamp,
                            r.max_timestamp, r.token_id, r.hmac)


def _expiry_response(code: int, expiry: int) -> dict:
    return {"error_code": code, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


async def renew(ctx: "RequestContext", request: Any, *, tokens: "DelegationTokenManager") -> dict:
    if not allow_token_requests(ctx.connection):
        return _expiry_response(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    try:
        code, expiry = await tokens.renew_token(ctx.connection.principal, bytes(request.hmac),
                                                int(request.renew_period_ms))
    except Exception:
        log.exception("Renewing a delegation token failed")
        return _expiry_response(ErrorCode.UNKNOWN_SERVER_ERROR, -1)
    return _expiry_response(code, expiry)


async def expire(ctx: "RequestContext", request: Any, *, tokens: "DelegationTokenManager") -> dict:
    if not allow_token_requests(ctx.connection):
        return _expiry_response(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    try:
        code, expiry = await tokens.expire_token(ctx.connection.principal, bytes(request.hmac),
                                                 int(request.expiry_time_period_ms))
    except Exception:
        log.exception("Expiring a delegation token failed")
        return _expiry_response(ErrorCode.UNKNOWN_SERVER_ERROR, -1)
    return _expiry_response(code, expiry)


def _described(info: TokenInformation, hmac: bytes) -> dict:
    owner_type, owner_name = _split(info.owner)
    requester_type, requester_name = _split(info.token_requester)
    return {"principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp": info.issue_timestamp, "expiry_timestamp": info.expiry_timestamp,
            "max_timestamp": info.max_timestamp, "token_id": info.token_id, "hmac": hmac,
            "renewers": [dict(zip(("principal_type", "principal_name"), _split(r))) for r in info.renewers]}


async def describe(ctx: "RequestContext", request: Any, *, tokens: "DelegationTokenManager", authz: "Authz") -> dict:
    def answer(code: int, found: List[Tuple[TokenInformation, bytes]]) -> dict:
        return {"error_code": code, "tokens": [_described(i, h) for i, h in found], "throttle_time_ms": 0}

    if not allow_token_requests(ctx.connection):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    if not tokens.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    if request.owners is not None and len(request.owners) == 0:
        return answer(0, [])
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    requester = ctx.connection.principal

    def eligible(token: TokenInformation) -> bool:
        if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
            return False
        if token.owner_or_renewer(requester):
            return True
        return (authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                or authz.allowed(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner))

    return answer(0, tokens.get_tokens(eligible))
