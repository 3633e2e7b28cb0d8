"""LeaderAndIsr (controller -> broker): become leader or follower of partitions, at a new leader epoch.

The broker refuses a request addressed to an older registration of itself (STALE_BROKER_EPOCH: its
broker epoch, the czxid of ``/brokers/ids/<id>``, moved on, KIP-380); the replica manager refuses an
older controller epoch and stale leader epochs per partition. Partitions it now leads are opened for
produce; the rest are handed to the replica fetchers. The coordinators hear of the change through
the replica manager's leadership listeners.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.replica.partition import LeaderAndIsrPartitionState
from broker.util.broker_channel import BrokerNode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.dynamic_config import DynamicConfigManager
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 7
ZERO_UUID = uuid.UUID(int=0)


def _partition_states(request: Any, version: int) -> List[Tuple[str, Optional[uuid.UUID], Any]]:
    if version >= 2:
        return [(t.topic_name, getattr(t, "topic_id", None) if version >= 5 else None, ps)
                for t in request.topic_states for ps in t.partition_states]
    return [(ps.topic_name, None, ps) for ps in request.ungrouped_partition_states]


def _response(version: int, error: int, items: List[Tuple[str, Optional[uuid.UUID], Any]],
              errors: Dict[Tuple[str, int], int]) -> dict:
    if version < 5:
        return {"error_code": error, "partition_errors": [
            {"topic_name": t, "partition_index": ps.partition_index,
             "error_code": errors.get((t, ps.partition_index), error)} for t, _, ps in items]}
    by_topic: Dict[str, dict] = {}
    for t, tid, ps in items:
        entry = by_topic.setdefault(t, {"topic_id": tid or ZERO_UUID, "partition_errors": []})
        entry["partition_errors"].append({"partition_index": ps.partition_index,
                                          "error_code": errors.get((t, ps.partition_index), error)})
    return {"error_code": error, "topics": list(by_topic.values())}


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 broker_epoch: Callable[[], int], topic_configs: "DynamicConfigManager") -> dict:
    version = ctx.api_version
    items = _partition_states(request, version)
    request_epoch = request.broker_epoch if version >= 2 else -1
    if request_epoch != -1 and request_epoch < broker_epoch():
        return _response(version, int(ErrorCode.STALE_BROKER_EPOCH), items, {})
    states = [LeaderAndIsrPartitionState.from_message(t, ps) for t, _, ps in items]
    topic_ids = {t: tid for t, tid, _ in items if tid is not None and tid != ZERO_UUID}
    live_leaders = {ll.broker_id: BrokerNode(ll.broker_id, ll.host_name, ll.port) for ll in request.live_leaders}
    error, errors = await replica_manager.become_leader_or_follower(
        request.controller_id, request.controller_epoch, states, topic_ids, live_leaders,
        topic_configs.topic_log_config)
    return _response(version, int(error), items, errors)
