"""LocalTieredStorage: Kafka's directory layout and RemoteStorageManager contract, on segments written by the
project's Log."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.storage.remote.local_tiered_storage import LocalTieredStorage
from broker.storage.remote.metadata import TopicIdPartition, random_uuid, uuid_to_string
from broker.storage.remote.storage_manager import (
    IndexType, LogSegmentData, RemoteResourceNotFoundException, RemoteStorageException,
)
from tests.harness.tiered_segments import rolled_segments, write_log

#: RemoteLogSegmentFileset.FILENAME_FORMAT and RemoteTopicPartitionDirectory's format (Kafka's test classes)
KAFKA_FILENAME = re.compile(r"(\d+-)([a-zA-Z0-9_-]{22})(\.[a-z_]+)")


@pytest.fixture
def segments(tmp_path: Path):
    log = write_log(tmp_path / "orders-2", batches=80, epochs=(0, 4))
    tip = TopicIdPartition(random_uuid(), "orders", 2)
    yield tip, rolled_segments(log, tip)
    log.close()


def _rsm(tmp_path: Path, **extra: str) -> LocalTieredStorage:
    rsm = LocalTieredStorage()
    rsm.configure({"dir": str(tmp_path / "remote"), "broker.id": 0, **extra})
    return rsm


def test_layout_is_kafkas(tmp_path: Path, segments) -> None:
    tip, segs = segments
    rsm = _rsm(tmp_path)
    for s in segs:
        assert rsm.copy_log_segment_data(s.metadata, s.data) is None
    part_dir = tmp_path / "remote" / "kafka-tiered-storage" / f"orders-2-{uuid_to_string(tip.topic_id)}"
    names = sorted(p.name for p in part_dir.iterdir())
    assert len(names) == 5 * len(segs)  # no transaction index: no .txnindex
    for name in names:
        assert KAFKA_FILENAME.fullmatch(name), name
    first = segs[0].metadata
    stem = f"{first.start_offset:020d}-{uuid_to_string(first.remote_log_segment_id.id)}"
    assert {f"{stem}{s}" for s in (".log", ".index", ".timeindex", ".leader_epoch_checkpoint", ".snapshot")} <= set(names)


def test_fetch_ranges_and_indexes(tmp_path: Path, segments) -> None:
    _, segs = segments
    rsm = _rsm(tmp_path)
    s = segs[0]
    rsm.copy_log_segment_data(s.metadata, s.data)
    whole = s.data.log_segment.read_bytes()
    assert rsm.fetch_log_segment(s.metadata, 0).read() == whole
    assert rsm.fetch_log_segment(s.metadata, 100, 199).read() == whole[100:200]  # end inclusive
    assert rsm.fetch_log_segment(s.metadata, 5000).read() == whole[5000:]
    size = s.metadata.segment_size_in_bytes
    assert rsm.fetch_log_segment(s.metadata, size - 1, size).read() == whole[-1:]
    with pytest.raises(ValueError):
        rsm.fetch_log_segment(s.metadata, 10, 9)
    with pytest.raises(ValueError):
        rsm.fetch_log_segment(s.metadata, 0, size + 1)
    assert rsm.fetch_index(s.metadata, IndexType.OFFSET).read() == s.data.offset_index.read_bytes()
    assert rsm.fetch_index(s.metadata, IndexType.TIMESTAMP).read() == s.data.time_index.read_bytes()
    assert rsm.fetch_index(s.metadata, IndexType.PRODUCER_SNAPSHOT).read() == \
        s.data.producer_snapshot_index.read_bytes()
    assert rsm.fetch_index(s.metadata, IndexType.LEADER_EPOCH).read() == s.data.leader_epoch_index
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_index(s.metadata, IndexType.TRANSACTION)


def test_missing_segment_and_delete(tmp_path: Path, segments) -> None:
    _, segs = segments
    rsm = _rsm(tmp_path)
    s = segs[0]
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(s.metadata, 0)
    rsm.copy_log_segment_data(s.metadata, s.data)
    rsm.delete_log_segment_data(s.metadata)
    rsm.delete_log_segment_data(s.metadata)  # idempotent
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(s.metadata, 0)


def test_failed_copy_leaves_nothing(tmp_path: Path, segments) -> None:
    _, segs = segments
    rsm = _rsm(tmp_path)
    s = segs[0]
    broken = LogSegmentData(s.data.log_segment, s.data.offset_index, s.data.time_index, None,
                            tmp_path / "no-such.snapshot", s.data.leader_epoch_index)
    with pytest.raises(RemoteStorageException):
        rsm.copy_log_segment_data(s.metadata, broken)
    assert not any(p.is_file() for p in (tmp_path / "remote").rglob("*"))


def test_configure_rules(tmp_path: Path) -> None:
    with pytest.raises(RemoteStorageException, match="Broker ID is required"):
        LocalTieredStorage().configure({"dir": str(tmp_path)})
    rsm = _rsm(tmp_path, **{"delete.enable": "false"})
    with pytest.raises(RemoteStorageException, match="already configured"):
        rsm.configure({"dir": str(tmp_path), "broker.id": 0})
