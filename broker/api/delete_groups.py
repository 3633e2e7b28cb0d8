"""DeleteGroups: remove empty groups and their offsets (tombstones in ``__consumer_offsets``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 2


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    names = list(dict.fromkeys(request.groups_names))
    result = await coordinator.delete_groups(names)
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": int(result[g])} for g in names]}
