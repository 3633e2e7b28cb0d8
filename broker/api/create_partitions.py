"""CreatePartitions: add partitions to existing topics (the controller places and starts them).

Only the active controller accepts it (NOT_CONTROLLER elsewhere, as in Kafka's ZooKeeper mode); the
answer waits until the new partitions have leaders in this broker's metadata, up to ``timeout_ms``.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.api.authz import Authz
from broker.api.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, ControllerMutationQuota, throttle
from broker.errors import ErrorCode
from broker.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.controller import KafkaController
    from broker.cluster.metadata_cache import MetadataCache
    from broker.quota.client_quota_manager import ControllerMutationQuotaManager

MIN_VERSION, MAX_VERSION = 0, 3
_ALLOW_ALL = Authz()


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager",
                 controller: "KafkaController", metadata: "MetadataCache",
                 mutation_quota: "ControllerMutationQuotaManager", authz: Authz = _ALLOW_ALL) -> dict:
    if not controller.is_active:
        return {"throttle_time_ms": 0, "results": [
            {"name": t.name, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None} for t in request.topics]}
    names = [t.name for t in request.topics]
    quota = ControllerMutationQuota(mutation_quota, ctx, strict=ctx.api_version >= 3)
    alterable = (authz.filter_allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                                      [n for n in names if names.count(n) == 1])
                 if authz.enabled else None)  # ALTER on each (not duplicated) topic

    async def one(t: Any) -> dict:
        if names.count(t.name) > 1:
            return {"name": t.name, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": "Duplicate topic in request."}
        if alterable is not None and t.name not in alterable:
            return {"name": t.name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": "The topic authorization is failed."}
        if not request.validate_only and not quota.try_record(0):
            return {"name": t.name, "error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    "error_message": THROTTLING_QUOTA_EXCEEDED_MESSAGE}
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
        meta = metadata.topic(t.name)
        before = len(meta.partitions) if meta is not None else None
        code, msg = await admin.create_partitions(t.name, t.count, assignments, request.validate_only,
                                                  request.timeout_ms)
        if code == 0 and not request.validate_only:
            quota.try_record(max(0, t.count - before) if before is not None else 0)
        return {"name": t.name, "error_code": code, "error_message": msg}

    results = list(await asyncio.gather(*(one(t) for t in request.topics)))
    throttle_ms = quota.throttle_time_ms()
    throttle(ctx, throttle_ms)
    return {"throttle_time_ms": throttle_ms, "results": results}
