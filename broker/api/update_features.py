"""UpdateFeatures (KIP-584): change finalized feature levels in ``/feature`` (the controller validates them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController

MIN_VERSION, MAX_VERSION = 0, 1


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController") -> dict:
    return await controller.update_features(request, ctx.api_version)
