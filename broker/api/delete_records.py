"""DeleteRecords: advance a partition's log start offset (its low watermark)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 2


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager") -> dict:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, low = await replica_manager.delete_records((t.name, p.partition_index), p.offset)
            parts.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
