"""DescribeGroups: state, protocol and members (metadata and assignment once Stable) of groups."""
from __future__ import annotations

from typing import Any

from broker.api import acl_ops
from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    coordinator = getattr(broker, "group_coordinator", None)
    include_ops = bool(getattr(request, "include_authorized_operations", False)) and ctx.api_version >= 3
    out = []
    for gid in request.groups:
        if coordinator is None:
            d = {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "group_id": gid, "group_state": "",
                 "protocol_type": "", "protocol_data": "", "members": []}
        else:
            d = coordinator.describe_group(gid)
        d["authorized_operations"] = acl_ops.GROUP_OPERATIONS if include_ops and not d["error_code"] \
            else -2147483648
        out.append(d)
    return {"throttle_time_ms": 0, "groups": out}
