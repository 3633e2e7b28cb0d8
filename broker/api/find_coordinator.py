"""FindCoordinator: which broker coordinates a group (v4+: many keys at once).

The group coordinator is the leader of ``__consumer_offsets`` partition
``abs(hashCode(group)) % offsets.topic.num.partitions``; the topic is created on first use.
Transaction coordinators (key_type 1) do not exist yet: COORDINATOR_NOT_AVAILABLE.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from broker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from broker.errors import ErrorCode, error_for_code

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 6
GROUP, TRANSACTION = 0, 1


def _message(code: int) -> Optional[str]:
    return error_for_code(code).message if code else None


async def _lookup(coordinator: "GroupCoordinator", metadata: "MetadataCache", ctx: "RequestContext", key: str,
                  key_type: int) -> dict:
    entry = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": 0, "error_message": None}
    if key_type == TRANSACTION:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif key_type != GROUP:
        code = ErrorCode.INVALID_REQUEST
    else:
        code = await coordinator.ensure_offsets_topic()
        if not code:
            meta = metadata.partition(GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(key))
            node = metadata.brokers.get(meta.leader) if meta is not None else None
            endpoint = node.endpoint(ctx.listener_name) if node is not None else None
            if endpoint is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                entry.update(node_id=node.broker_id, host=endpoint.host, port=endpoint.port)
    entry["error_code"] = int(code)
    entry["error_message"] = _message(code)
    return entry


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache") -> dict:
    version = ctx.api_version
    key_type = getattr(request, "key_type", GROUP)
    if version >= 4:
        coordinators: List[dict] = [await _lookup(coordinator, metadata, ctx, k, key_type)
                                    for k in request.coordinator_keys]
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    e = await _lookup(coordinator, metadata, ctx, request.key, key_type)
    return {"throttle_time_ms": 0, "error_code": e["error_code"], "error_message": e["error_message"],
            "node_id": e["node_id"], "host": e["host"], "port": e["port"]}
