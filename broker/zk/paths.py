"""Kafka's ZooKeeper znodes (ZooKeeper mode, Kafka 3.9): one small class per znode with its path and the exact JSON
Kafka reads and writes, so Kafka's own tools (and operators) find everything where they expect it.

Encoding: UTF-8 JSON, compact separators, as Kafka's Json.encodeAsBytes. Layouts (see
/work/shared/reference/zookeeper-layout.md):
  /cluster/id                                   {"version":"1","id":"<22-char base64url uuid>"}
  /brokers/ids/<id>            (ephemeral)      {"version":5,"host":h,"port":p,"jmx_port":-1,"timestamp":"<ms>",
                                                 "endpoints":[...],"listener_security_protocol_map":{...},
                                                 "rack":r|null,"features":{}}
  /brokers/topics/<t>                           {"version":3,"topic_id":id,"partitions":{"0":[1,2]},
                                                 "adding_replicas":{},"removing_replicas":{}}
  /brokers/topics/<t>/partitions/<p>/state      {"version":1,"leader":l,"leader_epoch":e,"controller_epoch":c,
                                                 "isr":[...]} (+ "leader_recovery_state":1 when RECOVERING)
  /controller                  (ephemeral)      {"version":2,"brokerid":b,"timestamp":"<ms>","kraftControllerEpoch":-1}
  /controller_epoch                             decimal text
  /config/<entity type>/<name>                  {"version":1,"config":{k: v}}
  /config/changes/config_change_<10 digits>     {"version":2,"entity_path":"topics/foo"}
  /admin/delete_topics/<t>                      empty
  /latest_producer_id_block                     {"version":1,"broker":b,"block_start":"0","block_end":"999"}
  /isr_change_notification/isr_change_<seq>     {"version":1,"partitions":[{"topic":t,"partition":p}]}
  /feature                                      {"version":2,"status":1,"features":{}}
  /admin/reassign_partitions                    {"version":1,"partitions":[{"topic":t,"partition":p,"replicas":[..]}]}
  /admin/preferred_replica_election             {"version":1,"partitions":[{"topic":t,"partition":p}]}
  /log_dir_event_notification/log_dir_event_<seq> {"version":1,"broker":b,"event":1}
  /delegation_token/tokens/<token id>           {"version":3,"owner":"User%3Aa","tokenRequester":..,
                                                 "renewers":[..],"issueTimestamp":ms,"maxTimestamp":ms,
                                                 "expiryTimestamp":ms,"tokenId":id}
  /delegation_token/token_changes/token_change_<10 digits>   token id (UTF-8 text)
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from broker.config.kafka_config import Endpoint
from broker.quota.entity import desanitize, sanitize
from broker.security.token_cache import TokenInformation, parse_principal


def _enc(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _dec(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def _now_ms_str() -> str:
    return str(int(time.time() * 1000))


def new_uuid_base64() -> str:
    """A random Kafka Uuid as 22-char base64url without padding (never starting with '-', as Kafka avoids)."""
    while True:
        raw = uuid.uuid4().bytes
        s = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not s.startswith("-"):
            return s


def topic_id_to_uuid(topic_id: str | None) -> uuid.UUID:
    """Kafka's base64url topic id (as stored in /brokers/topics/<t>) as a uuid.UUID; None -> the zero uuid."""
    if not topic_id:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def uuid_to_topic_id(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


# ----------------------------------------------------------------------------------------------- cluster / brokers
class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _enc({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return str(_dec(data)["id"])


class BrokerIdsZNode:
    path = "/brokers/ids"


class BrokerSequenceIdZNode:
    path = "/brokers/seqid"


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as registered in /brokers/ids/<id>."""

    broker_id: int
    endpoints: list[Endpoint]
    rack: str | None = None
    features: dict[str, Any] = field(default_factory=dict)
    jmx_port: int = -1
    timestamp: str = ""

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for e in self.endpoints:
            if e.listener_name == listener_name:
                return e
        return None


class BrokerIdZNode:
    version = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        return _enc({
            "version": BrokerIdZNode.version,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "jmx_port": info.jmx_port,
            "timestamp": info.timestamp or _now_ms_str(),
            "endpoints": [e.connection_string() for e in info.endpoints],
            "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in info.endpoints},
            **({"rack": info.rack} if info.rack is not None else {}),  # Kafka writes "rack" only when set
            "features": info.features,
        })

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        obj = _dec(data)
        proto_map = obj.get("listener_security_protocol_map") or {}
        endpoints = []
        for s in obj.get("endpoints", []):
            name, rest = s.split("://", 1)
            host, port = rest.rsplit(":", 1)
            host = host[1:-1] if host.startswith("[") else host
            endpoints.append(Endpoint(name, host, int(port), proto_map.get(name, name)))
        if not endpoints and obj.get("host"):
            endpoints.append(Endpoint("PLAINTEXT", obj["host"], int(obj["port"]), "PLAINTEXT"))
        return BrokerInfo(broker_id, endpoints, obj.get("rack"), obj.get("features") or {},
                          int(obj.get("jmx_port", -1)), str(obj.get("timestamp", "")))


# ----------------------------------------------------------------------------------------------- topics
class TopicsZNode:
    path = "/brokers/topics"


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: str | None
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        obj: dict[str, Any] = {"version": 3 if assignment.topic_id else 2}
        if assignment.topic_id:
            obj["topic_id"] = assignment.topic_id
        obj["partitions"] = {str(p): list(r) for p, r in sorted(assignment.partitions.items())}
        obj["adding_replicas"] = {str(p): list(r) for p, r in sorted(assignment.adding_replicas.items())}
        obj["removing_replicas"] = {str(p): list(r) for p, r in sorted(assignment.removing_replicas.items())}
        return _enc(obj)

    @staticmethod
    def decode(data: bytes) -> TopicAssignment:
        obj = _dec(data) or {}

        def m(key: str) -> dict[int, list[int]]:
            return {int(p): [int(r) for r in rs] for p, rs in (obj.get(key) or {}).items()}

        return TopicAssignment(obj.get("topic_id"), m("partitions"), m("adding_replicas"), m("removing_replicas"))


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


@dataclass(frozen=True)
class LeaderAndIsr:
    """Contents of a partition state znode (plus the znode version for compare-and-set, -1 when unknown)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = 0
    zk_version: int = -1


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(s: LeaderAndIsr) -> bytes:
        obj: dict[str, Any] = {"version": 1, "leader": s.leader, "leader_epoch": s.leader_epoch,
                               "controller_epoch": s.controller_epoch, "isr": list(s.isr)}
        if s.leader_recovery_state != 0:  # as Kafka: only when RECOVERING (KIP-704)
            obj["leader_recovery_state"] = s.leader_recovery_state
        return _enc(obj)

    @staticmethod
    def decode(data: bytes, zk_version: int = -1) -> LeaderAndIsr:
        o = _dec(data)
        return LeaderAndIsr(int(o["leader"]), int(o["leader_epoch"]), [int(r) for r in o["isr"]],
                            int(o["controller_epoch"]), int(o.get("leader_recovery_state", 0)), zk_version)


# ----------------------------------------------------------------------------------------------- controller
class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _enc({"version": 2, "brokerid": broker_id, "timestamp": _now_ms_str(), "kraftControllerEpoch": -1})

    @staticmethod
    def decode(data: bytes) -> int:
        o = _dec(data)
        return int(o) if isinstance(o, int) else int(o["brokerid"])


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode("ascii").strip() or 0)


# ----------------------------------------------------------------------------------------------- configs
class ConfigEntityZNode:
    """/config/<type>/<name>: overrides for a topic, broker ('<default>' = cluster default), user, client, ip."""

    DEFAULT = "<default>"

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"/config/{entity_type}/{entity_name}"

    @staticmethod
    def encode(configs: dict[str, str]) -> bytes:
        return _enc({"version": 1, "config": dict(configs)})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        o = _dec(data)
        return {k: str(v) for k, v in ((o or {}).get("config") or {}).items()}


class TopicConfigZNode:
    @staticmethod
    def path(topic: str) -> str:
        return ConfigEntityZNode.path("topics", topic)


def sanitize_entity_name(name: str) -> str:
    """Kafka URL-encodes user/client entity names in znode paths (<default> stays literal)."""
    return name if name == ConfigEntityZNode.DEFAULT else quote(name, safe="")


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"
    prefix = "config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _enc({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes) -> str:
        return str(_dec(data)["entity_path"])


class DeleteTopicsZNode:
    path = "/admin/delete_topics"

    @staticmethod
    def topic_path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class ProducerIdBlockZNode:
    path = "/latest_producer_id_block"
    block_size = 1000

    @staticmethod
    def encode(broker_id: int, block_start: int, block_end: int) -> bytes:
        return _enc({"version": 1, "broker": broker_id, "block_start": str(block_start),
                     "block_end": str(block_end)})

    @staticmethod
    def decode(data: bytes | None) -> tuple[int, int, int] | None:
        """(broker, block_start, block_end) or None for an empty znode."""
        o = _dec(data)
        if not o:
            return None
        return int(o["broker"]), int(o["block_start"]), int(o["block_end"])


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"
    prefix = "isr_change_"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _enc({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        return [(d["topic"], int(d["partition"])) for d in _dec(data)["partitions"]]


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"
    prefix = "log_dir_event_"
    #: The only event type Kafka defines: a log directory of the broker went offline.
    LOG_DIR_FAILURE = 1

    @staticmethod
    def encode(broker_id: int, event: int = 1) -> bytes:
        return _enc({"version": 1, "broker": broker_id, "event": event})

    @staticmethod
    def decode(data: bytes) -> int | None:
        """The broker id of a log-dir failure event (None for other or unreadable events)."""
        o = _dec(data)
        if not isinstance(o, dict) or int(o.get("event", 1)) != LogDirEventNotificationZNode.LOG_DIR_FAILURE:
            return None
        return int(o["broker"])


class ReassignPartitionsZNode:
    """Legacy (pre KIP-455) reassignment request written by old tools; the controller drains it."""

    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignments: dict[tuple[str, int], list[int]]) -> bytes:
        return _enc({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignments.items()]})

    @staticmethod
    def decode(data: bytes | None) -> dict[tuple[str, int], list[int]]:
        o = _dec(data) or {}
        return {(str(d["topic"]), int(d["partition"])): [int(r) for r in d["replicas"]]
                for d in o.get("partitions") or []}


class PreferredReplicaElectionZNode:
    """Legacy preferred-leader election request (kafka-preferred-replica-election.sh, pre KIP-460)."""

    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _enc({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes | None) -> set[tuple[str, int]]:
        o = _dec(data) or {}
        return {(str(d["topic"]), int(d["partition"])) for d in o.get("partitions") or []}


class FeatureZNode:
    """/feature: cluster-wide finalized feature levels (KIP-584), written only by the controller.

    Finalized features are stored as {"name": {"max_version_level": n}} (v2; v1 also had min_version_level).
    Status 1 = enabled, 0 = disabled (inter.broker.protocol.version < 2.7)."""

    path = "/feature"
    ENABLED = 1
    DISABLED = 0

    @staticmethod
    def encode(features: dict[str, Any], status: int = 1) -> bytes:
        return _enc({"version": 2, "status": status, "features": features})

    @staticmethod
    def decode(data: bytes) -> dict[str, Any]:
        return dict(_dec(data).get("features") or {})

    @staticmethod
    def encode_levels(levels: dict[str, int], status: int = 1, version: int = 2) -> bytes:
        """Finalized levels {name: level} in Kafka's JSON (v1 repeats the level as min_version_level)."""
        if version == 1:
            feats = {k: {"max_version_level": v, "min_version_level": v} for k, v in sorted(levels.items())}
        else:
            feats = {k: {"max_version_level": v} for k, v in sorted(levels.items())}
        return _enc({"version": version, "status": status, "features": feats})

    @staticmethod
    def decode_levels(data: bytes | None) -> tuple[int, dict[str, int]]:
        """(status, {name: finalized max level})."""
        o = _dec(data) or {}
        levels = {}
        for name, v in (o.get("features") or {}).items():
            levels[str(name)] = int(v["max_version_level"]) if isinstance(v, dict) else int(v)
        return int(o.get("status", 1)), levels


# ----------------------------------------------------------------------------------------------- delegation tokens
class DelegationTokenAuthZNode:
    path = "/delegation_token"


class DelegationTokenChangeNotificationZNode:
    """/delegation_token/token_changes/token_change_<10 digits>: data is the changed token id (UTF-8)."""

    path = "/delegation_token/token_changes"
    prefix = "token_change_"

    @staticmethod
    def encode(token_id: str) -> bytes:
        return token_id.encode("utf-8")

    @staticmethod
    def decode(data: bytes | None) -> str:
        return (data or b"").decode("utf-8")


class DelegationTokensZNode:
    path = "/delegation_token/tokens"


class DelegationTokenInfoZNode:
    """/delegation_token/tokens/<token id>: Kafka's TokenInformation JSON (version 3), principals sanitized:
    {"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":["User%3Abob"],
     "issueTimestamp":ms,"maxTimestamp":ms,"expiryTimestamp":ms,"tokenId":id}"""

    version = 3

    @staticmethod
    def path(token_id: str) -> str:
        return f"{DelegationTokensZNode.path}/{token_id}"

    @staticmethod
    def encode(info: TokenInformation) -> bytes:
        return _enc({"version": DelegationTokenInfoZNode.version, "owner": sanitize(info.owner),
                     "tokenRequester": sanitize(info.token_requester),
                     "renewers": [sanitize(r) for r in info.renewers], "issueTimestamp": info.issue_timestamp,
                     "maxTimestamp": info.max_timestamp, "expiryTimestamp": info.expiry_timestamp,
                     "tokenId": info.token_id})

    @staticmethod
    def decode(data: bytes | None) -> TokenInformation | None:
        """None for an empty znode; ValueError (or KeyError) for one Kafka could not read either."""
        o = _dec(data)
        if o is None:
            return None
        version = int(o["version"])
        if not 0 < version <= DelegationTokenInfoZNode.version:
            raise ValueError(f"Unsupported delegation token znode version {version}")

        def principal(s: str) -> str:
            kind, name = parse_principal(desanitize(str(s)))
            return f"{kind}:{name}"

        owner = principal(o["owner"])
        requester = principal(o["tokenRequester"]) if version >= 3 else owner
        return TokenInformation(str(o["tokenId"]), owner, requester, tuple(principal(r) for r in o["renewers"]),
                                int(o["issueTimestamp"]), int(o["maxTimestamp"]), int(o["expiryTimestamp"]))


#: Persistent paths Kafka creates at start-up (ZkData.PersistentZkPaths plus the config entity roots).
PERSISTENT_PATHS = [
    "/consumers",
    BrokerIdsZNode.path,
    TopicsZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    BrokerSequenceIdZNode.path,
    IsrChangeNotificationZNode.path,
    ProducerIdBlockZNode.path,
    LogDirEventNotificationZNode.path,
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
]
