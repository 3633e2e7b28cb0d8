"""ApiVersions: the list of APIs and versions this broker really serves (from the registry)."""
from __future__ import annotations

from typing import Any

MIN_VERSION, MAX_VERSION = 0, 4


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    return broker.registry.api_versions_body()
