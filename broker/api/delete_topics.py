"""DeleteTopics: by name (v0-v5) or by name/topic id (v6)."""
from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, List, Optional, Set, Tuple

from broker.api.authz import Authz
from broker.api.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, ControllerMutationQuota, throttle
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.controller import KafkaController
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.cluster.metadata_cache import MetadataCache
    from broker.quota.client_quota_manager import ControllerMutationQuotaManager

MIN_VERSION, MAX_VERSION = 0, 6
ZERO_UUID = uuid.UUID(int=0)
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager", metadata: "MetadataCache",
                 controller: "KafkaController", config: "DynamicBrokerConfig",
                 mutation_quota: "ControllerMutationQuotaManager", authz: Authz = _ALLOW_ALL) -> dict:
    wanted: List[Tuple[Optional[str], Optional[uuid.UUID]]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(n, None) for n in request.topic_names]
    refused = 0
    if not controller.is_active:  # in ZooKeeper mode only the controller deletes topics
        refused = ErrorCode.NOT_CONTROLLER
    elif not config.get("delete.topic.enable"):
        refused = ErrorCode.INVALID_REQUEST if ctx.api_version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
    if refused:
        return {"throttle_time_ms": 0, "responses": [
            {"name": n, "topic_id": tid or ZERO_UUID, "error_code": refused, "error_message": None}
            for n, tid in wanted]}
    todo: List[Tuple[int, str]] = []
    responses: List[dict] = []
    quota = ControllerMutationQuota(mutation_quota, ctx, strict=ctx.api_version >= 5)
    # With an authorizer: DELETE on each topic; a topic named by id also needs DESCRIBE, else its name stays hidden
    describable: Optional[Set[str]] = None
    deletable: Optional[Set[str]] = None
    if authz.enabled:
        found = [n if n is not None else metadata.topic_name(tid) if tid is not None else None for n, tid in wanted
                 if n is not None or (tid is not None and tid != ZERO_UUID)]
        names = [n for n in found if n is not None]
        describable = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        deletable = authz.filter_allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
    for name, tid in wanted:
        by_id = name is None
        if name is None and tid is not None and tid != ZERO_UUID:
            name = metadata.topic_name(tid)
            if name is None:
                responses.append({"name": None, "topic_id": tid, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                                  "error_message": None})  # Kafka 3.9.1 sends no message
                continue
        if name is None:
            responses.append({"name": None, "topic_id": tid or ZERO_UUID, "error_code": ErrorCode.INVALID_REQUEST,
                              "error_message": "Neither topic name nor id was given."})
            continue
        if deletable is not None and describable is not None:
            if by_id and name not in describable:
                responses.append({"name": None, "topic_id": tid, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "error_message": None})
                continue
            if name not in deletable:
                responses.append({"name": name, "topic_id": tid or ZERO_UUID,
                                  "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "error_message": None})
                continue
        responses.append({"name": name, "topic_id": metadata.topic_id(name) or ZERO_UUID})
        meta = metadata.topic(name)
        if not quota.try_record(len(meta.partitions) if meta is not None else 0):
            responses[-1].update(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                 error_message=THROTTLING_QUOTA_EXCEEDED_MESSAGE)
            continue
        todo.append((len(responses) - 1, name))
    # All topics of the request are marked at once and waited for together (one timeout).
    outcomes = await asyncio.gather(*(admin.delete_topic(name, request.timeout_ms) for _, name in todo))
    for (i, _), (code, msg) in zip(todo, outcomes):
        responses[i].update(error_code=code, error_message=msg)
    throttle_ms = quota.throttle_time_ms()
    throttle(ctx, throttle_ms)
    return {"throttle_time_ms": throttle_ms, "responses": responses}
