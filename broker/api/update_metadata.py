"""UpdateMetadata (controller -> every broker): the cluster's live brokers, leaders and ISRs.

The only way a broker learns metadata, as in Kafka's ZooKeeper mode. Refused when addressed to an
older registration of this broker (STALE_BROKER_EPOCH) or sent by an older controller than the last
one heard from (STALE_CONTROLLER_EPOCH). Partitions the request deletes (leader -2) leave the cache.
An ElectLeaders waiting for its leaders (DelayedElectLeader) is checked against each partition the request carries.
Brokers the request no longer lists as alive let the HW of partitions led here move without them (brokers_gone).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 8


async def handle(ctx: "RequestContext", request: Any, *, metadata: "MetadataCache",
                 replica_manager: "ReplicaManager", broker_epoch: Callable[[], int]) -> dict:
    version = ctx.api_version
    request_epoch = request.broker_epoch if version >= 5 else -1
    if request_epoch != -1 and request_epoch < broker_epoch():
        return {"error_code": int(ErrorCode.STALE_BROKER_EPOCH)}
    # The replica manager holds the latest controller epoch heard (LeaderAndIsr, StopReplica and this).
    if request.controller_epoch < replica_manager.controller_epoch:
        return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)}
    replica_manager.controller_epoch = request.controller_epoch
    alive_before = set(metadata.brokers)
    metadata.update_metadata(request, version)
    gone = alive_before.difference(metadata.brokers)
    if gone:  # a leader's HW may have waited for one of them
        replica_manager.brokers_gone(gone)
    if replica_manager.delayed_elect_leader_purgatory.watching():  # Kafka's hasDelayedElectionOperations
        for tp in _partitions(request, version):
            replica_manager.try_complete_election(tp)
    return {"error_code": 0}


def _partitions(request: Any, version: int) -> Iterator[Tuple[str, int]]:
    """The topic-partitions an UpdateMetadata request carries (grouped by topic from v5)."""
    if version >= 5:
        for t in request.topic_states:
            for ps in t.partition_states:
                yield t.topic_name, ps.partition_index
    else:
        for ps in request.ungrouped_partition_states:
            yield ps.topic_name, ps.partition_index
