"""ListOffsets: earliest, latest (high watermark), max timestamp, earliest local (-4) and latest tiered (-5, KIP-405),
and offset-for-time lookups."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 9
_ALLOW_ALL = Authz()


def duplicate_partitions(topics: Any) -> Set[Tuple[str, int]]:
    """The partitions a ListOffsets request names more than once (Kafka's ListOffsetsRequest.duplicatePartitions)."""
    seen: Set[Tuple[str, int]] = set()
    twice: Set[Tuple[str, int]] = set()
    for t in topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            (twice if tp in seen else seen).add(tp)
    return twice


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    rm = replica_manager
    isolation = getattr(request, "isolation_level", 0)
    replica_id = request.replica_id  # a follower (>= 0) sees up to the LEO, a consumer (-1) up to the HW/LSO
    topics = []
    refused = []
    allowed: Optional[Set[str]] = None
    if authz.enabled:  # DESCRIBE on each topic; refused topics are answered after the others, as Kafka does
        allowed = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in request.topics])
    duplicates = duplicate_partitions(request.topics) if version >= 1 else set()
    for t in request.topics:
        if allowed is not None and t.name not in allowed:
            refused.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]})
            continue
        parts = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            entry = {"partition_index": p.partition_index, "error_code": 0, "old_style_offsets": [],
                     "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if tp in duplicates:  # Kafka: INVALID_REQUEST for every occurrence of a partition asked for twice
                entry["error_code"] = ErrorCode.INVALID_REQUEST
                parts.append(entry)
                continue
            cle = getattr(p, "current_leader_epoch", -1)
            code, ts, offset, epoch = await rm.list_offset(tp, p.timestamp, isolation, replica_id=replica_id,
                                                           current_leader_epoch=cle)
            entry["error_code"] = code
            if code == 0:
                if version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 else []
                entry.update(timestamp=ts, offset=offset, leader_epoch=epoch)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics + refused}
