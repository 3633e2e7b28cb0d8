"""DescribeGroups: state, protocol and members (metadata and assignment once Stable) of groups."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api import acl_ops

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    include_ops = bool(getattr(request, "include_authorized_operations", False)) and ctx.api_version >= 3
    out = []
    for gid in request.groups:
        d = coordinator.describe_group(gid)
        d["authorized_operations"] = acl_ops.GROUP_OPERATIONS if include_ops and not d["error_code"] \
            else -2147483648
        out.append(d)
    return {"throttle_time_ms": 0, "groups": out}
