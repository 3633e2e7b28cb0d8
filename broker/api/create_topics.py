"""CreateTopics: validate, assign replicas, write ZooKeeper; describe the result's configs (v5+)."""
from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Dict

from broker.api.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, ControllerMutationQuota, throttle
from broker.config.topic_defs import describe_topic_config
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.controller import KafkaController
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.quota.client_quota_manager import ControllerMutationQuotaManager

MIN_VERSION, MAX_VERSION = 0, 7
ZERO_UUID = uuid.UUID(int=0)


def _config_entries(config: "DynamicBrokerConfig", overrides: Dict[str, str]) -> list:
    out = []
    for e in describe_topic_config(config.current, overrides):
        out.append({"name": e.name, "value": None if e.is_sensitive else e.value, "read_only": e.read_only,
                    "config_source": int(e.source), "is_sensitive": e.is_sensitive})
    return out


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager", config: "DynamicBrokerConfig",
                 controller: "KafkaController", mutation_quota: "ControllerMutationQuotaManager") -> dict:
    version = ctx.api_version
    if not controller.is_active:  # in ZooKeeper mode only the controller creates topics
        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None,
             "num_partitions": -1, "replication_factor": -1, "configs": None} for t in request.topics]}
    seen: Dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    validate_only = bool(getattr(request, "validate_only", False))
    quota = ControllerMutationQuota(mutation_quota, ctx, strict=version >= 6)

    async def one(t: Any) -> dict:
        if seen[t.name] > 1:
            return {"name": t.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": f"Create topics request from client `{ctx.client_id}` contains "
                                     f"multiple entries for the following topics: {t.name}",
                    "num_partitions": -1, "replication_factor": -1, "configs": None}
        if not validate_only and not quota.try_record(0):
            return {"name": t.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    "error_message": THROTTLING_QUOTA_EXCEEDED_MESSAGE, "num_partitions": -1,
                    "replication_factor": -1, "configs": None}
        configs = {c.name: c.value for c in t.configs}
        assignments = [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
        r = await admin.create_topic(t.name, t.num_partitions, t.replication_factor, assignments, configs,
                                     validate_only, request.timeout_ms)
        if r.error_code == 0 and not validate_only:
            quota.try_record(r.num_partitions if r.num_partitions > 0 else len(assignments))
        entry = {"name": t.name, "topic_id": r.topic_id or ZERO_UUID, "error_code": r.error_code,
                 "error_message": r.error_message if version >= 1 else None,
                 "num_partitions": -1, "replication_factor": -1, "configs": None}
        if r.error_code == 0 and version >= 5:
            entry.update(num_partitions=r.num_partitions, replication_factor=r.replication_factor,
                         configs=_config_entries(config, {k: v for k, v in configs.items() if v is not None}))
        return entry

    # Topics of one request wait for their leaders together, bounded by the request's one timeout.
    results = list(await asyncio.gather(*(one(t) for t in request.topics)))
    throttle_ms = quota.throttle_time_ms()
    throttle(ctx, throttle_ms)
    return {"throttle_time_ms": throttle_ms, "topics": results}
