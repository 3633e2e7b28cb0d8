"""DeleteGroups: remove empty groups and their offsets (tombstones in ``__consumer_offsets``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 2
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    names = list(dict.fromkeys(request.groups_names))
    if authz.enabled:  # DELETE on each group
        allowed = authz.filter_allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
        result = await coordinator.delete_groups([g for g in names if g in allowed]) if allowed else {}
        result.update((g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in names if g not in allowed)
    else:
        result = await coordinator.delete_groups(names)
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": int(result[g])} for g in names]}
