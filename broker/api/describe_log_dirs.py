"""DescribeLogDirs: which log dir holds each hosted partition, and its size; a partition moving between log dirs
(AlterReplicaLogDirs) also shows its future replica (``is_future_key``) in the target dir. A log dir that failed
(KIP-112) is answered as Kafka does: error KAFKA_STORAGE_ERROR, no topics, sizes -1."""
from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 4


def _collect(replica_manager: "ReplicaManager", log_dirs: List[str], wanted: Optional[Set[Tuple[str, int]]]
             ) -> Tuple[Dict[str, Dict[str, List[dict]]], Dict[str, Tuple[int, int]]]:
    """(dir -> topic -> partition entries, dir -> (total, usable) bytes); runs on a worker thread."""
    by_dir: Dict[str, Dict[str, List[dict]]] = {os.path.abspath(d): {} for d in log_dirs}
    for tp, p in sorted(replica_manager.partitions.items()):
        plog = p.log  # a hosted partition has its log (ReplicaManager.partitions)
        if plog is None or (wanted is not None and tp not in wanted):
            continue
        d = os.path.abspath(os.path.dirname(str(plog.dir)))
        # Kafka's getLogEndOffsetLag: max(HW - LEO, 0) for a current replica
        by_dir.setdefault(d, {}).setdefault(tp[0], []).append({
            "partition_index": tp[1], "partition_size": plog.size_bytes,
            "offset_lag": max(0, plog.high_watermark - plog.log_end_offset), "is_future_key": False})
    lm = replica_manager.log_manager
    futures = lm.all_future_logs() if hasattr(lm, "all_future_logs") else {}
    for tp, fut in sorted(futures.items()):
        if wanted is not None and tp not in wanted:
            continue
        hosted = replica_manager.partitions.get(tp)
        cur = hosted.log if hosted is not None and hosted.log is not None else lm.get_log(tp)
        d = os.path.abspath(os.path.dirname(str(fut.dir)))
        # a future replica's lag: how far it is behind the current one (-1 when that is not available)
        by_dir.setdefault(d, {}).setdefault(tp[0], []).append({
            "partition_index": tp[1], "partition_size": fut.size_bytes,
            "offset_lag": cur.log_end_offset - fut.log_end_offset if cur is not None else -1, "is_future_key": True})
    usage: Dict[str, Tuple[int, int]] = {}
    for d in by_dir:
        try:
            u = shutil.disk_usage(d)
            usage[d] = (u.total, u.free)
        except OSError:
            usage[d] = (-1, -1)
    return by_dir, usage


async def handle(ctx: "RequestContext", request: Any, *,
                 replica_manager: "ReplicaManager", config: "DynamicBrokerConfig") -> dict:
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir, usage = await replica_manager.run_io(_collect, replica_manager, config.current.log_dirs, wanted)
    offline = set(replica_manager.log_manager.offline_log_dirs)
    results = []
    for d, topics in by_dir.items():
        if d in offline:
            results.append({"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": d, "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        total, usable = usage[d]
        results.append({"error_code": 0, "log_dir": d,
                        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}
