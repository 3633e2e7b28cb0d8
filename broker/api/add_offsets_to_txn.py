"""AddOffsetsToTxn: add the group's ``__consumer_offsets`` partition to the producer's transaction, so that the
offsets a TxnOffsetCommit writes there become visible with the transaction's commit.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else
GROUP_AUTHORIZATION_FAILED), as Kafka checks; PRODUCER_FENCED reaches v0-1 clients as INVALID_PRODUCER_EPOCH.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 4
_ALLOW_ALL = Authz()


def _answer(code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code)}


async def handle(ctx: "RequestContext", request: Any, *, txn_coordinator: "TransactionCoordinator",
                 group_coordinator: "GroupCoordinator", authz: Authz = _ALLOW_ALL) -> dict:
    tid, group = request.transactional_id, request.group_id
    if authz.enabled:
        if not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, group):
            return _answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    tp = (GROUP_METADATA_TOPIC_NAME, group_coordinator.partition_for(group))
    code = await txn_coordinator.add_partitions(tid, request.producer_id, request.producer_epoch, {tp})
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return _answer(code)
