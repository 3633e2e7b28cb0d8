"""DescribeGroups: state, protocol and members (metadata and assignment once Stable) of groups."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api import acl_ops
from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 5
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    include_ops = bool(getattr(request, "include_authorized_operations", False)) and ctx.api_version >= 3
    out = []
    for gid in request.groups:
        if authz.enabled:  # DESCRIBE on each group; the bit field is the principal's own operations on it
            if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
                out.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                            "protocol_type": "", "protocol_data": "", "members": [],
                            "authorized_operations": acl_ops.NOT_REQUESTED})
                continue
            d = coordinator.describe_group(gid)
            d["authorized_operations"] = (authz.authorized_operations(ctx, ResourceType.GROUP, gid)
                                          if include_ops and not d["error_code"] else acl_ops.NOT_REQUESTED)
            out.append(d)
            continue
        d = coordinator.describe_group(gid)
        d["authorized_operations"] = acl_ops.GROUP_OPERATIONS if include_ops and not d["error_code"] \
            else -2147483648
        out.append(d)
    return {"throttle_time_ms": 0, "groups": out}
