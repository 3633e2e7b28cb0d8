"""MetadataCache.update_metadata: what an UpdateMetadata changes, and that what it leaves alone keeps its identity
(the prepared Metadata answers, broker.api.metadata_answers, are invalidated by identity)."""
from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional

from broker.cluster.metadata_cache import MetadataCache, PartitionMeta
from broker.protocol import api as proto
from broker.protocol.api import ApiKey

TID = uuid.UUID(int=1)


def state(p: int, leader: int = 0, epoch: int = 1, isr: Optional[List[int]] = None) -> Dict[str, Any]:
    return {"partition_index": p, "controller_epoch": 1, "leader": leader, "leader_epoch": epoch,
            "isr": [0] if isr is None else isr, "zk_version": 1, "replicas": [0, 1], "offline_replicas": [1]}


def apply(m: MetadataCache, topics: List[Dict[str, Any]], hosts: str = "h") -> List[Any]:
    body = {"controller_id": 0, "controller_epoch": 3, "broker_epoch": 1, "topic_states": topics,
            "live_brokers": [{"id": b, "rack": None, "endpoints": [
                {"port": 9092, "host": f"{hosts}{b}", "listener": "PLAINTEXT", "security_protocol": 0}]}
                for b in (0, 1)]}
    frame = memoryview(proto.encode_request(ApiKey.UPDATE_METADATA, 8, 1, "c", body))[4:]
    _, offset = proto.decode_request_header(frame)
    return m.update_metadata(proto.decode_request(ApiKey.UPDATE_METADATA, 8, frame, offset), 8)


def test_update_metadata_applies_states_ids_and_deletions() -> None:
    m = MetadataCache(0)
    assert apply(m, [{"topic_name": "t", "topic_id": TID, "partition_states": [state(1), state(0, leader=1)]}]) == []
    t = m.topics["t"]
    assert m.initialized and m.controller_epoch == 3 and t.topic_id == TID and m.topic_name(TID) == "t"
    assert t.partitions[0] == PartitionMeta(0, 1, 1, (0, 1), (0,), 1, 1, (1,))
    assert m.brokers[1].endpoint("PLAINTEXT").host == "h1"
    assert apply(m, [{"topic_name": "t", "topic_id": TID, "partition_states": [state(1, leader=-2)]}]) == [("t", 1)]
    assert sorted(m.topics["t"].partitions) == [0]
    assert apply(m, [{"topic_name": "t", "topic_id": TID, "partition_states": [state(0, leader=-2)]}]) == [("t", 0)]
    assert "t" not in m.topics and m.topic_name(TID) is None
    assert apply(m, [{"topic_name": "u", "topic_id": TID, "partition_states": [state(0, leader=-2)]}]) == [("u", 0)]
    assert "u" not in m.topics


def test_what_an_update_leaves_alone_stays_the_same_object() -> None:
    m = MetadataCache(0)
    topics = [{"topic_name": n, "topic_id": uuid.UUID(int=i + 1), "partition_states": [state(p) for p in range(3)]}
              for i, n in enumerate(("a", "b"))]
    apply(m, topics)
    a, b, brokers = m.topics["a"], m.topics["b"], m.brokers
    apply(m, topics)  # a full resend, as to a broker that rejoined
    assert m.topics["a"] is a and m.topics["b"] is b and m.brokers is brokers
    apply(m, [{"topic_name": "a", "topic_id": uuid.UUID(int=1), "partition_states": [state(2, epoch=2)]}])
    assert m.topics["a"] is not a and m.topics["b"] is b and m.brokers is brokers
    assert m.topics["a"].partitions[0] is a.partitions[0] and m.topics["a"].partitions[2].leader_epoch == 2
    a = m.topics["a"]
    apply(m, [{"topic_name": "a", "topic_id": uuid.UUID(int=9), "partition_states": []}])  # only the id changes
    assert m.topics["a"] is not a and m.topics["a"].topic_id == uuid.UUID(int=9)
    assert m.topic_name(uuid.UUID(int=1)) is None and m.topic_name(uuid.UUID(int=9)) == "a"
    apply(m, [], hosts="moved")
    assert m.brokers is not brokers and m.topics["b"] is b
