"""DynamicConfigManager: applies config changes announced under ``/config/changes`` (Kafka's ZkConfigManager).

Whoever changes an entity's overrides (AlterConfigs on any broker, Kafka's own tools) writes
``/config/<type>/<name>`` and a sequential ``/config/changes/config_change_<n>`` notification.
Every broker watches the notifications and reloads only the entities they name:

- ``topics/<t>``: the topic's effective log config is rebuilt and applied to its hosted logs;
- ``brokers/<default>`` and ``brokers/<this broker's id>``: the dynamic broker config layers are
  reloaded into :class:`DynamicBrokerConfig` (its listeners then re-derive topic defaults);
- ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``: that entity's client quotas are
  re-read and handed to the quota managers (every broker enforces its own share, no restart);
  ``users/<u>`` also carries the user's SCRAM credentials, handed to the credential cache the
  SASL logins read (all users' credentials are loaded at start-up, before requests are served).

At start-up the broker's dynamic layers are read once, as Kafka's DynamicBrokerConfig does, so a
restarted broker keeps what AlterConfigs set. Watch callbacks arrive on kazoo's thread and only
schedule work on the event loop; ZooKeeper reads run on the ZooKeeper executor.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set

from broker.config.dynamic_rules import layer_to_apply, redacted
from broker.config.topic_defs import effective_topic_config
from broker.quota.entity import IP_QUOTA_KEYS, QuotaEntity, desanitize, parse_quota_values
from broker.storage.config import LogConfig

if TYPE_CHECKING:
    from broker.config.dynamic import DynamicBrokerConfig
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"

#: Applies a topic's new effective log config to its hosted logs.
TopicConfigSink = Callable[[str, LogConfig], None]
#: Hears every topic's new overrides, hosted here or not (the controller acts on unclean.leader.election.enable).
TopicOverridesListener = Callable[[str, Dict[str, str]], None]
#: Receives an entity's client quota values (absent keys: no quota at that level).
QuotaSink = Callable[[QuotaEntity, Dict[str, float]], None]
#: Receives an IP's (or <default>'s) connection_creation_rate, None when unset.
IpQuotaSink = Callable[[str, Optional[float]], None]
#: Receives a user's whole config (raw user name) whenever users/<user> changes: its SCRAM credentials.
ScramSink = Callable[[str, Dict[str, str]], None]


class DynamicConfigManager:
    def __init__(self, config: "DynamicBrokerConfig", zk: "KafkaZkClient", zk_calls: "NamedExecutor",
                 topic_config_sink: TopicConfigSink, hosted_topics: Callable[[], Set[str]],
                 quota_sink: Optional[QuotaSink] = None, ip_quota_sink: Optional[IpQuotaSink] = None,
                 scram_sink: Optional[ScramSink] = None) -> None:
        self.config = config
        self.zk = zk
        self.zk_calls = zk_calls
        self.topic_config_sink = topic_config_sink
        self.hosted_topics = hosted_topics
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._pending_topics: Set[str] = set()
        self._pending_quotas: Set[str] = set()
        self.quota_sink = quota_sink
        self.ip_quota_sink = ip_quota_sink
        self.scram_sink = scram_sink
        self._pending_brokers = False
        self._task: Optional["asyncio.Task[None]"] = None
        self._stopping = False
        self._overrides_listeners: List[TopicOverridesListener] = []

    def add_topic_overrides_listener(self, listener: TopicOverridesListener) -> None:
        self._overrides_listeners.append(listener)

    # ------------------------------------------------------------------ lifecycle
    async def load_broker_configs(self) -> None:
        """Read this broker's dynamic layers from ZooKeeper (start-up, before anything uses the config)."""
        await self._reload_broker_configs()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.zk_calls.run(self.zk.watch_config_changes, self._on_notifications)
        # after the watch, so no change slips between the read and the watch
        if self.quota_sink is not None or self.scram_sink is not None:
            for path in await self.zk_calls.run(self._quota_entity_paths):
                await self._reload_quota(path)

    def _quota_entity_paths(self) -> List[str]:
        """zk-call thread: every quota entity znode (users, users/<u>/clients/<c>, clients)."""
        paths = []
        for user in self.zk.get_children("/config/users"):
            paths.append(f"users/{user}")
            paths.extend(f"users/{user}/clients/{c}" for c in self.zk.get_children(f"/config/users/{user}/clients"))
        paths.extend(f"clients/{c}" for c in self.zk.get_children("/config/clients"))
        paths.extend(f"ips/{ip}" for ip in self.zk.get_children("/config/ips"))
        return paths

    async def _reload_quota(self, entity_path: str) -> None:
        etype, _, ename = entity_path.partition("/")
        if etype == "ips":
            if self.ip_quota_sink is not None:
                config = await self.zk_calls.run(self.zk.get_entity_config, "ips", ename)
                rate = parse_quota_values(config, IP_QUOTA_KEYS).get("connection_creation_rate")
                self.ip_quota_sink(ename if ename == DEFAULT_ENTITY else desanitize(ename), rate)
            return
        entity = QuotaEntity.from_config_path(entity_path)
        if entity is None or (self.quota_sink is None and self.scram_sink is None):
            return
        etype, _, ename = entity_path.partition("/")
        config = await self.zk_calls.run(self.zk.get_entity_config, etype, ename)
        if self.quota_sink is not None:
            self.quota_sink(entity, parse_quota_values(config))
        if (self.scram_sink is not None and etype == "users" and entity.client_id is None
                and entity.user is not None and entity.user != DEFAULT_ENTITY):
            self.scram_sink(entity.user, config)  # Kafka's UserConfigHandler: credentials of users/<user> only

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ------------------------------------------------------------------ topic configs
    def log_config_for(self, overrides: Dict[str, str]) -> LogConfig:
        """The effective LogConfig of a topic with these overrides under the current broker config."""
        return LogConfig.from_props(effective_topic_config(self.config.current, overrides))

    async def topic_log_config(self, topic: str) -> LogConfig:
        """Read the topic's overrides from ZooKeeper and build its LogConfig (a new replica's log)."""
        overrides = await self.zk_calls.run(self.zk.get_topic_config, topic) or {}
        return self.log_config_for(overrides)

    async def refresh_topic(self, topic: str) -> None:
        self.topic_config_sink(topic, await self.topic_log_config(topic))

    async def refresh_all_topics(self) -> None:
        """Broker defaults changed: every hosted topic's effective config may have changed."""
        for topic in sorted(self.hosted_topics()):
            await self.refresh_topic(topic)

    # ------------------------------------------------------------------ notifications
    def _on_notifications(self, entity_paths: List[str]) -> None:
        """kazoo thread: remember what changed and let the event loop apply it."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopping:
            return
        loop.call_soon_threadsafe(self._note, list(entity_paths))

    def _note(self, entity_paths: List[str]) -> None:
        me = str(self.config.broker_id)
        for path in entity_paths:
            kind, _, name = path.partition("/")
            if kind == "topics":
                self._pending_topics.add(name)
            elif kind == "brokers" and name in (DEFAULT_ENTITY, me):
                self._pending_brokers = True
            elif kind in ("users", "clients", "ips") and (self.quota_sink is not None or self.scram_sink is not None):
                self._pending_quotas.add(path)
        if self._task is None and (self._pending_topics or self._pending_brokers or self._pending_quotas):
            self._task = asyncio.get_running_loop().create_task(self._apply())

    async def _apply(self) -> None:
        try:
            while self._pending_topics or self._pending_brokers or self._pending_quotas:
                if self._pending_brokers:
                    self._pending_brokers = False
                    await self._reload_broker_configs()
                quotas, self._pending_quotas = self._pending_quotas, set()
                for path in sorted(quotas):
                    await self._reload_quota(path)
                topics, self._pending_topics = self._pending_topics, set()
                hosted = self.hosted_topics()
                for topic in sorted(topics):
                    overrides = await self.zk_calls.run(self.zk.get_topic_config, topic) or {}
                    if topic in hosted:
                        self.topic_config_sink(topic, self.log_config_for(overrides))
                    for listener in self._overrides_listeners:
                        listener(topic, dict(overrides))
        except asyncio.CancelledError:
            raise
        except Exception:
            if not self._stopping:
                log.exception("Applying a config change notification failed")
        finally:
            self._task = None

    async def _reload_broker_configs(self) -> None:
        stored_per_broker = await self.zk_calls.run(self.zk.get_entity_config, "brokers", str(self.config.broker_id))
        stored_default = await self.zk_calls.run(self.zk.get_entity_config, "brokers", DEFAULT_ENTITY)
        # what Kafka ignores in them (static keys, unprefixed key stores, undecodable passwords, ...), and the
        # listener, TLS and SASL keys this broker applies only from server.properties, are left out (logged)
        per_broker = layer_to_apply(stored_per_broker or {}, True, f"broker {self.config.broker_id}")
        default = layer_to_apply(stored_default or {}, False, "default cluster")
        current = self.config.current
        if per_broker == current.dynamic_per_broker and default == current.dynamic_cluster_default:
            return
        try:
            new = current.with_dynamic(per_broker=per_broker or {}, cluster_default=default or {})
        except Exception as exc:  # an invalid value written by someone else must not stop the broker
            log.error("Ignoring invalid dynamic broker configs in ZooKeeper: %s", exc)
            return
        log.info("Dynamic broker configs updated: per broker %s, cluster default %s", redacted(per_broker),
                 redacted(default))
        self.config.update(new)


__all__ = ["DynamicConfigManager"]
