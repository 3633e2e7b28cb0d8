"""LeaveGroup: members leave (v3+: several at once, static members by group.instance.id)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple


if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    version = ctx.api_version
    if version >= 3:
        leaving: List[Tuple[str, Optional[str]]] = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    top, members = await coordinator.leave_group(request.group_id, leaving)
    if version >= 3:
        return {"throttle_time_ms": 0, "error_code": int(top),
                "members": [{"member_id": mid, "group_instance_id": iid, "error_code": int(e)}
                            for mid, iid, e in members]}
    code = top or next((e for _, _, e in members if e), 0)
    return {"throttle_time_ms": 0, "error_code": int(code)}
