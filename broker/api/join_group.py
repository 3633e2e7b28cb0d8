"""JoinGroup: a member joins (or rejoins) a classic group; the answer waits for the rebalance."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 9


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    version = ctx.api_version
    instance_id = getattr(request, "group_instance_id", None) if version >= 5 else None
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else -1
    result = await coordinator.join_group(
        request.group_id, request.member_id, instance_id, ctx.client_id or "",
        "/" + ctx.connection.client_host, rebalance_timeout, request.session_timeout_ms,
        request.protocol_type, [(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4 and instance_id is None,
        support_skip_assignment=version >= 9)
    response = dict(result, throttle_time_ms=0)
    if version < 7 and response["protocol_name"] is None:
        response["protocol_name"] = ""
    if version < 9:
        response["skip_assignment"] = False
    return response
