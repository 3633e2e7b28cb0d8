"""KafkaZkClient: Kafka's ZooKeeper registry operations over kazoo.

Every method blocks and is safe to call from any thread (kazoo's client is thread-safe; registration state is
guarded by a lock). Callbacks registered with watch_*() and on_new_session() run on kazoo's event thread or a
helper thread: keep them short and hand work to the caller's own loop.

Session handling: kazoo keeps reconnecting after a session expires (state LOST) and opens a new session; when that
happens this client re-creates /brokers/ids/<id> and then calls the on_new_session callbacks (controller
election and the like), so the broker survives an expiry without a restart. kazoo's watch recipes re-arm
themselves on the new session.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss, NodeExistsError, NoNodeError,
                              NotEmptyError, RolledBackError, RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState
from kazoo.retry import KazooRetry

from broker.config.kafka_config import Endpoint
from broker.zk.errors import (BrokerIdInUseError, ControllerMovedError, NoSuchTopicError, TopicExistsError,
                              ZkClientClosedError, ZkUnavailableError)
from broker.zk.handler import PollingHandler
from broker.zk.paths import (
    PERSISTENT_PATHS, BrokerIdsZNode, BrokerIdZNode, BrokerInfo, BrokerSequenceIdZNode, ClusterIdZNode,
    ConfigEntityChangeNotificationZNode, ConfigEntityZNode, ControllerEpochZNode, ControllerZNode, DeleteTopicsZNode,
    FeatureZNode, IsrChangeNotificationZNode, LeaderAndIsr, LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode, ProducerIdBlockZNode, ReassignPartitionsZNode, TopicAssignment, TopicConfigZNode,
    TopicPartitionStateZNode, TopicPartitionsZNode, TopicPartitionZNode, TopicZNode, TopicsZNode, new_uuid_base64,
)
from broker.zk.paths import DelegationTokenChangeNotificationZNode, DelegationTokenInfoZNode, DelegationTokensZNode
from broker.security.token_cache import TokenInformation

log = logging.getLogger(__name__)

#: Extra wait beyond zookeeper.session.timeout.ms for a stale /brokers/ids/<id> to expire.
STALE_REGISTRATION_MARGIN_MS = 2000


def split_connect(connect: str) -> tuple[str, str | None]:
    """'h1:2181,h2:2181/kafka' -> ('h1:2181,h2:2181', '/kafka'); no chroot -> None."""
    if "/" not in connect:
        return connect, None
    hosts, chroot = connect.split("/", 1)
    chroot = "/" + chroot.strip("/")
    return hosts, (None if chroot == "/" else chroot)


def _delete_op(path: str, tx: Any) -> None:
    """A guarded multi-op's one delete (a builder for _guarded)."""
    tx.delete(path)


class KafkaZkClient:
    """Kafka's znode operations on one ZooKeeper session (see module docstring)."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 stale_registration_wait_ms: int | None = None, kazoo_client: Any | None = None,
                 max_in_flight_requests: int = 10) -> None:
        """`max_in_flight_requests` is Kafka's zookeeper.max.in.flight.requests: how many pipelined requests
        (the controller's bulk reads and guarded writes) may be unanswered at once on this session."""
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        self.stale_registration_wait_ms = (stale_registration_wait_ms if stale_registration_wait_ms is not None
                                           else session_timeout_ms + STALE_REGISTRATION_MARGIN_MS)
        # kazoo_client: tests inject an in-memory fake with kazoo's interface (no ZooKeeper needed).
        # Reconnect attempts at most ~1 s apart, as ZooKeeper's own client does: kazoo's default backoff grows to
        # an hour, so a broker cut off for a while would reconnect long after ZooKeeper is back (or let its
        # session expire although ZooKeeper came back within the session timeout).
        self._zk = (kazoo_client if kazoo_client is not None
                    else KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000.0, handler=PollingHandler(),
                                     connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)))
        if max_in_flight_requests < 1:
            raise ValueError("zookeeper.max.in.flight.requests must be at least 1")
        self.max_in_flight_requests = max_in_flight_requests
        #: one permit per unanswered pipelined request, shared by every thread (Kafka's ZooKeeperClient semaphore)
        self._in_flight = threading.BoundedSemaphore(max_in_flight_requests)
        self._lock = threading.RLock()
        self._broker_epoch = -1
        self._registration: BrokerInfo | None = None
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._session_lost_callbacks: list[Callable[[], None]] = []
        self._session_lost = False
        self._closed = False
        self._closing = threading.Event()
        self._config_watch_last_seq: dict[int, int] = {}
        #: How session-recovery work leaves kazoo's thread; tests substitute a synchronous call.
        self.run_in_background: Callable[[Callable[[], None]], None] = (
            lambda fn: threading.Thread(target=fn, name="zk-new-session", daemon=True).start())

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Connect, create the chroot and Kafka's persistent paths. Raises ZkUnavailableError on timeout."""
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self._zk.stop()
            self._zk.close()
            raise ZkUnavailableError(
                f"Timed out waiting for connection while in state: CONNECTING to ZooKeeper at {self.connect} "
                f"(zookeeper.connect) after {self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms); is "
                f"ZooKeeper running?"
            ) from None
        if self.chroot:
            self._zk.ensure_path(self.chroot)
            self._zk.chroot = self.chroot  # every later path is relative to the chroot
        for path in PERSISTENT_PATHS:
            self._zk.ensure_path(path)
        self._zk.add_listener(self._on_state)
        log.info("Connected to ZooKeeper at %s (session 0x%x)", self.connect, self.session_id)

    def close(self) -> None:
        """Close the session (ephemeral znodes vanish at once)."""
        with self._lock:
            self._closed = True
        self._closing.set()  # wakes a registration waiting for a stale node
        try:
            self._zk.stop()
        finally:
            self._zk.close()

    @property
    def session_id(self) -> int:
        cid = self._zk.client_id
        return int(cid[0]) if cid else 0

    @property
    def connected(self) -> bool:
        """Whether the session is connected to a ZooKeeper server now (False while kazoo reconnects or after
        close); a request made while it is False waits until the connection is back."""
        return bool(getattr(self._zk, "connected", True)) and not self._closed

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client (tests and tools only)."""
        return self._zk

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on a helper thread) after a session expiry has been replaced by a new session."""
        self._new_session_callbacks.append(callback)

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on kazoo's thread: it must not block) when the session expires; ephemeral znodes
        such as /controller are gone from then on (the controller resigns at once, as Kafka's Expire event)."""
        self._session_lost_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's thread: must not block, so real work moves to a helper thread.
        if self._closed:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired; waiting for a new session")
            self._session_lost = True
            for cb in list(self._session_lost_callbacks):
                try:
                    cb()
                except Exception:
                    log.exception("on_session_lost callback failed")
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            self.run_in_background(self._after_new_session)

    def _after_new_session(self) -> None:
        log.info("New ZooKeeper session 0x%x established", self.session_id)
        with self._lock:
            info = self._registration
        if info is not None:
            try:
                epoch = self._register(info)
                with self._lock:
                    self._broker_epoch = epoch
            except Exception:
                log.exception("Re-registering broker %d after session expiry failed", info.broker_id)
        for cb in list(self._new_session_callbacks):
            try:
                cb()
            except Exception:
                log.exception("on_new_session callback failed")

    # ------------------------------------------------------------------ cluster id and brokers
    def get_or_create_cluster_id(self) -> str:
        """Read /cluster/id, creating it with a new random id if absent (first broker wins)."""
        try:
            data, _ = self._zk.get(ClusterIdZNode.path)
            return ClusterIdZNode.decode(data)
        except NoNodeError:
            pass
        cluster_id = new_uuid_base64()
        try:
            self._zk.create(ClusterIdZNode.path, ClusterIdZNode.encode(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:
            data, _ = self._zk.get(ClusterIdZNode.path)
            return ClusterIdZNode.decode(data)

    def generate_broker_id(self, reserved_broker_max_id: int = 1000) -> int:
        """Kafka's broker.id generation: bump /brokers/seqid's version and add reserved.broker.max.id."""
        stat = self._zk.set(BrokerSequenceIdZNode.path, b"")
        return int(stat.version) + reserved_broker_max_id

    def register_broker(self, broker_id: int, endpoints: list[Endpoint], rack: str | None = None,
                        features: dict[str, Any] | None = None, jmx_port: int = -1) -> int:
        """Create ephemeral /brokers/ids/<id>; return its czxid (Kafka's broker epoch).

        A node left by a crashed predecessor (an older session) is waited for, up to stale_registration_wait_ms;
        if it is still there the owner is alive and BrokerIdInUseError is raised.
        """
        info = BrokerInfo(broker_id, list(endpoints), rack, dict(features or {}), jmx_port)
        czxid = self._register(info)
        with self._lock:
            self._registration = info
            self._broker_epoch = czxid
        return czxid

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch: the czxid of its current registration (-1 before it registers; KIP-380)."""
        return self._broker_epoch

    def _register(self, info: BrokerInfo) -> int:
        path = BrokerIdZNode.path(info.broker_id)
        deadline = time.monotonic() + self.stale_registration_wait_ms / 1000.0
        waited = False
        while True:
            data = BrokerIdZNode.encode(info)
            try:
                self._zk.create(path, data, ephemeral=True)
                _, stat = self._zk.get(path)
                if waited:
                    log.info("Stale registration of broker %d has expired; registered", info.broker_id)
                log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                         info.broker_id, path, ",".join(e.connection_string() for e in info.endpoints),
                         stat.czxid)
                return int(stat.czxid)
            except NodeExistsError:
                pass
            gone = threading.Event()
            try:
                existing, stat = self._zk.get(path, watch=lambda _event: gone.set())
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.session_id:
                log.info("Broker %d is already registered by this session", info.broker_id)
                return int(stat.czxid)
            remaining = deadline - time.monotonic()
            other = BrokerIdZNode.decode(info.broker_id, existing)
            desc = (f"endpoints {','.join(e.connection_string() for e in other.endpoints)}, registered at "
                    f"{other.timestamp}, session 0x{stat.ephemeralOwner:x}")
            if remaining <= 0:
                raise BrokerIdInUseError(
                    f"Broker id {info.broker_id} is already registered in ZooKeeper at {self.connect} "
                    f"({path}: {desc}) by another live broker; waited "
                    f"{self.stale_registration_wait_ms} ms for it to expire. Stop the other broker or change "
                    f"broker.id.")
            if not waited:
                log.warning("Broker id %d is registered by another session (%s); waiting up to %d ms for it "
                            "to expire (a previous run of this broker that did not shut down cleanly?)",
                            info.broker_id, desc, int(remaining * 1000))
                waited = True
            # Wait for the stale node to vanish, but give up at once if the broker is shutting down.
            wait_until = time.monotonic() + remaining
            while not gone.is_set() and not self._closing.is_set() and time.monotonic() < wait_until:
                gone.wait(min(0.2, max(0.0, wait_until - time.monotonic())))
            if self._closing.is_set():
                raise ZkUnavailableError(f"ZooKeeper client closed while waiting to register broker "
                                         f"{info.broker_id}")

    def get_live_brokers(self) -> dict[int, BrokerInfo]:
        out: dict[int, BrokerInfo] = {}
        for child in self._zk.get_children(BrokerIdZNode.path(0).rsplit("/", 1)[0]):
            try:
                data, _ = self._zk.get(BrokerIdZNode.path(int(child)))
            except NoNodeError:
                continue
            out[int(child)] = BrokerIdZNode.decode(int(child), data)
        return out

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, _ = self._zk.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return BrokerIdZNode.decode(broker_id, data)

    def watch_brokers(self, callback: Callable[[dict[int, BrokerInfo]], None]) -> None:
        """Call callback(live brokers) now and on every change of /brokers/ids."""

        def on_children(_children: list[str]) -> None:
            callback(self.get_live_brokers())

        self._zk.ChildrenWatch("/brokers/ids", on_children)

    # ------------------------------------------------------------------ controller
    def try_elect_controller(self, broker_id: int) -> int | None:
        """Try to become controller: atomically create ephemeral /controller and bump /controller_epoch.

        Returns the new controller epoch, or None if another broker is controller."""
        result = self.try_elect_controller_with_version(broker_id)
        return None if result is None else result[0]

    def try_elect_controller_with_version(self, broker_id: int) -> tuple[int, int] | None:
        """As try_elect_controller, but returns (epoch, /controller_epoch znode version) or None.

        The version is what every later controller write checks (a zombie controller's write then fails)."""
        try:
            return self.register_controller_and_increment_epoch(broker_id)
        except ControllerMovedError:
            return None

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Kafka's election in one multi-op: create ephemeral /controller and set /controller_epoch to epoch + 1
        (compare-and-set on its version). Returns (new epoch, new epoch znode version).

        If /controller already exists and belongs to this very session (a retry after a connection blip) the
        current epoch is returned. Raises ControllerMovedError if another broker holds /controller."""
        while True:
            current = self.get_controller_epoch_and_version()
            if current is None:
                try:
                    self._zk.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
                except NodeExistsError:
                    pass
                continue
            epoch, version = current
            tx = self._zk.transaction()
            tx.create(ControllerZNode.path, ControllerZNode.encode(broker_id), ephemeral=True)
            tx.set_data(ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch + 1), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                new_version = results[1].version if hasattr(results[1], "version") else version + 1
                log.info("Broker %d elected controller with epoch %d (epoch znode version %d)", broker_id,
                         epoch + 1, new_version)
                return epoch + 1, int(new_version)
            if isinstance(results[0], NodeExistsError):
                stat = self._zk.exists(ControllerZNode.path)
                if stat is not None and stat.ephemeralOwner == self.session_id:
                    try:
                        if self.get_controller_id() == broker_id:
                            again = self.get_controller_epoch_and_version()
                            if again is not None:
                                return again
                    except NoNodeError:
                        pass
                if stat is None:
                    continue  # the holder just went away: try again
                raise ControllerMovedError(f"Broker {self.get_controller_id()} is already controller")
            # /controller_epoch changed under us (someone else was elected and left): retry

    def get_controller_epoch_and_version(self) -> tuple[int, int] | None:
        """(controller epoch, /controller_epoch znode version) or None if the znode does not exist."""
        try:
            data, stat = self._zk.get(ControllerEpochZNode.path)
        except NoNodeError:
            return None
        return ControllerEpochZNode.decode(data), int(stat.version)

    def delete_controller(self, expected_epoch_zk_version: int) -> None:
        """Resign: delete /controller, guarded by the epoch version (raises ControllerMovedError if stale)."""
        def build(tx: Any) -> None:
            tx.delete(ControllerZNode.path)
        results = self._guarded(expected_epoch_zk_version, build)
        if results and isinstance(results[0], Exception) and not isinstance(results[0], NoNodeError):
            raise results[0]

    def get_controller_id(self) -> int | None:
        try:
            data, _ = self._zk.get(ControllerZNode.path)
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    def get_controller_epoch(self) -> int:
        try:
            data, _ = self._zk.get(ControllerEpochZNode.path)
        except NoNodeError:
            return 0
        return ControllerEpochZNode.decode(data)

    def watch_controller(self, callback: Callable[[int | None], None]) -> None:
        """Call callback(controller id or None) now and whenever /controller changes."""

        def on_data(data: bytes | None, _stat: Any) -> None:
            callback(ControllerZNode.decode(data) if data else None)

        self._zk.DataWatch(ControllerZNode.path, on_data)

    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if this broker holds it."""
        if self.get_controller_id() == broker_id:
            try:
                self._zk.delete(ControllerZNode.path)
            except NoNodeError:
                pass

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None,
                     topic_id: str | None = None, live_brokers: set[int] | None = None) -> str:
        """Atomically create the config, topic and partition state znodes; return the topic id.

        Each partition's leader is its first live replica (-1 if none), ISR = its live replicas (all replicas if
        none is live), epochs 0. Raises TopicExistsError."""
        topic_id = topic_id or new_uuid_base64()
        if live_brokers is None:
            live_brokers = {int(c) for c in self._zk.get_children("/brokers/ids")}
        controller_epoch = self.get_controller_epoch()
        configs = dict(configs or {})
        if self._zk.exists(TopicZNode.path(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        tx = self._zk.transaction()
        cfg_path = TopicConfigZNode.path(name)
        cfg_stat = self._zk.exists(cfg_path)
        if cfg_stat is not None:
            tx.set_data(cfg_path, ConfigEntityZNode.encode(configs), version=cfg_stat.version)
        else:
            tx.create(cfg_path, ConfigEntityZNode.encode(configs))
        tx.create(TopicZNode.path(name), TopicZNode.encode(TopicAssignment(topic_id, dict(assignment))))
        tx.create(TopicPartitionsZNode.path(name), b"")
        for p, replicas in sorted(assignment.items()):
            self._tx_create_partition(tx, name, p, replicas, live_brokers, controller_epoch)
        results = tx.commit()
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            if self._zk.exists(TopicZNode.path(name)):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            raise errors[0]
        return topic_id

    @staticmethod
    def _tx_create_partition(tx: Any, topic: str, p: int, replicas: list[int], live: set[int],
                             controller_epoch: int) -> None:
        live_replicas = [r for r in replicas if r in live]
        leader = live_replicas[0] if live_replicas else -1
        state = LeaderAndIsr(leader, 0, live_replicas or list(replicas), controller_epoch)
        tx.create(TopicPartitionZNode.path(topic, p), b"")
        tx.create(TopicPartitionStateZNode.path(topic, p), TopicPartitionStateZNode.encode(state))

    def get_all_topics(self) -> set[str]:
        return set(self._zk.get_children(TopicsZNode.path))

    def get_topic(self, name: str) -> tuple[str | None, dict[int, list[int]]] | None:
        """(topic_id, {partition: replicas}) or None if the topic does not exist."""
        try:
            data, _ = self._zk.get(TopicZNode.path(name))
        except NoNodeError:
            return None
        a = TopicZNode.decode(data)
        return a.topic_id, a.partitions

    def watch_topics(self, callback: Callable[[set[str]], None]) -> None:
        """Call callback(all topic names) now and on every change of /brokers/topics."""
        self._zk.ChildrenWatch(TopicsZNode.path, lambda children: callback(set(children)))

    def watch_topic(self, name: str, callback: Callable[[tuple[str | None, dict[int, list[int]]] | None], None]
                    ) -> None:
        """Call callback(get_topic(name) result) now and when the assignment changes (e.g. add_partitions)."""

        def on_data(data: bytes | None, _stat: Any) -> bool | None:
            if data is None:
                callback(None)
                return False  # topic gone: stop watching
            a = TopicZNode.decode(data)
            callback((a.topic_id, a.partitions))
            return None

        self._zk.DataWatch(TopicZNode.path(name), on_data)

    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        """Leader, epochs and ISR with the znode version in zk_version; None if absent."""
        try:
            data, stat = self._zk.get(TopicPartitionStateZNode.path(topic, partition))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(data, stat.version)

    def set_partition_state(self, topic: str, partition: int, state: LeaderAndIsr, expected_version: int
                            ) -> int | None:
        """Compare-and-set the partition state; return the new znode version, or None on a version conflict."""
        try:
            stat = self._zk.set(TopicPartitionStateZNode.path(topic, partition),
                                TopicPartitionStateZNode.encode(state), version=expected_version)
        except BadVersionError:
            return None
        return int(stat.version)

    def add_partitions(self, name: str, new_assignment: dict[int, list[int]],
                       live_brokers: set[int] | None = None) -> None:
        """Replace the assignment with `new_assignment` (existing + new partitions) and create state znodes for
        the new partitions, atomically."""
        try:
            data, stat = self._zk.get(TopicZNode.path(name))
        except NoNodeError:
            raise NoSuchTopicError(f"Topic '{name}' does not exist.") from None
        current = TopicZNode.decode(data)
        if live_brokers is None:
            live_brokers = {int(c) for c in self._zk.get_children("/brokers/ids")}
        merged = dict(current.partitions)
        merged.update(new_assignment)
        tx = self._zk.transaction()
        tx.set_data(TopicZNode.path(name),
                    TopicZNode.encode(TopicAssignment(current.topic_id, merged, current.adding_replicas,
                                                      current.removing_replicas)), version=stat.version)
        epoch = self.get_controller_epoch()
        for p in sorted(set(new_assignment) - set(current.partitions)):
            self._tx_create_partition(tx, name, p, new_assignment[p], live_brokers, epoch)
        results = tx.commit()
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            raise errors[0]

    def mark_topic_for_deletion(self, name: str) -> None:
        try:
            self._zk.create(DeleteTopicsZNode.topic_path(name), b"", makepath=True)
        except NodeExistsError:
            pass

    def topics_marked_for_deletion(self) -> set[str]:
        return set(self._zk.get_children(DeleteTopicsZNode.path))

    def watch_topic_deletions(self, callback: Callable[[set[str]], None]) -> None:
        self._zk.ChildrenWatch(DeleteTopicsZNode.path, lambda children: callback(set(children)))

    def delete_topic_znodes(self, name: str) -> None:
        """Remove the topic's assignment, partition state and config znodes, then its deletion marker."""
        for path in (TopicZNode.path(name), TopicConfigZNode.path(name), DeleteTopicsZNode.topic_path(name)):
            try:
                self._zk.delete(path, recursive=True)
            except NoNodeError:
                pass
            except NotEmptyError:  # a child appeared concurrently: try once more
                self._zk.delete(path, recursive=True)

    # ------------------------------------------------------------------ configs
    def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """Overrides of /config/<type>/<name> ({} if none). entity_type: topics, brokers, users, clients, ips."""
        try:
            data, _ = self._zk.get(ConfigEntityZNode.path(entity_type, entity_name))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def set_entity_config(self, entity_type: str, entity_name: str, configs: dict[str, str]) -> None:
        """Replace the overrides of an entity and announce it under /config/changes.

        For nested quota entities pass entity_type='users' and entity_name='alice/clients/app1'."""
        self._set_or_create(ConfigEntityZNode.path(entity_type, entity_name), ConfigEntityZNode.encode(configs))
        self._zk.create(f"{ConfigEntityChangeNotificationZNode.path}/{ConfigEntityChangeNotificationZNode.prefix}",
                        ConfigEntityChangeNotificationZNode.encode(f"{entity_type}/{entity_name}"), sequence=True)

    def get_topic_config(self, name: str) -> dict[str, str]:
        return self.get_entity_config("topics", name)

    def set_topic_config(self, name: str, configs: dict[str, str]) -> None:
        self.set_entity_config("topics", name, configs)

    def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        out = {}
        for child in self._zk.get_children(f"/config/{entity_type}"):
            out[child] = self.get_entity_config(entity_type, child)
        return out

    def watch_config_changes(self, callback: Callable[[list[str]], None]) -> None:
        """Call callback([entity_path, ...]) for notifications created after this call, in sequence order."""
        token = len(self._config_watch_last_seq)
        prefix = ConfigEntityChangeNotificationZNode.prefix
        existing = self._zk.get_children(ConfigEntityChangeNotificationZNode.path)
        self._config_watch_last_seq[token] = max((int(c[len(prefix):]) for c in existing
                                                  if c.startswith(prefix)), default=-1)

        def on_children(children: list[str]) -> None:
            last = self._config_watch_last_seq[token]
            new = sorted(int(c[len(prefix):]) for c in children if c.startswith(prefix)
                         and int(c[len(prefix):]) > last)
            paths = []
            for seq in new:
                try:
                    data, _ = self._zk.get(f"{ConfigEntityChangeNotificationZNode.path}/{prefix}{seq:010d}")
                except NoNodeError:
                    continue
                except (ConnectionLoss, ConnectionClosedError, SessionExpiredError):
                    if self._closed:  # a notification that raced the broker's shutdown: nothing left to apply it to
                        return
                    raise  # kazoo's ChildrenWatch reads the children again once reconnected
                paths.append(ConfigEntityChangeNotificationZNode.decode(data))
            if new:
                self._config_watch_last_seq[token] = new[-1]
            if paths:
                callback(paths)

        self._zk.ChildrenWatch(ConfigEntityChangeNotificationZNode.path, on_children)

    # ------------------------------------------------------------------ delegation tokens (KIP-48)
    def create_delegation_token_paths(self) -> None:
        """/delegation_token/token_changes and /delegation_token/tokens (as Kafka's token manager at start-up)."""
        for path in (DelegationTokenChangeNotificationZNode.path, DelegationTokensZNode.path):
            self._zk.ensure_path(path)

    def get_delegation_token_ids(self) -> list[str]:
        return self.get_children(DelegationTokensZNode.path)

    def get_delegation_token_info(self, token_id: str) -> TokenInformation | None:
        """The token's znode (None if absent); ValueError/KeyError if Kafka could not read it either."""
        try:
            data, _ = self._zk.get(DelegationTokenInfoZNode.path(token_id))
        except NoNodeError:
            return None
        return DelegationTokenInfoZNode.decode(data)

    def set_or_create_delegation_token(self, info: TokenInformation) -> None:
        self._set_or_create(DelegationTokenInfoZNode.path(info.token_id), DelegationTokenInfoZNode.encode(info))

    def _set_or_create(self, path: str, data: bytes) -> None:
        """Write a persistent znode whether or not it exists yet (creating its parents), racing writers included."""
        try:
            self._zk.set(path, data)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                self._zk.set(path, data)

    def delete_delegation_token(self, token_id: str) -> None:
        try:
            self._zk.delete(DelegationTokenInfoZNode.path(token_id), recursive=True)
        except NoNodeError:
            pass

    def create_token_change_notification(self, token_id: str) -> None:
        """Tell every broker that this token changed (token_change_<seq>, data = token id)."""
        znode = DelegationTokenChangeNotificationZNode
        self._zk.create(f"{znode.path}/{znode.prefix}", znode.encode(token_id), sequence=True, makepath=True)

    def get_token_change_notifications(self) -> list[tuple[int, str, int]]:
        """(sequence number, token id, ctime in ms) of every token change notification, in sequence order."""
        prefix = DelegationTokenChangeNotificationZNode.prefix
        seqs = sorted(int(c[len(prefix):]) for c in self.get_children(DelegationTokenChangeNotificationZNode.path)
                      if c.startswith(prefix) and c[len(prefix):].isdigit())
        found = self._get_many(f"{DelegationTokenChangeNotificationZNode.path}/{prefix}{seq:010d}" for seq in seqs)
        out = []
        for seq, (result, error) in zip(seqs, found):
            if isinstance(error, NoNodeError):
                continue
            if error is not None:
                raise error
            data, stat = result
            out.append((seq, DelegationTokenChangeNotificationZNode.decode(data), int(stat.ctime)))
        return out

    def delete_token_change_notification(self, seq: int) -> None:
        try:
            self._zk.delete(f"{DelegationTokenChangeNotificationZNode.path}/"
                            f"{DelegationTokenChangeNotificationZNode.prefix}{seq:010d}")
        except NoNodeError:
            pass

    # ------------------------------------------------------------------ producer ids, ISR notifications
    def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claim the next block of 1000 producer ids by compare-and-set on /latest_producer_id_block.

        Returns (block_start, block_end) inclusive: first 0..999, then 1000..1999, ..."""
        size = ProducerIdBlockZNode.block_size
        while True:
            try:
                data, stat = self._zk.get(ProducerIdBlockZNode.path)
            except NoNodeError:
                try:
                    self._zk.create(ProducerIdBlockZNode.path, b"")
                except NodeExistsError:
                    pass
                continue
            prev = ProducerIdBlockZNode.decode(data)
            start = 0 if prev is None else prev[2] + 1
            end = start + size - 1
            if end > 2**63 - 1:
                raise RuntimeError("Producer id space exhausted")
            try:
                self._zk.set(ProducerIdBlockZNode.path, ProducerIdBlockZNode.encode(broker_id, start, end),
                             version=stat.version)
            except BadVersionError:
                continue
            log.info("Acquired producer id block %d-%d for broker %d", start, end, broker_id)
            return start, end

    def propagate_isr_changes(self, partitions: list[tuple[str, int]]) -> None:
        """Tell the controller that these partitions' ISR changed (/isr_change_notification/isr_change_<seq>)."""
        self._zk.create(f"{IsrChangeNotificationZNode.path}/{IsrChangeNotificationZNode.prefix}",
                        IsrChangeNotificationZNode.encode(partitions), sequence=True)

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller a log directory of this broker failed (log_dir_event_<seq> notification)."""
        self._zk.create(f"{LogDirEventNotificationZNode.path}/{LogDirEventNotificationZNode.prefix}",
                        LogDirEventNotificationZNode.encode(broker_id), sequence=True, makepath=True)

    # ================================================================== controller support
    # Reads used by the controller are pipelined (kazoo's *_async) so a failover over many partitions costs a few
    # round trips, not one per znode; at most zookeeper.max.in.flight.requests are unanswered at any time (Kafka's
    # ZooKeeperClient.handleRequests). Every controller write is a multi-op whose first op checks the
    # /controller_epoch znode version the controller got when it was elected: if another controller has been
    # elected since, ZooKeeper rejects the whole write and ControllerMovedError is raised.

    def _pipelined(self, calls: Iterable[Callable[[], Any]]) -> list[tuple[Any, Exception | None]]:
        """Issue kazoo async calls in order, with at most `max_in_flight_requests` unanswered on this session
        (every thread's pipelined calls together, as Kafka's in-flight semaphore); per call, in order, (result,
        None) or (None, the error its get() raised). A permit is returned when its answer is collected: answers
        come in request order on one session, so this thread collects its oldest before it asks for more."""
        window: deque[Any] = deque()
        out: list[tuple[Any, Exception | None]] = []

        def collect() -> None:
            pending = window.popleft()
            try:
                out.append((pending.get(), None))
            except Exception as e:  # noqa: BLE001 - handed to the caller with the call it belongs to
                if self._closed and isinstance(e, (ConnectionLoss, ConnectionClosedError, SessionExpiredError)):
                    e = ZkClientClosedError(f"ZooKeeper session closed (shutdown): {type(e).__name__}")
                out.append((None, e))
            finally:
                self._in_flight.release()

        try:
            for call in calls:
                while not self._in_flight.acquire(blocking=False):
                    if window:
                        collect()
                    else:  # every permit is another thread's: wait for one of them
                        self._in_flight.acquire()
                        break
                try:
                    window.append(call())
                except BaseException:
                    self._in_flight.release()
                    raise
            while window:
                collect()
        finally:
            while window:  # an error above: still give back what this thread holds
                window.popleft()
                self._in_flight.release()
        return out

    def _get_many(self, paths: Iterable[str]) -> list[tuple[Any, Exception | None]]:
        """(data, stat) or the error (NoNodeError, ...) of each path, pipelined."""
        return self._pipelined(partial(self._zk.get_async, p) for p in paths)

    def _guarded(self, epoch_zk_version: int, build: Callable[[Any], None]) -> list[Any]:
        """One guarded multi-op; returns the results of the ops `build` added (exceptions for failed ones)."""
        return self._guarded_many(epoch_zk_version, [build])[0]

    def _guarded_many(self, epoch_zk_version: int, builders: Iterable[Callable[[Any], None]]) -> list[list[Any]]:
        """Several independent guarded multi-ops (each: check /controller_epoch's version, then the ops `build`
        adds), pipelined. Raises ControllerMovedError if any check failed."""
        def commit(build: Callable[[Any], None]) -> Any:
            tx = self._zk.transaction()
            tx.check(ControllerEpochZNode.path, epoch_zk_version)
            build(tx)
            return tx.commit_async()

        out: list[list[Any]] = []
        moved = False
        for results, error in self._pipelined(partial(commit, b) for b in builders):
            if error is not None:
                raise error
            results = list(results)
            first = results[0] if results else None
            if isinstance(first, Exception) and not isinstance(first, RolledBackError):
                moved = True
            out.append(results[1:])
        if moved:
            raise ControllerMovedError(
                f"Controller epoch znode version is no longer {epoch_zk_version}: another controller was elected")
        return out

    @staticmethod
    def _op_error(result: Any) -> Exception | None:
        """The error of one op of a failed multi (None if it succeeded or was only rolled back)."""
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return result
        return None

    # ------------------------------------------------------------------ generic watches
    def watch_children(self, path: str, callback: Callable[[], None]) -> "ZkWatch":
        """Call `callback()` whenever the children of `path` change, until the returned handle is cancelled.

        Unlike kazoo's recipe the callback is NOT called for the initial state: the caller reads after
        registering (so no change between read and watch is missed), as Kafka's ZNodeChildChangeHandler."""
        return self._watch(path, self._zk.ChildrenWatch, callback)

    def watch_data(self, path: str, callback: Callable[[], None]) -> "ZkWatch":
        """Call `callback()` whenever `path` is created, changed or deleted, until the handle is cancelled.

        Not called for the initial state (see watch_children)."""
        return self._watch(path, self._zk.DataWatch, callback)

    def _watch(self, path: str, recipe: Callable[..., Any], callback: Callable[[], None]) -> "ZkWatch":
        """Arm kazoo's ChildrenWatch/DataWatch recipe on `path`, skipping its first (initial-state) call."""
        handle = ZkWatch(path)

        def fired(*_args: Any) -> bool | None:
            if handle.cancelled:
                return False
            if handle.armed:
                callback()
            handle.armed = True
            return None

        recipe(path, fired)
        handle.armed = True
        return handle

    def watch_creation(self, path: str, callback: Callable[[], None]) -> "ZkWatch":
        """Call `callback()` each time `path` is created (not on changes or deletion), until cancelled: how
        Kafka's controller notices admin requests such as /admin/reassign_partitions (its own later updates of
        the znode must not count as new requests)."""
        handle = ZkWatch(path)

        def on_data(_data: bytes | None, _stat: Any, event: Any = None) -> bool | None:
            if handle.cancelled:
                return False
            if handle.armed and event is not None and getattr(event, "type", None) == EventType.CREATED:
                callback()
            handle.armed = True
            return None

        self._zk.DataWatch(path, on_data)
        handle.armed = True
        return handle

    def get_children(self, path: str) -> list[str]:
        """Children of `path` ([] if it does not exist)."""
        try:
            return list(self._zk.get_children(path))
        except NoNodeError:
            return []

    def path_exists(self, path: str) -> bool:
        return self._zk.exists(path) is not None

    # ------------------------------------------------------------------ generic versioned znode operations
    # (the ACL store's compare-and-set updates and its sequential change notifications, as Kafka's ZkAclStore)
    def ensure_paths(self, *paths: str) -> None:
        for path in paths:
            self._zk.ensure_path(path)

    def get_data_and_stat(self, path: str) -> tuple[bytes, Any] | None:
        """(data, stat) of `path`, None if it does not exist; stat has version, ctime (ms), mzxid, ..."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        return data or b"", stat

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` (and missing parents) with `data`; False if it already exists."""
        try:
            self._zk.create(path, data, makepath=True)
        except NodeExistsError:
            return False
        return True

    def set_data_if_version(self, path: str, data: bytes, version: int) -> bool:
        """Write `data` if `path` is still at `version`; False if it changed or vanished meanwhile."""
        try:
            self._zk.set(path, data, version=version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    def delete_if_version(self, path: str, version: int) -> bool:
        """Delete `path` if still at `version` (-1: any); True also when it is already gone (Kafka's
        conditionalDelete), False if it changed meanwhile."""
        try:
            self._zk.delete(path, version=version)
        except NoNodeError:
            return True
        except BadVersionError:
            return False
        return True

    def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create the persistent sequential znode `prefix`<10 digits>; returns its path."""
        return str(self._zk.create(prefix, data, sequence=True, makepath=True))

    # ------------------------------------------------------------------ brokers (controller view)
    def get_all_brokers_and_epochs(self) -> dict[int, tuple[BrokerInfo, int]]:
        """{broker id: (registration, broker epoch = czxid of /brokers/ids/<id>)}."""
        ids = [int(c) for c in self.get_children(BrokerIdsZNode.path) if c.isdigit()]
        out: dict[int, tuple[BrokerInfo, int]] = {}
        for bid, (result, error) in zip(ids, self._get_many(BrokerIdZNode.path(b) for b in ids)):
            if isinstance(error, NoNodeError):
                continue
            if error is not None:
                raise error
            data, stat = result
            out[bid] = (BrokerIdZNode.decode(bid, data), int(stat.czxid))
        return out

    def get_broker_and_epoch(self, broker_id: int) -> tuple[BrokerInfo, int] | None:
        try:
            data, stat = self._zk.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return BrokerIdZNode.decode(broker_id, data), int(stat.czxid)

    # ------------------------------------------------------------------ topics (controller view)
    def create_topic_assignment(self, name: str, assignment: dict[int, list[int]],
                                configs: dict[str, str] | None = None, topic_id: str | None = None) -> str:
        """Create only the topic's config and assignment znodes (Kafka's adminZkClient.createTopic); the
        controller sees the new /brokers/topics child and creates the partition states. Returns the topic id.
        Raises TopicExistsError."""
        topic_id = topic_id or new_uuid_base64()
        configs = dict(configs or {})
        if self._zk.exists(TopicZNode.path(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        tx = self._zk.transaction()
        cfg_path = TopicConfigZNode.path(name)
        cfg_stat = self._zk.exists(cfg_path)
        if cfg_stat is not None:
            tx.set_data(cfg_path, ConfigEntityZNode.encode(configs), version=cfg_stat.version)
        else:
            tx.create(cfg_path, ConfigEntityZNode.encode(configs))
        tx.create(TopicZNode.path(name), TopicZNode.encode(TopicAssignment(topic_id, dict(assignment))))
        results = tx.commit()
        errors = [r for r in results if self._op_error(r) is not None]
        if errors:
            if self._zk.exists(TopicZNode.path(name)):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            raise errors[0]
        return topic_id

    def add_partitions_assignment(self, name: str, new_assignment: dict[int, list[int]]) -> None:
        """Extend the topic's assignment (existing + new partitions) with compare-and-set; the controller's
        watch on /brokers/topics/<t> creates the new partitions' states. Raises NoSuchTopicError."""
        try:
            data, stat = self._zk.get(TopicZNode.path(name))
        except NoNodeError:
            raise NoSuchTopicError(f"Topic '{name}' does not exist.") from None
        current = TopicZNode.decode(data)
        merged = dict(current.partitions)
        merged.update(new_assignment)
        self._zk.set(TopicZNode.path(name),
                     TopicZNode.encode(TopicAssignment(current.topic_id, merged, current.adding_replicas,
                                                       current.removing_replicas)), version=stat.version)

    def get_topic_assignments(self, topics: set[str] | list[str]) -> dict[str, TopicAssignment]:
        """Full assignments (topic id, replicas, adding/removing replicas) of the topics that exist."""
        names = sorted(topics)
        out: dict[str, TopicAssignment] = {}
        for t, (result, error) in zip(names, self._get_many(TopicZNode.path(t) for t in names)):
            if isinstance(error, NoNodeError):
                continue
            if error is not None:
                raise error
            out[t] = TopicZNode.decode(result[0])
        return out

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        """Overwrite /brokers/topics/<t> (controller only). Raises NoSuchTopicError if it is gone."""
        def build(tx: Any) -> None:
            tx.set_data(TopicZNode.path(topic), TopicZNode.encode(assignment))
        err = self._op_error(self._guarded(epoch_zk_version, build)[0])
        if isinstance(err, NoNodeError):
            raise NoSuchTopicError(f"Topic '{topic}' does not exist.")
        if err is not None:
            raise err

    def set_topic_assignments(self, assignments: dict[str, TopicAssignment], epoch_zk_version: int
                              ) -> dict[str, Exception]:
        """Overwrite several /brokers/topics/<t> (controller only), pipelined; {topic: error} of those that failed
        (NoSuchTopicError if the topic is gone). Raises ControllerMovedError."""
        topics = list(assignments)

        def builder(topic: str) -> Callable[[Any], None]:
            data = TopicZNode.encode(assignments[topic])
            return lambda tx: tx.set_data(TopicZNode.path(topic), data)

        errors: dict[str, Exception] = {}
        for topic, results in zip(topics, self._guarded_many(epoch_zk_version, [builder(t) for t in topics])):
            err = self._op_error(results[0])
            if isinstance(err, NoNodeError):
                errors[topic] = NoSuchTopicError(f"Topic '{topic}' does not exist.")
            elif err is not None:
                errors[topic] = err
        return errors

    def get_partition_states(self, partitions: list[tuple[str, int]] | set[tuple[str, int]]
                             ) -> dict[tuple[str, int], LeaderAndIsr]:
        """Partition states (zk_version = znode version = partition epoch) of those that exist."""
        return {tp: s for tp, (s, _) in self.get_partition_states_and_mzxids(partitions).items()}

    def get_partition_states_and_mzxids(self, partitions: list[tuple[str, int]] | set[tuple[str, int]]
                                        ) -> dict[tuple[str, int], tuple[LeaderAndIsr, int]]:
        """As get_partition_states (the same pipelined reads), each with its znode's mzxid (the zxid of its last
        write): the controller compares it with leaders' broker epochs at failover (bounced_leaders.py)."""
        tps = list(partitions)
        out: dict[tuple[str, int], tuple[LeaderAndIsr, int]] = {}
        for tp, (result, error) in zip(tps, self._get_many(TopicPartitionStateZNode.path(*tp) for tp in tps)):
            if isinstance(error, NoNodeError):
                continue
            if error is not None:
                raise error
            data, stat = result
            out[tp] = (TopicPartitionStateZNode.decode(data, int(stat.version)), int(stat.mzxid))
        return out

    def create_partition_states(self, states: dict[tuple[str, int], LeaderAndIsr], epoch_zk_version: int
                                ) -> dict[tuple[str, int], Exception | LeaderAndIsr]:
        """Create the state znodes of new partitions (and their parents); per partition the created state
        (zk_version 0) or the error (NodeExistsError if it already existed)."""
        tps = list(states)
        self._create_partition_parents(tps, epoch_zk_version)

        def builder(tp: tuple[str, int]) -> Callable[[Any], None]:
            def build(tx: Any) -> None:
                tx.create(TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(states[tp]))
            return build

        out: dict[tuple[str, int], Exception | LeaderAndIsr] = {}
        for tp, results in zip(tps, self._guarded_many(epoch_zk_version, [builder(tp) for tp in tps])):
            err = self._op_error(results[0])
            out[tp] = err if err is not None else replace(states[tp], zk_version=0)
        return out

    #: parent znodes created per guarded multi: one request for many partitions, far below jute.maxbuffer (1 MB)
    PARENTS_PER_MULTI = 500

    def _create_partition_parents(self, tps: list[tuple[str, int]], epoch_zk_version: int) -> None:
        """Create /brokers/topics/<t>/partitions and .../partitions/<p> where missing, before the state znodes.

        Kafka creates each with its own guarded create; here the partition znodes of a topic go in guarded
        multis of up to PARENTS_PER_MULTI creates (10,000 new partitions: 20 requests, not 10,000). A chunk in
        which one znode already exists is rolled back whole by ZooKeeper and then done Kafka's way, one guarded
        create per znode, an existing one being fine."""
        topics = sorted({t for t, _ in tps})
        topic_paths = [TopicPartitionsZNode.path(t) for t in topics]
        found = self._pipelined(partial(self._zk.exists_async, p) for p in topic_paths)
        paths: list[str] = []
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        for t, path, (stat, error) in zip(topics, topic_paths, found):
            if error is not None:
                raise error
            if stat is None:
                paths.append(path)
            paths += [TopicPartitionZNode.path(t, p) for p in by_topic[t]]
        chunks = [paths[i:i + self.PARENTS_PER_MULTI] for i in range(0, len(paths), self.PARENTS_PER_MULTI)]

        def create_all(chunk: list[str]) -> Callable[[Any], None]:
            def build(tx: Any) -> None:
                for path in chunk:
                    tx.create(path, b"")
            return build

        results = self._guarded_many(epoch_zk_version, [create_all(c) for c in chunks])
        retry = [path for c, r in zip(chunks, results) if any(self._op_error(x) for x in r) for path in c]
        if not retry:
            return
        for path, r in zip(retry, self._guarded_many(epoch_zk_version, [create_all([p]) for p in retry])):
            err = self._op_error(r[0])
            if err is not None and not isinstance(err, NodeExistsError):
                log.warning("Creating %s failed: %r", path, err)

    def update_leader_and_isr(self, states: dict[tuple[str, int], LeaderAndIsr], controller_epoch: int,
                              epoch_zk_version: int
                              ) -> tuple[dict[tuple[str, int], Exception | LeaderAndIsr], list[tuple[str, int]]]:
        """Compare-and-set partition states. Each state's zk_version is the expected znode version; the written
        state carries `controller_epoch`. Returns ({tp: new state (zk_version = new version) or error},
        [tps whose version did not match: re-read and retry])."""
        tps = list(states)

        def builder(tp: tuple[str, int]) -> Callable[[Any], None]:
            s = replace(states[tp], controller_epoch=controller_epoch)

            def build(tx: Any) -> None:
                tx.set_data(TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(s),
                            version=s.zk_version)
            return build

        finished: dict[tuple[str, int], Exception | LeaderAndIsr] = {}
        retry: list[tuple[str, int]] = []
        for tp, results in zip(tps, self._guarded_many(epoch_zk_version, [builder(tp) for tp in tps])):
            r = results[0]
            err = self._op_error(r)
            if isinstance(err, BadVersionError):
                retry.append(tp)
            elif err is not None:
                finished[tp] = err
            else:
                finished[tp] = replace(states[tp], controller_epoch=controller_epoch, zk_version=int(r.version))
        return finished, retry

    def delete_topic_znodes_guarded(self, topic: str, epoch_zk_version: int) -> None:
        """Controller: remove the topic's assignment subtree, its config and its deletion marker in one multi."""
        paths: list[str] = []

        def collect(path: str) -> None:
            for child in self.get_children(path):
                collect(f"{path}/{child}")
            paths.append(path)

        if self._zk.exists(TopicZNode.path(topic)):
            collect(TopicZNode.path(topic))
        for p in (TopicConfigZNode.path(topic), DeleteTopicsZNode.topic_path(topic)):
            if self._zk.exists(p):
                paths.append(p)
        if not paths:
            return

        def build(tx: Any) -> None:
            for p in paths:
                tx.delete(p)
        results = self._guarded(epoch_zk_version, build)
        if any(self._op_error(r) for r in results):
            # something changed under us (a partition added concurrently?): delete one by one
            for p in paths:
                try:
                    self._guarded(epoch_zk_version, partial(_delete_op, p))
                except ControllerMovedError:
                    raise
                except Exception:
                    log.debug("Deleting %s failed", p, exc_info=True)

    def delete_topic_deletions(self, topics: list[str] | set[str], epoch_zk_version: int) -> None:
        """Remove /admin/delete_topics/<t> markers (missing ones are ignored)."""
        self._delete_children_guarded([DeleteTopicsZNode.topic_path(t) for t in topics], epoch_zk_version)

    def _delete_children_guarded(self, paths: list[str], epoch_zk_version: int) -> None:
        if not paths:
            return
        builders = [(lambda tx, p=p: tx.delete(p)) for p in paths]
        self._guarded_many(epoch_zk_version, builders)  # NoNode results are fine: already gone

    # ------------------------------------------------------------------ notifications (controller view)
    def get_isr_change_notifications(self) -> list[str]:
        prefix = IsrChangeNotificationZNode.prefix
        return sorted(c for c in self.get_children(IsrChangeNotificationZNode.path) if c.startswith(prefix))

    def get_partitions_from_isr_change_notifications(self, names: list[str]) -> set[tuple[str, int]]:
        out: set[tuple[str, int]] = set()
        for result, error in self._get_many(f"{IsrChangeNotificationZNode.path}/{n}" for n in names):
            if isinstance(error, NoNodeError):
                continue
            if error is not None:
                raise error
            try:
                out.update(IsrChangeNotificationZNode.decode(result[0]))
            except (ValueError, KeyError, TypeError):
                log.warning("Ignoring an unreadable ISR change notification")
        return out

    def delete_isr_change_notifications(self, names: list[str], epoch_zk_version: int) -> None:
        self._delete_children_guarded([f"{IsrChangeNotificationZNode.path}/{n}" for n in names], epoch_zk_version)

    def get_log_dir_event_notifications(self) -> list[str]:
        prefix = LogDirEventNotificationZNode.prefix
        return sorted(c for c in self.get_children(LogDirEventNotificationZNode.path) if c.startswith(prefix))

    def get_broker_ids_from_log_dir_events(self, names: list[str]) -> list[int]:
        out: list[int] = []
        for n in names:
            try:
                data, _ = self._zk.get(f"{LogDirEventNotificationZNode.path}/{n}")
            except NoNodeError:
                continue
            try:
                bid = LogDirEventNotificationZNode.decode(data)
            except (ValueError, KeyError, TypeError):
                bid = None
            if bid is not None and bid not in out:
                out.append(bid)
        return out

    def delete_log_dir_event_notifications(self, names: list[str], epoch_zk_version: int) -> None:
        self._delete_children_guarded([f"{LogDirEventNotificationZNode.path}/{n}" for n in names],
                                      epoch_zk_version)

    # ------------------------------------------------------------------ admin requests (legacy znodes)
    def get_partition_reassignment(self) -> dict[tuple[str, int], list[int]] | None:
        """Contents of /admin/reassign_partitions (None if absent)."""
        try:
            data, _ = self._zk.get(ReassignPartitionsZNode.path)
        except NoNodeError:
            return None
        try:
            return ReassignPartitionsZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("Ignoring unreadable %s", ReassignPartitionsZNode.path)
            return {}

    def create_partition_reassignment(self, reassignments: dict[tuple[str, int], list[int]]) -> None:
        """What kafka-reassign-partitions.sh --zookeeper did (tests and tools). Raises NodeExistsError."""
        self._zk.create(ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(reassignments),
                        makepath=True)

    def set_or_create_partition_reassignment(self, reassignments: dict[tuple[str, int], list[int]],
                                             epoch_zk_version: int) -> None:
        data = ReassignPartitionsZNode.encode(reassignments)
        err = self._op_error(self._guarded(
            epoch_zk_version, lambda tx: tx.set_data(ReassignPartitionsZNode.path, data))[0])
        if isinstance(err, NoNodeError):
            self._guarded(epoch_zk_version, lambda tx: tx.create(ReassignPartitionsZNode.path, data))

    def delete_partition_reassignment(self, epoch_zk_version: int) -> None:
        self._delete_children_guarded([ReassignPartitionsZNode.path], epoch_zk_version)

    def get_preferred_replica_election(self) -> set[tuple[str, int]] | None:
        try:
            data, _ = self._zk.get(PreferredReplicaElectionZNode.path)
        except NoNodeError:
            return None
        try:
            return PreferredReplicaElectionZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("Ignoring unreadable %s", PreferredReplicaElectionZNode.path)
            return set()

    def create_preferred_replica_election(self, partitions: list[tuple[str, int]]) -> None:
        self._zk.create(PreferredReplicaElectionZNode.path, PreferredReplicaElectionZNode.encode(partitions),
                        makepath=True)

    def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        self._delete_children_guarded([PreferredReplicaElectionZNode.path], epoch_zk_version)

    # ------------------------------------------------------------------ features
    def get_feature_znode(self) -> tuple[bytes, int] | None:
        """(raw /feature data, znode version) or None if absent."""
        try:
            data, stat = self._zk.get(FeatureZNode.path)
        except NoNodeError:
            return None
        return data, int(stat.version)

    def get_finalized_features(self) -> tuple[int, dict[str, int]] | None:
        """(status, {feature: finalized level}) of /feature, None if absent."""
        found = self.get_feature_znode()
        return None if found is None else FeatureZNode.decode_levels(found[0])

    def create_feature_znode(self, data: bytes) -> int:
        """Create /feature (not guarded: Kafka's controller creates it before watching anything); returns its
        version (0). An existing node is left as is and its version returned."""
        try:
            self._zk.create(FeatureZNode.path, data)
            return 0
        except NodeExistsError:
            stat = self._zk.exists(FeatureZNode.path)
            return int(stat.version) if stat is not None else 0

    def set_feature_znode(self, data: bytes, epoch_zk_version: int) -> int:
        """Overwrite /feature with the controller-epoch check; returns the new znode version."""
        results = self._guarded(epoch_zk_version, lambda tx: tx.set_data(FeatureZNode.path, data))
        err = self._op_error(results[0])
        if err is not None:
            raise err
        return int(results[0].version)


class ZkWatch:
    """Handle of a watch registered by KafkaZkClient.watch_children/watch_data; cancel() stops it (kazoo drops
    the watch the next time it fires)."""

    __slots__ = ("path", "cancelled", "armed")

    def __init__(self, path: str) -> None:
        self.path = path
        self.cancelled = False
        self.armed = False

    def cancel(self) -> None:
        self.cancelled = True
