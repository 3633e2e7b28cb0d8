"""Authorization of the APIs Kafka authorizes as a whole (one resource per request), as guards around their handlers.

Kafka 3.9's KafkaApis checks these requests against one resource before doing anything: the inter-broker APIs and
the cluster-wide admin APIs against the cluster (``kafka-cluster``), the classic group membership APIs against the
request's group, InitProducerId against its transactional id or, for an idempotent producer, IDEMPOTENT_WRITE on the
cluster or WRITE on any topic (KIP-679). A refused request gets the response Kafka sends then (its request's
``getErrorResponse``, or the explicit error answer of KafkaApis), built here from the request.

APIs that authorize per resource inside one request (topics, groups, configs, ACLs) do it in their own handler
module. :func:`guard` wraps a handler only when an authorizer is configured, so without one the registry holds the
bare handlers, exactly as before.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from broker.api import leader_and_isr, stop_replica
from broker.api.acls import cluster_denied_message
from broker.errors import ErrorCode
from broker.protocol.api_keys import ApiKey
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation as Op, ResourceType

if TYPE_CHECKING:
    from broker.api.authz import Authz
    from broker.api.dispatcher import RequestContext

#: A guard returns None when the request may proceed, else the complete denial response body.
Guard = Callable[["Authz", "RequestContext", Any], Optional[dict]]

CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
#: Kafka's Errors messages, where a response carries one
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."


def _by_topic(pairs: List[Tuple[str, int]], entry: Callable[[int], dict]) -> Dict[str, List[dict]]:
    out: Dict[str, List[dict]] = {}
    for topic, partition in pairs:
        out.setdefault(topic, []).append(entry(partition))
    return out


# ---------------------------------------------------------------------------------------- denial responses
def _leader_and_isr_denied(ctx: "RequestContext", request: Any) -> dict:
    v = ctx.api_version
    return leader_and_isr._response(v, CLUSTER_DENIED, leader_and_isr._partition_states(request, v), {})


def _stop_replica_denied(ctx: "RequestContext", request: Any) -> dict:
    return {"error_code": CLUSTER_DENIED, "partition_errors": [
        {"topic_name": tp[0], "partition_index": tp[1], "error_code": CLUSTER_DENIED}
        for tp, _, _ in stop_replica._partitions(request, ctx.api_version)]}


def _alter_replica_log_dirs_denied(ctx: "RequestContext", request: Any) -> dict:
    pairs = list(dict.fromkeys((t.name, int(p)) for d in request.dirs for t in d.topics for p in t.partitions))
    by_topic = _by_topic(pairs, lambda p: {"partition_index": p, "error_code": CLUSTER_DENIED})
    return {"throttle_time_ms": 0, "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}


def _elect_leaders_denied(ctx: "RequestContext", request: Any) -> dict:
    pairs = ([(t.topic, p) for t in request.topic_partitions for p in t.partitions]
             if request.topic_partitions is not None else [])
    by_topic = _by_topic(list(dict.fromkeys(pairs)), lambda p: {"partition_id": p, "error_code": CLUSTER_DENIED,
                                                                 "error_message": None})
    return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


def _reassignments_denied(ctx: "RequestContext", request: Any) -> dict:
    message = cluster_denied_message(ctx)
    return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "error_message": message, "responses": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": CLUSTER_DENIED,
                                         "error_message": message} for p in t.partitions]}
        for t in request.topics]}


def _alter_client_quotas_denied(ctx: "RequestContext", request: Any) -> dict:
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": CLUSTER_DENIED, "error_message": None,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
        for entry in request.entries]}


def _join_group_denied(ctx: "RequestContext", request: Any) -> dict:
    return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "generation_id": -1, "protocol_type": None,
            "protocol_name": None if ctx.api_version >= 7 else "", "leader": "", "skip_assignment": False,
            "member_id": "", "members": []}


def _sync_group_denied(ctx: "RequestContext", request: Any) -> dict:
    error = GROUP_DENIED
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        error = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # Kafka checks this before authorizing
    return {"throttle_time_ms": 0, "error_code": error, "protocol_type": None, "protocol_name": None,
            "assignment": b""}


def _init_producer_id_denied(error: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


# ---------------------------------------------------------------------------------------- guards
def cluster(operation: Op, denied: Callable[["RequestContext", Any], dict]) -> Guard:
    """A guard for `operation` on the cluster resource."""
    def check(authz: "Authz", ctx: "RequestContext", request: Any) -> Optional[dict]:
        if authz.allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            return None
        return denied(ctx, request)
    check.operation = operation  # type: ignore[attr-defined]
    check.resource_type = ResourceType.CLUSTER  # type: ignore[attr-defined]
    return check


def group_read(denied: Callable[["RequestContext", Any], dict]) -> Guard:
    """A guard for READ on the request's group."""
    def check(authz: "Authz", ctx: "RequestContext", request: Any) -> Optional[dict]:
        if authz.allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
            return None
        return denied(ctx, request)
    check.operation = Op.READ  # type: ignore[attr-defined]
    check.resource_type = ResourceType.GROUP  # type: ignore[attr-defined]
    return check


def init_producer_id(authz: "Authz", ctx: "RequestContext", request: Any) -> Optional[dict]:
    """WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster (refusal not logged) or WRITE on
    at least one topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED."""
    tid = request.transactional_id
    if tid is not None:
        if authz.allowed(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return None
        return _init_producer_id_denied(TXN_DENIED)
    if (authz.allowed(ctx, Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, log_if_denied=False)
            or authz.allowed_by_resource_type(ctx, Op.WRITE, ResourceType.TOPIC)):
        return None
    return _init_producer_id_denied(CLUSTER_DENIED)


def _const(body: dict) -> Callable[["RequestContext", Any], dict]:
    return lambda ctx, request: dict(body)


GUARDS: Dict[int, Guard] = {
    # controller -> broker and broker -> controller
    ApiKey.LEADER_AND_ISR: cluster(Op.CLUSTER_ACTION, _leader_and_isr_denied),
    ApiKey.STOP_REPLICA: cluster(Op.CLUSTER_ACTION, _stop_replica_denied),
    ApiKey.UPDATE_METADATA: cluster(Op.CLUSTER_ACTION, _const({"error_code": CLUSTER_DENIED})),
    ApiKey.CONTROLLED_SHUTDOWN: cluster(Op.CLUSTER_ACTION, _const({"error_code": CLUSTER_DENIED,
                                                                   "remaining_partitions": []})),
    ApiKey.ALTER_PARTITION: cluster(Op.CLUSTER_ACTION, _const({"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                               "topics": []})),
    ApiKey.ALLOCATE_PRODUCER_IDS: cluster(Op.CLUSTER_ACTION, _const({
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "producer_id_start": 0, "producer_id_len": 0})),
    # cluster-wide administration
    ApiKey.DESCRIBE_LOG_DIRS: cluster(Op.DESCRIBE, _const({"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                           "results": []})),
    ApiKey.ALTER_REPLICA_LOG_DIRS: cluster(Op.ALTER, _alter_replica_log_dirs_denied),
    ApiKey.ELECT_LEADERS: cluster(Op.ALTER, _elect_leaders_denied),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster(Op.ALTER, _reassignments_denied),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: cluster(Op.DESCRIBE, lambda ctx, request: {
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "error_message": cluster_denied_message(ctx),
        "topics": []}),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: cluster(Op.DESCRIBE_CONFIGS, _const({
        "throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "error_message": None, "entries": None})),
    ApiKey.ALTER_CLIENT_QUOTAS: cluster(Op.ALTER_CONFIGS, _alter_client_quotas_denied),
    ApiKey.UPDATE_FEATURES: cluster(Op.ALTER, _const({"throttle_time_ms": 0, "error_code": CLUSTER_DENIED,
                                                      "error_message": CLUSTER_DENIED_MESSAGE, "results": []})),
    # classic group membership
    ApiKey.JOIN_GROUP: group_read(_join_group_denied),
    ApiKey.SYNC_GROUP: group_read(_sync_group_denied),
    ApiKey.HEARTBEAT: group_read(_const({"throttle_time_ms": 0, "error_code": GROUP_DENIED})),
    ApiKey.LEAVE_GROUP: group_read(_const({"throttle_time_ms": 0, "error_code": GROUP_DENIED, "members": []})),
    # producers
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
}


def guard(api_key: int, handler: Any, authz: "Authz") -> Any:
    """`handler` behind the API's guard (unchanged when the API has none or no authorizer is configured)."""
    check = GUARDS.get(int(api_key))
    if check is None or not authz.enabled:
        return handler

    async def guarded(ctx: "RequestContext", request: Any) -> Any:
        denied = check(authz, ctx, request)
        if denied is not None:
            return denied
        return await handler(ctx, request)

    guarded.__wrapped__ = handler  # type: ignore[attr-defined]
    return guarded


__all__ = ["GUARDS", "guard"]
