"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-3, as Kafka 3.9's AclApis in ZooKeeper mode.

Order of checks, as Kafka: the cluster permission first (DESCRIBE for DescribeAcls, ALTER for the other two; refused:
CLUSTER_AUTHORIZATION_FAILED), then whether an authorizer is configured (SECURITY_DISABLED), then each binding or
filter on its own. v0 has no pattern type field: it decodes as LITERAL, so v0 only ever names literal patterns.

CreateAcls validation answers INVALID_REQUEST per binding with Kafka's client-visible message: KafkaApis' own
checks ("The only valid name for the CLUSTER resource is kafka-cluster", "Invalid empty resource name") verbatim;
what Kafka's AclAuthorizer refuses (a '/' in the name, unknown elements) as "Failed to create ACL" (its wrapper
message, the cause stays in the broker log). Two cases Kafka does not answer per binding are answered per binding
here, with INVALID_REQUEST and the reason: ANY/MATCH elements in a creation (Kafka fails the whole request with
UNKNOWN_SERVER_ERROR) and a principal without a type (Kafka fails that resource's ACLs with UNKNOWN_SERVER_ERROR).

Writes go through the authorizer's ZooKeeper store, which updates this broker's cache before answering, so the
client's next request to this broker sees the change; other brokers follow their change-notification watch.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import (CLUSTER_RESOURCE_NAME, AccessControlEntry, AccessControlEntryFilter, AclBinding,
                                 AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                                 ResourcePatternFilter, ResourceType, validate_binding, validate_filter)

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 3
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
#: Kafka's AclAuthorizer wraps its own validation failures in InvalidRequestException("Failed to create ACL", cause)
AUTHORIZER_REFUSAL = "Failed to create ACL"


def cluster_denied_message(ctx: "RequestContext") -> str:
    """The message of Kafka's ClusterAuthorizationException for a refused cluster operation."""
    return (f"Request (apiKey={ctx.api_key}, apiVersion={ctx.api_version}, clientId={ctx.client_id}, "
            f"principal={ctx.connection.principal}) is not authorized.")


def _binding(c: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(c.resource_type), c.resource_name,
                        PatternType.from_code(c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, AclOperation.from_code(c.operation),
                           AclPermissionType.from_code(c.permission_type)))


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
                              PatternType.from_code(f.pattern_type_filter)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))


def creation_error(binding: AclBinding) -> Optional[str]:
    """The INVALID_REQUEST message a creation gets, or None if it may be created (see module docstring)."""
    reason = validate_binding(binding)
    if reason is None:
        return None
    if reason.startswith("ACL binding contains invalid resource name") or "unknown elements" in reason:
        log.debug("Failed to create ACL %s: %s", binding, reason)
        return AUTHORIZER_REFUSAL
    return reason


def _acl_entry(b: AclBinding) -> dict:
    e = b.entry
    return {"principal": e.principal, "host": e.host, "operation": int(e.operation),
            "permission_type": int(e.permission_type)}


async def describe(ctx: "RequestContext", request: Any, *, authz: Authz) -> dict:
    def answer(code: int, message: Optional[str], resources: List[dict]) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": resources}

    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_denied_message(ctx), [])
    if not authz.enabled:
        return answer(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE, [])
    binding_filter = _filter(request)
    reason = validate_filter(binding_filter)
    if reason is not None:
        return answer(ErrorCode.INVALID_REQUEST, reason, [])
    grouped: Dict[ResourcePattern, List[dict]] = {}
    for b in authz.describe_acls(binding_filter):
        grouped.setdefault(b.pattern, []).append(_acl_entry(b))
    return answer(0, None, [{"resource_type": int(p.resource_type), "resource_name": p.name,
                             "pattern_type": int(p.pattern_type), "acls": acls} for p, acls in grouped.items()])


async def create(ctx: "RequestContext", request: Any, *, authz: Authz) -> dict:
    creations = list(request.creations)

    def all_failed(code: int, message: Optional[str]) -> dict:
        return {"throttle_time_ms": 0,
                "results": [{"error_code": code, "error_message": message} for _ in creations]}

    if not authz.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_denied_message(ctx))
    if not authz.enabled:
        return all_failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    results: List[Tuple[int, Optional[str]]] = [(0, None)] * len(creations)
    valid: List[Tuple[int, AclBinding]] = []
    for i, c in enumerate(creations):
        binding = _binding(c)
        reason = creation_error(binding)
        if reason is not None:
            results[i] = (ErrorCode.INVALID_REQUEST, reason)
        else:
            valid.append((i, binding))
    if valid:
        outcomes = await authz.create_acls([b for _, b in valid])
        for (i, _), outcome in zip(valid, outcomes):
            if outcome is not None:
                results[i] = outcome
    return {"throttle_time_ms": 0,
            "results": [{"error_code": int(code), "error_message": msg} for code, msg in results]}


async def delete(ctx: "RequestContext", request: Any, *, authz: Authz) -> dict:
    filters = list(request.filters)

    def all_failed(code: int, message: Optional[str]) -> dict:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}

    if not authz.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_denied_message(ctx))
    if not authz.enabled:
        return all_failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    out: List[Optional[dict]] = [None] * len(filters)
    valid: List[Tuple[int, AclBindingFilter]] = []
    for i, f in enumerate(filters):
        binding_filter = _filter(f)
        reason = validate_filter(binding_filter)
        if reason is not None:
            out[i] = {"error_code": ErrorCode.INVALID_REQUEST, "error_message": reason, "matching_acls": []}
        else:
            valid.append((i, binding_filter))
    deleted = await authz.delete_acls([f for _, f in valid]) if valid else []
    for (i, _), matches in zip(valid, deleted):
        out[i] = {"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": int(err[0]) if err else 0, "error_message": err[1] if err else None,
             "resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
             "pattern_type": int(b.pattern.pattern_type), **_acl_entry(b)} for b, err in matches]}
    return {"throttle_time_ms": 0, "filter_results": out}
