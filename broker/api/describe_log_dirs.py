"""DescribeLogDirs: which log dir holds each hosted partition, and its size."""
from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Optional, Set, Tuple

MIN_VERSION, MAX_VERSION = 0, 4


def _collect(broker: Any, wanted: Optional[Set[Tuple[str, int]]]
             ) -> Tuple[Dict[str, Dict[str, List[dict]]], Dict[str, Tuple[int, int]]]:
    """(dir -> topic -> partition entries, dir -> (total, usable) bytes); runs on a worker thread."""
    by_dir: Dict[str, Dict[str, List[dict]]] = {os.path.abspath(d): {} for d in broker.config.log_dirs}
    for tp, p in sorted(broker.replica_manager.partitions.items()):
        if wanted is not None and tp not in wanted:
            continue
        d = os.path.abspath(os.path.dirname(str(p.log.dir)))
        by_dir.setdefault(d, {}).setdefault(tp[0], []).append({
            "partition_index": tp[1], "partition_size": p.log.size_bytes,
            "offset_lag": max(0, p.log.log_end_offset - p.log.high_watermark), "is_future_key": False})
    usage: Dict[str, Tuple[int, int]] = {}
    for d in by_dir:
        try:
            u = shutil.disk_usage(d)
            usage[d] = (u.total, u.free)
        except OSError:
            usage[d] = (-1, -1)
    return by_dir, usage


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir, usage = await broker.replica_manager.run_io(_collect, broker, wanted)
    results = []
    for d, topics in by_dir.items():
        total, usable = usage[d]
        results.append({"error_code": 0, "log_dir": d,
                        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}
