"""Topic administration: create, delete, add partitions, alter configs (Kafka's ZkAdminManager role).

As in Kafka's ZooKeeper mode, this writes only what an operator's request asks for, in Kafka's znode
layout: a new topic's replica assignment and config, a partition addition, a deletion marker under
``/admin/delete_topics``. The controller reacts to those znodes (partition states, leaders,
LeaderAndIsr, StopReplica) and announces the outcome with UpdateMetadata; requests that promise a
result wait for it in this broker's metadata cache (CreateTopics until every partition has a leader,
DeleteTopics until the topic is gone), up to the request's timeout, as Kafka's delayed topic
operations do. All ZooKeeper calls run on the ZooKeeper executor.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from broker.cluster.topic_names import colliding_topics, invalid_topic_reason
from broker.cluster.assignment import RackInfoMissingError, assign_replicas_to_brokers
from broker.config.kafka_config import KafkaConfig
from broker.config.topic_defs import validate_topic_configs
from broker.config.types import InvalidConfigError
from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.dynamic_config import DynamicConfigManager
    from broker.cluster.metadata_cache import MetadataCache
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's textual topic id: base64url without padding."""
    import base64
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


@dataclass
class TopicResult:
    name: str
    error_code: int = 0
    error_message: Optional[str] = None
    topic_id: Optional[uuid.UUID] = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Dict[str, Optional[str]] = field(default_factory=dict)


class AdminManager:
    def __init__(self, config: "DynamicBrokerConfig", metadata: "MetadataCache", zk: "KafkaZkClient",
                 zk_calls: "NamedExecutor", dynamic_config: "DynamicConfigManager") -> None:
        self.config = config
        self.dynamic_config = dynamic_config
        self.metadata = metadata
        self.zk = zk
        self.zk_calls = zk_calls

    def broker_config(self) -> Optional["KafkaConfig"]:
        """The broker's current config (topic rules read its defaults and remote.log.storage.system.enable)."""
        current = getattr(self.config, "current", None)
        return current if isinstance(current, KafkaConfig) else None

    async def _zk(self, fn: Any, *args: Any) -> Any:
        return await self.zk_calls.run(fn, *args)

    # --- create ----------------------------------------------------------------------
    def _plan(self, name: str, num_partitions: int, replication_factor: int,
              assignments: List[Tuple[int, List[int]]], configs: Dict[str, Optional[str]]) -> TopicResult:
        cfg = self.config
        reason = invalid_topic_reason(name)
        if reason:
            return TopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if self.metadata.topic(name) is not None:
            return TopicResult(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        colliding = colliding_topics(name, self.metadata.topics)
        if colliding:
            return TopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                               f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
        live = sorted(self.metadata.live_broker_ids())
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return TopicResult(name, ErrorCode.INVALID_REQUEST,
                                   "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                   "Both cannot be used at the same time.")
            plan = {p: list(b) for p, b in assignments}
            if sorted(plan) != list(range(len(plan))):
                return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "partitions should be a consecutive 0-based integer sequence")
            sizes = {len(b) for b in plan.values()}
            twice = {p: b for p, b in plan.items() if len(set(b)) != len(b)}
            if twice:  # Kafka's wording, a Scala Map of Seqs
                found = ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, b))})" for p, b in sorted(twice.items()))
                return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"Duplicate replica assignment found: HashMap({found})")
            for p, b in plan.items():
                if not b or len(set(b)) != len(b):
                    return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       f"Duplicate or empty replica assignment for partition {p}: {b}")
                missing = [x for x in b if x not in live]
                if missing:
                    return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       f"Unknown broker(s) {missing} in replica assignment {b}.")
            if len(sizes) != 1:
                return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "All partitions should have the same number of replicas")
            num_partitions, replication_factor = len(plan), sizes.pop()
        else:
            if num_partitions == -1:
                num_partitions = cfg.get("num.partitions")
            if replication_factor == -1:
                replication_factor = cfg.get("default.replication.factor")
            if num_partitions <= 0:
                return TopicResult(name, ErrorCode.INVALID_PARTITIONS,
                                   "Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                return TopicResult(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "Replication factor must be larger than 0.")
            if replication_factor > len(live):
                return TopicResult(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                   f"Replication factor: {replication_factor} larger than available brokers: "
                                   f"{len(live)}.")
            try:
                plan = assign_replicas_to_brokers({b: self.metadata.brokers[b].rack for b in live}, num_partitions,
                                                  replication_factor)
            except RackInfoMissingError as exc:
                return TopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc))
        try:
            validate_topic_configs(configs, self.broker_config())
        except InvalidConfigError as exc:
            return TopicResult(name, ErrorCode.INVALID_CONFIG, str(exc))
        r = TopicResult(name, 0, None, None, num_partitions, replication_factor, dict(configs))
        r.plan = plan  # type: ignore[attr-defined]
        return r

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: List[Tuple[int, List[int]]], configs: Dict[str, Optional[str]],
                           validate_only: bool, timeout_ms: int = 0) -> TopicResult:
        """Validate, write the assignment and config; then wait up to ``timeout_ms`` for every partition's
        leader to reach this broker's metadata (REQUEST_TIMED_OUT if it does not)."""
        r = self._plan(name, num_partitions, replication_factor, assignments, configs)
        if r.error_code or validate_only:
            return r
        topic_id = new_topic_id()
        clean = {k: v for k, v in configs.items() if v is not None}
        try:
            await self._zk(self.zk.create_topic_assignment, name, r.plan, clean,  # type: ignore[attr-defined]
                           uuid_to_base64(topic_id))
        except Exception as exc:
            if type(exc).__name__ in ("TopicExistsError", "NodeExistsError"):
                return TopicResult(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            log.exception("Creating topic %s failed", name)
            return TopicResult(name, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
        r.topic_id = topic_id
        log.info("Created topic %s with %d partitions, replication factor %d, configs %s", name,
                 r.num_partitions, r.replication_factor, clean)
        if timeout_ms > 0 and not await self.metadata.wait_until(
                lambda: self.metadata.has_leaders(name, r.num_partitions), timeout_ms / 1000.0):
            r.error_code = ErrorCode.REQUEST_TIMED_OUT
            r.error_message = (f"Topic {name} was created, but its partitions had no leaders within "
                               f"{timeout_ms} ms")
        return r

    async def auto_create_topic(self, name: str) -> int:
        """Create ``name`` with the broker defaults (Metadata auto-create); 0 or an error code.

        As in Kafka, the answer does not wait for leaders: the client sees LEADER_NOT_AVAILABLE and retries.
        """
        r = await self.create_topic(name, -1, -1, [], {}, False)
        if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        if r.error_code == ErrorCode.INVALID_REPLICATION_FACTOR:
            return ErrorCode.LEADER_NOT_AVAILABLE
        return r.error_code

    async def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Dict[str, str]) -> int:
        """Create an internal topic (``__consumer_offsets``) on first use; 0 once it exists.

        Like Kafka, refuses (COORDINATOR_NOT_AVAILABLE) while fewer brokers are alive than the
        topic's replication factor, rather than creating it under-replicated.
        """
        if self.metadata.topic(name) is not None:
            return 0
        live = sorted(self.metadata.live_broker_ids())
        if len(live) < replication_factor:
            log.warning("Cannot create %s yet: replication factor %d but only %d live brokers", name,
                        replication_factor, len(live))
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            plan = assign_replicas_to_brokers({b: self.metadata.brokers[b].rack for b in live}, num_partitions,
                                              replication_factor)
        except RackInfoMissingError as exc:
            log.error("Cannot create %s: %s", name, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            await self._zk(self.zk.create_topic_assignment, name, plan, dict(configs),
                           uuid_to_base64(new_topic_id()))
            log.info("Created internal topic %s with %d partitions, replication factor %d", name,
                     num_partitions, replication_factor)
        except Exception as exc:
            if type(exc).__name__ not in ("TopicExistsError", "NodeExistsError"):
                log.exception("Creating internal topic %s failed", name)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return 0

    # --- delete ----------------------------------------------------------------------
    async def delete_topic(self, name: str, timeout_ms: int) -> Tuple[int, Optional[str]]:
        """Queue the deletion for the controller; wait up to ``timeout_ms`` until the topic left the metadata."""
        if self.metadata.topic(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None  # Kafka 3.9.1 gives no message here
        await self._zk(self.zk.mark_topic_for_deletion, name)
        if not await self.metadata.wait_until(lambda: self.metadata.topic(name) is None, max(timeout_ms, 0) / 1000.0):
            return ErrorCode.REQUEST_TIMED_OUT, f"Deletion of topic {name} did not finish in {timeout_ms} ms"
        return 0, None

    # --- partitions --------------------------------------------------------------------
    async def create_partitions(self, name: str, count: int, assignments: Optional[List[List[int]]],
                                validate_only: bool, timeout_ms: int = 0) -> Tuple[int, Optional[str]]:
        meta = self.metadata.topic(name)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        current = len(meta.partitions)
        if count < current:
            return (ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        live = sorted(self.metadata.live_broker_ids())
        rf = len(next(iter(meta.partitions.values())).replicas) if meta.partitions else 1
        if assignments:
            # Kafka's ZkAdminManager.createPartitions looks for unknown brokers first, over all assignments
            unknown = sorted({x for b in assignments for x in b} - set(self.metadata.brokers))
            if unknown:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
            if len(assignments) != count - current:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Increasing the number of partitions by {count - current} but {len(assignments)} "
                        f"assignments provided.")
            new = {current + i: list(b) for i, b in enumerate(assignments)}
            for p, b in new.items():
                if len(b) != rf or len(set(b)) != len(b) or any(x not in live for x in b):
                    return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"Invalid replica assignment {b} for partition {p}.")
        else:
            if rf > len(live):
                return (ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"Replication factor: {rf} larger than available brokers: {len(live)}.")
            # As Kafka's AdminZkClient.createPartitions: the round robin goes on from partition 0's first replica
            # (start index and replica shift both its position among the live brokers)
            p0 = meta.partitions.get(0)
            start = max(0, next((i for i, b in enumerate(live) if p0 is not None and p0.replicas
                                 and b >= p0.replicas[0]), -1))
            try:
                new = assign_replicas_to_brokers({b: self.metadata.brokers[b].rack for b in live}, count - current,
                                                 rf, start_partition=current, start_index=start, shift=start)
            except RackInfoMissingError as exc:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)
        if validate_only:
            return 0, None
        await self._zk(self.zk.add_partitions_assignment, name, new)
        if timeout_ms > 0 and not await self.metadata.wait_until(
                lambda: self.metadata.has_leaders(name, count), timeout_ms / 1000.0):
            return ErrorCode.REQUEST_TIMED_OUT, f"The new partitions of {name} had no leaders within {timeout_ms} ms"
        return 0, None

    # --- configs -----------------------------------------------------------------------
    async def topic_overrides(self, name: str) -> Dict[str, str]:
        return dict(await self._zk(self.zk.get_topic_config, name) or {})

    async def set_topic_overrides(self, name: str, configs: Dict[str, str]) -> None:
        await self._zk(self.zk.set_topic_config, name, configs)
        await self.dynamic_config.refresh_topic(name)

    async def broker_overrides(self, entity: str) -> Dict[str, str]:
        """Dynamic configs of ``/config/brokers/<entity>`` (a broker id or ``<default>``)."""
        return dict(await self._zk(self.zk.get_entity_config, "brokers", entity) or {})

    async def set_broker_overrides(self, entity: str, configs: Dict[str, str]) -> None:
        """Replace ``/config/brokers/<entity>`` and announce it, so every broker reloads it."""
        await self._zk(self.zk.set_entity_config, "brokers", entity, configs)


def new_topic_id() -> uuid.UUID:
    """A random topic id whose text form does not start with '-' (Kafka never issues those)."""
    topic_id = uuid.uuid4()
    while uuid_to_base64(topic_id).startswith("-"):
        topic_id = uuid.uuid4()
    return topic_id
