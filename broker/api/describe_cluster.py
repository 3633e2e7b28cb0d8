"""DescribeCluster: cluster id, controller and live brokers (AdminClient.describeCluster)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api import acl_ops
from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache

MIN_VERSION, MAX_VERSION = 0, 1
BROKER_ENDPOINT = 1
_ALLOW_ALL = Authz()


def _cluster_operations(ctx: "RequestContext", request: Any, authz: Authz) -> int:
    """Kafka: only when asked; with an authorizer, 0 unless the principal may DESCRIBE the cluster."""
    if not request.include_cluster_authorized_operations:
        return acl_ops.NOT_REQUESTED
    if not authz.enabled:
        return acl_ops.CLUSTER_OPERATIONS
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        return 0
    return authz.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


async def handle(ctx: "RequestContext", request: Any, *, metadata: "MetadataCache",
                 authz: Authz = _ALLOW_ALL) -> dict:
    if not metadata.initialized:
        await metadata.wait_initialized(5.0)
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    if endpoint_type != BROKER_ENDPOINT:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "The broker only serves broker endpoints", "endpoint_type": endpoint_type,
                "cluster_id": metadata.cluster_id or "", "controller_id": -1, "brokers": []}
    return {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": endpoint_type,
        "cluster_id": metadata.cluster_id or "", "controller_id": metadata.controller_id,
        "brokers": [{"broker_id": bid, "host": ep.host, "port": ep.port, "rack": rack}
                    for bid, ep, rack in metadata.alive_endpoints(ctx.listener_name)],
        "cluster_authorized_operations": _cluster_operations(ctx, request, authz),
    }
