"""ApiVersions: the list of APIs and versions this broker really serves (from the registry)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.api.registry import ApiRegistry

MIN_VERSION, MAX_VERSION = 0, 4


async def handle(ctx: "RequestContext", request: Any, *, registry: "ApiRegistry") -> dict:
    return registry.api_versions_body()
