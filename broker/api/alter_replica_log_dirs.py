"""AlterReplicaLogDirs: move replicas between this broker's log dirs while they keep serving (KIP-113).

Each (dir, topic, partitions) entry asks this broker to keep those partitions' replicas in that log dir;
the ReplicaManager starts moving them (future logs filled from the current ones, swapped in once caught
up) and answers per partition: NONE, LOG_DIR_NOT_FOUND (not one of log.dirs), REPLICA_NOT_AVAILABLE (no
replica here yet: it will be created in that dir), KAFKA_STORAGE_ERROR. Results are grouped by topic, as
Kafka's KafkaApis.handleAlterReplicaLogDirsRequest does; a partition named twice keeps the last dir.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 2


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager") -> dict:
    wanted: Dict[Tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, int(p))] = d.path
    errors = await replica_manager.alter_replica_log_dirs(wanted) if wanted else {}
    by_topic: Dict[str, List[dict]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": int(code)})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
