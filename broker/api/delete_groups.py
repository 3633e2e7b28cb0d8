"""DeleteGroups: remove empty groups and their offsets (tombstones in ``__consumer_offsets``)."""
from __future__ import annotations

from typing import Any

from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 2


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    coordinator = getattr(broker, "group_coordinator", None)
    names = list(dict.fromkeys(request.groups_names))
    if coordinator is None:
        result = {g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in names}
    else:
        result = await coordinator.delete_groups(names)
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": int(result[g])} for g in names]}
