"""DynamicConfigManager's SCRAM sink: users/<user> notifications (and start-up) reach the credential cache."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

from broker.cluster.dynamic_config import DynamicConfigManager
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.kafka_config import KafkaConfig
from broker.security.credential_cache import ScramCredentialCache
from broker.security.scram import ScramCredential, format_credential
from tests.unit.cluster.test_dynamic_config import FakeZk, InlineCalls, settle

CRED = ScramCredential.from_password("SCRAM-SHA-256", "pw", iterations=4096)


class UsersZk(FakeZk):
    def get_children(self, path: str) -> List[str]:
        kind = path.split("/")[2]
        if path.count("/") == 2:
            return sorted({n.split("/")[0] for k, n in self.entities if k == kind})
        user = path.split("/")[3]
        return sorted({n.split("/")[2] for k, n in self.entities if k == "users" and n.startswith(f"{user}/")})


def make(with_quotas: bool) -> Tuple[DynamicConfigManager, UsersZk, ScramCredentialCache, List[Any]]:
    cfg = DynamicBrokerConfig(KafkaConfig({"broker.id": "1", "zookeeper.connect": "zk:2181",
                                           "log.dirs": "/tmp/x"}, warn_unknown=False))
    zk = UsersZk()
    cache = ScramCredentialCache()
    quotas: List[Any] = []
    mgr = DynamicConfigManager(cfg, zk, InlineCalls(), lambda t, c: None, lambda: set(),  # type: ignore[arg-type]
                               quota_sink=(lambda e, v: quotas.append((e, v))) if with_quotas else None,
                               scram_sink=cache.update)
    return mgr, zk, cache, quotas


def test_start_up_loads_every_users_credentials() -> None:
    async def main() -> None:
        for with_quotas in (True, False):
            mgr, zk, cache, quotas = make(with_quotas)
            zk.entities[("users", "al%40ice")] = {"SCRAM-SHA-256": format_credential(CRED), "producer_byte_rate": "5"}
            zk.entities[("users", "al%40ice/clients/app")] = {"SCRAM-SHA-512": format_credential(CRED)}
            zk.entities[("users", "<default>")] = {"SCRAM-SHA-256": format_credential(CRED)}
            await mgr.start()
            assert cache.get("SCRAM-SHA-256", "al@ice") == CRED  # desanitized user name
            assert cache.get("SCRAM-SHA-512", "al@ice") is None  # users/<u>/clients/<c> carries no credentials
            assert cache.get("SCRAM-SHA-256", "<default>") is None
            assert bool(quotas) == with_quotas
            await mgr.stop()
    asyncio.run(main())


def test_notifications_update_and_remove_credentials() -> None:
    async def main() -> None:
        mgr, zk, cache, _ = make(True)
        await mgr.start()
        zk.entities[("users", "bob")] = {"SCRAM-SHA-512": format_credential(CRED)}
        zk.callback(["users/bob"])
        await settle()
        assert cache.get("SCRAM-SHA-512", "bob") == CRED
        zk.entities[("users", "bob")] = {"producer_byte_rate": "10"}  # credential deleted, quota kept
        zk.callback(["users/bob"])
        await settle()
        assert cache.get("SCRAM-SHA-512", "bob") is None
        await mgr.stop()
    asyncio.run(main())


def test_a_scram_sink_alone_is_enough() -> None:
    async def main() -> None:
        mgr, zk, cache, _ = make(False)
        await mgr.start()
        entities: Dict[Tuple[str, str], Dict[str, str]] = zk.entities
        entities[("users", "carol")] = {"SCRAM-SHA-256": format_credential(CRED)}
        zk.callback(["users/carol", "clients/x", "ips/1.2.3.4"])
        await settle()
        assert cache.get("SCRAM-SHA-256", "carol") == CRED
        await mgr.stop()
    asyncio.run(main())
