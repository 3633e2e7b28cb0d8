"""Authorization as the API handlers ask for it: "may this connection do OPERATION on RESOURCE?".

`Authz` is the handlers' one collaborator for access control. Without an authorizer configured
(`authorizer.class.name` empty) everything is allowed, as in Kafka; with one, `enabled` is True and
`broker.api.acl_authz.AclAuthz` answers from the ACLs. Handlers test `authz.enabled` once before doing any
per-resource work, so the no-authorizer path costs one attribute read.

The methods mirror Kafka's AuthHelper: `allowed` (authorize one literal resource), `filter_allowed`
(filterByAuthorized: the names of a collection that are allowed, each distinct name checked once with its
reference count), `allowed_by_resource_type` (KIP-679's authorizeByResourceType) and `authorized_operations`
(the int32 bit field of allowed operations that Metadata/DescribeGroups/DescribeCluster report).
`log_if_allowed`/`log_if_denied` choose the audit level as in Kafka (DEBUG/INFO when set, TRACE otherwise).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional, Set, Tuple

from broker.api import acl_ops
from broker.security.acl import AclBinding, AclBindingFilter, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

#: (error code, error message) of one failed ACL creation or deletion
AclError = Tuple[int, Optional[str]]


class Authz:
    """Default: no authorizer (every request allowed)."""

    enabled = False

    def allowed(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                name: str, *, log_if_allowed: bool = True, log_if_denied: bool = True, ref_count: int = 1) -> bool:
        return True

    def filter_allowed(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                       names: Iterable[str], *, log_if_allowed: bool = True, log_if_denied: bool = True) -> Set[str]:
        """The distinct names among `names` that may be accessed (duplicates count as references)."""
        return set(names)

    def allowed_by_resource_type(self, ctx: "RequestContext", operation: AclOperation,
                                 resource_type: ResourceType) -> bool:
        """KIP-679: may the principal perform `operation` on at least one resource of this type?"""
        return True

    def authorized_operations(self, ctx: "RequestContext", resource_type: ResourceType, name: str) -> int:
        """The bit field of the resource type's supported operations that are allowed (never logged)."""
        return acl_ops.all_operations(resource_type)

    # ACL administration (CreateAcls/DescribeAcls/DeleteAcls): only an authorizer holds ACLs; handlers check
    # `enabled` first and answer SECURITY_DISABLED otherwise.
    def describe_acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        raise RuntimeError("No Authorizer is configured on the broker")

    async def create_acls(self, bindings: List[AclBinding]) -> List[Optional[AclError]]:
        """Create valid bindings; per binding None (created or already present) or its error."""
        raise RuntimeError("No Authorizer is configured on the broker")

    async def delete_acls(self, filters: List[AclBindingFilter]
                          ) -> List[List[Tuple[AclBinding, Optional[AclError]]]]:
        """Per filter, the bindings it deleted, each with None or the error that kept it from being deleted."""
        raise RuntimeError("No Authorizer is configured on the broker")


__all__ = ["Authz", "AclError"]
