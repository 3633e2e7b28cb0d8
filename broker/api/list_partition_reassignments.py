"""ListPartitionReassignments (KIP-455): the reassignments in progress (topics null = all)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController

MIN_VERSION, MAX_VERSION = 0, 0


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController") -> dict:
    return await controller.list_partition_reassignments(request)
