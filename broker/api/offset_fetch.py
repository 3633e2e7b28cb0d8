"""OffsetFetch: a group's committed offsets (v8+: several groups; v7+: require_stable)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 9
_ALLOW_ALL = Authz()


def _requested(topics: Any) -> Optional[List[Tuple[str, int]]]:
    if topics is None:
        return None
    return [(t.name, i) for t in topics for i in t.partition_indexes]


def _group_topics(rows: List[Tuple[Tuple[str, int], int, int, str, int]]) -> List[dict]:
    by_topic: Dict[str, List[dict]] = {}
    for (topic, partition), offset, epoch, metadata, error in rows:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                               "committed_leader_epoch": epoch, "metadata": metadata,
                                               "error_code": int(error)})
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def _fetch(coordinator: "GroupCoordinator", group_id: str, partitions: Optional[List[Tuple[str, int]]],
                 require_stable: bool) -> Tuple[int, List[Any]]:
    return await coordinator.fetch_offsets(group_id, partitions, require_stable)


async def _fetch_authorized(ctx: "RequestContext", authz: Authz, coordinator: "GroupCoordinator", group_id: str,
                            partitions: Optional[List[Tuple[str, int]]], require_stable: bool
                            ) -> Tuple[int, List[Any]]:
    """Kafka's fetchOffsets with an authorizer: DESCRIBE on the group, then on each topic; all-partitions requests
    silently omit topics not describable, named partitions of such topics get TOPIC_AUTHORIZATION_FAILED."""
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    if partitions is None:
        error, rows = await _fetch(coordinator, group_id, None, require_stable)
        if error:
            return error, rows
        allowed = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [r[0][0] for r in rows])
        return 0, [r for r in rows if r[0][0] in allowed]
    allowed = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [tp[0] for tp in partitions])
    error, rows = await _fetch(coordinator, group_id, [tp for tp in partitions if tp[0] in allowed], require_stable)
    if error:
        return error, rows
    return 0, rows + [(tp, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED) for tp in partitions
                      if tp[0] not in allowed]


async def handle(ctx: "RequestContext", request: Any, *, coordinator: "GroupCoordinator",
                 authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    require_stable = bool(getattr(request, "require_stable", False)) if version >= 7 else False
    _fetch_one = (functools.partial(_fetch_authorized, ctx, authz, coordinator) if authz.enabled
                  else functools.partial(_fetch, coordinator))
    if version >= 8:
        groups = []
        for g in request.groups:
            error, rows = await _fetch_one(g.group_id, _requested(g.topics), require_stable)
            groups.append({"group_id": g.group_id, "error_code": int(error),
                           "topics": [] if error else _group_topics(rows)})
        return {"throttle_time_ms": 0, "groups": groups}
    partitions = _requested(request.topics)
    error, rows = await _fetch_one(request.group_id, partitions, require_stable)
    if error:
        if version < 2:
            # No top-level error field: every requested partition carries it.
            rows = [(tp, -1, -1, "", error) for tp in partitions or []]
            return {"throttle_time_ms": 0, "topics": _group_topics(rows)}
        return {"throttle_time_ms": 0, "error_code": int(error), "topics": []}
    return {"throttle_time_ms": 0, "error_code": 0, "topics": _group_topics(rows)}
