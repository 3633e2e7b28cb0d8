"""KafkaController: the ZooKeeper-mode controller role every broker runs (Kafka 3.9 semantics).

Every broker races to create the ephemeral /controller; the winner bumps /controller_epoch in the same
multi-op, becomes the active controller (onControllerFailover) and from then on reacts to ZooKeeper watches and
broker requests. All of that runs on ONE event thread (ControllerEventManager): watch callbacks, API calls,
broker responses and timers only enqueue events. ZooKeeper calls are made synchronously on that thread; every
write is guarded by the /controller_epoch znode version, so a controller that lost its place (a zombie) has
its next write rejected and resigns. Requests to brokers go through the ControllerChannelManager.

Public API (thread-safe; the coroutines are awaited on the broker's event loop):
  startup(), shutdown(), is_active, epoch, active_controller_id,
  alter_partition(request, api_version), controlled_shutdown(broker_id, broker_epoch),
  allocate_producer_ids(broker_id, broker_epoch), elect_leaders(election_type, partitions, timeout_ms),
  alter_partition_reassignments(request), list_partition_reassignments(request),
  update_features(request, api_version).
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any, Callable, Iterable

from kazoo.exceptions import SessionExpiredError

from broker.cluster.controller import events as ev
from broker.cluster.controller.alter_partition import validate_alter_partition
from broker.cluster.controller.bounced_leaders import find_bounced_leaders
from broker.cluster.controller.channel_manager import ControllerChannelManager
from broker.cluster.controller.config import ControllerConfig
from broker.cluster.controller.context import (NO_LEADER, ControllerContext, PartitionReplica, PartitionState,
                                               ReplicaAssignment, ReplicaState, TopicPartition)
from broker.cluster.controller.election import preferred_replica_leader
from broker.cluster.controller.event_manager import ControllerEvent, ControllerEventManager
from broker.cluster.controller.features import (SAFE_DOWNGRADE, UPGRADE, incompatible_features, supported_ranges,
                                                validate_feature_update)
from broker.cluster.controller.partition_state_machine import (CONTROLLED_SHUTDOWN, PREFERRED,
                                                               ElectionStrategy, OfflineElection,
                                                               PartitionStateMachine, StateChangeFailed)
from broker.cluster.controller.reassignment import PartitionReassignments
from broker.cluster.controller.replica_state_machine import ReplicaStateMachine
from broker.cluster.controller.request_batch import ControllerBrokerRequestBatch
from broker.cluster.controller.topic_deletion_manager import DeletionClient, TopicDeletionManager
from broker.errors import ErrorCode
from broker.util.broker_channel import BrokerChannelFactory, BrokerNode
from broker.util.clock import Clock
from broker.zk.client import KafkaZkClient, ZkWatch
from broker.zk.errors import ZOOKEEPER_GONE, ControllerMovedError, NoSuchTopicError
from broker.zk.paths import (BrokerIdsZNode, BrokerIdZNode, BrokerInfo, ControllerZNode, DeleteTopicsZNode,
                             FeatureZNode, IsrChangeNotificationZNode, LeaderAndIsr, LogDirEventNotificationZNode,
                             PreferredReplicaElectionZNode, ReassignPartitionsZNode, TopicAssignment,
                             TopicPartitionStateZNode, TopicsZNode, TopicZNode, new_uuid_base64, topic_id_to_uuid,
                             uuid_to_topic_id)

log = logging.getLogger(__name__)

AUTO_REBALANCE_TIMER = "auto-leader-rebalance-task"


def _f(obj: Any, name: str, default: Any = None) -> Any:
    """A request field from a decoded Message (attribute) or a plain dict."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _once(fn: Callable[..., None]) -> Callable[..., None]:
    """A reply callback that only the first call gets through (preempt and a late answer cannot both reply)."""
    lock = threading.Lock()
    done = [False]

    def wrapper(*args: Any) -> None:
        with lock:
            if done[0]:
                return
            done[0] = True
        fn(*args)

    return wrapper


_STRATEGY_NAMES = {"OfflineElection": "OfflinePartitionLeaderElectionStrategy",
                   "ReassignElection": "ReassignPartitionLeaderElectionStrategy",
                   "PreferredElection": "PreferredReplicaPartitionLeaderElectionStrategy",
                   "ControlledShutdownElection": "ControlledShutdownPartitionLeaderElectionStrategy"}


class KafkaController:
    """See the module docstring. Construct one per broker; `startup()` joins the controller election."""

    def __init__(self, config: ControllerConfig, zk: KafkaZkClient,
                 channel_factory: BrokerChannelFactory | None = None,
                 loop: asyncio.AbstractEventLoop | None = None, *,
                 channel_manager: Any = None, clock: Clock | None = None, threaded: bool = True) -> None:
        """`channel_factory` and `loop` build the real ControllerChannelManager; tests pass `channel_manager`
        (anything with startup/add_broker/remove_broker/send_request/shutdown), a manual `clock` and
        threaded=False, then drive events with `event_manager.process_pending()`."""
        self.config = config
        self.zk = zk
        if channel_manager is None:
            if channel_factory is None or loop is None:
                raise ValueError("KafkaController needs channel_factory and loop (or a channel_manager)")
            channel_manager = ControllerChannelManager(channel_factory, loop, config.broker_id,
                                                       config.controller_socket_timeout_ms,
                                                       config.request_retry_backoff_ms)
        self.channel_manager = channel_manager
        self.event_manager = ControllerEventManager(self.process, clock)
        #: OfflinePartitionsCount as of the last event (written by the event thread, read by the metrics endpoint)
        self.offline_partitions_count = 0
        self._threaded = threaded
        self.ctx = ControllerContext()
        self.active_controller_id = -1
        self._unclean_default = config.unclean_leader_election_enable
        self.batch = ControllerBrokerRequestBatch(
            config, self.ctx, self._send_request,
            on_leader_and_isr_response=lambda b, r: self.event_manager.put(ev.LeaderAndIsrResponseReceived(b, r)),
            on_update_metadata_response=lambda b, r: self.event_manager.put(
                ev.UpdateMetadataResponseReceived(b, r)),
            on_stop_replica_response=self._on_stop_replica_response)
        self.partition_sm = PartitionStateMachine(config, self.ctx, zk, self.batch, self._unclean_enabled_for)
        self.replica_sm = ReplicaStateMachine(config.broker_id, self.ctx, zk, self.batch)
        self.topic_deletion = TopicDeletionManager(
            config.delete_topic_enable, self.ctx, self.replica_sm, self.partition_sm,
            DeletionClient(delete_topic=self._delete_topic_znodes,
                           delete_topic_deletions=lambda ts: zk.delete_topic_deletions(ts, self.ctx.epoch_zk_version),
                           mute_partition_modifications=self._unwatch_topic,
                           send_metadata_update=lambda tps: self._send_update_metadata(
                               self.ctx.live_or_shutting_down_broker_ids, tps)))
        self.reassignment = PartitionReassignments(
            config, self.ctx, zk, self.batch, self.replica_sm, self.partition_sm, self.topic_deletion,
            watch_isr=self._watch_reassignment_isr, unwatch_isr=self._unwatch_reassignment_isr,
            remove_from_zk_reassignment=self._maybe_remove_from_zk_reassignment,
            send_update_metadata=self._send_update_metadata)
        self._controller_watch: ZkWatch | None = None
        self._watches: list[ZkWatch] = []
        self._topic_watches: dict[str, ZkWatch] = {}
        self._broker_watches: dict[int, ZkWatch] = {}
        self._reassign_isr_watches: dict[TopicPartition, ZkWatch] = {}
        self._finalized_features: dict[str, int] = {}
        self._listeners: list[Callable[[int], None]] = []
        self._started = False
        self._handlers: dict[type, Callable[[Any], object]] = {
            ev.Startup: lambda e: self._process_startup(),
            ev.ControllerChange: lambda e: self._process_reelect(),
            ev.Reelect: lambda e: self._process_reelect(),
            ev.Expire: lambda e: self._process_expire(),
            ev.RegisterBrokerAndReelect: lambda e: self._process_reelect(),
            ev.BrokerChange: lambda e: self._process_broker_change(),
            ev.BrokerModifications: lambda e: self._process_broker_modification(e.broker_id),
            ev.TopicChange: lambda e: self._process_topic_change(),
            ev.PartitionModifications: lambda e: self._process_partition_modifications(e.topic),
            ev.TopicDeletion: lambda e: self._process_topic_deletion(),
            ev.IsrChangeNotification: lambda e: self._process_isr_change_notification(),
            ev.LogDirEventNotification: lambda e: self._process_log_dir_event_notification(),
            ev.ZkPartitionReassignment: lambda e: self._process_zk_partition_reassignment(),
            ev.PartitionReassignmentIsrChange: lambda e: self._process_partition_reassignment_isr_change(e.tp),
            ev.AutoPreferredReplicaLeaderElection: lambda e: self._process_auto_preferred_election(),
            ev.UncleanLeaderElectionEnable: lambda e: self._process_unclean_enable(None),
            ev.TopicUncleanLeaderElectionEnable: lambda e: self._process_unclean_enable(e.topic),
            ev.LeaderAndIsrResponseReceived: self._process_leader_and_isr_response,
            ev.UpdateMetadataResponseReceived: self._process_update_metadata_response,
            ev.TopicDeletionStopReplicaResponseReceived: self._process_topic_deletion_stop_replica_response,
            ev.ReplicaLeaderElection: self._process_replica_leader_election,
            ev.ControlledShutdown: self._process_controlled_shutdown,
            ev.AlterPartitionReceived: self._process_alter_partition,
            ev.AllocateProducerIds: self._process_allocate_producer_ids,
            ev.ApiPartitionReassignment: self._process_api_partition_reassignment,
            ev.ListPartitionReassignments: self._process_list_partition_reassignments,
            ev.UpdateFeatures: self._process_update_features,
            ev.ShutdownEventThread: lambda e: None,
        }

    # ================================================================== lifecycle and status
    def startup(self) -> None:
        """Join the election: watch /controller and try to become controller (on the event thread)."""
        if self._started:
            return
        self._started = True
        self.zk.on_session_lost(lambda: self.event_manager.clear_and_put(ev.Expire()))
        self.zk.on_new_session(lambda: self.event_manager.put(ev.RegisterBrokerAndReelect()))
        self.event_manager.put(ev.Startup())
        if self._threaded:
            self.event_manager.start()

    def shutdown(self) -> None:
        """Stop the event thread (queued requests are answered NOT_CONTROLLER) and resign locally. /controller is
        left to vanish with the ZooKeeper session, as Kafka does. The event in progress is waited for (at most
        30 s) only while ZooKeeper is connected: one waiting for a ZooKeeper that is gone cannot finish. Such an
        event keeps the controller's state (which is its thread's alone): it ends, without resigning here, when the
        broker closes its ZooKeeper session (ZkClientClosedError)."""
        self.event_manager.close(give_up=lambda: not getattr(self.zk, "connected", True))
        self._set_active(-1)
        if not self.event_manager.is_running:
            try:
                self._on_controller_resignation()
            except Exception:
                log.exception("Error while resigning on shutdown")
        if self._controller_watch is not None:
            self._controller_watch.cancel()
        try:
            self.channel_manager.shutdown()
        except Exception:
            log.exception("Error while closing the controller channels")

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.config.broker_id

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    @property
    def alter_partition_enabled(self) -> bool:
        """Whether leaders should use AlterPartition (IBP >= 2.7) or write the ISR + notifications themselves."""
        return self.config.is_alter_partition_enabled

    @property
    def allocate_producer_ids_enabled(self) -> bool:
        """Whether brokers should ask the controller for producer-id blocks (IBP >= 3.0)."""
        return self.config.is_allocate_producer_ids_enabled

    def add_controller_change_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(active controller id or -1)` on the event thread whenever this broker's view changes."""
        self._listeners.append(listener)

    def enable_unclean_leader_election(self) -> None:
        """The broker default unclean.leader.election.enable became true (dynamic config): elect where now
        possible."""
        self._unclean_default = True
        self.event_manager.put(ev.UncleanLeaderElectionEnable())

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """A topic's unclean.leader.election.enable override became true."""
        if self.is_active:
            self.event_manager.put(ev.TopicUncleanLeaderElectionEnable(topic))

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self.topic_deletion.is_topic_queued_for_deletion(topic)

    # ================================================================== API (thread-safe)
    async def _ask(self, make: Callable[[Callable[..., None]], ControllerEvent]) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def settle(value: Any) -> None:
            if not fut.done():
                fut.set_result(value)

        def reply(*args: Any) -> None:
            value = args[0] if len(args) == 1 else args
            try:
                loop.call_soon_threadsafe(settle, value)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more

        self.event_manager.put(make(_once(reply)))
        return await fut

    async def alter_partition(self, request: Any, api_version: int) -> dict:
        """AlterPartition (v0-3) from a partition leader: the response body as a dict."""
        return await self._ask(lambda cb: ev.AlterPartitionReceived(request, api_version, cb))

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        """(error code, partitions the broker still leads)."""
        return await self._ask(lambda cb: ev.ControlledShutdown(broker_id, broker_epoch, cb))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict:
        return await self._ask(lambda cb: ev.AllocateProducerIds(broker_id, broker_epoch, cb))

    async def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None,
                            timeout_ms: int = 60000) -> dict:
        """ElectLeaders response body (preferred=0, unclean=1; partitions None = all partitions, and then only
        the partitions that needed an election or failed are listed)."""
        parts = None if partitions is None else {(str(t), int(p)) for t, p in partitions}
        results = await self._ask(lambda cb: ev.ReplicaLeaderElection(
            parts, int(election_type), ev.ADMIN_CLIENT, cb))
        response = self._elect_leaders_response(results, partitions is None)
        if not results and not self.is_active:
            response["error_code"] = int(ErrorCode.NOT_CONTROLLER)
        return response

    async def elect_leaders_results(self, election_type: int, partitions: Iterable[TopicPartition]
                                    ) -> dict[TopicPartition, tuple[int, str | None, int | None]]:
        """{tp: (error code, message, elected leader or None)}; every partition NOT_CONTROLLER when not active."""
        parts = {(str(t), int(p)) for t, p in partitions}
        if not self.is_active:
            return {tp: (int(ErrorCode.NOT_CONTROLLER), None, None) for tp in parts}
        results = await self._ask(lambda cb: ev.ReplicaLeaderElection(parts, int(election_type), ev.ADMIN_CLIENT,
                                                                      cb))
        return dict(results) if results else {tp: (int(ErrorCode.NOT_CONTROLLER), None, None) for tp in parts}

    async def alter_partition_reassignments(self, request: Any) -> dict:
        reassignments: dict[TopicPartition, list[int] | None] = {}
        for t in _f(request, "topics", []) or []:
            for p in _f(t, "partitions", []) or []:
                replicas = _f(p, "replicas")
                reassignments[(_f(t, "name"), int(_f(p, "partition_index")))] = (
                    None if replicas is None else [int(r) for r in replicas])
        return await self._ask(lambda cb: ev.ApiPartitionReassignment(reassignments, cb))

    async def list_partition_reassignments(self, request: Any) -> dict:
        topics = _f(request, "topics")
        parts = None if topics is None else {(_f(t, "name"), int(p)) for t in topics
                                             for p in _f(t, "partition_indexes", []) or []}
        return await self._ask(lambda cb: ev.ListPartitionReassignments(parts, cb))

    async def update_features(self, request: Any, api_version: int) -> dict:
        return await self._ask(lambda cb: ev.UpdateFeatures(request, api_version, cb))

    # callback variants (tests and non-asyncio callers)
    def submit(self, event: ControllerEvent) -> None:
        self.event_manager.put(event)

    # ================================================================== event processing
    def process(self, event: ControllerEvent) -> None:
        """Run one event (on the event thread). A ControllerMovedError means another broker is controller."""
        handler = self._handlers.get(type(event))
        if handler is None:
            log.error("No handler for controller event %r", event)
            return
        try:
            handler(event)
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when processing %r: %s", event, e)
            event.preempt()
            self._maybe_resign()
        except ZOOKEEPER_GONE as e:
            # the session expired or the connection dropped mid-event: the Expire event that follows makes this
            # controller resign; one line, not a traceback (whoever waits gets NOT_CONTROLLER and retries)
            log.error("Error processing controller event %r: the ZooKeeper %s (%s)", event,
                      "session expired" if isinstance(e, SessionExpiredError) else "connection was lost",
                      type(e).__name__)
            event.preempt()
        except Exception:
            log.exception("Error processing controller event %r", event)
            event.preempt()
        finally:
            self._update_metrics()

    def _update_metrics(self) -> None:
        """After each event, on the event thread (Kafka's updateMetrics): publish the counts the metrics endpoint
        reports, so its HTTP threads read one int and never the ControllerContext."""
        if not self.is_active:
            self.offline_partitions_count = 0
            return
        ctx = self.ctx
        offline = PartitionState.OFFLINE
        self.offline_partitions_count = sum(1 for tp, state in ctx.partition_states.items()
                                            if state is offline and not ctx.is_topic_queued_for_deletion(tp[0]))

    def _set_active(self, controller_id: int) -> None:
        if controller_id != self.active_controller_id:
            self.active_controller_id = controller_id
            for listener in list(self._listeners):
                try:
                    listener(controller_id)
                except Exception:
                    log.exception("Controller change listener failed")

    # ------------------------------------------------------------------ election
    def _process_startup(self) -> None:
        if self._controller_watch is None:
            self._controller_watch = self.zk.watch_data(ControllerZNode.path,
                                                        lambda: self.event_manager.put(ev.ControllerChange()))
        self._elect()

    def _process_reelect(self) -> None:
        self._maybe_resign()
        self._elect()

    def _process_expire(self) -> None:
        self._set_active(-1)
        self._on_controller_resignation()

    def _maybe_resign(self) -> None:
        was_active = self.is_active
        current = self.zk.get_controller_id()
        self._set_active(current if current is not None else -1)
        if was_active and not self.is_active:
            self._on_controller_resignation()

    def _elect(self) -> None:
        current = self.zk.get_controller_id()
        if current is not None:
            self._set_active(current)
            if current != self.config.broker_id or self.ctx.epoch_zk_version:
                return
        try:
            epoch, version = self.zk.register_controller_and_increment_epoch(self.config.broker_id)
        except ControllerMovedError:
            self._maybe_resign()
            return
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, version
        log.info("%d successfully elected as the controller. Epoch incremented to %d and epoch zk version is now "
                 "%d", self.config.broker_id, epoch, version)
        self._set_active(self.config.broker_id)
        try:
            self._on_controller_failover()
        except ControllerMovedError:
            raise
        except ZOOKEEPER_GONE as exc:
            log.error("Error while electing or becoming controller on broker %d: the ZooKeeper session or connection "
                      "was lost (%s). Trigger controller movement immediately", self.config.broker_id,
                      type(exc).__name__)
            self._trigger_controller_move()
        except Exception:
            log.exception("Error while electing or becoming controller on broker %d. Trigger controller movement "
                          "immediately", self.config.broker_id)
            self._trigger_controller_move()

    def _trigger_controller_move(self) -> None:
        current = self.zk.get_controller_id()
        self._set_active(current if current is not None else -1)
        if not self.is_active:
            log.warning("Controller has already moved when trying to trigger controller movement")
            return
        version = self.ctx.epoch_zk_version
        self._set_active(-1)
        self._on_controller_resignation()
        try:
            self.zk.delete_controller(version)
        except ControllerMovedError:
            log.warning("Controller has already moved when trying to trigger controller movement")

    # ------------------------------------------------------------------ failover / resignation
    def _on_controller_failover(self) -> None:
        zk, ctx = self.zk, self.ctx
        self._maybe_setup_feature_versioning()
        put = self.event_manager.put
        self._watches = [
            zk.watch_children(BrokerIdsZNode.path, lambda: put(ev.BrokerChange())),
            zk.watch_children(TopicsZNode.path, lambda: put(ev.TopicChange())),
            zk.watch_children(DeleteTopicsZNode.path, lambda: put(ev.TopicDeletion())),
            zk.watch_children(LogDirEventNotificationZNode.path, lambda: put(ev.LogDirEventNotification())),
            zk.watch_children(IsrChangeNotificationZNode.path, lambda: put(ev.IsrChangeNotification())),
            zk.watch_creation(PreferredReplicaElectionZNode.path,
                              lambda: put(ev.ReplicaLeaderElection(None, ev.PREFERRED, ev.ZK_TRIGGERED))),
            zk.watch_creation(ReassignPartitionsZNode.path, lambda: put(ev.ZkPartitionReassignment())),
        ]
        zk.delete_log_dir_event_notifications(zk.get_log_dir_event_notifications(), ctx.epoch_zk_version)
        zk.delete_isr_change_notifications(zk.get_isr_change_notifications(), ctx.epoch_zk_version)
        bounced = self._initialize_controller_context()
        to_delete, ineligible = self._fetch_topic_deletions_in_progress()
        self.topic_deletion.init(to_delete, ineligible)
        # brokers must know the live brokers before the LeaderAndIsr requests the state machines send
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, [])
        self.replica_sm.startup()
        self.partition_sm.startup()
        log.info("Ready to serve as the new controller with epoch %d", ctx.epoch)
        self._initialize_partition_reassignments()
        self.topic_deletion.try_topic_deletion()
        pending = self._fetch_pending_preferred_replica_elections()
        self._on_replica_election(pending, ev.PREFERRED, ev.ZK_TRIGGERED)
        if bounced:
            self._on_bounced_at_failover(bounced)
        if self.config.auto_leader_rebalance_enable:
            self.event_manager.schedule(AUTO_REBALANCE_TIMER, self.config.auto_leader_rebalance_initial_delay_ms,
                                        ev.AutoPreferredReplicaLeaderElection)

    def _on_controller_resignation(self) -> None:
        for w in self._watches:
            w.cancel()
        self._watches = []
        for ws in (self._topic_watches, self._broker_watches, self._reassign_isr_watches):
            for w in ws.values():
                w.cancel()
            ws.clear()
        self.event_manager.cancel(AUTO_REBALANCE_TIMER)
        self.batch.clear()
        had_brokers = bool(self.ctx.live_broker_epochs)
        self.ctx.reset()
        self._finalized_features = {}
        if had_brokers:
            self.channel_manager.shutdown()
        log.info("Resigned")

    def _maybe_setup_feature_versioning(self) -> None:
        """/feature: enabled (keeping finalized levels) at IBP >= 2.7, else disabled and empty (KIP-584)."""
        found = self.zk.get_feature_znode()
        if self.config.is_feature_versioning_supported:
            status, levels = FeatureZNode.decode_levels(found[0]) if found is not None else (FeatureZNode.ENABLED, {})
            levels = levels if status == FeatureZNode.ENABLED else {}
            wanted = FeatureZNode.encode_levels(levels, FeatureZNode.ENABLED, self.config.feature_znode_version)
        else:
            levels = {}
            wanted = FeatureZNode.encode_levels({}, FeatureZNode.DISABLED, self.config.feature_znode_version)
        if found is None:
            self.zk.create_feature_znode(wanted)
        elif json.loads(found[0] or b"{}") != json.loads(wanted):
            self.zk.set_feature_znode(wanted, self.ctx.epoch_zk_version)
        self._finalized_features = levels

    def _compatible_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> dict[int, tuple[BrokerInfo, int]]:
        """Brokers whose supported features cover the finalized ones (others are ignored, as Kafka does)."""
        if not self.config.is_feature_versioning_supported or not self._finalized_features:
            return brokers
        ok = {}
        for bid, (info, epoch) in brokers.items():
            bad = incompatible_features(supported_ranges(info.features), self._finalized_features)
            if bad:
                log.warning("Ignoring registration of broker %d due to incompatibilities with finalized features "
                            "%s", bid, bad)
            else:
                ok[bid] = (info, epoch)
        return ok

    def _broker_node(self, broker_id: int) -> BrokerNode | None:
        info = self.ctx.live_brokers.get(broker_id)
        ep = info.endpoint(self.config.inter_broker_listener_name) if info is not None else None
        if ep is None:
            log.error("Broker %d has no endpoint for the inter-broker listener %s", broker_id,
                      self.config.inter_broker_listener_name)
            return None
        return BrokerNode(broker_id, ep.host, ep.port)

    def _add_channel(self, broker_id: int) -> None:
        node = self._broker_node(broker_id)
        if node is not None:
            self.channel_manager.add_broker(broker_id, node)

    def _initialize_controller_context(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Read the cluster from ZooKeeper. Returns the live brokers held back as bounced leaders (see
        bounced_leaders.py): they are left out of the live brokers until the failover has started the state
        machines without them (their failure), then `_on_bounced_at_failover` starts them."""
        ctx, zk = self.ctx, self.zk
        ctx.add_live_brokers(self._compatible_brokers(zk.get_all_brokers_and_epochs()))
        log.info("Initialized broker epochs cache: %s", ctx.live_broker_epochs)
        ctx.all_topics = set(zk.get_all_topics())
        for t in sorted(ctx.all_topics):
            self._watch_topic(t)
        assignments = self._process_topic_ids(zk.get_topic_assignments(ctx.all_topics))
        for t, a in assignments.items():
            self._put_topic_assignment(t, a)
            for p in a.partitions:
                if ctx.partition_full_replica_assignment((t, p)).is_being_reassigned:
                    ctx.partitions_being_reassigned.add((t, p))
        ctx.leadership.clear()
        ctx.shutting_down_broker_ids.clear()
        for bid in sorted(ctx.live_broker_epochs):
            self._watch_broker(bid)
        states = zk.get_partition_states_and_mzxids(ctx.all_partitions())
        ctx.leadership.update({tp: s for tp, (s, _) in states.items()})
        bounced: dict[int, tuple[BrokerInfo, int]] = {}
        for bid, tps in find_bounced_leaders(states, ctx.live_broker_epochs).items():
            log.info("Broker %d registered after the leadership of %d partitions was written: treating it as "
                     "bounced", bid, len(tps))
            log.debug("Partitions led by bounced broker %d: %s", bid, [_tp_str(tp) for tp in tps])
            bounced[bid] = (ctx.live_brokers[bid], ctx.live_broker_epochs[bid])
        ctx.remove_live_brokers(bounced)
        for bid in bounced:
            self._unwatch_broker(bid)
        for bid in sorted(ctx.live_broker_epochs):
            self._add_channel(bid)
        log.info("Currently active brokers in the cluster: %s", sorted(ctx.live_broker_ids))
        log.info("Current list of topics in the cluster: %s", sorted(ctx.all_topics))
        return bounced

    def _on_bounced_at_failover(self, bounced: dict[int, tuple[BrokerInfo, int]]) -> None:
        """The bounced leaders' start-up, as a running controller handles a bounced broker's new registration.
        Their failure already happened: the failover started the state machines with them offline (their
        replicas left the ISRs, the partitions they led got another live ISR member as leader or none)."""
        self.ctx.add_live_brokers(bounced)
        for bid in sorted(bounced):
            self._add_channel(bid)
        self._on_broker_startup(sorted(bounced))

    def _put_topic_assignment(self, topic: str, a: TopicAssignment) -> None:
        for p, replicas in a.partitions.items():
            self.ctx.update_partition_full_replica_assignment(
                (topic, p), ReplicaAssignment.of(replicas, a.adding_replicas.get(p, ()),
                                                 a.removing_replicas.get(p, ())))

    def _process_topic_ids(self, assignments: dict[str, TopicAssignment]) -> dict[str, TopicAssignment]:
        """Give topics created by old tools (no topic_id) an id (IBP >= 2.8) and remember every id."""
        out = {}
        for t, a in assignments.items():
            if a.topic_id is None and self.config.uses_topic_id:
                a = TopicAssignment(new_uuid_base64(), a.partitions, a.adding_replicas, a.removing_replicas)
                self.zk.set_topic_assignment(t, a, self.ctx.epoch_zk_version)
                log.info("Assigned topic id %s to topic %s", a.topic_id, t)
            if a.topic_id is not None:
                self.ctx.topic_ids[t] = a.topic_id
            out[t] = a
        return out

    def _watch_topic(self, topic: str) -> None:
        if topic not in self._topic_watches:
            self._topic_watches[topic] = self.zk.watch_data(
                TopicZNode.path(topic), lambda: self.event_manager.put(ev.PartitionModifications(topic)))

    def _unwatch_topic(self, topic: str) -> None:
        w = self._topic_watches.pop(topic, None)
        if w is not None:
            w.cancel()

    def _watch_broker(self, broker_id: int) -> None:
        if broker_id not in self._broker_watches:
            self._broker_watches[broker_id] = self.zk.watch_data(
                BrokerIdZNode.path(broker_id), lambda: self.event_manager.put(ev.BrokerModifications(broker_id)))

    def _unwatch_broker(self, broker_id: int) -> None:
        w = self._broker_watches.pop(broker_id, None)
        if w is not None:
            w.cancel()

    def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        to_delete = set(self.zk.topics_marked_for_deletion())
        ctx = self.ctx
        with_offline = {t for t in ctx.all_topics
                        if any(not ctx.is_replica_online(r, tp) for tp, r in ctx.replicas_for_topic(t))}
        reassigning = {tp[0] for tp in ctx.partitions_being_reassigned}
        log.info("List of topics to be deleted: %s", sorted(to_delete))
        return to_delete, with_offline | reassigning

    # ------------------------------------------------------------------ requests to brokers
    def _send_request(self, broker_id: int, api_key: int, api_version: int, body: dict,
                      callback: Callable[[Any], None] | None) -> None:
        self.channel_manager.send_request(broker_id, api_key, api_version, body, callback)

    def _on_stop_replica_response(self, broker_id: int, response: Any, deleted: set[TopicPartition]) -> None:
        self.event_manager.put(ev.TopicDeletionStopReplicaResponseReceived(broker_id, response, deleted))

    def _send_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.batch.new_batch()
        try:
            self.batch.add_update_metadata(brokers, partitions)
            self.batch.send_requests(self.ctx.epoch)
        finally:
            self.batch.clear()

    # ------------------------------------------------------------------ brokers
    def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        current = self.zk.get_all_brokers_and_epochs()
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = sorted(set(current) - known)
        dead_ids = sorted(known - set(current))
        bounced_ids = sorted(b for b in set(current) & known if current[b][1] > ctx.live_broker_epochs[b])
        log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                 new_ids, dead_ids, bounced_ids, sorted(current))
        for b in bounced_ids + dead_ids:
            self.channel_manager.remove_broker(b)
        if new_ids:
            ctx.add_live_brokers(self._compatible_brokers({b: current[b] for b in new_ids}))
            for b in new_ids:
                if b in ctx.live_broker_epochs:
                    self._add_channel(b)
            self._on_broker_startup([b for b in new_ids if b in ctx.live_broker_epochs])
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            self._on_broker_failure(bounced_ids)
            ctx.add_live_brokers(self._compatible_brokers({b: current[b] for b in bounced_ids}))
            for b in bounced_ids:
                if b in ctx.live_broker_epochs:
                    self._add_channel(b)
            self._on_broker_startup([b for b in bounced_ids if b in ctx.live_broker_epochs])
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            self._on_broker_failure(dead_ids)

    def _on_broker_startup(self, new_brokers: list[int]) -> None:
        if not new_brokers:
            return
        ctx = self.ctx
        log.info("New broker startup callback for %s", new_brokers)
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        self._send_update_metadata(existing, [])
        self._send_update_metadata(new_brokers, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(set(new_brokers))
        self.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.partition_sm.trigger_online_partition_state_change()
        resumed = {tp: ctx.partition_full_replica_assignment(tp) for tp in sorted(ctx.partitions_being_reassigned)}
        self._on_partition_reassignment({tp: a for tp, a in resumed.items()
                                         if any(r in new_brokers for r in a.target_replicas)})
        deleting = {tp[0] for tp, _ in replicas if self.topic_deletion.is_topic_queued_for_deletion(tp[0])}
        if deleting:
            log.info("Some replicas for topics scheduled for deletion %s are on the newly restarted brokers %s. "
                     "Signaling restart of topic deletion for these topics", sorted(deleting), new_brokers)
            self.topic_deletion.resume_deletion_for_topics(deleting)
        for b in new_brokers:
            self._watch_broker(b)

    def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self.ctx
        log.info("Broker failure callback for %s", dead)
        for b in dead:
            ctx.replicas_on_offline_dirs.pop(b, None)
            ctx.shutting_down_broker_ids.discard(b)
        self._on_replicas_become_offline(ctx.replicas_on_brokers(set(dead)))
        for b in dead:
            self._unwatch_broker(b)

    def _on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        ctx = self.ctx
        for_deletion = [r for r in replicas if self.topic_deletion.is_topic_queued_for_deletion(r[0][0])]
        not_for_deletion = [r for r in replicas if r not in for_deletion]
        self.partition_sm.handle_state_changes(ctx.partitions_with_offline_leader(), PartitionState.OFFLINE)
        results = self.partition_sm.trigger_online_partition_state_change()
        self.replica_sm.handle_state_changes(not_for_deletion, ReplicaState.OFFLINE)
        if for_deletion:
            self.topic_deletion.fail_replica_deletion(for_deletion)
        if not not_for_deletion and all(isinstance(r, Exception) for r in results.values()):
            self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, [])

    def _process_broker_modification(self, broker_id: int) -> None:
        if not self.is_active:
            return
        found = self.zk.get_broker_and_epoch(broker_id)
        old = self.ctx.live_brokers.get(broker_id)
        if found is None or old is None:
            return
        new = found[0]
        if new.endpoints != old.endpoints or new.features != old.features:
            log.info("Updated broker metadata: %s -> %s", old, new)
            self.ctx.live_brokers[broker_id] = new
            self._add_channel(broker_id)  # a changed inter-broker address is used from now on
            self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, [])

    # ------------------------------------------------------------------ topics
    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        log.info("New partition creation callback for %s", [_tp_str(tp) for tp in partitions])
        replicas = self.ctx.replicas_for_partitions(partitions)
        self.partition_sm.handle_state_changes(partitions, PartitionState.NEW)
        self.replica_sm.handle_state_changes(replicas, ReplicaState.NEW)
        self.partition_sm.handle_state_changes(partitions, PartitionState.ONLINE, OfflineElection(False))
        self.replica_sm.handle_state_changes(self.ctx.replicas_for_partitions(partitions), ReplicaState.ONLINE)

    def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        topics = set(self.zk.get_all_topics())
        new_topics = topics - ctx.all_topics
        deleted = ctx.all_topics - topics
        ctx.all_topics = set(topics)
        for t in sorted(new_topics):
            self._watch_topic(t)
        added = self._process_topic_ids(self.zk.get_topic_assignments(new_topics))
        for t in sorted(deleted):
            ctx.remove_topic(t)
            self._unwatch_topic(t)
        new_partitions: list[TopicPartition] = []
        for t, a in sorted(added.items()):
            self._put_topic_assignment(t, a)
            new_partitions += [(t, p) for p in sorted(a.partitions)]
        log.info("New topics: %s, deleted topics: %s", sorted(new_topics), sorted(deleted))
        if new_partitions:
            self._on_new_partition_creation(new_partitions)

    def _process_partition_modifications(self, topic: str) -> None:
        if not self.is_active:
            return
        found = self.zk.get_topic_assignments([topic]).get(topic)
        if found is None:
            return
        ctx = self.ctx
        to_add = {p: r for p, r in found.partitions.items() if not ctx.partition_replica_assignment((topic, p))}
        if self.topic_deletion.is_topic_queued_for_deletion(topic):
            if to_add:
                log.warning("Skipping adding partitions %s for topic %s since it is currently being deleted",
                            sorted(to_add), topic)
                existing = {p: list(ctx.partition_full_replica_assignment((topic, p)).replicas)
                            for p in found.partitions if p not in to_add}
                try:
                    self.zk.set_topic_assignment(topic, TopicAssignment(ctx.topic_ids.get(topic), existing),
                                                 ctx.epoch_zk_version)
                except NoSuchTopicError:
                    pass
            return
        if to_add:
            log.info("New partitions to be added %s", sorted(to_add))
            for p, replicas in to_add.items():
                ctx.update_partition_full_replica_assignment((topic, p), ReplicaAssignment.of(replicas))
            self._on_new_partition_creation([(topic, p) for p in sorted(to_add)])

    def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        topics = set(self.zk.topics_marked_for_deletion())
        missing = topics - ctx.all_topics
        if missing:
            log.warning("Ignoring request to delete non-existing topics %s", sorted(missing))
            self.zk.delete_topic_deletions(sorted(missing), ctx.epoch_zk_version)
        topics -= missing
        if self.config.delete_topic_enable:
            if topics:
                log.info("Starting topic deletion for topics %s", sorted(topics))
                reassigning = {tp[0] for tp in ctx.partitions_being_reassigned}
                # queue first so the halt sticks (Kafka marks before queueing, which halts nothing new)
                ctx.topics_to_be_deleted |= topics
                self.topic_deletion.mark_topic_ineligible_for_deletion(topics & reassigning,
                                                                       "topic reassignment in progress")
                self.topic_deletion.enqueue_topics_for_deletion(topics)
        elif topics:
            log.info("Removing %s since delete topic is disabled", sorted(topics))
            self.zk.delete_topic_deletions(sorted(topics), ctx.epoch_zk_version)

    def _delete_topic_znodes(self, topic: str) -> None:
        self.zk.delete_topic_znodes_guarded(topic, self.ctx.epoch_zk_version)

    def _unclean_enabled_for(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable override, else the broker default."""
        try:
            v = self.zk.get_topic_config(topic).get("unclean.leader.election.enable")
        except Exception:
            log.exception("Reading the config of topic %s failed", topic)
            return False
        if v is None:
            return self._unclean_default
        return str(v).strip().lower() == "true"

    def _process_unclean_enable(self, topic: str | None) -> None:
        if not self.is_active:
            return
        self.partition_sm.trigger_online_partition_state_change(topic)

    # ------------------------------------------------------------------ notifications (legacy / log dirs)
    def _process_isr_change_notification(self) -> None:
        if not self.is_active:
            return
        names = self.zk.get_isr_change_notifications()
        try:
            partitions = sorted(tp for tp in self.zk.get_partitions_from_isr_change_notifications(names)
                                if self.ctx.partition_replica_assignment(tp))
            if partitions:
                self.ctx.leadership.update(self.zk.get_partition_states(partitions))
                self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, partitions)
                self.reassignment.maybe_complete(partitions)
        finally:
            self.zk.delete_isr_change_notifications(names, self.ctx.epoch_zk_version)

    def _process_log_dir_event_notification(self) -> None:
        if not self.is_active:
            return
        names = self.zk.get_log_dir_event_notifications()
        try:
            brokers = self.zk.get_broker_ids_from_log_dir_events(names)
            log.info("Handling log directory failure for brokers %s", brokers)
            self.replica_sm.handle_state_changes(self.ctx.replicas_on_brokers(set(brokers)), ReplicaState.ONLINE)
        finally:
            self.zk.delete_log_dir_event_notifications(names, self.ctx.epoch_zk_version)

    def _process_leader_and_isr_response(self, e: ev.LeaderAndIsrResponseReceived) -> None:
        if not self.is_active:
            return
        resp = e.response
        error = int(_f(resp, "error_code", 0) or 0)
        if error != ErrorCode.NONE:
            log.error("Received error %s in LeaderAndIsr response %s from broker %d", error, resp, e.broker_id)
            return
        errors: dict[TopicPartition, int] = {}
        for t in _f(resp, "topics", None) or []:
            name = self.ctx.topic_name(uuid_to_topic_id(_f(t, "topic_id")))
            if name is None:
                continue
            for pe in _f(t, "partition_errors", []) or []:
                errors[(name, int(_f(pe, "partition_index")))] = int(_f(pe, "error_code"))
        for pe in _f(resp, "partition_errors", None) or []:
            errors[(_f(pe, "topic_name"), int(_f(pe, "partition_index")))] = int(_f(pe, "error_code"))
        offline = {tp for tp, code in errors.items() if code == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, code in errors.items() if code == ErrorCode.NONE}
        previous = set(self.ctx.replicas_on_offline_dirs.get(e.broker_id, set()))
        current = (previous - online) | offline
        self.ctx.replicas_on_offline_dirs[e.broker_id] = current
        newly = current - previous
        if newly:
            log.info("Mark replicas %s on broker %d as offline", sorted(newly), e.broker_id)
            self._on_replicas_become_offline([(tp, e.broker_id) for tp in sorted(newly)])

    def _process_update_metadata_response(self, e: ev.UpdateMetadataResponseReceived) -> None:
        error = int(_f(e.response, "error_code", 0) or 0)
        if self.is_active and error != ErrorCode.NONE:
            log.error("Received error %s in UpdateMetadata response from broker %d", error, e.broker_id)

    def _process_topic_deletion_stop_replica_response(self, e: ev.TopicDeletionStopReplicaResponseReceived) -> None:
        if not self.is_active:
            return
        request_error = int(_f(e.response, "error_code", 0) or 0)
        errors: dict[TopicPartition, int] = {}
        for pe in _f(e.response, "partition_errors", []) or []:
            tp = (_f(pe, "topic_name"), int(_f(pe, "partition_index")))
            # (a replica a reassignment removed earlier is no longer assigned: its answer is not for us)
            if tp[0] in self.ctx.topics_with_deletion_started and tp in e.deleted_partitions \
                    and e.broker_id in self.ctx.partition_replica_assignment(tp):
                errors[tp] = int(_f(pe, "error_code"))
        if not errors:
            return
        in_error = set(errors) if request_error != ErrorCode.NONE else {tp for tp, c in errors.items() if c}
        self.topic_deletion.fail_replica_deletion([(tp, e.broker_id) for tp in sorted(in_error)])
        if len(in_error) != len(errors):
            self.topic_deletion.complete_replica_deletion([(tp, e.broker_id) for tp in sorted(set(errors) - in_error)])

    # ------------------------------------------------------------------ leader elections
    def _on_replica_election(self, partitions: Iterable[TopicPartition], election_type: int,
                             trigger: str) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        partitions = sorted(set(partitions))
        strategy: ElectionStrategy = (PREFERRED if election_type == ev.PREFERRED
                                      else OfflineElection(allow_unclean=trigger == ev.ADMIN_CLIENT))
        try:
            results = self.partition_sm.handle_state_changes(partitions, PartitionState.ONLINE, strategy)
            if trigger != ev.ADMIN_CLIENT:
                for tp, r in results.items():
                    if isinstance(r, Exception):
                        log.error("Error completing replica leader election (%s) for partition %s: %s",
                                  election_type, _tp_str(tp), r)
            return results
        finally:
            if trigger != ev.ADMIN_CLIENT:
                self._remove_partitions_from_preferred_replica_election(partitions, trigger == ev.AUTO_TRIGGERED)

    def _remove_partitions_from_preferred_replica_election(self, partitions: list[TopicPartition],
                                                           auto: bool) -> None:
        for tp in partitions:
            s = self.ctx.leadership.get(tp)
            replicas = self.ctx.partition_replica_assignment(tp)
            if s is not None and replicas and s.leader == replicas[0]:
                log.info("Partition %s completed preferred replica leader election. New leader is %d",
                         _tp_str(tp), replicas[0])
            elif s is not None and replicas:
                log.warning("Partition %s failed to complete preferred replica leader election to %d. Leader is "
                            "still %d", _tp_str(tp), replicas[0], s.leader)
        if not auto:
            self.zk.delete_preferred_replica_election(self.ctx.epoch_zk_version)

    def _fetch_pending_preferred_replica_elections(self) -> list[TopicPartition]:
        requested = self.zk.get_preferred_replica_election() or set()
        pending = []
        for tp in sorted(requested):
            replicas = self.ctx.partition_replica_assignment(tp)
            s = self.ctx.leadership.get(tp)
            if not replicas or (s is not None and s.leader == replicas[0]):
                continue
            if self.topic_deletion.is_topic_queued_for_deletion(tp[0]):
                continue
            pending.append(tp)
        return pending

    def _process_replica_leader_election(self, e: ev.ReplicaLeaderElection) -> None:
        callback = e.callback or (lambda _results: None)
        if not self.is_active:
            callback({tp: (int(ErrorCode.NOT_CONTROLLER), None, None) for tp in e.partitions or ()})
            return
        if e.partitions is None and e.trigger == ev.ZK_TRIGGERED:
            requested = self.zk.get_preferred_replica_election()
            if requested is None:
                return  # the znode is gone (we deleted it after the last election)
            partitions = set(requested)
        elif e.partitions is None:
            partitions = set(self.ctx.all_partitions())
        else:
            partitions = set(e.partitions)
        ctx = self.ctx
        known = {tp for tp in partitions if ctx.partition_replica_assignment(tp)}
        unknown = partitions - known
        being_deleted = {tp for tp in known if self.topic_deletion.is_topic_queued_for_deletion(tp[0])}
        live = known - being_deleted
        electable: set[TopicPartition] = set()
        already_valid: set[TopicPartition] = set()
        for tp in live:
            s = ctx.leadership.get(tp)
            leader = s.leader if s is not None else NO_LEADER
            if e.election_type == ev.PREFERRED:
                needed = leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = leader == NO_LEADER or not ctx.is_live_broker(leader)
            (electable if needed else already_valid).add(tp)
        results: dict[TopicPartition, tuple[int, str | None, int | None]] = {}
        for tp, r in self._on_replica_election(electable, e.election_type, e.trigger).items():
            if isinstance(r, LeaderAndIsr):
                results[tp] = (int(ErrorCode.NONE), None, r.leader)
            elif isinstance(r, StateChangeFailed):
                code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if e.election_type == ev.PREFERRED
                        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                results[tp] = (int(code), str(r), None)
            else:
                results[tp] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), str(r), None)
        for tp in already_valid:
            results[tp] = (int(ErrorCode.ELECTION_NOT_NEEDED), None, None)
        for tp in being_deleted:
            results[tp] = (int(ErrorCode.INVALID_TOPIC_EXCEPTION), "The topic is being deleted", None)
        for tp in unknown:
            results[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.", None)
        callback(results)

    @staticmethod
    def _elect_leaders_response(results: dict[TopicPartition, tuple[int, str | None, int | None]],
                                all_partitions: bool) -> dict:
        by_topic: dict[str, list[dict]] = {}
        for (t, p), (code, msg, _leader) in sorted(results.items()):
            if all_partitions and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            by_topic.setdefault(t, []).append({"partition_id": p, "error_code": code, "error_message": msg})
        top = 0
        if all_partitions and results and all(c == ErrorCode.NOT_CONTROLLER for c, _, _ in results.values()):
            top = int(ErrorCode.NOT_CONTROLLER)
        return {"throttle_time_ms": 0, "error_code": top,
                "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}

    def _process_auto_preferred_election(self) -> None:
        if not self.is_active:
            return
        try:
            self._check_and_trigger_auto_leader_rebalance()
        finally:
            self.event_manager.schedule(AUTO_REBALANCE_TIMER,
                                        self.config.leader_imbalance_check_interval_seconds * 1000,
                                        ev.AutoPreferredReplicaLeaderElection)

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        ctx = self.ctx
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            if self.topic_deletion.is_topic_queued_for_deletion(tp[0]):
                continue
            replicas = ctx.partition_replica_assignment(tp)
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        for broker, tps in sorted(by_preferred.items()):
            not_preferred = [tp for tp in tps if tp in ctx.leadership and ctx.leadership[tp].leader != broker]
            ratio = len(not_preferred) / len(tps)
            if ratio > self.config.leader_imbalance_per_broker_percentage / 100.0:
                candidates = [tp for tp in not_preferred if tp[0] in ctx.all_topics
                              and not self.topic_deletion.is_topic_queued_for_deletion(tp[0])
                              and self._can_preferred_replica_be_leader(tp)]
                if candidates:
                    log.info("Leader imbalance ratio for broker %d is %.3f: moving leadership of %s back",
                             broker, ratio, [_tp_str(tp) for tp in candidates])
                    self._on_replica_election(candidates, ev.PREFERRED, ev.AUTO_TRIGGERED)

    def _can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        replicas = self.ctx.partition_replica_assignment(tp)
        live = {r for r in replicas if self.ctx.is_replica_online(r, tp)}
        return preferred_replica_leader(replicas, self.ctx.leadership[tp].isr, live) is not None

    # ------------------------------------------------------------------ controlled shutdown
    def _process_controlled_shutdown(self, e: ev.ControlledShutdown) -> None:
        try:
            remaining = self._do_controlled_shutdown(e.broker_id, e.broker_epoch)
        except _ApiError as err:
            e.callback(int(err.code), [])
            return
        except ControllerMovedError:
            e.callback(int(ErrorCode.NOT_CONTROLLER), [])
            raise
        e.callback(int(ErrorCode.NONE), remaining)

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.ctx
        if not self.is_active:
            raise _ApiError(ErrorCode.NOT_CONTROLLER, "Controller moved to another broker")
        if broker_id not in ctx.live_broker_epochs:
            raise _ApiError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
        if broker_epoch != -1 and broker_epoch < ctx.live_broker_epochs[broker_id]:
            log.info("Received controlled shutdown request from an old broker epoch %d for broker %d. Current "
                     "broker epoch is %d.", broker_epoch, broker_id, ctx.live_broker_epochs[broker_id])
            raise _ApiError(ErrorCode.STALE_BROKER_EPOCH, "stale broker epoch")
        log.info("Shutting down broker %d", broker_id)
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act = [tp for tp in ctx.partitions_on_broker(broker_id)
                  if len(ctx.partition_replica_assignment(tp)) > 1 and tp in ctx.leadership
                  and not self.topic_deletion.is_topic_queued_for_deletion(tp[0])]
        led = [tp for tp in to_act if ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in to_act if ctx.leadership[tp].leader != broker_id]
        self.partition_sm.handle_state_changes(led, PartitionState.ONLINE, CONTROLLED_SHUTDOWN)
        self.batch.new_batch()
        try:
            for tp in followed:
                self.batch.add_stop_replica([broker_id], tp, delete=False)
            self.batch.send_requests(ctx.epoch)
        finally:
            self.batch.clear()
        self.replica_sm.handle_state_changes([(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
        return ctx.partition_leaders_on_broker(broker_id)

    # ------------------------------------------------------------------ AlterPartition
    def _process_alter_partition(self, e: ev.AlterPartitionReceived) -> None:
        try:
            response, accepted = self._try_alter_partition(e.request, e.api_version)
        except (ControllerMovedError, *ZOOKEEPER_GONE):
            e.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "topics": []})
            raise  # process() logs it in one line (and resigns for ControllerMovedError)
        except Exception:
            log.exception("Error when processing AlterPartition: %s", e.request)
            e.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "topics": []})
            return
        e.callback(response)
        self.reassignment.maybe_complete(accepted)

    def _try_alter_partition(self, request: Any, version: int) -> tuple[dict, list[TopicPartition]]:
        ctx = self.ctx

        def top_error(code: int) -> tuple[dict, list[TopicPartition]]:
            return {"throttle_time_ms": 0, "error_code": int(code), "topics": []}, []

        if not self.is_active:
            return top_error(ErrorCode.NOT_CONTROLLER)
        broker_id = int(_f(request, "broker_id"))
        broker_epoch = int(_f(request, "broker_epoch", -1))
        known_epoch = ctx.live_broker_epochs.get(broker_id)
        if known_epoch is None or known_epoch != broker_epoch:
            log.info("Ignoring AlterPartition from broker %d with epoch %d (known epoch %s)", broker_id,
                     broker_epoch, known_epoch)
            return top_error(ErrorCode.STALE_BROKER_EPOCH)
        use_ids = version > 1
        responses: dict[str, list[dict]] = {}
        unknown_topic_ids: list[dict] = []
        to_alter: dict[TopicPartition, tuple[LeaderAndIsr, dict[int, int]]] = {}
        for t in _f(request, "topics", []) or []:
            if use_ids:
                tid = _f(t, "topic_id")
                name = ctx.topic_name(uuid_to_topic_id(tid)) if tid is not None else None
                if name is None:
                    unknown_topic_ids.append({"topic_name": "", "topic_id": tid, "partitions": [
                        {"partition_index": int(_f(p, "partition_index")),
                         "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID)} for p in _f(t, "partitions", []) or []]})
                    continue
            else:
                name = _f(t, "topic_name")
            for p in _f(t, "partitions", []) or []:
                if version >= 3:
                    members = [(int(_f(b, "broker_id")), int(_f(b, "broker_epoch", -1)))
                               for b in _f(p, "new_isr_with_epochs", []) or []]
                else:
                    members = [(int(b), -1) for b in _f(p, "new_isr", []) or []]
                state = LeaderAndIsr(broker_id, int(_f(p, "leader_epoch")), [b for b, _ in members], ctx.epoch,
                                     int(_f(p, "leader_recovery_state", 0) or 0), int(_f(p, "partition_epoch")))
                to_alter[(name, int(_f(p, "partition_index")))] = (state, dict(members))
        results: dict[TopicPartition, LeaderAndIsr | int] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, (new, epochs) in to_alter.items():
            code = validate_alter_partition(ctx, tp, new, epochs, version)
            if isinstance(code, LeaderAndIsr):
                results[tp] = code  # already in the requested state
            elif code != ErrorCode.NONE:
                results[tp] = int(code)
            else:
                adjusted[tp] = new
        if adjusted:
            written, bad_version = self.zk.update_leader_and_isr(adjusted, ctx.epoch, ctx.epoch_zk_version)
            for tp, r in written.items():
                if isinstance(r, LeaderAndIsr):
                    ctx.leadership[tp] = r
                    results[tp] = r
                else:
                    log.error("Failed to update ISR for partition %s: %r", _tp_str(tp), r)
                    results[tp] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            for tp in bad_version:
                log.info("Failed to update ISR to %s for partition %s, bad ZK version.", adjusted[tp], _tp_str(tp))
                results[tp] = int(ErrorCode.INVALID_UPDATE_VERSION)
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, list(to_alter))
        for (t, p), outcome in sorted(results.items()):
            if isinstance(outcome, LeaderAndIsr):
                entry = {"partition_index": p, "error_code": 0, "leader_id": outcome.leader,
                         "leader_epoch": outcome.leader_epoch, "isr": list(outcome.isr),
                         "leader_recovery_state": outcome.leader_recovery_state, "partition_epoch": outcome.zk_version}
            else:
                entry = {"partition_index": p, "error_code": outcome, "leader_id": 0, "leader_epoch": 0, "isr": [],
                         "leader_recovery_state": 0, "partition_epoch": 0}
            responses.setdefault(t, []).append(entry)
        topics = [{"topic_name": t, "topic_id": topic_id_to_uuid(ctx.topic_ids.get(t)), "partitions": ps}
                  for t, ps in responses.items()] + unknown_topic_ids
        accepted = [tp for tp, r in results.items() if isinstance(r, LeaderAndIsr)]
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}, accepted

    # ------------------------------------------------------------------ AllocateProducerIds
    def _process_allocate_producer_ids(self, e: ev.AllocateProducerIds) -> None:
        def error(code: int) -> None:
            e.callback({"throttle_time_ms": 0, "error_code": int(code), "producer_id_start": 0,
                        "producer_id_len": 0})

        if not self.is_active:
            return error(ErrorCode.NOT_CONTROLLER)
        known = self.ctx.live_broker_epochs.get(e.broker_id)
        if known is None:
            return error(ErrorCode.BROKER_ID_NOT_REGISTERED)
        if known != e.broker_epoch:
            return error(ErrorCode.STALE_BROKER_EPOCH)
        try:
            start, end = self.zk.allocate_producer_id_block(e.broker_id)
        except (ControllerMovedError, *ZOOKEEPER_GONE):
            raise  # process() answers NOT_CONTROLLER and logs one line
        except Exception:
            log.exception("Allocating a producer id block for broker %d failed", e.broker_id)
            return error(ErrorCode.UNKNOWN_SERVER_ERROR)
        e.callback({"throttle_time_ms": 0, "error_code": 0, "producer_id_start": start,
                    "producer_id_len": end - start + 1})

    # ------------------------------------------------------------------ reassignment (KIP-455)
    def _process_api_partition_reassignment(self, e: ev.ApiPartitionReassignment) -> None:
        if not self.is_active:
            e.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                        "responses": []})
            return
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in e.reassignments.items():
            err = self._validate_replicas(tp, target) if target is not None else None
            if err is not None:
                results[tp] = err
                continue
            built = self._maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), None)
            else:
                to_reassign[tp] = built
        try:
            self._maybe_remove_from_zk_reassignment(lambda tp, _r: tp in to_reassign)
            results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        except ControllerMovedError:
            e.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                        "responses": []})
            raise
        by_topic: dict[str, list[dict]] = {}
        for (t, p), (code, msg) in sorted(results.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "error_code": code, "error_message": msg})
        e.callback({"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})

    def _validate_replicas(self, tp: TopicPartition, replicas: list[int]) -> tuple[int, str] | None:
        code = int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        if not replicas:
            return code, "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return code, f"Duplicate replica ids in partition reassignment replica list: {replicas}"
        if any(r < 0 for r in replicas):
            return code, f"Invalid broker id in replica list: {replicas}"
        new = self.ctx.partition_full_replica_assignment(tp).reassign_to(replicas)
        if not set(new.adding) <= self.ctx.live_broker_ids:
            return code, (f"Replica assignment has brokers that are not alive. Replica list: {list(new.adding)}, "
                          f"live broker list: {sorted(self.ctx.live_broker_ids)}")
        return None

    def _maybe_build_reassignment(self, tp: TopicPartition, target: list[int] | None) -> ReplicaAssignment | None:
        current = self.ctx.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(target if target is not None else current.origin_replicas)
        return None if target is None else current.reassign_to(target)

    def _maybe_trigger_partition_reassignment(self, reassignments: dict[TopicPartition, ReplicaAssignment]
                                              ) -> dict[TopicPartition, tuple[int, str | None]]:
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        valid: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, a in reassignments.items():
            if self.topic_deletion.is_topic_queued_for_deletion(tp[0]):
                log.info("Skipping reassignment of %s since the topic is currently being deleted", _tp_str(tp))
                out[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.")
            elif not self.ctx.partition_replica_assignment(tp):
                out[tp] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.")
            else:
                valid[tp] = a
        failed = self._on_partition_reassignment(valid)
        for tp in valid:
            exc = failed.get(tp)
            out[tp] = (int(ErrorCode.NONE), None) if exc is None else (int(ErrorCode.UNKNOWN_SERVER_ERROR),
                                                                         str(exc) or None)
        return out

    def _on_partition_reassignment(self, reassignments: dict[TopicPartition, ReplicaAssignment]
                                   ) -> dict[TopicPartition, Exception]:
        """Kafka's onPartitionReassignment over many partitions at once (see reassignment.py); {tp: error} of the
        partitions whose reassignment step failed (logged)."""
        try:
            failed = self.reassignment.on_partition_reassignment(reassignments)
        except ControllerMovedError:
            raise
        except Exception as exc:
            log.exception("Error completing reassignment of partitions %s", [_tp_str(tp) for tp in reassignments])
            return {tp: exc for tp in reassignments}
        for tp, error in sorted(failed.items()):
            log.error("Error completing reassignment of partition %s: %r", _tp_str(tp), error)
        return failed

    def _watch_reassignment_isr(self, tp: TopicPartition) -> None:
        """IBP < 2.7: the leader writes the ISR itself; watch the state znode to notice the new replicas join."""
        if tp not in self._reassign_isr_watches:
            self._reassign_isr_watches[tp] = self.zk.watch_data(
                TopicPartitionStateZNode.path(*tp),
                lambda: self.event_manager.put(ev.PartitionReassignmentIsrChange(tp)))

    def _unwatch_reassignment_isr(self, tp: TopicPartition) -> None:
        w = self._reassign_isr_watches.pop(tp, None)
        if w is not None:
            w.cancel()

    def _maybe_remove_from_zk_reassignment(self, should_remove: Callable[[TopicPartition, list[int]], bool]) -> None:
        current = self.zk.get_partition_reassignment()
        if current is None:
            return
        keep = {tp: r for tp, r in current.items() if not should_remove(tp, r)}
        if len(keep) == len(current) and current:
            return
        log.info("Removing partitions %s from the list of reassigned partitions in zookeeper",
                 sorted(set(current) - set(keep)))
        if not keep:
            self.zk.delete_partition_reassignment(self.ctx.epoch_zk_version)
        else:
            self.zk.set_or_create_partition_reassignment(keep, self.ctx.epoch_zk_version)

    def _process_zk_partition_reassignment(self) -> set[TopicPartition]:
        if not self.is_active:
            return set()
        requested = self.zk.get_partition_reassignment()
        if requested is None:
            return set()
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            built = self._maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), None)
            else:
                to_reassign[tp] = built
        results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp for tp, (code, _) in results.items() if code != ErrorCode.NONE}
        if failed:
            log.warning("Failed reassignment through zk with the following errors: %s", results)
            self._maybe_remove_from_zk_reassignment(lambda tp, _r: tp in failed)
        elif not requested:
            self.zk.delete_partition_reassignment(self.ctx.epoch_zk_version)
        return {tp for tp in results if tp not in failed}

    def _initialize_partition_reassignments(self) -> None:
        resumed = self._process_zk_partition_reassignment()
        self._on_partition_reassignment({tp: self.ctx.partition_full_replica_assignment(tp)
                                         for tp in sorted(self.ctx.partitions_being_reassigned) if tp not in resumed})

    def _process_partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if self.is_active and tp in self.ctx.partitions_being_reassigned:
            # at IBP < 2.7 the leader wrote the ISR itself: refresh our copy first
            s = self.zk.get_partition_states([tp]).get(tp)
            if s is not None:
                self.ctx.leadership[tp] = s
            self.reassignment.maybe_complete([tp])

    def _process_list_partition_reassignments(self, e: ev.ListPartitionReassignments) -> None:
        if not self.is_active:
            e.callback({"throttle_time_ms": 0, "error_code": int(ErrorCode.NOT_CONTROLLER), "error_message": None,
                        "topics": []})
            return
        tps = e.partitions if e.partitions is not None else set(self.ctx.partitions_being_reassigned)
        by_topic: dict[str, list[dict]] = {}
        for tp in sorted(tps):
            a = self.ctx.partition_full_replica_assignment(tp)
            if a.is_being_reassigned:
                by_topic.setdefault(tp[0], []).append({
                    "partition_index": tp[1], "replicas": list(a.replicas), "adding_replicas": list(a.adding),
                    "removing_replicas": list(a.removing)})
        e.callback({"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})

    # ------------------------------------------------------------------ UpdateFeatures
    def _process_update_features(self, e: ev.UpdateFeatures) -> None:
        def top(code: int, msg: str | None) -> None:
            e.callback({"throttle_time_ms": 0, "error_code": int(code), "error_message": msg, "results": []})

        if not self.is_active:
            return top(ErrorCode.NOT_CONTROLLER, None)
        if not self.config.is_feature_versioning_supported:
            return top(ErrorCode.INVALID_REQUEST, "Feature versioning system is disabled.")
        existing = dict(self._finalized_features)
        target = dict(existing)
        errors: dict[str, tuple[int, str | None]] = {}
        brokers = [supported_ranges(info.features) for info in self.ctx.live_brokers.values()]
        for u in _f(e.request, "feature_updates", []) or []:
            feature = str(_f(u, "feature", ""))
            level = int(_f(u, "max_version_level", 0))
            if e.api_version == 0:
                upgrade_type = SAFE_DOWNGRADE if _f(u, "allow_downgrade", False) else UPGRADE
            else:
                upgrade_type = int(_f(u, "upgrade_type", UPGRADE))
            code, msg, new_level = validate_feature_update(feature, level, upgrade_type, existing.get(feature),
                                                           self.config.supported_features, brokers)
            errors[feature] = (int(code), msg)
            if code == ErrorCode.NONE:
                if new_level is None:
                    target.pop(feature, None)
                else:
                    target[feature] = new_level
        validate_only = bool(_f(e.request, "validate_only", False)) and e.api_version >= 1
        if target != existing and not validate_only:
            try:
                self.zk.set_feature_znode(FeatureZNode.encode_levels(target, FeatureZNode.ENABLED,
                                                                     self.config.feature_znode_version),
                                          self.ctx.epoch_zk_version)
                self._finalized_features = target
            except ControllerMovedError:
                top(ErrorCode.NOT_CONTROLLER, None)
                raise
            except Exception as exc:
                log.warning("Processing of feature updates failed: %r", exc)
                errors = {f: ((int(ErrorCode.FEATURE_UPDATE_FAILED), None) if c == ErrorCode.NONE else (c, m))
                          for f, (c, m) in errors.items()}
        e.callback({"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "results": [{"feature": f, "error_code": c, "error_message": m} for f, (c, m) in errors.items()]})

    @property
    def finalized_features(self) -> dict[str, int]:
        return dict(self._finalized_features)


class _ApiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
