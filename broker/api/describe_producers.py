"""DescribeProducers: the idempotent/transactional producers active on a partition."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 0
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 authz: Authz = _ALLOW_ALL) -> dict:
    rm = replica_manager
    topics = []
    for t in request.topics:
        if authz.enabled and not authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name):
            topics.append({"name": t.name, "partitions": [
                {"partition_index": idx, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 "error_message": "Topic authorization failed.", "active_producers": []}
                for idx in t.partition_indexes]})
            continue
        parts = []
        for idx in t.partition_indexes:
            p = rm.get_partition((t.name, idx))
            if p is None:
                parts.append({"partition_index": idx, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "active_producers": []})
                continue
            if p.log is None:  # as Kafka: any replica with a log answers, followers too
                parts.append({"partition_index": idx, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              "active_producers": []})
                continue
            producers = await rm.run_io(p.log.active_producers, key=(t.name, idx))
            parts.append({"partition_index": idx, "error_code": 0, "active_producers": [
                {"producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
                 "last_sequence": s.last_sequence, "last_timestamp": s.last_timestamp,
                 "coordinator_epoch": getattr(s, "coordinator_epoch", -1),
                 "current_txn_start_offset": getattr(s, "current_txn_start_offset", -1)}
                for s in producers]})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
