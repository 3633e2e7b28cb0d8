"""DescribeCluster: cluster id, controller and live brokers (AdminClient.describeCluster)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.api import acl_ops
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache

MIN_VERSION, MAX_VERSION = 0, 1
BROKER_ENDPOINT = 1


async def handle(ctx: "RequestContext", request: Any, *, metadata: "MetadataCache") -> dict:
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
        "cluster_authorized_operations": (acl_ops.CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                                          else acl_ops.NOT_REQUESTED),
    }
