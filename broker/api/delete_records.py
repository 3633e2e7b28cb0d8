"""DeleteRecords: advance partitions' log start offsets; answered once every live replica followed (the low
watermark passed the offset) or the request's timeout ended (REQUEST_TIMED_OUT), as Kafka's
DelayedDeleteRecords does."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 2
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 authz: Authz = _ALLOW_ALL) -> dict:
    wanted: Dict[Tuple[str, int], int] = {}
    refused: Dict[Tuple[str, int], Tuple[int, int]] = {}
    allowed = (authz.filter_allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in request.topics])
               if authz.enabled else None)  # DELETE on each topic
    for t in request.topics:
        for p in t.partitions:
            if allowed is not None and t.name not in allowed:
                refused[(t.name, p.partition_index)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
            else:
                wanted[(t.name, p.partition_index)] = p.offset
    done = await replica_manager.delete_records_all(wanted, request.timeout_ms) if wanted else {}
    done.update(refused)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, low = done[(t.name, p.partition_index)]
            parts.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
