"""CreateTopics: validate, assign replicas, write ZooKeeper; describe the result's configs (v5+)."""
from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Dict, Optional, Set

from broker.api.authz import Authz
from broker.api.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, ControllerMutationQuota, throttle
from broker.config.topic_defs import describe_topic_config
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.controller import KafkaController
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.quota.client_quota_manager import ControllerMutationQuotaManager

MIN_VERSION, MAX_VERSION = 0, 7
ZERO_UUID = uuid.UUID(int=0)
_ALLOW_ALL = Authz()


def _config_entries(config: "DynamicBrokerConfig", overrides: Dict[str, str]) -> list:
    out = []
    for e in describe_topic_config(config.current, overrides):
        out.append({"name": e.name, "value": None if e.is_sensitive else e.value, "read_only": e.read_only,
                    "config_source": int(e.source), "is_sensitive": e.is_sensitive})
    return out


async def handle(ctx: "RequestContext", request: Any, *, admin: "AdminManager", config: "DynamicBrokerConfig",
                 controller: "KafkaController", mutation_quota: "ControllerMutationQuotaManager",
                 authz: Authz = _ALLOW_ALL) -> dict:
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
    # With an authorizer: CREATE on the cluster or on each topic; the created topic's configs are described only
    # with DESCRIBE_CONFIGS on it (else topic_config_error_code TOPIC_AUTHORIZATION_FAILED), as Kafka.
    creatable: Optional[Set[str]] = None
    describable: Optional[Set[str]] = None
    if authz.enabled:
        names = [t.name for t in request.topics]
        creatable = (set(names) if authz.allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME,
                                                 log_if_denied=False)
                     else authz.filter_allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, names))
        describable = authz.filter_allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names,
                                           log_if_denied=False)

    def configs_refused(entry: dict) -> dict:
        if describable is not None and entry["name"] not in describable:
            entry["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return entry

    async def one(t: Any) -> dict:
        if seen[t.name] > 1:
            return configs_refused({
                "name": t.name, "topic_id": ZERO_UUID, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "Found multiple entries for this topic.",  # Kafka 3.9.1's wording
                "num_partitions": -1, "replication_factor": -1, "configs": []})
        if creatable is not None and t.name not in creatable:
            return configs_refused({"name": t.name, "topic_id": ZERO_UUID,
                                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    "error_message": "Authorization failed.", "num_partitions": -1,
                                    "replication_factor": -1, "configs": None})
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
                 "num_partitions": -1, "replication_factor": -1,
                 # Kafka's result keeps its default (empty) config list when the creation fails
                 "configs": [] if r.error_code else None}
        if r.error_code == 0 and describable is not None and t.name not in describable:
            return configs_refused(entry)
        if r.error_code == 0 and version >= 5:
            entry.update(num_partitions=r.num_partitions, replication_factor=r.replication_factor,
                         configs=_config_entries(config, {k: v for k, v in configs.items() if v is not None}))
        return entry

    # Topics of one request wait for their leaders together, bounded by the request's one timeout.
    results = list(await asyncio.gather(*(one(t) for t in request.topics)))
    throttle_ms = quota.throttle_time_ms()
    throttle(ctx, throttle_ms)
    return {"throttle_time_ms": throttle_ms, "topics": results}
