"""Tiered storage (KIP-405) end to end on 3 real broker processes (bin/, real ZooKeeper) with Kafka's
``LocalTieredStorage`` layout in a directory the brokers share: segments roll and are copied by the leader, local
segments past local.retention go, a stock consumer (confluent-kafka) reads every record from offset 0 across the
remote/local boundary; the leader is killed (-9) and the new leader continues copying from the metadata
(``__remote_log_metadata``) without copying any segment again."""
from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.cluster.conftest import ClusterView, wait_for
from tools.cluster import LocalCluster

LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
SEGMENT_BYTES = 16 * 1024
VALUE = 200


def _remote_segments(remote: Path) -> Dict[str, Tuple[int, int]]:
    """segment id -> (start offset, size) of every segment LocalTieredStorage holds."""
    out: Dict[str, Tuple[int, int]] = {}
    for f in remote.rglob("*.log"):
        m = re.match(r"(\d{20})-(.+)\.log$", f.name)
        if m:
            out[m.group(2)] = (int(m.group(1)), f.stat().st_size)
    return out


def _local_segments(cluster: LocalCluster, broker_id: int, topic: str) -> List[int]:
    d = cluster.brokers[broker_id].log_dir / f"{topic}-0"
    return sorted(int(f.stem) for f in d.glob("*.log")) if d.exists() else []


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 4096,
                  "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(topic, key=b"%d" % i, value=b"%08d" % i + b"x" * (VALUE - 8))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _consume_all(bootstrap: str, topic: str, n: int, timeout_s: float = 90) -> List[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.max.bytes": 1 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    seen: List[int] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.offset() == len(seen), (m.offset(), len(seen))
            seen.append(int(m.value()[:8]))
    finally:
        c.close()
    return seen


def test_tiered_topic_copies_deletes_locally_reads_back_and_survives_leader_kill(
        new_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    cluster = new_cluster(3, overrides={
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "500",
        "remote.fetch.max.wait.ms": "2000"})
    view = ClusterView(cluster.bootstrap)
    topic = "tiered"
    view.create_topic(topic, 1, 3, {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                                    "local.retention.ms": "1000", "retention.ms": "-1"})
    n1 = 3000  # ~600 KB: ~37 segments
    _produce(cluster.bootstrap, topic, 0, n1)
    leader = view.partitions(topic)[0][0]

    # segments are copied, and the leader's local log keeps only the tail
    wait_for(lambda: len(_remote_segments(remote)) >= 30, 90, "rolled segments copied to remote storage")
    wait_for(lambda: len(_local_segments(cluster, leader, topic)) <= 3, 60, "local segments past local.retention "
             "deleted on the leader")
    wait_for(lambda: all(len(_local_segments(cluster, b, topic)) <= 3 for b in range(3)), 60,
             "followers delete copied segments too")
    assert _local_segments(cluster, leader, topic)[0] > 0

    # a stock consumer reads every record from offset 0, most of them from remote storage
    assert _consume_all(cluster.bootstrap, topic, n1) == list(range(n1))

    before = _remote_segments(remote)
    starts = sorted(s for s, _ in before.values())
    assert len(starts) == len(set(starts)), "a segment was copied twice"

    # kill -9 the leader: the new leader continues from the metadata, no segment is copied again
    cluster.brokers[leader].kill()
    wait_for(lambda: view.partitions(topic)[0][0] not in (-1, leader), 60, "a new leader")
    _produce(cluster.bootstrap, topic, n1, 1000)
    wait_for(lambda: len(_remote_segments(remote)) >= len(before) + 8, 90, "the new leader copies new segments")
    after = _remote_segments(remote)
    assert set(before) <= set(after)
    starts_after = sorted(s for s, _ in after.values())
    assert len(starts_after) == len(set(starts_after)), "a segment was copied again after the leader change"
    assert min(s for k, (s, _) in after.items() if k not in before) > max(starts), "a gap or an overlap"
    assert _consume_all(cluster.bootstrap, topic, n1 + 1000) == list(range(n1 + 1000))
