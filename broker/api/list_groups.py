"""ListGroups: the groups this broker coordinates (v4+: state filter, v5+: type filter)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    states = {s.lower() for s in (request.states_filter or [])} if version >= 4 else set()
    types = {t.lower() for t in (request.types_filter or [])} if version >= 5 else set()
    error, groups = coordinator.list_groups(states or None)
    if types and "classic" not in types:
        groups = []
    # DESCRIBE on the cluster lists every group (kept by Kafka for compatibility); otherwise only the groups the
    # principal may DESCRIBE, silently
    if authz.enabled and groups and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER,
                                                      CLUSTER_RESOURCE_NAME, log_if_denied=False):
        groups = [g for g in groups
                  if authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"], log_if_denied=False)]
    return {"throttle_time_ms": 0, "error_code": int(error), "groups": groups}
