"""BrokerServer: builds the broker's components in dependency order and stops them in reverse.

Start-up mirrors Kafka's KafkaServer in ZooKeeper mode (after a probe that every listener's port is free, so a
port in use fails at once rather than after the logs are loaded): connect to ZooKeeper, get the cluster id and
this broker's dynamic configs, lock and load the logs (recovering after a crash), bind the listeners,
register ``/brokers/ids/<id>`` (its czxid is the broker epoch), start the KafkaController (every broker
runs for ``/controller``), then serve. From then on the broker learns the cluster only from the
controller: LeaderAndIsr makes it leader or follower of partitions, UpdateMetadata fills the metadata
cache, StopReplica stops or deletes replicas.

Shutdown is controlled (``controlled.shutdown.enable``): the broker first asks the controller to move
its leaderships away (ControlledShutdown), while it still serves requests, then stops listening,
stops replication, resigns as controller, closes ZooKeeper and finally flushes and closes the logs.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any, Callable, Dict, List, Optional, Tuple

from broker.api.acl_authz import AclAuthz
from broker.api.authz import Authz
from broker.api.dispatcher import RequestDispatcher
from broker.api.fetch_session import FetchSessionCache
from broker.api.handlers import ApiServices, build_registry
from broker.api.throttling import RequestThrottler
from broker.cluster.acl_store import ZkAclStore
from broker.cluster.admin import AdminManager
from broker.cluster.client_quota_admin import ClientQuotaAdmin
from broker.cluster.controller import ControllerConfig, KafkaController
from broker.cluster.controller_channel import BrokerToControllerChannel, ControllerUnavailableError
from broker.cluster.dynamic_config import DynamicConfigManager
from broker.cluster.delegation_token_manager import DelegationTokenManager, TokenConfig
from broker.cluster.scram_credential_admin import ScramCredentialAdmin
from broker.cluster.zk_alter_partition import ZkAlterPartitionManager
from broker.cluster.metadata_cache import MetadataCache
from broker.config import tiered_storage as tiered_config
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.ibp import InterBrokerProtocolVersion
from broker.config.kafka_config import Endpoint, KafkaConfig
from broker.coordinator.group.service import GroupCoordinator
from broker.coordinator.offsets_topic import OffsetsTopicIO
from broker.coordinator.producer_ids import ProducerIdManager
from broker.replica.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.replica.produce_verification import ProduceVerification
from broker.coordinator.transaction.marker_channel import TransactionMarkerChannelManager, metadata_leader_lookup
from broker.coordinator.transaction.records import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.transaction.service import TransactionCoordinator
from broker.errors import ErrorCode
from broker.metrics.endpoint import MetricsEndpoint
from broker.network.bind_check import first_bind_error
from broker.network.client import NetworkClient
from broker.network.socket_server import ConnectionLimits, ListenerSpec, SocketServer
from broker.protocol.api import ApiKey
from broker.quota.client_quota_manager import QuotaManagers
from broker.quota.connection_quotas import parse_ip_overrides
from broker.replica.alter_partition import AlterPartitionManager
from broker.replica.config import ReplicaConfig
from broker.replica.manager import ReplicaManager
from broker.security.authorizer import AclAuthorizer, AclCache, parse_super_users
from broker.security.credential_cache import ScramCredentialCache
from broker.security.token_cache import DelegationTokenCache
from broker.server_security import build_inter_broker_client, build_listener_security
from broker.replica.remote_log_metadata_topic import BrokerMetadataTopic
from broker.replica.replication_quota import ReplicationQuotas, dynamic_rate_getter
from broker.replica.tiered_storage import TieredStorage, load_remote_storage_manager
from broker.storage.cleaner import CleanerConfig
from broker.storage.config import LogConfig
from broker.storage.log_dir_check import unusable_log_dirs
from broker.storage.log_manager import LogManager
from broker.util.broker_channel import BrokerChannel, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.util import runtime_tuning
from broker.util.executor import NamedExecutor
from broker.util.fd_budget import (
    WARN_FRACTION, DescriptorBudget, effective_reserve, estimate_descriptors, raise_nofile_limit,
)
from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)
#: how often client quota metrics are logged (only groups of connections with a quota appear)
QUOTA_REPORT_INTERVAL_S = float(os.environ.get("BROKER_QUOTA_REPORT_INTERVAL_S", "30"))
#: how often a controlled-shutdown attempt checks that this broker still has its ZooKeeper connection
ZK_CONNECTION_CHECK_S = 0.1


class StartupError(Exception):
    """A start-up failure with a one-line message for the operator."""


class BrokerServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = DynamicBrokerConfig(config)
        self.broker_id: int = config.broker_id
        #: the broker's one clock (Kafka's Time), given to every component that reads the time or waits on it
        self.clock: Clock = SYSTEM_CLOCK
        self.ibp = InterBrokerProtocolVersion.parse(config.get("inter.broker.protocol.version"))
        self.zk: Optional[KafkaZkClient] = None
        #: blocking ZooKeeper calls run here, never on the disk I/O workers
        self.zk_calls = NamedExecutor("zk-call", max_workers=2)
        #: coordinator loads (replaying __consumer_offsets partitions) run here
        self.coordinator_loader = NamedExecutor("group-metadata-loader", max_workers=1)
        #: transaction coordinator loads (replaying __transaction_state partitions) run here
        self.txn_loader = NamedExecutor("transaction-log-loader", max_workers=1)
        self.log_manager: Optional[LogManager] = None
        #: {log dir: why} of the dirs of log.dirs unusable at start-up: they start offline (KIP-112)
        self._initial_offline_dirs: Dict[str, str] = {}
        self.replica_manager: Optional[ReplicaManager] = None
        self.metadata = MetadataCache(self.broker_id)
        self.fetch_sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"))
        self.dispatcher: Optional[RequestDispatcher] = None
        self.admin: Optional[AdminManager] = None
        self.dynamic_config: Optional[DynamicConfigManager] = None
        self.controller: Optional[KafkaController] = None
        self.to_controller: Optional[BrokerToControllerChannel] = None
        self.producer_ids: Optional[ProducerIdManager] = None
        self.group_coordinator: Optional[GroupCoordinator] = None
        self.txn_coordinator: Optional[TransactionCoordinator] = None
        self.txn_verifier: Optional[AddPartitionsToTxnManager] = None
        self.produce_verification: Optional[ProduceVerification] = None
        self.socket_server: Optional[SocketServer] = None
        self._channels: List[BrokerChannel] = []
        #: SCRAM credentials of users (from /config/users), read by SASL logins on every SASL listener
        self.credential_cache = ScramCredentialCache()
        #: delegation tokens (from /delegation_token/tokens) and their SCRAM credentials, for tokenauth logins
        self.token_cache = DelegationTokenCache()
        self.token_manager: Optional[DelegationTokenManager] = None
        self.client_security: Optional[Any] = None
        #: access control: Kafka's ACL authorizer when authorizer.class.name selects it, else allow-all
        self.authz: Authz = Authz()
        self.acl_store: Optional[ZkAclStore] = None
        #: the Prometheus endpoint (broker.metrics.prometheus.port; None when off)
        self.metrics_endpoint: Optional[MetricsEndpoint] = None
        self._registered = False
        self._stopped = asyncio.Event()

    # ------------------------------------------------------------------------------------ wiring helpers
    def _channel(self, client_id: str) -> BrokerChannel:
        """A NetworkClient for one component (each owns its connections, as in Kafka)."""
        cfg = self.config.current
        sec = self.client_security
        ch = NetworkClient(f"broker-{self.broker_id}-{client_id}",
                           request_timeout_ms=cfg.get("replica.socket.timeout.ms"),
                           ssl_context=sec.ssl_context if sec is not None else None,
                           sasl=((sec.sasl_mechanism, sec.username, sec.password)
                                 if sec is not None and sec.sasl_mechanism else None))
        self._channels.append(ch)
        return ch

    def _broker_epoch(self) -> int:
        return self.zk.broker_epoch if self.zk is not None else -1

    def _broker_node(self, broker_id: int) -> Optional[BrokerNode]:
        """Where ``broker_id`` listens for other brokers (the inter-broker listener), from the metadata cache."""
        ep = self.metadata.endpoint_of(broker_id, self.config.current.inter_broker_listener_name)
        return BrokerNode(broker_id, ep.host, ep.port) if ep is not None else None

    def _leader_node(self, topic: str, partition: int) -> Optional[BrokerNode]:
        """Where the leader of (topic, partition) listens for other brokers; None without a known leader."""
        meta = self.metadata.partition(topic, partition)
        return self._broker_node(meta.leader) if meta is not None and meta.leader >= 0 else None

    def _controller_node(self) -> Optional[BrokerNode]:
        cid = self.metadata.controller_id
        if cid < 0 and self.controller is not None:
            cid = self.controller.active_controller_id
        return self._broker_node(cid) if cid >= 0 else None

    def _replicas(self) -> ReplicaManager:
        assert self.replica_manager is not None
        return self.replica_manager

    # ------------------------------------------------------------------------------------ start
    async def start(self) -> None:
        cfg = self.config.current
        loop = asyncio.get_running_loop()
        runtime_tuning.configure()
        # A port in use ends start-up before ZooKeeper or any log is touched (Kafka finds out after loading logs).
        bind_error = await loop.run_in_executor(None, first_bind_error,
                                                [(e.listener_name, e.host, e.port) for e in cfg.listeners])
        if bind_error is not None:
            raise StartupError(bind_error)
        # Each log dir usable (created, readable, .lock writable); one that is not starts offline (KIP-112), and with
        # none usable start-up ends with Kafka's lines naming log.dirs and the dirs
        self._initial_offline_dirs = dict(await loop.run_in_executor(None, unusable_log_dirs, cfg.log_dirs))
        await loop.run_in_executor(None, self._check_descriptors)
        await self._start_metrics_endpoint()

        zk = self.zk = KafkaZkClient(cfg.zk_connect, cfg.zk_session_timeout_ms, cfg.zk_connection_timeout_ms,
                                     max_in_flight_requests=int(cfg.get("zookeeper.max.in.flight.requests")))
        await self.zk_calls.run(zk.start)
        cluster_id = await self.zk_calls.run(zk.get_or_create_cluster_id)
        self.metadata.cluster_id = cluster_id
        log.info("Cluster ID = %s", cluster_id)
        # Dynamic broker configs (/config/brokers/<id> and <default>) apply from the start, as in Kafka.
        start_cfg = self.config.current
        self.client_security = build_inter_broker_client(start_cfg)
        self.listener_security = build_listener_security(start_cfg, self.credential_cache,
                                                         self._token_scram_lookup())
        self.quotas = QuotaManagers(int(start_cfg.get("quota.window.num")),
                                    int(start_cfg.get("quota.window.size.seconds")), clock=self.clock)
        self.throttler = RequestThrottler(self.quotas)
        self.client_quota_admin = ClientQuotaAdmin(zk, self.zk_calls)
        self.scram_admin = ScramCredentialAdmin(zk, self.zk_calls)
        self.dynamic_config = DynamicConfigManager(
            self.config, zk, self.zk_calls, lambda t, c: self._replicas().update_config(t, c),
            lambda: {t for t, _ in self._replicas().partitions}, quota_sink=self.quotas.apply,
            ip_quota_sink=self.quotas.apply_ip, scram_sink=self.credential_cache.update)
        await self.dynamic_config.load_broker_configs()
        cfg = self.config.current

        default_log_config = LogConfig.from_props(cfg.log_config_defaults())
        self.log_manager = log_manager = await loop.run_in_executor(None, self._make_log_manager, default_log_config,
                                                                    cluster_id)

        replica_config = ReplicaConfig.from_props(cfg.get)
        self.to_controller = BrokerToControllerChannel(self._channel("to-controller"), self._controller_node)
        self.replica_manager = rm = ReplicaManager(
            self.broker_id, self.log_manager, io_threads=min(4, int(cfg.get("num.io.threads"))), clock=self.clock,
            config=replica_config,
            alter_partition_manager=self._alter_partition_manager(),
            channel_factory=self._channel, broker_epoch=self._broker_epoch,
            is_broker_alive=lambda b: b in self.metadata.brokers, broker_node=self._broker_node,
            broker_rack=lambda b: self.metadata.brokers[b].rack if b in self.metadata.brokers else None,
            metadata_has_partition=lambda tp: self.metadata.partition(*tp) is not None,
            quotas=ReplicationQuotas.from_config(self.broker_id, cfg.get, dynamic_rate_getter(cfg)),
            log_dir_event_notifier=lambda: self.zk_calls.run(zk.propagate_log_dir_event, self.broker_id))
        if self.metrics_endpoint is not None:
            rm.topic_stats = self.metrics_endpoint.topics
        # leader/follower.replication.throttled.rate follow /config/brokers/<id> and <default> (BrokerConfigHandler)
        self.config.add_listener(lambda _old, new: rm.quotas.update_rates(dynamic_rate_getter(new)))
        self.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        self.admin = AdminManager(self.config, self.metadata, zk, self.zk_calls, self.dynamic_config)
        if cfg.get(tiered_config.SYSTEM_ENABLE):
            rm.tiered = tiered = await loop.run_in_executor(None, self._tiered_storage, loop)
            # the copy/fetch quotas and remote.fetch.max.wait.ms are dynamic, as Kafka's
            self.config.add_listener(lambda _old, new: tiered.update_dynamic(
                int(new.get("remote.log.manager.copy.max.bytes.per.second")),
                int(new.get("remote.log.manager.fetch.max.bytes.per.second")),
                int(new.get("remote.fetch.max.wait.ms"))))
            self.config.add_listener(lambda _old, new: tiered.resize_index_cache(
                int(new.get("remote.log.index.file.cache.total.size.bytes"))))
        await self._start_authorizer()
        # Group coordinator: loads __consumer_offsets partitions as this broker becomes their leader.
        # KIP-890 part 1: transactional appends (produce, TxnOffsetCommit) verified with the coordinator first
        self.txn_verifier = AddPartitionsToTxnManager(
            self._channel("add-partitions-to-txn"), self._leader_node,
            int(cfg.get("transaction.state.log.num.partitions")), int(cfg.get("request.timeout.ms")))
        verifying = lambda: bool(self.config.current.get("transaction.partition.verification.enable"))  # noqa: E731
        rm.transaction_verification_enabled = verifying  # the owner-side check of every transactional append
        self.produce_verification = ProduceVerification(rm, self.txn_verifier, verifying)
        self.group_coordinator = GroupCoordinator(
            self.config, OffsetsTopicIO(rm, self.coordinator_loader,
                                        required_acks=cfg.get("offsets.commit.required.acks"),
                                        commit_timeout_ms=cfg.get("offsets.commit.timeout.ms"), clock=self.clock),
            self.admin, verifier=_WhenEnabled(self.txn_verifier, verifying), clock=self.clock)
        self.group_coordinator.start()
        rm.add_leadership_listener(self.group_coordinator)
        # markers on __consumer_offsets settle the group coordinator's pending transactional offsets
        rm.add_txn_marker_listener(self.group_coordinator.on_txn_marker)
        self.txn_coordinator = self._transaction_coordinator(rm)
        self.txn_coordinator.start()
        rm.add_leadership_listener(self.txn_coordinator)
        self.controller = KafkaController(ControllerConfig.from_kafka_config(cfg, self.broker_id), zk,
                                          self._channel, loop, clock=self.clock)
        self.token_manager = DelegationTokenManager(TokenConfig.from_config(cfg.get), zk, self.zk_calls,
                                                    self.token_cache, self.controller, clock=self.clock)
        self.dispatcher = RequestDispatcher(self._build_registry(), self.throttler,
                                            self.metrics_endpoint.requests if self.metrics_endpoint else None)
        self.dynamic_config.add_topic_overrides_listener(self._on_topic_overrides)

        listeners = []
        for e in cfg.listeners:
            rt = self.listener_security[e.listener_name]
            listeners.append(ListenerSpec(e.listener_name, e.host, e.port, e.security_protocol, rt.ssl_context,
                                          rt.authenticator_factory, rt.certificate_principal,
                                          inter_broker=e.listener_name == cfg.inter_broker_listener_name))
        self.config.add_listener(self._on_config_change)
        self.socket_server = SocketServer(self.dispatcher, listeners, cfg.get("socket.request.max.bytes"),
                                          cfg.get("socket.send.buffer.bytes"), cfg.get("socket.receive.buffer.bytes"),
                                          self._connection_limits(),
                                          DescriptorBudget(lambda: int(self.config.current.get("broker.fd.reserve")),
                                                           clock=self.clock),
                                          listen_backlog=int(cfg.get("socket.listen.backlog.size")),
                                          connections_max_idle_ms=int(cfg.get("connections.max.idle.ms")),
                                          clock=self.clock)
        # Ports are bound now (the registration advertises them); requests are processed only once registered,
        # as Kafka's enableRequestProcessing: a restarted broker waiting for its stale registration to expire
        # must not answer clients (UNKNOWN_TOPIC_OR_PARTITION for partitions whose logs it holds) meanwhile.
        try:
            await self.socket_server.start(serve=False)
        except OSError as exc:  # taken since the probe at the start
            raise StartupError(f"Socket server failed to bind: {exc.strerror or exc}. (listeners: "
                               f"{', '.join(e.connection_string() for e in cfg.listeners)})") from None

        endpoints = self._advertised_endpoints()
        await self.zk_calls.run(self._register, endpoints)
        self._registered = True
        rm.startup()
        await self.zk_calls.run(self.controller.startup)
        await self.dynamic_config.start()
        await self.token_manager.startup()
        log_manager.startup()
        await self.socket_server.enable_request_processing()
        if rm.tiered is not None:  # creates __remote_log_metadata through the cluster, so after serving starts
            rm.tiered.start()
        # Serving clients makes sense once the controller told us about the cluster (first UpdateMetadata).
        if not await self.metadata.wait_initialized(cfg.zk_session_timeout_ms / 1000.0 + 5):
            log.warning("No UpdateMetadata from a controller yet; serving with an empty view of the cluster")
        self._quota_report_task = loop.create_task(self._report_quotas(QUOTA_REPORT_INTERVAL_S))
        runtime_tuning.freeze_long_lived("start-up: logs, partitions and metadata loaded")
        log.info("[KafkaServer id=%d] started (listeners: %s)", self.broker_id,
                 ", ".join(e.connection_string() for e in endpoints))

    def _check_descriptors(self) -> None:
        """Raise the open file limit to the hard limit (as the JVM does) and log what the logs on disk will need
        of it, before any is loaded; WARN when that leaves little for connections (docs/descriptors.md)."""
        cfg = self.config.current
        limit = raise_nofile_limit()
        usable = [d for d in cfg.log_dirs if os.path.abspath(d) not in self._initial_offline_dirs]
        estimate = estimate_descriptors(limit, usable, int(cfg.get("broker.storage.segment.file.cache.size")),
                                        effective_reserve(int(cfg.get("broker.fd.reserve")), limit.soft))
        log.info(estimate.describe())
        if estimate.close_to_limit:
            log.warning("File descriptors: the logs on disk and the reserve need about %d of the limit of %d (more "
                        "than %d%%): new client connections will be refused early. Raise the hard limit (ulimit -Hn, "
                        "LimitNOFILE= in a systemd unit) or lower broker.storage.segment.file.cache.size",
                        estimate.needed, estimate.limit, int(100 * WARN_FRACTION))

    async def _start_authorizer(self) -> None:
        """authorizer.class.name = Kafka's AclAuthorizer: load every ACL from ZooKeeper and follow its changes
        (before any request is served, as Kafka configures its authorizer before the socket server starts)."""
        cfg = self.config.current
        name = (cfg.get("authorizer.class.name") or "").strip()
        if not name:
            return
        assert self.zk is not None
        cache = AclCache()
        authorizer = AclAuthorizer(cache, parse_super_users(cfg.get("super.users")),
                                   bool(cfg.get("allow.everyone.if.no.acl.found")))
        self.acl_store = ZkAclStore(self.zk, self.zk_calls, cache, clock=self.clock)
        await self.acl_store.start()
        self.authz = AclAuthz(authorizer, self.acl_store)
        log.info("Authorizer %s enabled (%d ACLs, super users: %s, allow.everyone.if.no.acl.found=%s)", name,
                 len(cache), ", ".join(sorted(authorizer.super_users)) or "none",
                 authorizer.allow_everyone_if_no_acl_found)

    async def _start_metrics_endpoint(self) -> None:
        """broker.metrics.prometheus.port set: serve Prometheus scrapes from now on (docs/metrics.md). A taken port
        ends start-up with one line, like a taken listener port, before ZooKeeper or any log is touched."""
        cfg = self.config.current
        port = cfg.get("broker.metrics.prometheus.port")
        if port is None:
            return
        host = cfg.get("broker.metrics.prometheus.host") or ""
        endpoint = MetricsEndpoint(self, int(port), host)
        try:
            await asyncio.get_running_loop().run_in_executor(None, endpoint.start)
        except OSError as exc:
            raise StartupError(f"Metrics endpoint failed to bind {host or '0.0.0.0'}:{port} "
                               f"(broker.metrics.prometheus.port): {exc.strerror or exc}") from None
        self.metrics_endpoint = endpoint

    async def _report_quotas(self, interval_s: float) -> None:
        """Client quota metrics per entity, logged while any quota is set (the broker has no JMX)."""
        quota_log = logging.getLogger("broker.quota.metrics")
        while True:
            await asyncio.sleep(interval_s)
            for line in self.quotas.report():
                quota_log.info(line)

    def _token_scram_lookup(self) -> Any:
        """Delegation-token SCRAM logins (tokenauth=true), once the token cache exists."""
        tokens = getattr(self, "token_cache", None)
        if tokens is None:
            return None
        return tokens.scram_credential

    def _connection_limits(self) -> ConnectionLimits:
        """Kafka's connection quotas, read from the current (dynamic) config at each new connection."""
        parsed: Dict[str, Dict[str, int]] = {}  # overrides text -> {ip: limit}: parsed (and DNS-resolved) once

        def per_ip(ip: str) -> int:
            cfg = self.config.current
            text = cfg.get("max.connections.per.ip.overrides") or ""
            overrides = parsed.get(text)
            if overrides is None:
                overrides = parsed[text] = parse_ip_overrides(text)
            return overrides.get(ip, int(cfg.get("max.connections.per.ip")))
        return ConnectionLimits(max_connections=lambda: int(self.config.current.get("max.connections")),
                                max_connections_per_ip=per_ip,
                                max_creation_rate=lambda: int(self.config.current.get("max.connection.creation.rate")),
                                ip_creation_delay_ms=self.quotas.ip_connection_delay_ms)

    def _build_registry(self) -> Any:
        assert self.replica_manager is not None and self.admin is not None and self.controller is not None
        assert self.group_coordinator is not None and self.producer_ids is not None
        assert self.dynamic_config is not None
        return build_registry(ApiServices(
            config=self.config, metadata=self.metadata, replica_manager=self.replica_manager, admin=self.admin,
            group_coordinator=self.group_coordinator, producer_ids=self.producer_ids,
            fetch_sessions=self.fetch_sessions, controller=self.controller, dynamic_config=self.dynamic_config,
            broker_epoch=self._broker_epoch, quotas=self.quotas, throttler=self.throttler,
            client_quotas=self.client_quota_admin, scram_credentials=self.scram_admin,
            delegation_tokens=self.token_manager, authz=self.authz, txn_coordinator=self.txn_coordinator,
            produce_verification=self.produce_verification))

    def _transaction_coordinator(self, rm: ReplicaManager) -> TransactionCoordinator:
        """Transaction coordinator: loads __transaction_state partitions as this broker becomes their leader (the
        leader epoch is the coordinator epoch) and sends markers over its own NetworkClient, as Kafka's
        TransactionMarkerChannelManager (WriteTxnMarkers v1 from IBP 2.8, v0 before)."""
        cfg = self.config.current
        assert self.admin is not None and self.producer_ids is not None

        def leader_epoch(partition: int) -> int:
            p = rm.get_partition((TRANSACTION_STATE_TOPIC_NAME, partition))
            return p.leader_epoch if p is not None else -1
        markers = TransactionMarkerChannelManager(
            self._channel("txn-marker-sender"), metadata_leader_lookup(self.metadata, self._broker_node),
            request_version=1 if self.ibp.is_at_least("2.8-IV0") else 0,
            request_timeout_ms=int(cfg.get("request.timeout.ms")), clock=self.clock)
        io = OffsetsTopicIO(rm, self.txn_loader, topic=TRANSACTION_STATE_TOPIC_NAME, required_acks=-1,
                            commit_timeout_ms=int(cfg.get("request.timeout.ms")), clock=self.clock)
        return TransactionCoordinator(self.config, io, self.admin, self.producer_ids, leader_epoch, markers,
                                      clock=self.clock)

    def _alter_partition_manager(self) -> Any:
        """How leaders change their ISR: AlterPartition to the controller from IBP 2.7-IV2 (KIP-497), before
        that a compare-and-set write of the state znode plus an /isr_change_notification."""
        if self.ibp.is_at_least("2.7-IV2"):
            return AlterPartitionManager(self.broker_id, self._broker_epoch, self._channel("alter-partition"),
                                         self._controller_node)
        assert self.zk is not None
        return ZkAlterPartitionManager(self.broker_id, self.zk, self.zk_calls,
                                       lambda: self._replicas().controller_epoch, clock=self.clock)

    async def _allocate_producer_ids(self) -> Tuple[int, int]:
        """The next producer-id block: from the controller at IBP >= 3.0 (KIP-730), else from ZooKeeper."""
        assert self.zk is not None
        if not self.ibp.is_at_least("3.0-IV0"):
            return await self.zk_calls.run(self.zk.allocate_producer_id_block, self.broker_id)
        assert self.to_controller is not None
        response = await self.to_controller.send(ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                                                  {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch()},
                                                  self.config.get("request.timeout.ms"))
        if response.error_code:
            raise RuntimeError(f"AllocateProducerIds failed: {ErrorCode(response.error_code).name}")
        start = int(response.producer_id_start)
        return start, start + int(response.producer_id_len) - 1

    def _tiered_storage(self, loop: asyncio.AbstractEventLoop) -> TieredStorage:
        """remote.log.storage.system.enable=true: the RemoteLogManager with the storage plug-in named by
        remote.log.storage.manager.class.name and the topic-based metadata manager over this cluster (Kafka's
        RemoteLogManager built by KafkaServer.startup in ZooKeeper mode)."""
        cfg = self.config.current
        assert self.log_manager is not None and self.admin is not None
        lm, admin = self.log_manager, self.admin
        rlmm_cfg = tiered_config.rlmm_config(cfg)
        port = BrokerMetadataTopic(
            loop, self._channel("remote-log-metadata"),
            lambda t, p: self._leader_node(t, p),
            lambda name, n, rf, configs: admin.ensure_internal_topic(name, n, rf, configs),
            request_timeout_ms=int(cfg.get("request.timeout.ms")),
            retry_timeout_ms=int(rlmm_cfg["remote.log.metadata.initialization.retry.max.timeout.ms"]),
            retry_interval_ms=int(rlmm_cfg["remote.log.metadata.initialization.retry.interval.ms"]), clock=self.clock)
        return TieredStorage(
            self.broker_id, load_remote_storage_manager(cfg, self.broker_id), port, rlmm_cfg,
            lambda t, p: lm.tiered_log((t, p)),
            task_interval_ms=int(cfg.get("remote.log.manager.task.interval.ms")),
            copy_max_bytes_per_second=int(cfg.get("remote.log.manager.copy.max.bytes.per.second")),
            copy_quota_window_num=int(cfg.get("remote.log.manager.copy.quota.window.num")),
            copy_quota_window_size_seconds=int(cfg.get("remote.log.manager.copy.quota.window.size.seconds")),
            fetch_max_bytes_per_second=int(cfg.get("remote.log.manager.fetch.max.bytes.per.second")),
            fetch_quota_window_num=int(cfg.get("remote.log.manager.fetch.quota.window.num")),
            fetch_quota_window_size_seconds=int(cfg.get("remote.log.manager.fetch.quota.window.size.seconds")),
            reader_threads=int(cfg.get("remote.log.reader.threads")),
            reader_max_pending=int(cfg.get("remote.log.reader.max.pending.tasks")),
            remote_fetch_max_wait_ms=int(cfg.get("remote.fetch.max.wait.ms")),
            log_dir=cfg.log_dirs[0],  # as Kafka's KafkaServer: config.logDirs.head
            index_cache_bytes=int(cfg.get("remote.log.index.file.cache.total.size.bytes")),
            thread_pool_size=int(cfg.get("remote.log.manager.thread.pool.size")),
            copier_thread_pool_size=int(cfg.get("remote.log.manager.copier.thread.pool.size")),
            expiration_thread_pool_size=int(cfg.get("remote.log.manager.expiration.thread.pool.size")))

    def _make_log_manager(self, default_log_config: LogConfig, cluster_id: str) -> Any:
        cfg = self.config.current
        return LogManager(cfg.log_dirs, default_log_config, broker_id=self.broker_id, cluster_id=cluster_id,
                          clock=self.clock, initial_offline_dirs=self._initial_offline_dirs,
                          retention_check_interval_ms=cfg.get("log.retention.check.interval.ms"),
                          initial_task_delay_ms=cfg.get("log.initial.task.delay.ms"),
                          flush_check_interval_ms=cfg.get("log.flush.scheduler.interval.ms"),
                          flush_recovery_offset_checkpoint_interval_ms=cfg.get(
                              "log.flush.offset.checkpoint.interval.ms"),
                          flush_start_offset_checkpoint_interval_ms=cfg.get(
                              "log.flush.start.offset.checkpoint.interval.ms"),
                          producer_id_expiration_ms=cfg.get("producer.id.expiration.ms"),
                          cleaner_config=CleanerConfig.from_broker_config(cfg.get),
                          recovery_threads_per_data_dir=cfg.get("num.recovery.threads.per.data.dir"),
                          segment_file_cache_size=cfg.get("broker.storage.segment.file.cache.size"),
                          remote_storage_system_enable=bool(cfg.get(tiered_config.SYSTEM_ENABLE)))

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
        assert self.zk is not None
        self.zk.register_broker(self.broker_id, endpoints, self.config.current.broker_rack)

    def _on_config_change(self, old: KafkaConfig, new: KafkaConfig) -> None:
        """A dynamic broker config changed: topic configs derived from broker defaults follow."""
        if self.dynamic_config is not None:
            asyncio.get_running_loop().create_task(self.dynamic_config.refresh_all_topics())
        if (self.controller is not None and new.get("unclean.leader.election.enable")
                and not old.get("unclean.leader.election.enable")):
            self.controller.enable_unclean_leader_election()

    def _on_topic_overrides(self, topic: str, overrides: Dict[str, str]) -> None:
        """A topic's overrides changed: a newly allowed unclean election may give an offline partition a leader."""
        if self.controller is not None and overrides.get("unclean.leader.election.enable", "").lower() == "true":
            self.controller.enable_topic_unclean_leader_election(topic)

    # ------------------------------------------------------------------------------------ stop
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships away (KafkaServer.controlledShutdown).

        Bounded as Kafka's: at most ``controlled.shutdown.max.retries`` attempts, each waiting at most
        ``request.timeout.ms`` for the controller's answer, ``controlled.shutdown.retry.backoff.ms`` apart; then
        an unclean shutdown. True once nothing is left to move.

        Unlike Kafka, an attempt also needs this broker's ZooKeeper connection: one begun, or still waiting, while
        the connection is down fails at once. Without ZooKeeper no controller can move leaderships (it must write
        them there), and a broker cut off from ZooKeeper alone loses them anyway when its session expires; so a
        broker whose ZooKeeper is gone spends at most ``(max.retries - 1) x backoff`` here (10 s by default)
        instead of ``max.retries x request.timeout.ms + (max.retries - 1) x backoff`` (100 s by default).
        """
        cfg = self.config.current
        if not cfg.get("controlled.shutdown.enable") or not self._registered or self.to_controller is None:
            return False
        retries = int(cfg.get("controlled.shutdown.max.retries"))
        backoff_s = int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000.0
        body = {"broker_id": self.broker_id, "broker_epoch": self._broker_epoch()}
        for attempt in range(1, retries + 1):
            try:
                response = await self._controlled_shutdown_attempt(body, int(cfg.get("request.timeout.ms")))
            except ControllerUnavailableError as exc:
                log.warning("Controlled shutdown attempt %d/%d: %s", attempt, retries, exc)
            else:
                remaining = [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
                if response.error_code == 0 and not remaining:
                    log.info("[KafkaServer id=%d] Controlled shutdown succeeded", self.broker_id)
                    return True
                log.info("Controlled shutdown attempt %d/%d: error %s, %d partitions still led here", attempt,
                         retries, ErrorCode(response.error_code).name, len(remaining))
            if attempt < retries:
                await asyncio.sleep(backoff_s)
        log.warning("[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the controlled shutdown "
                    "attempts failed", self.broker_id)
        return False

    async def _controlled_shutdown_attempt(self, body: Dict[str, int], timeout_ms: int) -> Any:
        """One ControlledShutdown request; ControllerUnavailableError after ``timeout_ms`` or as soon as this
        broker's ZooKeeper connection is down (see :meth:`controlled_shutdown`)."""
        assert self.to_controller is not None
        if not self._zk_connected():
            raise ControllerUnavailableError("no connection to ZooKeeper")
        send = asyncio.ensure_future(self.to_controller.send(ApiKey.CONTROLLED_SHUTDOWN, 3, body, timeout_ms))
        try:
            while True:
                done, _ = await asyncio.wait({send}, timeout=ZK_CONNECTION_CHECK_S)
                if done:
                    return send.result()
                if not self._zk_connected():
                    raise ControllerUnavailableError("lost the connection to ZooKeeper")
        finally:
            if not send.done():
                send.cancel()

    def _zk_connected(self) -> bool:
        return self.zk is not None and self.zk.connected

    async def stop(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        loop = asyncio.get_running_loop()
        try:
            await self.controlled_shutdown()
        except Exception:
            log.exception("Controlled shutdown failed")
        if self.socket_server is not None:
            await self.socket_server.stop()
        task = getattr(self, "_quota_report_task", None)
        if task is not None:
            task.cancel()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        if self.txn_coordinator is not None:
            await self.txn_coordinator.stop()
        if self.replica_manager is not None:
            await self.replica_manager.stop()
        if self.controller is not None:
            await loop.run_in_executor(None, self.controller.shutdown)
        if self.dynamic_config is not None:
            await self.dynamic_config.stop()
        if self.token_manager is not None:
            await self.token_manager.shutdown()
        if self.acl_store is not None:
            await self.acl_store.stop()
        for ch in self._channels:
            try:
                await ch.close()
            except Exception:
                log.debug("Closing an inter-broker channel failed", exc_info=True)
        if self.zk is not None:
            # on a thread of its own: zk-call workers may be waiting for a ZooKeeper that is gone, and closing
            # the client is what fails their requests (ConnectionLoss) and frees them
            await loop.run_in_executor(None, self.zk.close)
        if self.log_manager is not None:
            await loop.run_in_executor(None, self.log_manager.shutdown)
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.metrics_endpoint is not None:  # last: scrapes keep working while the broker shuts down
            await loop.run_in_executor(None, self.metrics_endpoint.stop)
        self.zk_calls.shutdown()
        self.coordinator_loader.shutdown()
        self.txn_loader.shutdown()
        self._stopped.set()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


def _default_host() -> str:
    return socket.getfqdn() or "localhost"


class _WhenEnabled:
    """The group coordinator's verifier, active while transaction.partition.verification.enable is true."""

    def __init__(self, verifier: AddPartitionsToTxnManager, enabled: Callable[[], bool]) -> None:
        self.verifier = verifier
        self.enabled = enabled

    async def verify_partition(self, topic: str, partition: int, transactional_id: str, producer_id: int,
                               producer_epoch: int, generic_errors: bool) -> int:
        if not self.enabled():
            return 0
        return await self.verifier.verify_partition(topic, partition, transactional_id, producer_id, producer_epoch,
                                                    generic_errors)
