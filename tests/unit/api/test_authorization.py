"""Authorization of every served API, as Kafka 3.9's KafkaApis does it: which resource and operation each request is
checked against, and the response (error codes, wire-encodable) when the principal is refused.

The handlers run from the real registry (``build_registry``) with the real ``AclAuthz`` over an ``AclCache``; the
authorizer records each check. "Deny" means no ACL at all (allow.everyone.if.no.acl.found=false, no super user).
"""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple
from unittest.mock import MagicMock

import pytest

from broker.api import acl_ops
from broker.api.acl_authz import AclAuthz
from broker.api.authz import Authz
from broker.api.dispatcher import ConnectionContext, RequestContext
from broker.api.fetch_session import FetchSessionCache
from broker.api.handlers import ApiServices, build_registry
from broker.api.throttling import RequestThrottler
from broker.cluster.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from broker.config.kafka_config import Endpoint
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from broker.quota.client_quota_manager import QuotaManagers
from broker.security.acl import (CLUSTER_RESOURCE_NAME, AccessControlEntry, AclOperation as Op, AclPermissionType,
                                 PatternType, ResourcePattern, ResourceType as RT)
from broker.security.authorizer import AclAuthorizer, AclCache

C = CLUSTER_RESOURCE_NAME
TID = uuid.UUID(int=7)
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
Check = Tuple[Op, RT, str]


class RecordingAuthz(AclAuthz):
    """The real ACL authorizer, recording (operation, resource type, name) of every check."""

    def __init__(self, cache: Optional[AclCache] = None) -> None:
        super().__init__(AclAuthorizer(cache if cache is not None else AclCache()))
        self.checks: List[Check] = []
        self.by_type: List[Tuple[Op, RT]] = []

    def allowed(self, ctx: Any, operation: Any, resource_type: Any, name: str, **kw: Any) -> bool:
        self.checks.append((operation, resource_type, name))
        return super().allowed(ctx, operation, resource_type, name, **kw)

    def allowed_by_resource_type(self, ctx: Any, operation: Any, resource_type: Any) -> bool:
        self.by_type.append((operation, resource_type))
        return super().allowed_by_resource_type(ctx, operation, resource_type)


class FakeConfig:
    broker_id = 0
    values = {"delete.topic.enable": True, "auto.create.topics.enable": True}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    @property
    def current(self) -> Any:
        return SimpleNamespace(log_dirs=["/tmp/none"], get=self.get)


def metadata() -> MetadataCache:
    m = MetadataCache(0)
    m.cluster_id = "cluster"
    m.controller_id = 0
    m.initialized = True
    m.set_brokers({0: BrokerMeta(0, (Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),))})
    m.put_topic(TopicMeta("t", TID, {0: PartitionMeta(0, 0, 0, (0,), (0,))}))
    return m


def registry(authz: Authz, coordinator: Any = None, admin: Any = None, producer_ids: Any = None) -> Any:
    quotas = QuotaManagers()
    return build_registry(ApiServices(
        config=FakeConfig(), metadata=metadata(), replica_manager=MagicMock(name="replica_manager"),  # type: ignore
        admin=admin or MagicMock(name="admin"), group_coordinator=coordinator or MagicMock(name="coordinator"),
        producer_ids=producer_ids or MagicMock(name="producer_ids"), fetch_sessions=FetchSessionCache(10),
        controller=SimpleNamespace(is_active=True), dynamic_config=MagicMock(name="dynamic_config"),
        broker_epoch=lambda: 1, quotas=quotas, throttler=RequestThrottler(quotas),
        client_quotas=MagicMock(name="client_quotas"), authz=authz))


def context(key: int, version: int, principal: str = "User:alice") -> RequestContext:
    conn = ConnectionContext("c1", "10.0.0.1", 5555, "PLAINTEXT")
    conn.principal = principal
    return RequestContext(conn, SimpleNamespace(api_key=key, api_version=version, correlation_id=1,
                                                client_id="cli"))


def request(key: int, version: int, body: Dict[str, Any]) -> Any:
    frame = memoryview(proto.encode_request(key, version, 1, "cli", body))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(key, version, frame, offset)


def call(reg: Any, key: int, version: int, body: Dict[str, Any], principal: str = "User:alice") -> Any:
    entry = reg.get(key)
    assert entry is not None, f"{ApiKey(key).name} is not served"
    resp = asyncio.run(entry.handler(context(key, version, principal), request(key, version, body)))
    if resp is not None:
        proto.encode_response(key, version, 1, resp)  # the refusal is a valid wire response
    return resp


def error_codes(obj: Any) -> List[int]:
    """Every error_code in a response body, depth first."""
    out: List[int] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "error_code":
                out.append(int(v))
            else:
                out.extend(error_codes(v))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            out.extend(error_codes(v))
    return out


BATCH = build_batch([(None, b"v")])
TXN_BATCH = build_batch([(None, b"v")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
PARTS = [{"partition_index": 0}]

# (id, api, version, request body, the check Kafka makes, the error every refused item carries)
CASES: List[Tuple[str, ApiKey, int, Dict[str, Any], Check, int]] = [
    ("produce", ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": BATCH}]}]}, (Op.WRITE, RT.TOPIC, "t"), TOPIC_DENIED),
    ("produce-transactional", ApiKey.PRODUCE, 9, {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
                                                  "topic_data": [{"name": "t", "partition_data": [
                                                      {"index": 0, "records": TXN_BATCH}]}]},
     (Op.WRITE, RT.TRANSACTIONAL_ID, "tx"), TXN_DENIED),
    ("fetch-consumer", ApiKey.FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]},
     (Op.READ, RT.TOPIC, "t"), TOPIC_DENIED),
    ("fetch-follower", ApiKey.FETCH, 12, {"replica_id": 1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), TOPIC_DENIED),
    ("list-offsets", ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, (Op.DESCRIBE, RT.TOPIC, "t"),
     TOPIC_DENIED),
    ("metadata", ApiKey.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True},
     (Op.DESCRIBE, RT.TOPIC, "t"), TOPIC_DENIED),
    ("offset-commit", ApiKey.OFFSET_COMMIT, 8, {"group_id": "g", "generation_id_or_member_epoch": 1,
                                                "member_id": "m", "topics": [{"name": "t", "partitions": [
                                                    {"partition_index": 0, "committed_offset": 5}]}]},
     (Op.READ, RT.GROUP, "g"), GROUP_DENIED),
    ("txn-offset-commit", ApiKey.TXN_OFFSET_COMMIT, 3, {"transactional_id": "tx", "group_id": "g", "producer_id": 5,
                                                        "producer_epoch": 0, "generation_id": -1, "member_id": "",
                                                        "topics": [{"name": "t", "partitions": [
                                                            {"partition_index": 0, "committed_offset": 5}]}]},
     (Op.WRITE, RT.TRANSACTIONAL_ID, "tx"), TXN_DENIED),
    ("offset-fetch-v7", ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None}, (Op.DESCRIBE, RT.GROUP, "g"),
     GROUP_DENIED),
    ("offset-fetch-v8", ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]},
     (Op.DESCRIBE, RT.GROUP, "g"), GROUP_DENIED),
    ("join-group", ApiKey.JOIN_GROUP, 9, {"group_id": "g", "session_timeout_ms": 10000, "member_id": "",
                                          "protocol_type": "consumer", "protocols": []},
     (Op.READ, RT.GROUP, "g"), GROUP_DENIED),
    ("sync-group", ApiKey.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                          "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
     (Op.READ, RT.GROUP, "g"), GROUP_DENIED),
    ("heartbeat", ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"},
     (Op.READ, RT.GROUP, "g"), GROUP_DENIED),
    ("leave-group", ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]},
     (Op.READ, RT.GROUP, "g"), GROUP_DENIED),
    ("describe-groups", ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": True},
     (Op.DESCRIBE, RT.GROUP, "g"), GROUP_DENIED),
    ("delete-groups", ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]}, (Op.DELETE, RT.GROUP, "g"), GROUP_DENIED),
    ("offset-delete", ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]}, (Op.DELETE, RT.GROUP, "g"), GROUP_DENIED),
    ("find-coordinator-v3", ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}, (Op.DESCRIBE, RT.GROUP, "g"),
     GROUP_DENIED),
    ("find-coordinator-v4", ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]},
     (Op.DESCRIBE, RT.GROUP, "g"), GROUP_DENIED),
    ("find-coordinator-txn", ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]},
     (Op.DESCRIBE, RT.TRANSACTIONAL_ID, "tx"), TXN_DENIED),
    ("create-topics", ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "new", "num_partitions": 1,
                                                            "replication_factor": 1}], "timeout_ms": 1000},
     (Op.CREATE, RT.TOPIC, "new"), TOPIC_DENIED),
    ("delete-topics", ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "t"}], "timeout_ms": 1000},
     (Op.DELETE, RT.TOPIC, "t"), TOPIC_DENIED),
    ("delete-records", ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000}, (Op.DELETE, RT.TOPIC, "t"), TOPIC_DENIED),
    ("create-partitions", ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "t", "count": 2, "assignments": None}],
                                                        "timeout_ms": 1000, "validate_only": False},
     (Op.ALTER, RT.TOPIC, "t"), TOPIC_DENIED),
    ("describe-configs-topic", ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
     (Op.DESCRIBE_CONFIGS, RT.TOPIC, "t"), TOPIC_DENIED),
    ("describe-configs-broker", ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None}]},
     (Op.DESCRIBE_CONFIGS, RT.CLUSTER, C), CLUSTER_DENIED),
    ("alter-configs-topic", ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": []}], "validate_only": False},
     (Op.ALTER_CONFIGS, RT.TOPIC, "t"), TOPIC_DENIED),
    ("alter-configs-broker", ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": 4, "resource_name": "0", "configs": []}], "validate_only": False},
     (Op.ALTER_CONFIGS, RT.CLUSTER, C), CLUSTER_DENIED),
    ("incremental-alter-configs-topic", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configs": []}], "validate_only": False},
     (Op.ALTER_CONFIGS, RT.TOPIC, "t"), TOPIC_DENIED),
    ("incremental-alter-configs-logger", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 8, "resource_name": "0", "configs": []}], "validate_only": False},
     (Op.ALTER_CONFIGS, RT.CLUSTER, C), CLUSTER_DENIED),
    ("describe-log-dirs", ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}, (Op.DESCRIBE, RT.CLUSTER, C),
     CLUSTER_DENIED),
    ("alter-replica-log-dirs", ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
        {"path": "/d", "topics": [{"name": "t", "partitions": [0, 1]}]}]}, (Op.ALTER, RT.CLUSTER, C),
     CLUSTER_DENIED),
    ("init-producer-id-transactional", ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx",
                                                                    "transaction_timeout_ms": 1000},
     (Op.WRITE, RT.TRANSACTIONAL_ID, "tx"), TXN_DENIED),
    ("init-producer-id-idempotent", ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                                 "transaction_timeout_ms": 1000},
     (Op.IDEMPOTENT_WRITE, RT.CLUSTER, C), CLUSTER_DENIED),
    ("describe-producers", ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]},
     (Op.READ, RT.TOPIC, "t"), TOPIC_DENIED),
    ("elect-leaders", ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "t", "partitions": [0]}], "timeout_ms": 1000}, (Op.ALTER, RT.CLUSTER, C), CLUSTER_DENIED),
    ("alter-partition-reassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}]}, (Op.ALTER, RT.CLUSTER, C),
     CLUSTER_DENIED),
    ("list-partition-reassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"topics": None},
     (Op.DESCRIBE, RT.CLUSTER, C), CLUSTER_DENIED),
    ("describe-client-quotas", ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False},
     (Op.DESCRIBE_CONFIGS, RT.CLUSTER, C), CLUSTER_DENIED),
    ("alter-client-quotas", ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
        {"entity": [{"entity_type": "user", "entity_name": "u"}], "ops": []}], "validate_only": False},
     (Op.ALTER_CONFIGS, RT.CLUSTER, C), CLUSTER_DENIED),
    ("update-features", ApiKey.UPDATE_FEATURES, 1, {"timeout_ms": 1000, "feature_updates": []},
     (Op.ALTER, RT.CLUSTER, C), CLUSTER_DENIED),
    ("offset-for-leader-epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]}, (Op.DESCRIBE, RT.TOPIC, "t"),
     TOPIC_DENIED),
    ("leader-and-isr", ApiKey.LEADER_AND_ISR, 7, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1,
                                                  "topic_states": [{"topic_name": "t", "partition_states": [
                                                      {"partition_index": 0}]}]},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("leader-and-isr-v1", ApiKey.LEADER_AND_ISR, 1, {"controller_id": 0, "controller_epoch": 1,
                                                     "ungrouped_partition_states": [
                                                         {"topic_name": "t", "partition_index": 0}]},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("update-metadata", ApiKey.UPDATE_METADATA, 8, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("stop-replica", ApiKey.STOP_REPLICA, 4, {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1,
                                              "topic_states": [{"topic_name": "t", "partition_states": [
                                                  {"partition_index": 0, "delete_partition": True}]}]},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("controlled-shutdown", ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 1, "broker_epoch": 1},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("write-txn-markers", ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [
        {"producer_id": 5, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "t", "partition_indexes": [0]}]}]}, (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("alter-partition", ApiKey.ALTER_PARTITION, 3, {"broker_id": 1, "broker_epoch": 1, "topics": []},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("allocate-producer-ids", ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": 1},
     (Op.CLUSTER_ACTION, RT.CLUSTER, C), CLUSTER_DENIED),
    ("create-acls", ApiKey.CREATE_ACLS, 3, {"creations": [
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:bob",
         "host": "*", "operation": 3, "permission_type": 3}]}, (Op.ALTER, RT.CLUSTER, C), CLUSTER_DENIED),
    ("delete-acls", ApiKey.DELETE_ACLS, 3, {"filters": [
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
     (Op.ALTER, RT.CLUSTER, C), CLUSTER_DENIED),
    ("describe-acls", ApiKey.DESCRIBE_ACLS, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                                "pattern_type_filter": 1, "principal_filter": None,
                                                "host_filter": None, "operation": 1, "permission_type": 1},
     (Op.DESCRIBE, RT.CLUSTER, C), CLUSTER_DENIED),
]


@pytest.mark.parametrize("name,key,version,body,check,error", CASES, ids=[c[0] for c in CASES])
def test_refused_request_gets_kafkas_error(name: str, key: ApiKey, version: int, body: Dict[str, Any],
                                           check: Check, error: int) -> None:
    authz = RecordingAuthz()
    resp = call(registry(authz), key, version, body)
    assert check in authz.checks, f"{name}: checked {authz.checks}"
    codes = [c for c in error_codes(resp) if c]  # (a top-level 0 next to per-item refusals is Kafka's too)
    assert codes and set(codes) == {error}, f"{name}: {resp}"


def test_every_served_api_that_kafka_authorizes_has_a_case() -> None:
    """The table covers every registered API (a new API must say how it is authorized)."""
    reg = registry(RecordingAuthz())
    exempt = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
              ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_CLUSTER,  # checked below: they filter rather than refuse
              # refused before any authorization in ZooKeeper mode, as Kafka 3.9 does (KRaft-only features)
              ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.ENVELOPE}
    served = {ApiKey(e.api_key) for e in reg}
    covered = {c[1] for c in CASES}
    assert served - covered - exempt == set()


def test_no_authorizer_registry_holds_the_bare_handlers() -> None:
    """Without an authorizer nothing is wrapped: the hot path is the handler itself."""
    reg = registry(Authz())
    for e in reg:
        assert not hasattr(e.handler, "__wrapped__"), ApiKey(e.api_key).name


def acl(cache: AclCache, rt: RT, name: str, op: Op, principal: str = "User:alice",
        permission: AclPermissionType = AclPermissionType.ALLOW, pattern: PatternType = PatternType.LITERAL,
        host: str = "*") -> None:
    cache.add(ResourcePattern(rt, name, pattern), [AccessControlEntry(principal, host, op, permission)])


# ------------------------------------------------------------------------------------------- partial permissions
def test_metadata_hides_undescribable_topics_and_reports_create_refusals() -> None:
    cache = AclCache()
    acl(cache, RT.TOPIC, "new", Op.DESCRIBE)  # may describe "new" but not create it
    authz = RecordingAuthz(cache)
    reg = registry(authz)
    resp = call(reg, ApiKey.METADATA, 9, {"topics": [{"name": "t"}, {"name": "new"}],
                                          "allow_auto_topic_creation": True,
                                          "include_cluster_authorized_operations": True,
                                          "include_topic_authorized_operations": True})
    by_name = {t["name"]: t for t in resp["topics"]}
    assert by_name["t"]["error_code"] == TOPIC_DENIED and by_name["t"]["topic_id"] == uuid.UUID(int=0)
    assert by_name["new"]["error_code"] == TOPIC_DENIED  # auto-creation refused: no CREATE on cluster or topic
    assert (Op.CREATE, RT.CLUSTER, C) in authz.checks and (Op.CREATE, RT.TOPIC, "new") in authz.checks
    assert resp["cluster_authorized_operations"] == 0  # no DESCRIBE on the cluster
    everything = call(reg, ApiKey.METADATA, 9, {"topics": None})
    assert everything["topics"] == []  # all-topics requests silently leave undescribable topics out


def test_metadata_authorized_operations_are_the_principals() -> None:
    cache = AclCache()
    acl(cache, RT.TOPIC, "t", Op.READ)
    acl(cache, RT.CLUSTER, C, Op.DESCRIBE)
    body = call(registry(RecordingAuthz(cache)), ApiKey.METADATA, 10, {
        "topics": [{"name": "t"}], "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True})
    # known topics' entries come pre-encoded (broker.api.metadata_answers): read them off the wire
    resp = proto.decode_response(ApiKey.METADATA, 10, proto.encode_response(ApiKey.METADATA, 10, 1, body)[0]).to_dict()
    (topic,) = resp["topics"]
    assert topic["error_code"] == 0
    assert topic["topic_authorized_operations"] == acl_ops.bits([Op.READ, Op.DESCRIBE])  # READ implies DESCRIBE
    assert resp["cluster_authorized_operations"] == acl_ops.bits([Op.DESCRIBE])


def test_describe_cluster_operations() -> None:
    cache = AclCache()
    reg = registry(RecordingAuthz(cache))
    body = {"include_cluster_authorized_operations": True}
    assert call(reg, ApiKey.DESCRIBE_CLUSTER, 1, body)["cluster_authorized_operations"] == 0
    acl(cache, RT.CLUSTER, C, Op.ALTER)
    assert call(reg, ApiKey.DESCRIBE_CLUSTER, 1, body)["cluster_authorized_operations"] == acl_ops.bits(
        [Op.ALTER, Op.DESCRIBE])
    assert call(registry(Authz()), ApiKey.DESCRIBE_CLUSTER, 1, body)["cluster_authorized_operations"] == \
        acl_ops.CLUSTER_OPERATIONS


def test_list_groups_keeps_only_describable_groups_unless_cluster_describe() -> None:
    coordinator = MagicMock()
    coordinator.list_groups.return_value = (0, [{"group_id": "g1", "protocol_type": "consumer"},
                                                {"group_id": "g2", "protocol_type": "consumer"}])
    cache = AclCache()
    acl(cache, RT.GROUP, "g2", Op.DESCRIBE)
    reg = registry(RecordingAuthz(cache), coordinator)
    assert [g["group_id"] for g in call(reg, ApiKey.LIST_GROUPS, 4, {})["groups"]] == ["g2"]
    acl(cache, RT.CLUSTER, C, Op.DESCRIBE)
    assert [g["group_id"] for g in call(reg, ApiKey.LIST_GROUPS, 4, {})["groups"]] == ["g1", "g2"]


def test_offset_commit_group_allowed_topic_refused() -> None:
    cache = AclCache()
    acl(cache, RT.GROUP, "g", Op.READ)
    authz = RecordingAuthz(cache)
    resp = call(registry(authz), ApiKey.OFFSET_COMMIT, 8, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]})
    assert error_codes(resp) == [TOPIC_DENIED]
    assert (Op.READ, RT.TOPIC, "t") in authz.checks


def test_offset_fetch_refused_topics_follow_the_others() -> None:
    cache = AclCache()
    acl(cache, RT.GROUP, "g", Op.DESCRIBE)
    acl(cache, RT.TOPIC, "t", Op.DESCRIBE)

    async def fetch_offsets(group: str, partitions: Any, stable: bool) -> Any:
        assert partitions == [("t", 0)]  # the refused topic is never asked for
        return 0, [(("t", 0), 42, -1, "", 0)]
    coordinator = MagicMock()
    coordinator.fetch_offsets = fetch_offsets
    resp = call(registry(RecordingAuthz(cache), coordinator), ApiKey.OFFSET_FETCH, 7, {
        "group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}, {"name": "x", "partition_indexes": [0]}]})
    assert [(t["name"], t["partitions"][0]["error_code"], t["partitions"][0]["committed_offset"])
            for t in resp["topics"]] == [("t", 0, 42), ("x", TOPIC_DENIED, -1)]


def test_create_topics_without_describe_configs_hides_the_configs() -> None:
    cache = AclCache()
    acl(cache, RT.CLUSTER, C, Op.CREATE)
    authz = RecordingAuthz(cache)

    async def create_topic(*args: Any) -> Any:
        return SimpleNamespace(error_code=0, error_message=None, topic_id=TID, num_partitions=1,
                               replication_factor=1)
    reg = registry(authz, admin=SimpleNamespace(create_topic=create_topic))
    resp = call(reg, ApiKey.CREATE_TOPICS, 7, {"topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1}],
                                               "timeout_ms": 1000})
    (t,) = resp["topics"]
    assert t["error_code"] == 0 and t["topic_config_error_code"] == TOPIC_DENIED and t["num_partitions"] == -1
    assert (Op.DESCRIBE_CONFIGS, RT.TOPIC, "new") in authz.checks


def test_init_producer_id_idempotent_with_write_on_any_topic() -> None:
    """KIP-679: WRITE on some topic is enough for an idempotent producer (no IDEMPOTENT_WRITE needed)."""
    cache = AclCache()
    acl(cache, RT.TOPIC, "orders-", Op.WRITE, pattern=PatternType.PREFIXED)
    authz = RecordingAuthz(cache)

    async def generate() -> int:
        return 1000
    reg = registry(authz, producer_ids=SimpleNamespace(generate=generate))
    resp = call(reg, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000})
    assert resp["error_code"] == 0 and resp["producer_id"] == 1000
    assert authz.by_type == [(Op.WRITE, RT.TOPIC)]


def test_deny_beats_allow_and_super_users_pass() -> None:
    cache = AclCache()
    acl(cache, RT.TOPIC, "*", Op.ALL)
    acl(cache, RT.TOPIC, "t", Op.WRITE, permission=AclPermissionType.DENY)
    reg = registry(RecordingAuthz(cache))
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": BATCH}]}]}
    assert error_codes(call(reg, ApiKey.PRODUCE, 9, body)) == [TOPIC_DENIED]
    su = AclAuthz(AclAuthorizer(cache, super_users=["User:admin"]))
    assert su.allowed(context(0, 9, "User:admin"), Op.WRITE, RT.TOPIC, "t")


def test_sync_group_v5_without_protocol_type_is_inconsistent_before_authorization() -> None:
    resp = call(registry(RecordingAuthz()), ApiKey.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1,
                                                                   "member_id": "m", "assignments": []})
    assert resp["error_code"] == 23  # INCONSISTENT_GROUP_PROTOCOL, as Kafka checks it first


def test_produce_acks_zero_refusals() -> None:
    reg = registry(RecordingAuthz())
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": BATCH}]}]}
    from broker.api.registry import CLOSE_CONNECTION
    entry = reg.get(ApiKey.PRODUCE)
    assert asyncio.run(entry.handler(context(0, 9), request(0, 9, body))) is CLOSE_CONNECTION
    txn = dict(body, transactional_id="tx", topic_data=[{"name": "t", "partition_data": [
        {"index": 0, "records": TXN_BATCH}]}])
    assert asyncio.run(entry.handler(context(0, 9), request(0, 9, txn))) is None  # Kafka answers nothing


# ------------------------------------------------------------------------------------------- ACL APIs
def test_acl_apis_without_authorizer_answer_security_disabled() -> None:
    reg = registry(Authz())
    bodies = {c[1]: c[3] for c in CASES}
    create = call(reg, ApiKey.CREATE_ACLS, 3, bodies[ApiKey.CREATE_ACLS])
    assert create["results"] == [{"error_code": 54, "error_message": "No Authorizer is configured."}]
    describe = call(reg, ApiKey.DESCRIBE_ACLS, 1, bodies[ApiKey.DESCRIBE_ACLS])
    assert (describe["error_code"], describe["error_message"]) == (54, "No Authorizer is configured on the broker")
    delete = call(reg, ApiKey.DELETE_ACLS, 0, bodies[ApiKey.DELETE_ACLS])
    assert error_codes(delete) == [54]


class MemoryStore:
    """An ACL store writing straight into the cache (the ZooKeeper store has its own tests)."""

    def __init__(self, cache: AclCache) -> None:
        self.cache = cache

    async def create_acls(self, bindings: List[Any]) -> List[Any]:
        for b in bindings:
            self.cache.add(b.pattern, [b.entry])
        return [None] * len(bindings)

    async def delete_acls(self, filters: List[Any]) -> List[Any]:
        out = []
        for f in filters:
            gone = [b for b in list(self.cache.bindings()) if f.matches(b)]
            for b in gone:
                self.cache.remove(b.pattern, [b.entry])
            out.append([(b, None) for b in gone])
        return out


def creation(rt: int, name: str, pattern: int = 3, principal: str = "User:bob", op: int = 3,
             perm: int = 3) -> Dict[str, Any]:
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": "*", "operation": op, "permission_type": perm}


def test_create_describe_delete_acls_with_kafkas_validation() -> None:
    cache = AclCache()
    authz = AclAuthz(AclAuthorizer(cache, super_users=["User:admin"]), MemoryStore(cache))
    reg = registry(authz)
    resp = call(reg, ApiKey.CREATE_ACLS, 3, {"creations": [
        creation(2, "orders"), creation(4, "other-cluster"), creation(2, ""), creation(2, "a/b"),
        creation(2, "pre", pattern=4), creation(2, "x", principal="bob"), creation(1, "x"), creation(0, "x")]},
        principal="User:admin")
    assert [(r["error_code"], r["error_message"]) for r in resp["results"]] == [
        (0, None),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid empty resource name"),
        (42, "Failed to create ACL"),
        (0, None),
        (42, "expected a string in format principalType:principalName but got bob"),
        (42, "resourceType must not be ANY"),
        (42, "Failed to create ACL"),
    ]
    assert len(cache) == 2
    match = {"resource_type_filter": 2, "resource_name_filter": "preview", "pattern_type_filter": 2,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    described = call(reg, ApiKey.DESCRIBE_ACLS, 3, match, principal="User:admin")
    assert [(r["resource_name"], r["pattern_type"]) for r in described["resources"]] == [("pre", 4)]
    v0 = call(reg, ApiKey.DESCRIBE_ACLS, 0, dict(match, resource_name_filter=None), principal="User:admin")
    assert [r["resource_name"] for r in v0["resources"]] == ["orders"]  # v0: literal patterns only
    deleted = call(reg, ApiKey.DELETE_ACLS, 3, {"filters": [
        dict(match, resource_name_filter="orders", pattern_type_filter=3),
        dict(match, operation=0)]}, principal="User:admin")
    first, second = deleted["filter_results"]
    assert [m["resource_name"] for m in first["matching_acls"]] == ["orders"]
    assert (second["error_code"], second["error_message"]) == (42, "Filter contain UNKNOWN elements")
    assert len(cache) == 1


def test_authorizer_audit_lines(caplog: pytest.LogCaptureFixture) -> None:
    cache = AclCache()
    acl(cache, RT.TOPIC, "t", Op.READ)
    authz = AclAuthz(AclAuthorizer(cache))
    ctx = context(ApiKey.FETCH, 12)
    with caplog.at_level(5, logger="kafka.authorizer.logger"):
        assert authz.allowed(ctx, Op.READ, RT.TOPIC, "t")
        assert not authz.allowed(ctx, Op.WRITE, RT.TOPIC, "t")
        assert not authz.allowed(ctx, Op.WRITE, RT.TOPIC, "u", log_if_denied=False)
        assert not authz.allowed_by_resource_type(ctx, Op.WRITE, RT.TOPIC)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert lines == [
        ("DEBUG", "Principal = User:alice is Allowed Operation = Read from host = 10.0.0.1 on resource = "
                  "Topic:LITERAL:t for request = Fetch with resourceRefCount = 1"),
        ("INFO", "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 on resource = "
                 "Topic:LITERAL:t for request = Fetch with resourceRefCount = 1"),
        ("Level 5", "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 on resource = "
                    "Topic:LITERAL:u for request = Fetch with resourceRefCount = 1"),
        ("INFO", "Principal = User:alice is Denied Operation = Write from host = 10.0.0.1 on resource = "
                 "Topic:UNKNOWN:NONE for request = Fetch with resourceRefCount = 0"),
    ]


def test_filter_allowed_counts_references(caplog: pytest.LogCaptureFixture) -> None:
    authz = AclAuthz(AclAuthorizer(AclCache()))
    with caplog.at_level(20, logger="kafka.authorizer.logger"):
        assert authz.filter_allowed(context(ApiKey.PRODUCE, 9), Op.WRITE, RT.TOPIC, ["a", "a", "b"]) == set()
    assert [r.getMessage().rsplit("= ", 1)[1] for r in caplog.records] == ["2", "1"]
