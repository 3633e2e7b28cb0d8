"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 4


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    code = await coordinator.heartbeat(request.group_id, request.member_id,
                                       getattr(request, "group_instance_id", None) if ctx.api_version >= 3 else None,
                                       request.generation_id)
    return {"throttle_time_ms": 0, "error_code": int(code)}
