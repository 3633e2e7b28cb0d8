"""BrokerServer: builds the broker's components in dependency order and stops them in reverse.

Start-up mirrors Kafka's KafkaServer: connect to ZooKeeper, get the cluster id, load the
logs (recovering after a crash), bind the listeners, register ``/brokers/ids/<id>``, join
the cluster (controller election, topics), then accept requests.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, List, Optional

from broker.api.dispatcher import RequestDispatcher
from broker.api.fetch_session import FetchSessionCache
from broker.api.handlers import ApiServices, build_registry
from broker.cluster.admin import AdminManager
from broker.cluster.dynamic_config import DynamicConfigManager
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.zk_sync import ClusterSync
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.kafka_config import Endpoint, KafkaConfig
from broker.coordinator.group.service import GroupCoordinator
from broker.coordinator.offsets_topic import OffsetsTopicIO
from broker.coordinator.producer_ids import ProducerIdManager
from broker.network.socket_server import ListenerSpec, SocketServer
from broker.replica.manager import ReplicaManager
from broker.storage.cleaner import CleanerConfig
from broker.storage.config import LogConfig
from broker.storage.log_manager import LogManager
from broker.util.executor import NamedExecutor
from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)


class StartupError(Exception):
    """A start-up failure with a one-line message for the operator."""


class BrokerServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = DynamicBrokerConfig(config)
        self.broker_id: int = config.broker_id
        self.controller_epoch: int = -1
        self.zk: Any = None
        #: blocking ZooKeeper calls run here, never on the disk I/O workers
        self.zk_calls = NamedExecutor("zk-call", max_workers=2)
        #: coordinator loads (replaying __consumer_offsets partitions) run here
        self.coordinator_loader = NamedExecutor("group-metadata-loader", max_workers=1)
        self.log_manager: Any = None
        self.replica_manager: Optional[ReplicaManager] = None
        self.metadata = MetadataCache(self.broker_id)
        self.fetch_sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"))
        self.dispatcher: Optional[RequestDispatcher] = None
        self.sync = ClusterSync(self)
        self.admin: Optional[AdminManager] = None
        self.dynamic_config: Optional[DynamicConfigManager] = None
        self.producer_ids: Optional[ProducerIdManager] = None
        self.group_coordinator: Optional[GroupCoordinator] = None
        #: objects with ``async on_become_leader(topic, p)`` / ``async on_resign(topic, p)`` (coordinators)
        self.leadership_listeners: List[Any] = []
        self.socket_server: Optional[SocketServer] = None
        self._stopped = asyncio.Event()

    # ------------------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config.current
        loop = asyncio.get_running_loop()
        for d in cfg.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as exc:
                raise StartupError(f"Cannot create log directory {d} (log.dirs): {exc.strerror}") from None

        self.zk = KafkaZkClient(cfg.zk_connect, cfg.zk_session_timeout_ms, cfg.zk_connection_timeout_ms)
        await self.zk_calls.run(self.zk.start)
        cluster_id = await self.zk_calls.run(self.zk.get_or_create_cluster_id)
        self.metadata.cluster_id = cluster_id
        log.info("Cluster ID = %s", cluster_id)
        # Dynamic broker configs (/config/brokers/<id> and <default>) apply from the start, as in Kafka.
        self.dynamic_config = DynamicConfigManager(
            self.config, self.zk, self.zk_calls, lambda t, c: self._replicas().update_config(t, c),
            lambda: {t for t, _ in self._replicas().partitions})
        await self.dynamic_config.load_broker_configs()
        cfg = self.config.current

        default_log_config = LogConfig.from_props(cfg.log_config_defaults())
        self.log_manager = await loop.run_in_executor(None, self._make_log_manager, default_log_config, cluster_id)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager,
                                              io_threads=min(4, int(cfg.get("num.io.threads"))))
        self.producer_ids = ProducerIdManager(self.broker_id, self.zk.allocate_producer_id_block, self.zk_calls.run)
        self.admin = AdminManager(self.config, self.metadata, self.zk, self.zk_calls, self.sync, self.dynamic_config)
        # Group coordinator: loads __consumer_offsets partitions as this broker becomes their leader.
        self.group_coordinator = GroupCoordinator(
            self.config, OffsetsTopicIO(self.replica_manager, self.coordinator_loader), self.admin)
        self.group_coordinator.start()
        self.leadership_listeners.append(self.group_coordinator)
        self.dispatcher = RequestDispatcher(build_registry(ApiServices(
            config=self.config, metadata=self.metadata, replica_manager=self.replica_manager, admin=self.admin,
            group_coordinator=self.group_coordinator, producer_ids=self.producer_ids,
            fetch_sessions=self.fetch_sessions)))

        listeners = [ListenerSpec(e.listener_name, e.host, e.port, e.security_protocol) for e in cfg.listeners]
        self.config.add_listener(self._on_config_change)
        self.socket_server = SocketServer(self.dispatcher, listeners, cfg.get("socket.request.max.bytes"),
                                          cfg.get("socket.send.buffer.bytes"), cfg.get("socket.receive.buffer.bytes"))
        await self.socket_server.start()

        endpoints = self._advertised_endpoints()
        await self.zk_calls.run(self._register, endpoints)
        await self.sync.start()
        await self.dynamic_config.start()
        self.log_manager.startup()
        self.zk.on_new_session(lambda: self.sync._schedule("session", self.sync.on_new_session))
        log.info("[KafkaServer id=%d] started (listeners: %s)", self.broker_id,
                 ", ".join(e.connection_string() for e in endpoints))

    def _replicas(self) -> ReplicaManager:
        assert self.replica_manager is not None
        return self.replica_manager

    def _make_log_manager(self, default_log_config: LogConfig, cluster_id: str) -> Any:
        cfg = self.config.current
        return LogManager(cfg.log_dirs, default_log_config, broker_id=self.broker_id, cluster_id=cluster_id,
                          retention_check_interval_ms=cfg.get("log.retention.check.interval.ms"),
                          flush_check_interval_ms=cfg.get("log.flush.scheduler.interval.ms"),
                          flush_recovery_offset_checkpoint_interval_ms=cfg.get(
                              "log.flush.offset.checkpoint.interval.ms"),
                          producer_id_expiration_ms=cfg.get("producer.id.expiration.ms"),
                          cleaner_config=CleanerConfig.from_broker_config(cfg.get))

    def _advertised_endpoints(self) -> List[Endpoint]:
        """Advertised listeners, with the real port where the config asked for port 0."""
        assert self.socket_server is not None
        out = []
        for e in self.config.current.advertised_listeners:
            port = e.port or self.socket_server.bound_ports.get(e.listener_name, e.port)
            host = e.host or _default_host()
            out.append(Endpoint(e.listener_name, host, port, e.security_protocol))
        return out

    def _register(self, endpoints: List[Endpoint]) -> None:
        self.zk.register_broker(self.broker_id, endpoints, self.config.current.broker_rack)

    async def on_become_leader(self, topic: str, partition: int) -> None:
        """Called after this broker became leader of ``topic-partition`` (coordinators load state here)."""
        for listener in self.leadership_listeners:
            await listener.on_become_leader(topic, partition)

    async def on_resign(self, topic: str, partition: int) -> None:
        """Called before this broker stops leading ``topic-partition``."""
        for listener in self.leadership_listeners:
            await listener.on_resign(topic, partition)

    def _on_config_change(self, old: KafkaConfig, new: KafkaConfig) -> None:
        """A dynamic broker config changed: topic configs derived from broker defaults follow."""
        if self.dynamic_config is not None:
            asyncio.get_running_loop().create_task(self.dynamic_config.refresh_all_topics())

    # ------------------------------------------------------------------------------------
    async def stop(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        loop = asyncio.get_running_loop()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        await self.sync.stop()
        if self.dynamic_config is not None:
            await self.dynamic_config.stop()
        if self.zk is not None:
            await self.zk_calls.run(self.zk.close)
        if self.log_manager is not None:
            await loop.run_in_executor(None, self.log_manager.shutdown)
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        self.zk_calls.shutdown()
        self.coordinator_loader.shutdown()
        self._stopped.set()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


def _default_host() -> str:
    import socket
    return socket.getfqdn() or "localhost"
