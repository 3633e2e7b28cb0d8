"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.coordinator.group.state import OffsetAndMetadata
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 9
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache", authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    readable: Optional[Set[str]] = None
    if authz.enabled:  # READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then on each topic
        if not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return {"throttle_time_ms": 0, "topics": [
                {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                                 "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
                                                for p in t.partitions]} for t in request.topics]}
        readable = authz.filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics])
    now = coordinator.clock.wall_ms()  # the commit timestamp: the coordinator's wall clock
    retention_ms = getattr(request, "retention_time_ms", -1) if 2 <= version <= 4 else -1
    errors: Dict[Tuple[str, int], int] = {}
    offsets: Dict[Tuple[str, int], OffsetAndMetadata] = {}
    order = []
    for t in request.topics:
        known = metadata.topic(t.name) is not None
        idxs = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            idxs.append(p.partition_index)
            if readable is not None and t.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not known or metadata.partition(t.name, p.partition_index) is None:
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
        generation = request.generation_id_or_member_epoch if version >= 1 else -1
        member_id = request.member_id if version >= 1 else ""
        instance_id = getattr(request, "group_instance_id", None) if version >= 7 else None
        errors.update(await coordinator.commit_offsets(request.group_id, member_id, instance_id, generation,
                                                       offsets))
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": int(errors[(name, i)])} for i in idxs]}
        for name, idxs in order]}
