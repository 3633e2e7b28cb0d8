"""CreatePartitions: add partitions to existing topics."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager

MIN_VERSION, MAX_VERSION = 0, 3


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager") -> dict:
    results = []
    for t in request.topics:
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
        code, msg = await admin.create_partitions(t.name, t.count, assignments, request.validate_only)
        results.append({"name": t.name, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "results": results}
