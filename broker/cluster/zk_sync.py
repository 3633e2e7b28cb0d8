"""Keeps the metadata cache and hosted partitions in step with ZooKeeper; controller duties.

Every broker watches ``/brokers/ids`` (live brokers), ``/brokers/topics`` (topics appearing
and vanishing) and config-change notifications. The broker that wins ``/controller``
also carries out topic deletions requested under ``/admin/delete_topics``.

Watch callbacks arrive on kazoo's thread; they only schedule work on the event loop.
All ZooKeeper reads run on worker threads.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Dict, Optional

from broker.cluster.metadata_cache import BrokerMeta, PartitionMeta, TopicMeta
from broker.config.topic_defs import effective_topic_config
from broker.storage.config import LogConfig

log = logging.getLogger(__name__)


class ClusterSync:
    def __init__(self, server: Any) -> None:
        self.server = server
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._topics_lock = asyncio.Lock()
        self._pending: set = set()
        self._tasks: set = set()
        self._stopping = False

    @property
    def zk(self) -> Any:
        return self.server.zk

    async def _io(self, fn: Any, *args: Any) -> Any:
        return await self.server.zk_calls.run(fn, *args)

    def _schedule(self, key: str, coro_fn: Any) -> None:
        """From any thread: run ``coro_fn()`` on the loop, coalescing repeats of ``key``."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def start() -> None:
            if key in self._pending or self._stopping:
                return
            self._pending.add(key)

            async def run() -> None:
                try:
                    await coro_fn()
                except asyncio.CancelledError:
                    pass
                except Exception:
                    if self._stopping:
                        log.debug("Handling ZooKeeper change %s interrupted by shutdown", key, exc_info=True)
                    else:
                        log.exception("Handling ZooKeeper change %s failed", key)
                finally:
                    self._pending.discard(key)

            task = loop.create_task(run())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        loop.call_soon_threadsafe(start)

    # --- start-up ------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.refresh_brokers()
        await self.elect()
        await self.refresh_all_topics()
        await self._io(self.zk.watch_brokers, lambda *a: self._schedule("brokers", self.refresh_brokers))
        await self._io(self.zk.watch_topics, lambda *a: self._schedule("topics", self.refresh_topic_set))
        watch_ctl = getattr(self.zk, "watch_controller", None)
        if watch_ctl is not None:
            await self._io(watch_ctl, lambda *a: self._schedule("controller", self.elect))
        watch_del = getattr(self.zk, "watch_topic_deletions", None)
        if watch_del is not None:
            await self._io(watch_del, lambda *a: self._schedule("deletions", self.process_deletions))
        await self.process_deletions()

    async def stop(self) -> None:
        """Stop reacting to ZooKeeper changes (before the ZooKeeper client closes)."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def on_new_session(self) -> None:
        """After a ZooKeeper session expiry and re-registration: re-elect and re-read everything."""
        await self.refresh_brokers()
        await self.elect()
        await self.refresh_all_topics()

    # --- brokers and controller ----------------------------------------------------------
    async def refresh_brokers(self) -> None:
        infos = await self._io(self.zk.get_live_brokers)
        brokers: Dict[int, BrokerMeta] = {}
        for bid, info in infos.items():
            brokers[int(bid)] = BrokerMeta(int(bid), tuple(info.endpoints), info.rack)
        self.server.metadata.set_brokers(brokers)

    async def elect(self) -> None:
        epoch = await self._io(self.zk.try_elect_controller, self.server.broker_id)
        controller = await self._io(self.zk.get_controller_id)
        self.server.metadata.controller_id = controller if controller is not None else -1
        if epoch is not None and epoch != self.server.controller_epoch:
            log.info("Broker %d is now the controller (epoch %s)", self.server.broker_id, epoch)
            self.server.controller_epoch = epoch
            await self.process_deletions()

    @property
    def is_controller(self) -> bool:
        return self.server.metadata.controller_id == self.server.broker_id

    # --- topics ----------------------------------------------------------------------------
    async def refresh_topic_set(self) -> None:
        """A topic appeared or vanished: read only those (not every partition of every topic)."""
        names = set(await self._io(self.zk.get_all_topics))
        known = set(self.server.metadata.topics)
        for gone in known - names:
            await self._remove_topic(gone)
        for name in sorted(names - known):
            await self.refresh_topic(name)

    async def refresh_all_topics(self) -> None:
        names = set(await self._io(self.zk.get_all_topics))
        for gone in set(self.server.metadata.topics) - names:
            await self._remove_topic(gone)
        for name in sorted(names):
            await self.refresh_topic(name)

    def _log_config(self, overrides: Dict[str, str]) -> LogConfig:
        return LogConfig.from_props(effective_topic_config(self.server.config.current, overrides))

    async def refresh_topic(self, name: str) -> None:
        found = await self._io(self.zk.get_topic, name)
        if found is None:
            if name in self.server.metadata.topics:
                await self._remove_topic(name)
            return
        topic_id, assignment = found
        if not isinstance(topic_id, uuid.UUID):
            topic_id = _parse_topic_id(topic_id)
        states = {}
        for p in assignment:
            states[p] = await self._io(self.zk.get_partition_state, name, p)
        overrides = await self._io(self.zk.get_topic_config, name) or {}
        parts: Dict[int, PartitionMeta] = {}
        for p, replicas in assignment.items():
            st = states.get(p)
            if st is None:
                parts[int(p)] = PartitionMeta(int(p), -1, -1, tuple(replicas), ())
            else:
                parts[int(p)] = PartitionMeta(int(p), st.leader, st.leader_epoch, tuple(replicas), tuple(st.isr),
                                              getattr(st, "zk_version", 0))
        log_config = self._log_config(overrides)
        min_isr = int(effective_topic_config(self.server.config.current, overrides).get("min.insync.replicas", 1))
        me = self.server.broker_id
        became_leader = []
        for p, pm in parts.items():
            if pm.leader == me:
                was = self.server.replica_manager.get_partition((name, p))
                await self.server.replica_manager.make_leader(name, p, topic_id, pm.leader_epoch, pm.replicas,
                                                              pm.isr, log_config, min_isr)
                if was is None or was.leader_id != me:
                    became_leader.append(p)
        self.server.metadata.put_topic(TopicMeta(name, topic_id, parts))
        for p in became_leader:
            await self.server.on_become_leader(name, p)

    async def _remove_topic(self, name: str) -> None:
        meta = self.server.metadata.remove_topic(name)
        if meta is None:
            return
        for p in meta.partitions:
            await self.server.on_resign(name, p)
            await self.server.replica_manager.stop_replica(name, p, delete=True)
        log.info("Topic %s removed; deleted its local partitions", name)

    async def process_deletions(self) -> None:
        """Controller only: carry out the deletions queued under /admin/delete_topics."""
        if not self.is_controller:
            return
        names = await self._io(self.zk.topics_marked_for_deletion)
        for name in names:
            await self._remove_topic(name)
            await self._io(self.zk.delete_topic_znodes, name)
            log.info("Deleted topic %s", name)


def _parse_topic_id(text: Any) -> uuid.UUID:
    """Kafka writes topic ids as base64url without padding (22 chars)."""
    import base64
    s = str(text)
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    return uuid.UUID(bytes=raw)
