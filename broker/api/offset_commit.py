"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``."""
from __future__ import annotations

import time
from typing import Any, Dict, Tuple

from broker.coordinator.group.state import OffsetAndMetadata
from broker.errors import ErrorCode

MIN_VERSION, MAX_VERSION = 0, 9


async def handle(broker: Any, ctx: Any, request: Any) -> dict:
    version = ctx.api_version
    coordinator = getattr(broker, "group_coordinator", None)
    now = int(time.time() * 1000)
    retention_ms = getattr(request, "retention_time_ms", -1) if 2 <= version <= 4 else -1
    errors: Dict[Tuple[str, int], int] = {}
    offsets: Dict[Tuple[str, int], OffsetAndMetadata] = {}
    order = []
    for t in request.topics:
        known = broker.metadata.topic(t.name) is not None
        idxs = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            idxs.append(p.partition_index)
            if not known or broker.metadata.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ts = getattr(p, "commit_timestamp", -1) if version == 1 else -1
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=getattr(p, "committed_leader_epoch", -1) if version >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now if ts == -1 else ts,
                expire_timestamp=now + retention_ms if retention_ms != -1 else None)
        order.append((t.name, idxs))
    if offsets:
        if coordinator is None:
            errors.update({tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        else:
            generation = request.generation_id_or_member_epoch if version >= 1 else -1
            member_id = request.member_id if version >= 1 else ""
            instance_id = getattr(request, "group_instance_id", None) if version >= 7 else None
            errors.update(await coordinator.commit_offsets(request.group_id, member_id, instance_id, generation,
                                                           offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": int(errors[(name, i)])} for i in idxs]}
        for name, idxs in order]}
