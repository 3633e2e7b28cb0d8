"""ApiVersions: the list of APIs and versions this broker really serves (from the registry)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.api.registry import ApiRegistry

MIN_VERSION, MAX_VERSION = 0, 4
#: KIP-511's rule for client_software_name and client_software_version (Kafka's ApiVersionsRequest.isValid)
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_client_software(request: Any, version: int) -> bool:
    """v3+: both strings must match KIP-511's pattern, else Kafka answers INVALID_REQUEST with no API list."""
    if version < 3:
        return True
    return all(_SOFTWARE.fullmatch(getattr(request, f, "") or "") is not None
               for f in ("client_software_name", "client_software_version"))


async def handle(ctx: "RequestContext", request: Any, *, registry: "ApiRegistry") -> dict:
    if not valid_client_software(request, ctx.api_version):
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    return registry.api_versions_answer(ctx.api_version)
