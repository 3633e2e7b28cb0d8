"""OffsetForLeaderEpoch: the end offset of a leader epoch, for truncation after leader changes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 4


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager") -> dict:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, epoch, end = await replica_manager.end_offset_for_epoch(
                (t.topic, p.partition), getattr(p, "current_leader_epoch", -1), p.leader_epoch)
            parts.append({"error_code": code, "partition": p.partition, "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
