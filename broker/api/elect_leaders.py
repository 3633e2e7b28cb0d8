"""ElectLeaders (KIP-460): a preferred (0) or unclean (1) leader election, carried out by the controller.

As in Kafka's ZooKeeper mode: ``topic_partitions`` null means every partition this broker's metadata knows
(and the answer then lists only partitions that were elected or failed); a broker that is not the
controller answers NOT_CONTROLLER for each partition; a successful election is answered once this broker's
metadata shows the new leader (Kafka's DelayedElectLeader), or with REQUEST_TIMED_OUT after ``timeout_ms``.
v0 has no election type: preferred.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController
    from broker.cluster.metadata_cache import MetadataCache

MIN_VERSION, MAX_VERSION = 0, 2
PREFERRED = 0

TopicPartition = Tuple[str, int]


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController",
                 metadata: "MetadataCache") -> dict:
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
        def elected() -> bool:
            return all((m := metadata.partition(*tp)) is not None and m.leader == leader
                       for tp, leader in expected.items())

        if not await metadata.wait_until(elected, max(request.timeout_ms, 0) / 1000.0):
            for tp, leader in expected.items():
                m = metadata.partition(*tp)
                if m is None or m.leader != leader:
                    errors[tp] = (int(ErrorCode.REQUEST_TIMED_OUT), "The new leader was not announced in time")
    by_topic: Dict[str, List[dict]] = {}
    for (t, p), (code, msg) in sorted(errors.items()):
        if all_partitions and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue  # Kafka lists, for "all partitions", only those elected or failed
        by_topic.setdefault(t, []).append({"partition_id": p, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "error_code": 0,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}
