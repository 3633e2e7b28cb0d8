"""Helpers of the tiered-storage process tests: what Kafka's LocalTieredStorage directory holds, a producer of
numbered records and a consumer that reads them back in order, ListOffsets -4/-5 on one broker."""
from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.accel import record_batch
from broker.protocol.api import ApiKey
from broker.protocol.records.errors import RecordError
from tests.harness.cluster_ops import call

#: remote.log.storage.manager.class.name of Kafka's LocalTieredStorage (the project maps it to its own)
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
#: ListOffsets timestamps: EARLIEST_LOCAL_TIMESTAMP (v8+), LATEST_TIERED_TIMESTAMP (v9)
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
VALUE = 200


def remote_segments(remote: Path) -> Dict[str, Tuple[int, int]]:
    """segment id -> (start offset, size) of every segment LocalTieredStorage holds."""
    out: Dict[str, Tuple[int, int]] = {}
    for f in remote.rglob("*.log"):
        m = re.match(r"(\d{20})-(.+)\.log$", f.name)
        if m:
            out[m.group(2)] = (int(m.group(1)), f.stat().st_size)
    return out


def local_segments(log_dir: Path, topic: str, partition: int = 0) -> List[int]:
    """Base offsets of the segments a broker's log directory holds for the partition."""
    d = Path(log_dir) / f"{topic}-{partition}"
    return sorted(int(f.stem) for f in d.glob("*.log")) if d.exists() else []


def produce_numbered(bootstrap: str, topic: str, start: int, n: int) -> None:
    """Records ``start`` .. ``start + n - 1`` (the number in the first 8 bytes), idempotent, acks=all."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 4096,
                  "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(topic, key=b"%d" % i, value=b"%08d" % i + b"x" * (VALUE - 8))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def consume_numbered(bootstrap: str, topic: str, n: int, timeout_s: float = 90) -> List[int]:
    """The numbers of the first ``n`` records from offset 0 (each record's offset checked against its place)."""
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


def list_offset(bootstrap: str, topic: str, timestamp: int) -> Tuple[int, int, int]:
    """(error code, offset, leader epoch) of one ListOffsets v9 lookup on partition 0 at that broker."""
    r: Any = call(bootstrap, ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = r.topics[0].partitions[0]
    return p.error_code, p.offset, p.leader_epoch


def remote_ranges(remote: Path) -> Dict[str, Tuple[int, int]]:
    """segment id -> (first offset, last offset) of every segment LocalTieredStorage holds (read from its batches)."""
    out: Dict[str, Tuple[int, int]] = {}
    for f in remote.rglob("*.log"):
        m = re.match(r"(\d{20})-(.+)\.log$", f.name)
        if m:
            try:
                batches = record_batch.validate_batches(bytearray(f.read_bytes()), False)
            except (RecordError, OSError):  # a copy still being written
                continue
            if batches:
                out[m.group(2)] = (int(m.group(1)), batches[-1].base_offset + batches[-1].last_offset_delta)
    return out


def remote_end_offset(remote: Path) -> int:
    """The last offset of the remote segments (what ListOffsets -5 answers once the copies caught up); -1: none."""
    return max((end for _, end in remote_ranges(remote).values()), default=-1)


def assert_copies_continue(before: Dict[str, Tuple[int, int]], after: Dict[str, Tuple[int, int]]) -> None:
    """What a leader copied after ``before`` (segment id -> (first, last offset)) continues it as Kafka's
    RLMCopyTask does: nothing removed; every new segment holds offsets past what was copied (the one that
    overlaps is the new leader's segment holding the first offset not copied yet: replicas roll their segments
    at their own points) and none starts past the end of what was copied before it (no gap)."""
    assert set(before) <= set(after), "remote segments disappeared"
    copied_end = max((end for _, end in before.values()), default=-1)
    for start, end in sorted(r for sid, r in after.items() if sid not in before):
        assert end > copied_end, f"segment {start}-{end} copied again (everything up to {copied_end} was copied)"
        assert start <= copied_end + 1, f"a gap: segment {start}-{end} after copies up to {copied_end}"
        copied_end = end
