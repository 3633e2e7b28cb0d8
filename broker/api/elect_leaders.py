"""ElectLeaders (KIP-460): a preferred (0) or unclean (1) leader election, carried out by the controller.

``topic_partitions`` null means every partition (v0 has no election type: preferred). Non-controllers
and a controller that moves answer NOT_CONTROLLER, as Kafka's ZooKeeper-mode brokers do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController

MIN_VERSION, MAX_VERSION = 0, 2
PREFERRED = 0


async def handle(ctx: "RequestContext", request: Any, *, controller: "KafkaController") -> dict:
    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED
    partitions: Optional[List[Tuple[str, int]]] = None
    if request.topic_partitions is not None:
        partitions = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    return await controller.elect_leaders(election_type, partitions, request.timeout_ms)
