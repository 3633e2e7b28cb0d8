"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""
from __future__ import annotations

from typing import Any

from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 4


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    code = await coordinator.heartbeat(request.group_id, request.member_id,
                                       getattr(request, "group_instance_id", None) if ctx.api_version >= 3 else None,
                                       request.generation_id)
    return {"throttle_time_ms": 0, "error_code": int(code)}
