"""ListTransactions (KIP-664, v1 adds KIP-994's duration filter): the transactional ids this broker coordinates,
filtered by state, producer id and (v1) minimum running time.

Unknown state names come back in ``unknown_state_filters``; only ids the principal may DESCRIBE are listed;
COORDINATOR_LOAD_IN_PROGRESS while any ``__transaction_state`` partition is loading, as Kafka answers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 1
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, txn_coordinator: "TransactionCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    duration = int(getattr(request, "duration_filter", -1)) if ctx.api_version >= 1 else -1
    error, unknown, entries = txn_coordinator.list_transactions(
        set(request.state_filters), {int(p) for p in request.producer_id_filters}, duration)
    if authz.enabled:
        entries = [e for e in entries if authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                       e["transactional_id"])]
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": entries}
