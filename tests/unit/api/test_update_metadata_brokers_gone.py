"""UpdateMetadata handing the replica manager the brokers it no longer lists as alive (their followers stop holding
a leader's HW: ``ReplicaManager.brokers_gone``), and nothing when every broker stays."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, List, Set

from broker.api import update_metadata as handler
from broker.cluster.metadata_cache import MetadataCache
from broker.protocol import api as proto
from broker.protocol.api import ApiKey

from .test_metadata_answers import BROKERS, topics_state


class FakeReplicaManager:
    def __init__(self) -> None:
        self.controller_epoch = 0
        self.gone: List[Set[int]] = []
        self.delayed_elect_leader_purgatory = SimpleNamespace(watching=lambda: False)

    def brokers_gone(self, broker_ids: Set[int]) -> None:
        self.gone.append(set(broker_ids))


def send(m: MetadataCache, rm: FakeReplicaManager, brokers: List[Any], version: int = 8) -> dict:
    body = {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1, "topic_states": topics_state(),
            "live_brokers": brokers}
    frame = memoryview(proto.encode_request(ApiKey.UPDATE_METADATA, version, 1, "controller", body))[4:]
    _, offset = proto.decode_request_header(frame)
    request = proto.decode_request(ApiKey.UPDATE_METADATA, version, frame, offset)
    ctx = SimpleNamespace(api_version=version)
    return asyncio.run(handler.handle(ctx, request, metadata=m, replica_manager=rm,  # type: ignore[arg-type]
                                      broker_epoch=lambda: 1))


def test_brokers_dropped_from_the_live_list_reach_the_replica_manager() -> None:
    m, rm = MetadataCache(0), FakeReplicaManager()
    assert send(m, rm, BROKERS)["error_code"] == 0
    assert rm.gone == []  # nothing was alive before: nobody went away
    assert send(m, rm, BROKERS)["error_code"] == 0
    assert rm.gone == []  # the same brokers
    assert send(m, rm, [b for b in BROKERS if b["id"] != 2])["error_code"] == 0
    assert rm.gone == [{2}]
    assert send(m, rm, BROKERS)["error_code"] == 0  # broker 2 back: nothing to recompute
    assert rm.gone == [{2}]
