"""Helpers of the tiered-storage process tests: what Kafka's LocalTieredStorage directory holds, a producer of
numbered records and a consumer that reads them back in order, ListOffsets -4/-5 on one broker, the remote segments'
records in ``__remote_log_metadata`` (read with the project's serde) and the checks on them."""
from __future__ import annotations

import re
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker.accel import record_batch
from broker.protocol.api import ApiKey
from broker.protocol.records.errors import RecordError
from broker.remote_log import metadata_serde
from broker.storage.remote.metadata import (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                                            RemoteLogSegmentState, uuid_to_string)
from tests.harness.cluster_ops import call
from tools.cluster import LocalCluster

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


def list_offset(bootstrap: str, topic: str, timestamp: int, partition: int = 0) -> Tuple[int, int, int]:
    """(error code, offset, leader epoch) of one ListOffsets v9 lookup on the partition at that broker."""
    r: Any = call(bootstrap, ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
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


@dataclass
class RemoteSegmentHistory:
    """One remote segment as ``__remote_log_metadata`` records it: its COPY_SEGMENT_STARTED metadata and every state
    recorded for it, in order, with the broker that recorded it."""

    metadata: RemoteLogSegmentMetadata
    states: List[Tuple[RemoteLogSegmentState, int]] = field(default_factory=list)

    @property
    def state(self) -> RemoteLogSegmentState:
        return self.states[-1][0]

    def reached(self, state: RemoteLogSegmentState) -> bool:
        return any(s == state for s, _ in self.states)


def remote_log_metadata(bootstrap: str, topic: str, timeout_s: float = 60) -> Dict[str, RemoteSegmentHistory]:
    """segment id (Kafka's Uuid text, as in the object names) -> its history, from every record of every partition
    of ``__remote_log_metadata`` up to the high watermark, decoded with broker.remote_log.metadata_serde (what a
    broker's RemoteLogMetadataManager consumes). A read that fails (a metadata partition without a leader just
    after a broker died) is made again until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _read_remote_log_metadata(bootstrap, topic, deadline)
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)  # the next try's back-off


def _read_remote_log_metadata(bootstrap: str, topic: str, deadline: float) -> Dict[str, RemoteSegmentHistory]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rlmm-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        md = c.list_topics(metadata_serde.METADATA_TOPIC, timeout=10).topics[metadata_serde.METADATA_TOPIC]
        if md.error is not None:
            raise KafkaException(md.error)
        ends = {p: c.get_watermark_offsets(TopicPartition(metadata_serde.METADATA_TOPIC, p), timeout=10)[1]
                for p in md.partitions}
        todo = {p: end for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(metadata_serde.METADATA_TOPIC, p, 0) for p in todo])
        out: Dict[str, RemoteSegmentHistory] = {}
        while todo:
            assert time.monotonic() < deadline, f"{metadata_serde.METADATA_TOPIC} not read to its end: {todo}"
            for m in c.consume(500, 1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                if m.offset() + 1 >= todo.get(m.partition(), 1 << 62):
                    todo.pop(m.partition())
                rec = metadata_serde.deserialize(m.value())
                if isinstance(rec, RemoteLogSegmentMetadata) and rec.topic_id_partition.topic == topic:
                    out[uuid_to_string(rec.remote_log_segment_id.id)] = RemoteSegmentHistory(
                        rec, [(rec.state, rec.broker_id)])
                elif isinstance(rec, RemoteLogSegmentMetadataUpdate) and rec.topic_id_partition.topic == topic:
                    out[uuid_to_string(rec.remote_log_segment_id.id)].states.append((rec.state, rec.broker_id))
        return out
    finally:
        c.close()


def assert_finished_copies_continue(history: Dict[str, RemoteSegmentHistory]) -> List[RemoteLogSegmentMetadata]:
    """The COPY_SEGMENT_FINISHED segments (by start offset) form one chain from offset 0 as Kafka 3.9's RLMCopyTask
    makes it: no gap, nothing copied twice (each segment ends past the one before it), and the only overlap is at a
    leader change: a new leader resumes after the highest finished offset but copies its whole local segment
    holding that offset (RLMCopyTask.candidateLogSegments takes ``logSegments(fromOffset, ...)``, the floor segment
    included, and replicas roll at their own points), so a segment starting inside the one before it must be
    another broker's. Returns the chain."""
    finished = sorted((h.metadata for h in history.values() if h.reached(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)),
                      key=lambda m: (m.start_offset, m.end_offset))
    assert finished and finished[0].start_offset == 0, [(m.start_offset, m.end_offset) for m in finished[:3]]
    for prev, cur in zip(finished, finished[1:]):
        span = f"{prev.start_offset}-{prev.end_offset} (broker {prev.broker_id}, epochs " \
               f"{dict(prev.segment_leader_epochs)}) then {cur.start_offset}-{cur.end_offset} (broker " \
               f"{cur.broker_id}, epochs {dict(cur.segment_leader_epochs)})"
        assert cur.start_offset <= prev.end_offset + 1, f"a gap between the copied segments: {span}"
        assert cur.end_offset > prev.end_offset, f"offsets copied twice: {span}"
        if cur.start_offset <= prev.end_offset:
            assert cur.broker_id != prev.broker_id, f"overlapping copies by one leader: {span}"
    return finished


def scrape_metrics(cluster: LocalCluster, broker_id: int) -> Dict[str, float]:
    """Every sample of the broker's Prometheus endpoint (``broker.metrics.prometheus.port``): name{labels} -> value."""
    port = cluster.brokers[broker_id].properties()["broker.metrics.prometheus.port"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out
