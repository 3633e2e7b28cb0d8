"""TxnOffsetCommit: a transactional producer commits a group's offsets inside its transaction.

As Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional id, then READ on the group
(each refusal answers every partition with it), READ on each topic, unknown partitions
UNKNOWN_TOPIC_OR_PARTITION. The group coordinator first checks with the transaction coordinator
that the group's ``__consumer_offsets`` partition is in the producer's open transaction (KIP-890
part 1), then writes the offsets as a transactional batch; they become visible to OffsetFetch when
the COMMIT marker lands (and ``require_stable`` fetches see UNSTABLE_OFFSET_COMMIT until then).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.coordinator.group.state import OffsetAndMetadata
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator

MIN_VERSION, MAX_VERSION = 0, 4
_ALLOW_ALL = Authz()


def _answer(order: List[Tuple[str, List[int]]], errors: Dict[Tuple[str, int], int]) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": int(errors[(name, i)])} for i in idxs]}
        for name, idxs in order]}


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache", authz: Authz = _ALLOW_ALL) -> dict:
    version = ctx.api_version
    order = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    whole: Optional[int] = None
    readable: Optional[Set[str]] = None
    if authz.enabled:
        if not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            whole = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            whole = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            readable = authz.filter_allowed(ctx, AclOperation.READ, ResourceType.TOPIC,
                                            [t.name for t in request.topics])
    if whole is None and not request.group_id:
        whole = ErrorCode.INVALID_GROUP_ID  # Kafka's validateGroupStatus for this API: a group id is required
    if whole is not None:
        return _answer(order, {(name, i): whole for name, idxs in order for i in idxs})
    now = coordinator.clock.wall_ms()  # the commit timestamp: the coordinator's wall clock
    errors: Dict[Tuple[str, int], int] = {}
    offsets: Dict[Tuple[str, int], OffsetAndMetadata] = {}
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if readable is not None and t.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif metadata.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1) if version >= 2 else -1,
                    metadata=p.committed_metadata if p.committed_metadata is not None else "",
                    commit_timestamp=now)
    if offsets:
        member_id = request.member_id if version >= 3 else ""
        generation = request.generation_id if version >= 3 else -1
        instance_id = request.group_instance_id if version >= 3 else None
        errors.update(await coordinator.txn_commit_offsets(
            request.group_id, request.transactional_id, request.producer_id, request.producer_epoch, member_id,
            instance_id, generation, offsets, version))
    return _answer(order, errors)
