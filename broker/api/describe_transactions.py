"""DescribeTransactions (KIP-664): state, producer id/epoch, timeout, start time and partitions of transactional ids
this broker coordinates.

Each id needs DESCRIBE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and only topics the principal may DESCRIBE
are listed, as Kafka filters them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.coordinator.transaction.state import describe_error
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 0
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, txn_coordinator: "TransactionCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    states = []
    for tid in request.transactional_ids:
        if authz.enabled and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            entry = describe_error(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            entry = txn_coordinator.describe_transaction(tid)
        if authz.enabled:
            entry["topics"] = [t for t in entry["topics"]
                               if authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic"])]
        states.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": states}
