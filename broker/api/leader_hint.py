"""KIP-951: on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH, tell the client who leads now (Produce v10+,
Fetch v16+), so it can go there without a metadata round trip, as Kafka 3.7+ brokers do.

The leader comes from the local replica if this broker hosts the partition, else from the metadata
cache; its endpoint (on the client's listener) goes into the response's ``node_endpoints``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Tuple

if TYPE_CHECKING:
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager


def current_leader(tp: Tuple[str, int], listener: str, replica_manager: "ReplicaManager",
                   metadata: "MetadataCache", endpoints: Dict[int, dict]) -> dict:
    """``{"leader_id", "leader_epoch"}`` for ``tp``; adds the leader's endpoint to ``endpoints``."""
    p = replica_manager.get_partition(tp)
    if p is not None and p.log is not None:
        leader, epoch = p.leader_id, p.leader_epoch
    else:
        meta = metadata.partition(*tp)
        leader, epoch = (meta.leader, meta.leader_epoch) if meta is not None else (-1, -1)
    ep = metadata.endpoint_of(leader, listener) if leader >= 0 else None
    if ep is None:
        return {"leader_id": -1, "leader_epoch": -1}
    b = metadata.brokers.get(leader)
    endpoints[leader] = {"node_id": leader, "host": ep.host, "port": ep.port, "rack": b.rack if b else None}
    return {"leader_id": leader, "leader_epoch": epoch}
