"""EndTxn: commit or abort the producer's transaction.

The coordinator logs PrepareCommit/PrepareAbort and answers; markers go to the partitions afterwards and the
transaction completes once all are written (until then a new request of the producer answers
CONCURRENT_TRANSACTIONS). Needs WRITE on the transactional id; PRODUCER_FENCED reaches v0-1 clients as
INVALID_PRODUCER_EPOCH, as Kafka maps it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 4
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, txn_coordinator: "TransactionCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    tid = request.transactional_id
    if authz.enabled and not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    code = await txn_coordinator.end_transaction(tid, request.producer_id, request.producer_epoch,
                                                 bool(request.committed))
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return {"throttle_time_ms": 0, "error_code": int(code)}
