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
from typing import Any, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from broker.config.kafka_config import Endpoint
from broker.zk.errors import BrokerIdInUseError, NoSuchTopicError, TopicExistsError, ZkUnavailableError
from broker.zk.paths import (
    PERSISTENT_PATHS, BrokerIdZNode, BrokerInfo, BrokerSequenceIdZNode, ClusterIdZNode,
    ConfigEntityChangeNotificationZNode, ConfigEntityZNode, ControllerEpochZNode, ControllerZNode, DeleteTopicsZNode,
    IsrChangeNotificationZNode, LeaderAndIsr, ProducerIdBlockZNode, TopicAssignment, TopicConfigZNode,
    TopicPartitionStateZNode, TopicPartitionsZNode, TopicPartitionZNode, TopicZNode, TopicsZNode, new_uuid_base64,
)

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


class KafkaZkClient:
    """Kafka's znode operations on one ZooKeeper session (see module docstring)."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 stale_registration_wait_ms: int | None = None) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        self.stale_registration_wait_ms = (stale_registration_wait_ms if stale_registration_wait_ms is not None
                                           else session_timeout_ms + STALE_REGISTRATION_MARGIN_MS)
        self._zk = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000.0)
        self._lock = threading.RLock()
        self._registration: BrokerInfo | None = None
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._session_lost = False
        self._closed = False
        self._closing = threading.Event()
        self._config_watch_last_seq: dict[int, int] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Connect, create the chroot and Kafka's persistent paths. Raises ZkUnavailableError on timeout."""
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self._zk.stop()
            self._zk.close()
            raise ZkUnavailableError(
                f"Timed out waiting for connection to ZooKeeper at {self.connect} after "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms); is ZooKeeper running?"
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
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client (tests and tools only)."""
        return self._zk

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on a helper thread) after a session expiry has been replaced by a new session."""
        self._new_session_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's thread: must not block, so real work moves to a helper thread.
        if self._closed:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired; waiting for a new session")
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            threading.Thread(target=self._after_new_session, name="zk-new-session", daemon=True).start()

    def _after_new_session(self) -> None:
        log.info("New ZooKeeper session 0x%x established", self.session_id)
        with self._lock:
            info = self._registration
        if info is not None:
            try:
                self._register(info)
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
        return czxid

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
        while True:
            try:
                data, stat = self._zk.get(ControllerEpochZNode.path)
                epoch, version = ControllerEpochZNode.decode(data), stat.version
            except NoNodeError:
                try:
                    self._zk.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
                except NodeExistsError:
                    pass
                continue
            ctl = self._zk.exists(ControllerZNode.path)
            if ctl is not None:
                # Still ours (same session, e.g. asked again after a connection blip): keep the current epoch.
                return epoch if ctl.ephemeralOwner == self.session_id else None
            tx = self._zk.transaction()
            tx.create(ControllerZNode.path, ControllerZNode.encode(broker_id), ephemeral=True)
            tx.set_data(ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch + 1), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                log.info("Broker %d elected controller with epoch %d", broker_id, epoch + 1)
                return epoch + 1
            if isinstance(results[0], NodeExistsError):
                return None
            # epoch changed under us (someone else was elected and left): retry

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
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(configs)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                self._zk.set(path, data)
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
                paths.append(ConfigEntityChangeNotificationZNode.decode(data))
            if new:
                self._config_watch_last_seq[token] = new[-1]
            if paths:
                callback(paths)

        self._zk.ChildrenWatch(ConfigEntityChangeNotificationZNode.path, on_children)

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
