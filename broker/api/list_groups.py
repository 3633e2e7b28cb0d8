"""ListGroups: the groups this broker coordinates (v4+: state filter, v5+: type filter)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator") -> dict:
    version = ctx.api_version
    states = {s.lower() for s in (request.states_filter or [])} if version >= 4 else set()
    types = {t.lower() for t in (request.types_filter or [])} if version >= 5 else set()
    error, groups = coordinator.list_groups(states or None)
    if types and "classic" not in types:
        groups = []
    return {"throttle_time_ms": 0, "error_code": int(error), "groups": groups}
