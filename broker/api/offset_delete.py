"""OffsetDelete: drop a group's offsets for partitions it no longer subscribes to."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 0


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache") -> dict:
    errors: Dict[Tuple[str, int], int] = {}
    wanted: List[Tuple[str, int]] = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if metadata.partition(t.name, p.partition_index) is None:
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
