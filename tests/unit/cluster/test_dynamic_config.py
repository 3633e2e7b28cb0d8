"""DynamicConfigManager: change notifications reload exactly the entities they name."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Tuple

from broker.cluster.dynamic_config import DynamicConfigManager
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.kafka_config import KafkaConfig
from broker.storage.config import LogConfig


class FakeZk:
    def __init__(self) -> None:
        self.entities: Dict[Tuple[str, str], Dict[str, str]] = {}
        self.callback: Callable[[List[str]], None] = lambda paths: None

    def get_entity_config(self, kind: str, name: str) -> Dict[str, str]:
        return dict(self.entities.get((kind, name), {}))

    def get_topic_config(self, name: str) -> Dict[str, str]:
        return self.get_entity_config("topics", name)

    def watch_config_changes(self, callback: Callable[[List[str]], None]) -> None:
        self.callback = callback


class InlineCalls:
    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


def make() -> Tuple[DynamicConfigManager, FakeZk, DynamicBrokerConfig, List[Tuple[str, LogConfig]]]:
    cfg = DynamicBrokerConfig(KafkaConfig({"broker.id": "1", "zookeeper.connect": "zk:2181",
                                           "log.dirs": "/tmp/x"}, warn_unknown=False))
    zk = FakeZk()
    applied: List[Tuple[str, LogConfig]] = []
    mgr = DynamicConfigManager(cfg, zk, InlineCalls(), lambda t, c: applied.append((t, c)),  # type: ignore[arg-type]
                               lambda: {"a", "b"})
    return mgr, zk, cfg, applied


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_start_up_loads_this_brokers_dynamic_layers() -> None:
    async def main() -> None:
        mgr, zk, cfg, _ = make()
        zk.entities[("brokers", "1")] = {"log.retention.ms": "1234"}
        zk.entities[("brokers", "<default>")] = {"log.retention.ms": "999", "log.segment.bytes": "2000000"}
        zk.entities[("brokers", "2")] = {"log.segment.bytes": "3000000"}  # another broker's: not ours
        await mgr.load_broker_configs()
        assert cfg.get("log.retention.ms") == 1234  # per broker wins over the cluster default
        assert cfg.get("log.segment.bytes") == 2000000
    asyncio.run(main())


def test_notifications_reload_named_topics_and_broker_layers_only() -> None:
    async def main() -> None:
        mgr, zk, cfg, applied = make()
        await mgr.start()
        seen: List[int] = []
        cfg.add_listener(lambda old, new: seen.append(new.get("log.retention.ms")))
        zk.entities[("topics", "a")] = {"retention.ms": "42"}
        zk.entities[("brokers", "<default>")] = {"log.retention.ms": "777"}
        zk.callback(["topics/a", "topics/not-hosted", "brokers/<default>", "brokers/7"])
        await settle()
        assert [t for t, _ in applied] == ["a"] and applied[0][1].retention_ms == 42
        assert seen == [777]
        zk.callback(["brokers/7"])  # someone else's broker entity: nothing to do
        await settle()
        assert seen == [777] and len(applied) == 1
        await mgr.stop()
    asyncio.run(main())


def test_invalid_dynamic_value_from_zookeeper_is_ignored_not_fatal() -> None:
    async def main() -> None:
        mgr, zk, cfg, _ = make()
        zk.entities[("brokers", "1")] = {"log.retention.ms": "not-a-number"}
        await mgr.load_broker_configs()
        assert cfg.get("log.retention.ms") == KafkaConfig({"zookeeper.connect": "z", "log.dirs": "/x"},
                                                          warn_unknown=False).get("log.retention.ms")
    asyncio.run(main())
