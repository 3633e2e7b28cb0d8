"""AlterPartition (leader -> controller, KIP-497): a partition leader asks the controller to change its ISR.

The controller validates the sender's broker epoch, the leader and partition epochs and every new
ISR member, writes the partition state znode with compare-and-set and answers with the new state.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController

MIN_VERSION, MAX_VERSION = 0, 3


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController") -> dict:
    return await controller.alter_partition(request, ctx.api_version)
