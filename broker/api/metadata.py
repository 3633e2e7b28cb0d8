"""Metadata: brokers, controller, topics and partition leaders; auto-creates topics like Kafka.

Known topics are answered from :class:`~broker.api.metadata_answers.MetadataAnswers` (each topic's entry
encoded once per change, not walked per request); :func:`topic_entry` and :func:`partition_entries` are the
per-partition walk, kept as the reference those entries are tested against and used when a handler is bound
without ``answers``. Loop affinity: the event loop, like the MetadataCache.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, List, Optional, Set

from broker.api import acl_ops
from broker.api.authz import Authz
from broker.api.metadata_answers import MetadataAnswers, TopicAnswer
from broker.cluster.topic_names import invalid_topic_reason
from broker.errors import ErrorCode
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.cluster.admin import AdminManager
    from broker.cluster.metadata_cache import MetadataCache
    from broker.config.dynamic import DynamicBrokerConfig

MIN_VERSION, MAX_VERSION = 0, 12
#: How long a Metadata request waits for a just-started broker's first UpdateMetadata.
METADATA_WAIT_S = 5.0
ZERO_UUID = uuid.UUID(int=0)
_ALLOW_ALL = Authz()
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def _name_of(metadata: "MetadataCache", topic_id: Optional[uuid.UUID]) -> Optional[str]:
    return metadata.topic_name(topic_id) if topic_id is not None else None


def _refused(name: Optional[str], topic_id: uuid.UUID, is_internal: bool) -> dict:
    return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": topic_id,
            "is_internal": is_internal, "partitions": [], "topic_authorized_operations": acl_ops.NOT_REQUESTED}


def _invalid_request(requested: List[Any]) -> dict:
    """Kafka's answer to topic ids (or null names) in a v10-11 request: InvalidRequestException, answered by
    MetadataRequest.getErrorResponse (every topic INVALID_REQUEST, a null name as "", nothing else)."""
    return {"throttle_time_ms": 0, "brokers": [], "topics": [
        {"error_code": ErrorCode.INVALID_REQUEST, "name": t.name if t.name is not None else "",
         "topic_id": getattr(t, "topic_id", None) or ZERO_UUID, "is_internal": False, "partitions": []}
        for t in requested]}


def partition_entries(metadata: "MetadataCache", topic: Any, version: int, listener: str) -> List[dict]:
    """Partitions as Kafka's ZkMetadataCache reports them to a client of ``listener``.

    Replica and ISR lists name only brokers reachable on that listener when the version cannot
    say otherwise (v0), and then REPLICA_NOT_AVAILABLE marks the gap; a dead leader gives
    LEADER_NOT_AVAILABLE with leader -1; a live leader without the listener LISTENER_NOT_FOUND (v6+).
    """
    strict = version == 0

    def reachable(ids: Any) -> List[int]:
        return [r for r in ids if metadata.endpoint_of(r, listener) is not None] if strict else list(ids)

    out = []
    for p in sorted(topic.partitions.values(), key=lambda m: m.partition):
        replicas, isr = reachable(p.replicas), reachable(p.isr)
        entry = {"partition_index": p.partition, "leader_epoch": p.leader_epoch, "replica_nodes": replicas,
                 "isr_nodes": isr, "offline_replicas": list(p.offline)}
        if metadata.endpoint_of(p.leader, listener) is None:
            if p.leader in metadata.brokers and version >= 6:
                entry["error_code"] = ErrorCode.LISTENER_NOT_FOUND
            else:
                entry["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE
            entry["leader_id"] = -1
        else:
            missing = len(replicas) < len(p.replicas) or len(isr) < len(p.isr)
            entry["error_code"] = ErrorCode.REPLICA_NOT_AVAILABLE if missing else 0
            entry["leader_id"] = p.leader
        out.append(entry)
    return out


def topic_entry(metadata: "MetadataCache", name: Optional[str], version: int, include_ops: bool,
                topic_id: Optional[uuid.UUID] = None, error: int = 0, listener: str = "PLAINTEXT") -> dict:
    """A topic's entry, walking its partitions (or UNKNOWN_TOPIC_OR_PARTITION / ``error`` for an unknown one)."""
    meta = metadata.topic(name) if name is not None else None
    if meta is None:
        return {"error_code": error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                "topic_id": topic_id or ZERO_UUID, "is_internal": False, "partitions": [],
                "topic_authorized_operations": acl_ops.NOT_REQUESTED}
    return {
        "error_code": error,
        "name": meta.name,
        "topic_id": meta.topic_id,
        "is_internal": meta.is_internal,
        "partitions": partition_entries(metadata, meta, version, listener),
        "topic_authorized_operations": acl_ops.TOPIC_OPERATIONS if include_ops else acl_ops.NOT_REQUESTED,
    }


async def handle(ctx: "RequestContext", request: Any, *, metadata: "MetadataCache", admin: "AdminManager",
                 config: "DynamicBrokerConfig", authz: Authz = _ALLOW_ALL,
                 answers: Optional[MetadataAnswers] = None) -> dict:
    """Kafka's handleTopicMetadataRequest. ``answers``: the prepared entries of known topics (None: walk them)."""
    version = ctx.api_version
    listener = ctx.listener_name
    if not metadata.initialized:
        await metadata.wait_initialized(METADATA_WAIT_S)
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    if 10 <= version < 12 and requested and any(
            t.name is None or (getattr(t, "topic_id", None) or ZERO_UUID) != ZERO_UUID for t in requested):
        return _invalid_request(requested)
    # Entries are dicts, or TopicAnswers (known topics, when prepared). Each is taken when its topic is
    # reached, as Kafka does: an auto-creation awaited for a later topic does not change it.
    topics: List[Any] = []

    def known(name: str) -> Any:
        meta = metadata.topic(name)
        if meta is None or answers is None:
            return topic_entry(metadata, name, version, include_ops, listener=listener)
        return answers.answer(meta, version, listener)
    # With an authorizer (Kafka's handleTopicMetadataRequest): topics need DESCRIBE (all-topics requests silently
    # leave the others out, named ones get TOPIC_AUTHORIZATION_FAILED without disclosing existence); auto-creating
    # needs CREATE on the cluster or on the topic. Refused topics follow the others, as in Kafka.
    refused_create: List[dict] = []
    refused_describe: List[dict] = []
    if requested is None or (version == 0 and len(requested) == 0):
        names = answers.topic_names() if answers is not None else sorted(metadata.topics)
        if authz.enabled:
            allowed = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=False)
            names = [n for n in names if n in allowed]
        if answers is not None:
            topics.extend(answers.answer_all(names, version, listener) if authz.enabled
                          else answers.answer_every_topic(version, listener))
        else:
            for topic in names:
                topics.append(topic_entry(metadata, topic, version, include_ops, listener=listener))
    else:
        allow_auto = (getattr(request, "allow_auto_topic_creation", True) if version >= 4 else True)
        auto_create = allow_auto and config.get("auto.create.topics.enable")
        describable: Optional[Set[str]] = None
        creatable: Optional[Set[str]] = None
        if authz.enabled:
            found = [t.name if t.name is not None else _name_of(metadata, getattr(t, "topic_id", None))
                     for t in requested]
            named = [n for n in found if n is not None]
            describable = authz.filter_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
            missing = [n for n in dict.fromkeys(named) if n in describable and metadata.topic(n) is None]
            if auto_create and missing and not authz.allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER,
                                                             CLUSTER_RESOURCE_NAME, log_if_denied=False):
                creatable = authz.filter_allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, missing)
        for t in requested:
            tid = getattr(t, "topic_id", None)
            name = t.name if t.name is not None else (metadata.topic_name(tid) if tid is not None else None)
            if name is None:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": tid,
                               "partitions": []})
                continue
            if describable is not None:
                if name not in describable:
                    # by id: ids are not secret, the name is; by name: not even whether the topic exists
                    by_id = t.name is None
                    refused_describe.append(_refused(None if by_id else name, (tid or ZERO_UUID) if by_id else ZERO_UUID,
                                                      False))
                    continue
                if creatable is not None and metadata.topic(name) is None and name not in creatable:
                    refused_create.append(_refused(name, ZERO_UUID, name in INTERNAL_TOPICS))
                    continue
            if metadata.topic(name) is None:
                if invalid_topic_reason(name) is not None:
                    topics.append(topic_entry(metadata, None, version, include_ops,
                                              error=ErrorCode.INVALID_TOPIC_EXCEPTION) | {"name": name})
                    continue
                if auto_create and not name.startswith("__"):
                    err = await admin.auto_create_topic(name)
                    if err or metadata.topic(name) is None:
                        # Created, but the controller has not announced its leaders yet: clients retry.
                        topics.append(topic_entry(metadata, None, version, include_ops,
                                                  error=err or ErrorCode.LEADER_NOT_AVAILABLE) | {"name": name})
                        continue
            topics.append(known(name))
    cluster_ops = acl_ops.NOT_REQUESTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = acl_ops.CLUSTER_OPERATIONS
    if authz.enabled:
        if include_ops:
            for i, entry in enumerate(topics):
                if entry.__class__ is TopicAnswer:
                    topics[i] = entry.with_operations(
                        version, authz.authorized_operations(ctx, ResourceType.TOPIC, entry.name))
                elif entry.get("name") is not None:
                    entry["topic_authorized_operations"] = authz.authorized_operations(ctx, ResourceType.TOPIC,
                                                                                       entry["name"])
        if cluster_ops != acl_ops.NOT_REQUESTED:
            cluster_ops = (authz.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
                           if authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
                           else 0)
        topics.extend(refused_create)
        topics.extend(refused_describe)
    elif include_ops:  # Kafka sets every answered topic's operations, the ones with an error included
        for i, entry in enumerate(topics):
            if entry.__class__ is TopicAnswer:
                topics[i] = entry.with_operations(version, acl_ops.TOPIC_OPERATIONS)
            else:
                entry["topic_authorized_operations"] = acl_ops.TOPIC_OPERATIONS
    if answers is not None:
        topics = [e.entry if e.__class__ is TopicAnswer else e for e in topics]
    brokers = [{"node_id": bid, "host": ep.host, "port": ep.port, "rack": rack}
               for bid, ep, rack in metadata.alive_endpoints(listener)]
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
    }
