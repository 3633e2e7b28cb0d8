"""WriteTxnMarkers (v0-1): a transaction coordinator, or KIP-664's abort tool, asks this partition leader to end a
producer's transaction with a COMMIT or ABORT marker (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Authorization: ALTER on the cluster (checked without a denial log, KIP-1037) or else CLUSTER_ACTION; a refusal
answers CLUSTER_AUTHORIZATION_FAILED for every partition. Each marker is appended to its partitions by the
ReplicaManager with acks=all semantics and the coordinator's origin (``append_txn_markers``: answered once the HW
passes the marker, or after request.timeout.ms), so every per-partition error of such a produce can come back
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...) plus the log's own:
TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the producer's last marker, and
INVALID_PRODUCER_EPOCH for a producer epoch older than the producer's. A partition not hosted here answers
UNKNOWN_TOPIC_OR_PARTITION.

The response has one entry per producer id, as Kafka's (two markers of one producer share it).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from broker.api.authz import Authz
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.replica.manager import ReplicaManager

MIN_VERSION, MAX_VERSION = 0, 1
DEFAULT_REQUEST_TIMEOUT_MS = 30000
_ALLOW_ALL = Authz()
TopicPartition = Tuple[str, int]


def _authorized(ctx: "RequestContext", authz: Authz) -> bool:
    if not authz.enabled:
        return True
    return (authz.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, log_if_denied=False)
            or authz.allowed(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME))


def _partitions(marker: Any) -> List[TopicPartition]:
    return list(dict.fromkeys((t.name, int(p)) for t in marker.topics for p in t.partition_indexes))


def _response(errors: Dict[int, Dict[TopicPartition, int]]) -> dict:
    markers = []
    for pid, by_tp in errors.items():
        topics: Dict[str, List[dict]] = {}
        for (topic, partition), code in by_tp.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
        markers.append({"producer_id": pid, "topics": [{"name": name, "partitions": parts}
                                                        for name, parts in topics.items()]})
    return {"markers": markers}


def _timeout_ms(config: Any) -> int:
    value = config.get("request.timeout.ms") if config is not None else None
    return int(value) if value is not None else DEFAULT_REQUEST_TIMEOUT_MS


async def handle(ctx: "RequestContext", request: Any, *, replica_manager: "ReplicaManager",
                 config: "DynamicBrokerConfig", authz: Authz = _ALLOW_ALL) -> dict:
    markers = list(request.markers)
    if not _authorized(ctx, authz):
        denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return _response({m.producer_id: {tp: denied for tp in _partitions(m)} for m in markers})
    timeout_ms = _timeout_ms(config)
    results = await asyncio.gather(*(
        replica_manager.append_txn_markers(m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                           bool(m.transaction_result), _partitions(m), timeout_ms)
        for m in markers))
    errors: Dict[int, Dict[TopicPartition, int]] = {}
    for m, by_tp in zip(markers, results):
        errors.setdefault(m.producer_id, {}).update(by_tp)
    return _response(errors)
