"""Metadata: brokers, controller, topics and partition leaders; auto-creates topics like Kafka."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, List, Optional

from broker.api import acl_ops
from broker.api.topic_names import invalid_topic_reason
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.metadata_cache import MetadataCache
    from broker.config.dynamic import DynamicBrokerConfig

MIN_VERSION, MAX_VERSION = 0, 12
#: How long a Metadata request waits for a just-started broker's first UpdateMetadata.
METADATA_WAIT_S = 5.0
ZERO_UUID = uuid.UUID(int=0)


def partition_entries(metadata: "MetadataCache", topic: Any, version: int, listener: str) -> List[dict]:
    """Partitions as Kafka's ZkMetadataCache reports them to a client of ``listener``.

    Replica and ISR lists name only brokers reachable on that listener when the version cannot
    say otherwise (v0), and then REPLICA_NOT_AVAILABLE marks the gap; a dead leader gives
    LEADER_NOT_AVAILABLE with leader -1; a live leader without the listener LISTENER_NOT_FOUND (v6+).
    """
    strict = version == 0

    def reachable(ids: Any) -> List[int]:
        return [r for r in ids if metadata.endpoint_of(r, listener) is not None] if strict else list(ids)

    out = []
    for p in sorted(topic.partitions.values(), key=lambda m: m.partition):
        replicas, isr = reachable(p.replicas), reachable(p.isr)
        entry = {"partition_index": p.partition, "leader_epoch": p.leader_epoch, "replica_nodes": replicas,
                 "isr_nodes": isr, "offline_replicas": list(p.offline)}
        if metadata.endpoint_of(p.leader, listener) is None:
            if p.leader in metadata.brokers and version >= 6:
                entry["error_code"] = ErrorCode.LISTENER_NOT_FOUND
            else:
                entry["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE
            entry["leader_id"] = -1
        else:
            missing = len(replicas) < len(p.replicas) or len(isr) < len(p.isr)
            entry["error_code"] = ErrorCode.REPLICA_NOT_AVAILABLE if missing else 0
            entry["leader_id"] = p.leader
        out.append(entry)
    return out


def topic_entry(metadata: "MetadataCache", name: Optional[str], version: int, include_ops: bool,
                topic_id: Optional[uuid.UUID] = None, error: int = 0, listener: str = "PLAINTEXT") -> dict:
    meta = metadata.topic(name) if name is not None else None
    if meta is None:
        return {"error_code": error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                "topic_id": topic_id or ZERO_UUID, "is_internal": False, "partitions": [],
                "topic_authorized_operations": acl_ops.NOT_REQUESTED}
    return {
        "error_code": error,
        "name": meta.name,
        "topic_id": meta.topic_id,
        "is_internal": meta.is_internal,
        "partitions": partition_entries(metadata, meta, version, listener),
        "topic_authorized_operations": acl_ops.TOPIC_OPERATIONS if include_ops else acl_ops.NOT_REQUESTED,
    }


async def handle(ctx: "RequestContext", request: Any, *, metadata: "MetadataCache", admin: "AdminManager",
                 config: "DynamicBrokerConfig") -> dict:
    version = ctx.api_version
    if not metadata.initialized:
        await metadata.wait_initialized(METADATA_WAIT_S)
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    topics: List[dict] = []
    if requested is None or (version == 0 and len(requested) == 0):
        for name in sorted(metadata.topics):
            topics.append(topic_entry(metadata, name, version, include_ops, listener=ctx.listener_name))
    else:
        allow_auto = (getattr(request, "allow_auto_topic_creation", True) if version >= 4 else True)
        auto_create = allow_auto and config.get("auto.create.topics.enable")
        for t in requested:
            name = t.name
            tid = getattr(t, "topic_id", None)
            if name is None:
                name = metadata.topic_name(tid) if tid is not None else None
                if name is None:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": tid,
                                   "partitions": []})
                    continue
            if metadata.topic(name) is None:
                if invalid_topic_reason(name) is not None:
                    topics.append(topic_entry(metadata, None, version, include_ops,
                                              error=ErrorCode.INVALID_TOPIC_EXCEPTION) | {"name": name})
                    continue
                if auto_create and not name.startswith("__"):
                    err = await admin.auto_create_topic(name)
                    if err or metadata.topic(name) is None:
                        # Created, but the controller has not announced its leaders yet: clients retry.
                        topics.append(topic_entry(metadata, None, version, include_ops,
                                                  error=err or ErrorCode.LEADER_NOT_AVAILABLE) | {"name": name})
                        continue
            topics.append(topic_entry(metadata, name, version, include_ops, listener=ctx.listener_name))
    brokers = [{"node_id": bid, "host": ep.host, "port": ep.port, "rack": rack}
               for bid, ep, rack in metadata.alive_endpoints(ctx.listener_name)]
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": (acl_ops.CLUSTER_OPERATIONS
                                          if getattr(request, "include_cluster_authorized_operations", False)
                                          else acl_ops.NOT_REQUESTED),
    }
