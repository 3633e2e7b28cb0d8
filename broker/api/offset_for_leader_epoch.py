"""OffsetForLeaderEpoch: the end offset of a leader epoch, for truncation after leader changes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Set

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 4
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 authz: Authz = _ALLOW_ALL) -> dict:
    topics = []
    refused = []
    allowed: Optional[Set[str]] = None
    # CLUSTER_ACTION (followers) covers every topic; consumers (KIP-320) need DESCRIBE on each topic. Refused topics
    # are answered after the others, as Kafka does.
    if authz.enabled and not authz.allowed(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                           CLUSTER_RESOURCE_NAME, log_if_denied=False):
        allowed = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                       [t.topic for t in request.topics])
    for t in request.topics:
        if allowed is not None and t.topic not in allowed:
            refused.append({"topic": t.topic, "partitions": [
                {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "partition": p.partition, "leader_epoch": -1,
                 "end_offset": -1} for p in t.partitions]})
            continue
        parts = []
        for p in t.partitions:
            code, epoch, end = await replica_manager.end_offset_for_epoch(
                (t.topic, p.partition), getattr(p, "current_leader_epoch", -1), p.leader_epoch)
            parts.append({"error_code": code, "partition": p.partition, "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics + refused}
