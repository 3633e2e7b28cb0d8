"""The admin calls of kafka-reassign-partitions, on the protocol client, with the answers Kafka's Admin gives.

Kafka's ReassignPartitionsCommand uses describeCluster, describeTopics, list/alterPartitionReassignments (sent to
the controller), incrementalAlterConfigs (a broker's own configs to that broker, topic configs to any) and
describe/alterReplicaLogDirs (to each replica's broker). Each method here is one of them; a failure raises
``AdminCallError`` whose text is what the Java exception's ``toString`` would be.
"""
from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from broker.errors import ErrorCode
from broker.protocol.api import ApiKey

from .java_format import exception_line
from .protocol_client import ProtocolClient

__all__ = ["AdminCallError", "ReassignAdmin", "TopicPartition", "Replica", "Reassignment", "SET", "DELETE",
           "replica_text"]

TopicPartition = Tuple[str, int]
#: (topic, partition, broker id): Kafka's TopicPartitionReplica
Replica = Tuple[str, int, int]
#: (replicas, adding replicas, removing replicas) of an ongoing reassignment
Reassignment = Tuple[List[int], List[int], List[int]]
SET, DELETE = 0, 1
_BROKER, _TOPIC = 4, 2


class AdminCallError(Exception):
    """An admin call failed; ``code`` is the Kafka error code (None for a client-side failure)."""

    def __init__(self, text: str, code: Optional[int] = None) -> None:
        super().__init__(text)
        self.code = code


def _raise_for(code: int, message: Optional[str]) -> None:
    if code:
        raise AdminCallError(exception_line(code, message or None), code)


class ReassignAdmin:
    """The calls, each a request or a few; ``timeout_ms`` is the admin client's default.api.timeout.ms."""

    def __init__(self, pc: ProtocolClient, timeout_ms: int) -> None:
        self.pc = pc
        self.timeout_ms = timeout_ms

    # ---------------------------------------------------------------------------------------------- cluster
    def nodes(self) -> Dict[int, Optional[str]]:
        """describeCluster: broker id -> rack (None when it has none)."""
        return {n.node_id: n.rack for n in self.pc.nodes()}

    def describe_topics(self, topics: Iterable[str]) -> Dict[str, Dict[int, List[int]]]:
        """topic -> partition -> replicas; a missing topic raises UnknownTopicOrPartitionException ``Topic t not
        found.`` as the tool rewords it."""
        names = sorted(set(topics))
        if not names:
            return {}
        md = self.pc.refresh_metadata(names)
        out: Dict[str, Dict[int, List[int]]] = {}
        for t in md.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise AdminCallError(exception_line(3, f"Topic {t.name} not found."), 3)
            _raise_for(t.error_code, None)
            out[t.name] = {p.partition_index: list(p.replica_nodes)
                           for p in sorted(t.partitions, key=lambda p: p.partition_index)}
        return out

    # ---------------------------------------------------------------------------------------------- reassignments
    def _to_controller(self, api_key: int, body: dict) -> object:
        """A controller request, sent again (after a fresh controller lookup) while the answer is NOT_CONTROLLER."""
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        while True:
            r = self.pc.send_to_controller(api_key, body)
            if getattr(r, "error_code", 0) != ErrorCode.NOT_CONTROLLER or time.monotonic() > deadline:
                return r
            time.sleep(0.2)
            self.pc.controller_id = -1

    def list_reassignments(self, partitions: Optional[Iterable[TopicPartition]] = None
                           ) -> Dict[TopicPartition, Reassignment]:
        """listPartitionReassignments (every ongoing one, or those of ``partitions``)."""
        topics = None
        if partitions is not None:
            by_topic: Dict[str, List[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": sorted(ps)} for t, ps in sorted(by_topic.items())]
        r = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": self.timeout_ms,
                                                                      "topics": topics})
        _raise_for(r.error_code, r.error_message)
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in r.topics or [] for p in t.partitions}

    def alter_reassignments(self, targets: Dict[TopicPartition, Optional[List[int]]]) -> Dict[TopicPartition, str]:
        """alterPartitionReassignments (None cancels); partition -> exception text, for those that failed."""
        by_topic: Dict[str, List[dict]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        r = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": self.timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        if r.error_code:
            return {tp: _message(r.error_code, r.error_message) for tp in targets}
        return {(t.name, p.partition_index): _message(p.error_code, p.error_message)
                for t in r.responses for p in t.partitions if p.error_code}

    # ---------------------------------------------------------------------------------------------- configs
    def alter_configs(self, brokers: Dict[int, Sequence[Tuple[str, int, Optional[str]]]],
                      topics: Dict[str, Sequence[Tuple[str, int, Optional[str]]]]) -> None:
        """incrementalAlterConfigs: (name, SET/DELETE, value) per broker and per topic; raises on the first error."""
        def resource(rtype: int, name: str, ops: Sequence[Tuple[str, int, Optional[str]]]) -> dict:
            return {"resource_type": rtype, "resource_name": name,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}

        answers = []
        for broker_id, ops in brokers.items():
            answers.append(self.pc.send_to(broker_id, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
                "resources": [resource(_BROKER, str(broker_id), ops)], "validate_only": False}))
        if topics:
            answers.append(self.pc.send_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
                "resources": [resource(_TOPIC, t, ops) for t, ops in topics.items()], "validate_only": False}))
        for r in answers:
            for res in r.responses:
                if res.error_code:
                    raise AdminCallError(exception_line(res.error_code, res.error_message or None), res.error_code)

    # ---------------------------------------------------------------------------------------------- log dirs
    def describe_replica_log_dirs(self, replicas: Iterable[Replica]
                                  ) -> Dict[Replica, Tuple[Optional[str], Optional[str]]]:
        """describeReplicaLogDirs: replica -> (current log dir, future log dir), None where there is none."""
        by_broker: Dict[int, Dict[str, Set[int]]] = {}
        for t, p, b in replicas:
            by_broker.setdefault(b, {}).setdefault(t, set()).add(p)
        out: Dict[Replica, Tuple[Optional[str], Optional[str]]] = {}
        for broker_id, topics in by_broker.items():
            wanted = {(t, p) for t, ps in topics.items() for p in ps}
            r = self.pc.send_to(broker_id, ApiKey.DESCRIBE_LOG_DIRS, {
                "topics": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(topics.items())]})
            _raise_for(getattr(r, "error_code", 0), None)
            found: Dict[TopicPartition, List[Optional[str]]] = {tp: [None, None] for tp in wanted}
            for res in r.results:
                if res.error_code:
                    continue
                for t in res.topics:
                    for p in t.partitions:
                        if (t.name, p.partition_index) in found:
                            found[(t.name, p.partition_index)][1 if p.is_future_key else 0] = res.log_dir
            for (t, p), (cur, fut) in found.items():
                out[(t, p, broker_id)] = (cur, fut)
        return out

    def alter_replica_log_dirs(self, moves: Dict[Replica, str]) -> Set[Replica]:
        """alterReplicaLogDirs: the replicas whose move was accepted (REPLICA_NOT_AVAILABLE: not yet, left out);
        any other error raises ``Failed to alter dir for <replica>``."""
        by_broker: Dict[int, Dict[str, Dict[str, List[int]]]] = {}
        for (t, p, b), d in moves.items():
            by_broker.setdefault(b, {}).setdefault(d, {}).setdefault(t, []).append(p)
        done: Set[Replica] = set()
        for broker_id, dirs in by_broker.items():
            r = self.pc.send_to(broker_id, ApiKey.ALTER_REPLICA_LOG_DIRS, {
                "dirs": [{"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                         for d, topics in dirs.items()]})
            for t in r.results:
                for p in t.partitions:
                    replica = (t.topic_name, p.partition_index, broker_id)
                    if p.error_code == 0:
                        done.add(replica)
                    elif p.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                        raise AdminCallError(f"Failed to alter dir for {replica_text(replica)}", p.error_code)
        return done


def _message(code: int, message: Optional[str]) -> str:
    """What Kafka's tool prints of a failed future: the exception's message."""
    return exception_line(code, message or None).split(": ", 1)[1]


def replica_text(replica: Replica) -> str:
    """TopicPartitionReplica.toString."""
    t, p, b = replica
    return f"{t}-{p}-{b}"

