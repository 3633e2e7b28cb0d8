"""DescribeCluster: cluster id, controller and live brokers (AdminClient.describeCluster)."""
from __future__ import annotations

from typing import Any

from broker.api import acl_ops
from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 1
BROKER_ENDPOINT = 1


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT)
    if endpoint_type != BROKER_ENDPOINT:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "The broker only serves broker endpoints", "endpoint_type": endpoint_type,
                "cluster_id": broker.metadata.cluster_id or "", "controller_id": -1, "brokers": []}
    return {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": endpoint_type,
        "cluster_id": broker.metadata.cluster_id or "", "controller_id": broker.metadata.controller_id,
        "brokers": [{"broker_id": bid, "host": ep.host, "port": ep.port, "rack": rack}
                    for bid, ep, rack in broker.metadata.alive_endpoints(ctx.listener_name)],
        "cluster_authorized_operations": (acl_ops.CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                                          else acl_ops.NOT_REQUESTED),
    }
