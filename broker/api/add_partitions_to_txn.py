"""AddPartitionsToTxn: add partitions to a producer's transaction (v0-3), or, from other brokers, batches of
transactions (v4+) that may only ask whether partitions are already in the transaction (``verify_only``, KIP-890).

As Kafka's KafkaApis: v0-3 need WRITE on the transactional id (else every partition
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic; internal topics are never writable this way
(TOPIC_AUTHORIZATION_FAILED); a partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION; one failed
partition fails the whole transaction's request, the others answering OPERATION_NOT_ATTEMPTED. v4+ need
CLUSTER_ACTION (else a top-level CLUSTER_AUTHORIZATION_FAILED). The coordinator's error applies to every partition
of its transaction; PRODUCER_FENCED reaches v0-1 clients as INVALID_PRODUCER_EPOCH.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from broker.api.authz import Authz
from broker.cluster.metadata_cache import INTERNAL_TOPICS
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 5
_ALLOW_ALL = Authz()
TopicPartition = Tuple[str, int]


def _partitions(topics: Any) -> List[TopicPartition]:
    return list(dict.fromkeys((t.name, int(p)) for t in topics for p in t.partitions))


def _topic_results(errors: Dict[TopicPartition, int]) -> List[dict]:
    by_topic: Dict[str, List[dict]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": int(code)})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _transaction(ctx: "RequestContext", coordinator: "TransactionCoordinator", metadata: "MetadataCache",
                       authz: Authz, tid: str, pid: int, epoch: int, verify_only: bool,
                       partitions: List[TopicPartition]) -> Dict[TopicPartition, int]:
    version = ctx.api_version
    if version < 4 and authz.enabled and not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                           tid):
        return {tp: int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for tp in partitions}
    if version < 4:
        writable = [t for t, _ in partitions if t not in INTERNAL_TOPICS]
        allowed = authz.filter_allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, writable) if authz.enabled \
            else set(writable)
    else:
        allowed = {t for t, _ in partitions}
    failed: Dict[TopicPartition, int] = {}
    ok: List[TopicPartition] = []
    for tp in partitions:
        if tp[0] not in allowed:
            failed[tp] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif metadata.partition(*tp) is None:
            failed[tp] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            ok.append(tp)
    if failed:
        return {tp: failed.get(tp, int(ErrorCode.OPERATION_NOT_ATTEMPTED)) for tp in partitions}
    if verify_only:
        return coordinator.verify_partitions(tid, pid, epoch, set(ok))
    code = await coordinator.add_partitions(tid, pid, epoch, set(ok))
    if code == ErrorCode.PRODUCER_FENCED and version < 2:
        code = int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return {tp: int(code) for tp in partitions}


async def handle(ctx: "RequestContext", request: Any, *, txn_coordinator: "TransactionCoordinator",
                 metadata: "MetadataCache", authz: Authz = _ALLOW_ALL) -> dict:
    if ctx.api_version < 4:
        errors = await _transaction(ctx, txn_coordinator, metadata, authz, request.v3_and_below_transactional_id,
                                    request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, False,
                                    _partitions(request.v3_and_below_topics))
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    if authz.enabled and not authz.allowed(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                           CLUSTER_RESOURCE_NAME):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "results_by_transaction": []}
    results = []
    for t in request.transactions:
        errors = await _transaction(ctx, txn_coordinator, metadata, authz, t.transactional_id, t.producer_id,
                                    t.producer_epoch, bool(t.verify_only), _partitions(t.topics))
        results.append({"transactional_id": t.transactional_id, "topic_results": _topic_results(errors)})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
