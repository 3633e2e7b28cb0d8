"""StopReplica (controller -> broker): stop serving partitions, and delete their logs when told to.

Sent when a broker stops following a partition (controlled shutdown, reassignment) and, with
``delete_partition``, when a topic is deleted or a replica moved away. Stale broker epochs are
refused (STALE_BROKER_EPOCH); the replica manager refuses an older controller epoch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 4

TopicPartition = Tuple[str, int]


def _partitions(request: Any, version: int) -> List[Tuple[TopicPartition, int, bool]]:
    """[(tp, leader epoch, delete)]; v0-2 carry one delete flag and no leader epoch (-1)."""
    if version >= 3:
        return [((t.topic_name, ps.partition_index), ps.leader_epoch, bool(ps.delete_partition))
                for t in request.topic_states for ps in t.partition_states]
    delete = bool(request.delete_partitions)
    if version == 0:
        return [((p.topic_name, p.partition_index), -1, delete) for p in request.ungrouped_partitions]
    return [((t.name, p), -1, delete) for t in request.topics for p in t.partition_indexes]


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 broker_epoch: Callable[[], int]) -> dict:
    version = ctx.api_version
    parts = _partitions(request, version)
    request_epoch = request.broker_epoch if version >= 1 else -1
    if request_epoch != -1 and request_epoch < broker_epoch():
        # Kafka answers a stale request with the error alone, no partition errors
        return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "partition_errors": []}
    error, errors = await replica_manager.stop_replicas(
        request.controller_id, request.controller_epoch, {tp: (epoch, delete) for tp, epoch, delete in parts})
    return {"error_code": int(error), "partition_errors": [
        {"topic_name": tp[0], "partition_index": tp[1], "error_code": int(errors[tp])}
        for tp, _, _ in parts if tp in errors]}
