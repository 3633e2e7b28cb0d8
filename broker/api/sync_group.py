"""SyncGroup: the leader hands out assignments; every member waits for its own."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinator.group.state import sync_result
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    version = ctx.api_version
    protocol_type = getattr(request, "protocol_type", None) if version >= 5 else None
    protocol_name = getattr(request, "protocol_name", None) if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        result = sync_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    else:
        result = await coordinator.sync_group(
            request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None) if version >= 3 else None, protocol_type, protocol_name,
            {a.member_id: bytes(a.assignment) for a in request.assignments})
    return dict(result, throttle_time_ms=0)
