"""Authorization as the API handlers ask for it: "may this connection do OPERATION on RESOURCE?".

`Authz` is the handlers' one collaborator for access control. Without an authorizer configured
(`authorizer.class.name` empty) everything is allowed, as in Kafka.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext


class Authz:
    """Default: no authorizer (every request allowed)."""

    enabled = False

    def allowed(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        return True


__all__ = ["Authz"]
