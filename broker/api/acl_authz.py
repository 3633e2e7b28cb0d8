"""The ACL authorizer as the handlers see it: Kafka 3.9's AclAuthorizer (ZooKeeper mode) behind the `Authz` contract.

Decisions come from `broker.security.authorizer.AclAuthorizer` over the `AclCache` that the ZooKeeper ACL store
(`broker.cluster.acl_store.ZkAclStore`) keeps current; the principal is the connection's (``User:ANONYMOUS`` on
PLAINTEXT, ``User:<name>`` once SASL or TLS authenticated it) and the host its client address, as Kafka's
``RequestContext.clientAddress.getHostAddress``.

Every decision is audited on the logger ``kafka.authorizer.logger`` exactly as Kafka's AclAuthorizer does: refusals
of explicitly requested resources at INFO, grants at DEBUG, decisions made only to filter or to compute authorized
operations at TRACE (level 5), with Kafka's line format (``decision_log_line``). config/logging.ini sends that
logger to ``kafka-authorizer.log`` in the broker's log dir, as Kafka's log4j.properties does.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Protocol, Set, Tuple

from broker.api import acl_ops
from broker.api.authz import AclError, Authz
from broker.config.security_keys import ACL_AUTHORIZER_CLASS_NAMES
from broker.protocol.api_keys import ApiKey
from broker.security.acl import (AclBinding, AclBindingFilter, AclOperation, PatternType, ResourcePattern,
                                 ResourceType)
from broker.security.authorizer import (AclAuthorizer, by_resource_type_log_pattern, decision_log_level,
                                        decision_log_line)

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

#: Kafka's audit logger name (log4j.logger.kafka.authorizer.logger in Kafka's log4j.properties)
audit_log = logging.getLogger("kafka.authorizer.logger")


def _api_name(key: int) -> str:
    """Kafka's ApiKeys.name (the message name, e.g. "Produce", "OffsetForLeaderEpoch") for the audit line."""
    try:
        return "".join(p.capitalize() for p in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)


_API_NAMES: Dict[int, str] = {int(k): _api_name(k) for k in ApiKey}


class AclWriter(Protocol):
    """What the authorizer needs from its ACL store to change ACLs (broker.cluster.acl_store.ZkAclStore)."""

    async def create_acls(self, bindings: List[AclBinding]) -> List[Optional[AclError]]: ...

    async def delete_acls(self, filters: List[AclBindingFilter]
                          ) -> List[List[Tuple[AclBinding, Optional[AclError]]]]: ...


class AclAuthz(Authz):
    """`Authz` backed by ACLs: super users, `allow.everyone.if.no.acl.found`, DENY over ALLOW, prefixes, `*`."""

    enabled = True

    def __init__(self, authorizer: AclAuthorizer, store: Optional[AclWriter] = None) -> None:
        self.authorizer = authorizer
        self.store = store

    # ------------------------------------------------------------------ decisions
    def _audit(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType, name: str,
               authorized: bool, log_if_allowed: bool, log_if_denied: bool, ref_count: int) -> None:
        level = decision_log_level(authorized, log_if_allowed, log_if_denied)
        if audit_log.isEnabledFor(level):
            conn = ctx.connection
            pattern = (ResourcePattern(resource_type, name, PatternType.LITERAL) if ref_count
                       else by_resource_type_log_pattern(resource_type))
            audit_log.log(level, "%s", decision_log_line(
                conn.principal, conn.client_host, operation, pattern, authorized,
                _API_NAMES.get(ctx.api_key, str(ctx.api_key)), ref_count))

    def allowed(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                name: str, *, log_if_allowed: bool = True, log_if_denied: bool = True, ref_count: int = 1) -> bool:
        conn = ctx.connection
        ok = self.authorizer.authorize(conn.principal, conn.client_host, operation, resource_type, name)
        self._audit(ctx, operation, resource_type, name, ok, log_if_allowed, log_if_denied, ref_count)
        return ok

    def filter_allowed(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType,
                       names: Iterable[str], *, log_if_allowed: bool = True, log_if_denied: bool = True) -> Set[str]:
        return {name for name, count in Counter(names).items()
                if self.allowed(ctx, operation, resource_type, name, log_if_allowed=log_if_allowed,
                                log_if_denied=log_if_denied, ref_count=count)}

    def allowed_by_resource_type(self, ctx: "RequestContext", operation: AclOperation,
                                 resource_type: ResourceType) -> bool:
        conn = ctx.connection
        ok = self.authorizer.authorize_by_resource_type(conn.principal, conn.client_host, operation, resource_type)
        self._audit(ctx, operation, resource_type, "NONE", ok, True, True, 0)  # Kafka's "resourceRefCount = 0" line
        return ok

    def authorized_operations(self, ctx: "RequestContext", resource_type: ResourceType, name: str) -> int:
        return acl_ops.bits(op for op in acl_ops.SUPPORTED_OPERATIONS.get(resource_type, ())
                            if self.allowed(ctx, op, resource_type, name, log_if_allowed=False,
                                            log_if_denied=False))

    # ------------------------------------------------------------------ ACL administration
    def describe_acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        return self.authorizer.describe(binding_filter)

    async def create_acls(self, bindings: List[AclBinding]) -> List[Optional[AclError]]:
        if self.store is None:
            raise RuntimeError("this authorizer has no ACL store")
        return await self.store.create_acls(bindings)

    async def delete_acls(self, filters: List[AclBindingFilter]
                          ) -> List[List[Tuple[AclBinding, Optional[AclError]]]]:
        if self.store is None:
            raise RuntimeError("this authorizer has no ACL store")
        return await self.store.delete_acls(filters)


__all__ = ["AclAuthz", "AclWriter", "ACL_AUTHORIZER_CLASS_NAMES", "audit_log"]
