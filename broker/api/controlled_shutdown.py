"""ControlledShutdown (broker -> controller): move a stopping broker's leaderships away before it goes.

Only the active controller answers (others: NOT_CONTROLLER); it refuses a stale broker epoch
(STALE_BROKER_EPOCH). The answer lists the partitions the broker still leads; the broker retries
until the list is empty (``controlled.shutdown.max.retries``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController

MIN_VERSION, MAX_VERSION = 0, 3


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController") -> dict:
    epoch = request.broker_epoch if ctx.api_version >= 2 else -1
    error, remaining = await controller.controlled_shutdown(request.broker_id, epoch)
    return {"error_code": int(error),
            "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}
