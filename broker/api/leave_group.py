"""LeaveGroup: members leave (v3+: several at once, static members by group.instance.id)."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    version = ctx.api_version
    coordinator = getattr(broker, "group_coordinator", None)
    if version >= 3:
        leaving: List[Tuple[str, Optional[str]]] = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    if coordinator is None:
        top, members = ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    else:
        top, members = await coordinator.leave_group(request.group_id, leaving)
    if version >= 3:
        return {"throttle_time_ms": 0, "error_code": int(top),
                "members": [{"member_id": mid, "group_instance_id": iid, "error_code": int(e)}
                            for mid, iid, e in members]}
    code = top or next((e for _, _, e in members if e), 0)
    return {"throttle_time_ms": 0, "error_code": int(code)}
