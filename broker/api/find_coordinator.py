"""FindCoordinator: which broker coordinates a group or a transactional id (v4+: many keys at once).

The group coordinator is the leader of ``__consumer_offsets`` partition
``abs(hashCode(group)) % offsets.topic.num.partitions``, the transaction coordinator (key_type 1) the leader of
``__transaction_state`` partition ``abs(hashCode(transactional id)) % transaction.state.log.num.partitions``;
each topic is created on first use, with its ``offsets.topic.*`` / ``transaction.state.log.*`` settings.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from broker.api.authz import Authz
from broker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from broker.coordinator.transaction.records import TRANSACTION_STATE_TOPIC_NAME
from broker.errors import KAFKA_INVALID_REQUEST_MESSAGE, ErrorCode, error_for_code
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.metadata_cache import MetadataCache
    from broker.coordinator.group.service import GroupCoordinator
    from broker.coordinator.transaction.service import TransactionCoordinator

MIN_VERSION, MAX_VERSION = 0, 6
GROUP, TRANSACTION = 0, 1
_ALLOW_ALL = Authz()
#: Kafka's Errors messages for the refusals below
_DENIED_MESSAGES: dict[int, str] = {ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
                    ErrorCode.INVALID_REQUEST: KAFKA_INVALID_REQUEST_MESSAGE}  # an unknown key type


def _message(code: int) -> Optional[str]:
    return _DENIED_MESSAGES.get(code) or error_for_code(code).message if code else None


def _refusal(authz: Authz, ctx: "RequestContext", key: str, key_type: int) -> int:
    """DESCRIBE on the group, or on the transactional id, the key names (0: allowed)."""
    if key_type == GROUP and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return 0


async def _lookup(coordinator: "GroupCoordinator", metadata: "MetadataCache", ctx: "RequestContext", key: str,
                  key_type: int, authz: Authz = _ALLOW_ALL,
                  txn_coordinator: Optional["TransactionCoordinator"] = None) -> dict:
    entry = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": 0, "error_message": None}
    if authz.enabled and (code := _refusal(authz, ctx, key, key_type)):
        pass
    elif key_type == TRANSACTION and txn_coordinator is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif key_type not in (GROUP, TRANSACTION):
        code = ErrorCode.INVALID_REQUEST
    else:
        if key_type == TRANSACTION:
            assert txn_coordinator is not None
            code = await txn_coordinator.ensure_transaction_state_topic()
            topic, partition = TRANSACTION_STATE_TOPIC_NAME, txn_coordinator.partition_for(key)
        else:
            code = await coordinator.ensure_offsets_topic()
            topic, partition = GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(key)
        if not code:
            meta = metadata.partition(topic, partition)
            node = metadata.brokers.get(meta.leader) if meta is not None else None
            endpoint = node.endpoint(ctx.listener_name) if node is not None else None
            if node is None or endpoint is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                entry.update(node_id=node.broker_id, host=endpoint.host, port=endpoint.port)
    entry["error_code"] = int(code)
    entry["error_message"] = _message(code)
    return entry


async def handle(ctx: "RequestContext", request: Any, *,
                 coordinator: "GroupCoordinator", metadata: "MetadataCache", authz: Authz = _ALLOW_ALL,
                 txn_coordinator: Optional["TransactionCoordinator"] = None) -> dict:
    version = ctx.api_version
    key_type = getattr(request, "key_type", GROUP)
    if version >= 4:
        coordinators: List[dict] = [await _lookup(coordinator, metadata, ctx, k, key_type, authz, txn_coordinator)
                                    for k in request.coordinator_keys]
        for c in coordinators:  # as Kafka 3.9.1 answers a found coordinator: an empty message, not null
            if not c["error_code"]:
                c["error_message"] = ""
        return {"throttle_time_ms": 0, "coordinators": coordinators}
    e = await _lookup(coordinator, metadata, ctx, request.key, key_type, authz, txn_coordinator)
    # v1-3: Kafka 3.9.1 sends Errors.NONE's message, "NONE", with a found coordinator
    message = e["error_message"] if e["error_code"] else "NONE"
    return {"throttle_time_ms": 0, "error_code": e["error_code"], "error_message": message,
            "node_id": e["node_id"], "host": e["host"], "port": e["port"]}
