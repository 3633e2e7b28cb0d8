"""OffsetDelete: drop a group's offsets for partitions it no longer subscribes to."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 0
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache", authz: Authz = _ALLOW_ALL) -> dict:
    errors: Dict[Tuple[str, int], int] = {}
    wanted: List[Tuple[str, int]] = []
    readable: Optional[Set[str]] = None
    if authz.enabled:  # DELETE on the group, then READ on each topic
        if not authz.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
            return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
        readable = authz.filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics])
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if readable is not None and t.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif metadata.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    top, deleted = await coordinator.delete_offsets(request.group_id, wanted)
    if top:
        return {"error_code": int(top), "throttle_time_ms": 0, "topics": []}
    errors.update(deleted)
    return {"error_code": 0, "throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": int(errors[(t.name, p.partition_index)])}
                                        for p in t.partitions]} for t in request.topics]}
