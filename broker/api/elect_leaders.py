"""ElectLeaders (KIP-460): a preferred (0) or unclean (1) leader election, carried out by the controller.

As in Kafka's ZooKeeper mode: ``topic_partitions`` null means every partition this broker's metadata knows
(and the answer then lists only partitions that were elected or failed); a broker that is not the
controller answers NOT_CONTROLLER for each partition; a successful election is answered once this broker's
metadata shows the new leader (Kafka's DelayedElectLeader, in the ReplicaManager's elect-leader purgatory and
completed by UpdateMetadata), or with REQUEST_TIMED_OUT after ``timeout_ms``.
v0 has no election type: preferred.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.replica.purgatory import DelayedElectLeader
from broker.util.request_time import parked

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController
    from broker.cluster.metadata_cache import MetadataCache
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 2
PREFERRED = 0

TopicPartition = Tuple[str, int]


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController",
                 metadata: "MetadataCache", replica_manager: "ReplicaManager") -> dict:
    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
    all_partitions = request.topic_partitions is None
    if all_partitions:
        partitions: List[TopicPartition] = [(t, p) for t, meta in metadata.topics.items() for p in meta.partitions]
    else:
        partitions = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    results = await controller.elect_leaders_results(election_type, partitions) if partitions else {}
    errors: Dict[TopicPartition, Tuple[int, Optional[str]]] = {tp: (code, msg) for tp, (code, msg, _) in
                                                               results.items()}
    expected = {tp: leader for tp, (code, _, leader) in results.items() if code == 0 and leader is not None}
    if expected:
        def leader_of(tp: TopicPartition) -> Optional[int]:
            m = metadata.partition(*tp)
            return m.leader if m is not None else None

        op = DelayedElectLeader(request.timeout_ms, expected, leader_of)
        if not replica_manager.delayed_elect_leader_purgatory.try_complete_else_watch(op, list(expected)):
            try:
                with parked():
                    await op.future
            finally:
                op.cancel()
        for tp in op.timed_out:
            errors[tp] = (int(ErrorCode.REQUEST_TIMED_OUT), "The new leader was not announced in time")
    by_topic: Dict[str, List[dict]] = {}
    for (t, p), (code, msg) in sorted(errors.items()):
        if all_partitions and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue  # Kafka lists, for "all partitions", only those elected or failed
        by_topic.setdefault(t, []).append({"partition_id": p, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "error_code": 0,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}
