"""RemoteLogManager's write side over a real Log (tmp dir), Kafka's LocalTieredStorage layout and the topic-based
metadata manager on an in-memory ``__remote_log_metadata``: every task runs inline (``run_once``), time is a
ManualClock."""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest

from broker.protocol.records.builder import build_batch
from broker.remote_log import metadata_serde
from broker.remote_log.metadata_manager import InMemoryMetadataTopic, TopicBasedRemoteLogMetadataManager
from broker.remote_log.quota import RLMQuotaManager
from broker.remote_log.remote_log_manager import RemoteLogManager
from broker.storage.config import LogConfig
from broker.storage.errors import OffsetMovedToTieredStorageError, OffsetOutOfRangeError
from broker.storage.log import Log
from broker.storage.tiered_log import copyable_segments
from broker.storage.remote.local_tiered_storage import LocalTieredStorage
from broker.storage.remote.metadata import (
    RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState, TopicIdPartition,
)
from broker.storage.remote.storage_manager import IndexType, RemoteStorageException
from broker.util.clock import ManualClock

S = RemoteLogSegmentState
TS = 1_700_000_000_000
TIP = TopicIdPartition(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788), "tiered", 0)
ONE = len(build_batch([(b"k", b"v" * 20, [], TS)]))


def batch(ts: int) -> bytearray:
    return bytearray(build_batch([(b"k", b"v" * 20, [], ts)]))


class Env:
    """A tiered Log of 2-batch segments, its RSM, metadata topic and a RemoteLogManager per broker."""

    def __init__(self, tmp: Path, config: LogConfig) -> None:
        self.tmp = tmp
        self.clock = ManualClock(TS)
        self.log = Log.open(str(tmp / "tiered-0"), config, clock=self.clock, remote_log_enabled=True)
        self.topic = InMemoryMetadataTopic()
        self.rsm = LocalTieredStorage()
        self.rsm.configure({"broker.id": 0, "dir": str(tmp / "remote")})
        self.rlms: list[RemoteLogManager] = []

    def rlm(self, broker_id: int = 0, log: Optional[Log] = None) -> RemoteLogManager:
        rlmm = TopicBasedRemoteLogMetadataManager(self.topic)
        rlmm.configure({"remote.log.metadata.topic.num.partitions": 7,
                        "remote.log.metadata.topic.replication.factor": 1})
        target = self.log if log is None else log
        rlm = RemoteLogManager(broker_id, self.rsm, rlmm, lambda t, p: target, clock=self.clock)
        self.rlms.append(rlm)
        return rlm

    def append(self, n: int, ts: Optional[int] = None) -> None:
        for i in range(n):
            self.log.append_as_leader(batch(self.clock.now_ms if ts is None else ts), 3)
        self.log.update_high_watermark(self.log.log_end_offset)

    def records(self) -> list[tuple[int, metadata_serde.RemoteLogMetadata]]:
        """Every metadata record written, decoded, with the partition it is in."""
        out: list[tuple[int, metadata_serde.RemoteLogMetadata]] = []
        for p, values in enumerate(self.topic.topics[metadata_serde.METADATA_TOPIC]):
            out += [(p, metadata_serde.deserialize(v)) for v in values]
        return out

    def remote_files(self) -> list[str]:
        root = self.tmp / "remote"
        return sorted(p.name for p in root.rglob("*") if p.is_file())


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=-2))
    yield e
    e.log.close()


def states(env: Env) -> list[tuple[int, int, S]]:
    """(start, end, state) of each segment in the metadata, as a fresh manager builds it from the topic."""
    rlmm = TopicBasedRemoteLogMetadataManager(env.topic)
    rlmm.configure({"remote.log.metadata.topic.num.partitions": 7})
    return [(m.start_offset, m.end_offset, m.state) for m in rlmm.list_remote_log_segments(TIP)]


def test_copies_only_rolled_segments_below_the_lso_in_order(env: Env) -> None:
    env.append(5)  # segments [0,1] [2,3] [4 active]
    env.log.update_high_watermark(3)  # [2,3] ends at 3: not below the HW
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    rlm.run_once()
    assert states(env) == [(0, 1, S.COPY_SEGMENT_FINISHED)]
    env.log.update_high_watermark(5)
    rlm.run_once()
    assert states(env) == [(0, 1, S.COPY_SEGMENT_FINISHED), (2, 3, S.COPY_SEGMENT_FINISHED)]
    assert env.log.highest_offset_in_remote_storage == 3
    # the active segment never goes, whatever the bound
    assert [c.segment.base_offset for c in copyable_segments(env.log, 0, bound=1 << 62)] == [0, 2]
    assert [c.segment.base_offset for c in copyable_segments(env.log, 2, bound=1 << 62)] == [2]
    rlm.run_once()
    assert len(states(env)) == 2
    # each copy: segment, indexes, producer snapshot, leader-epoch slice
    suffixes = {os.path.splitext(n)[1] for n in env.remote_files()}
    assert {".log", ".index", ".timeindex", ".snapshot", ".leader_epoch_checkpoint"} <= suffixes
    md = next(iter(rlm.rlmm.list_remote_log_segments(TIP)))
    assert md.segment_leader_epochs == {3: 0}
    assert env.rsm.fetch_index(md, IndexType.LEADER_EPOCH).read() == b"0\n1\n3 0\n"
    with env.rsm.fetch_log_segment(md, 0) as f:
        assert f.read() == Path(env.log.segments[0].path).read_bytes()


def test_records_decode_in_the_partitions_metadata_partition(env: Env) -> None:
    env.append(3)
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    rlm.run_once()
    recs = env.records()
    want = metadata_serde.metadata_partition(TIP, 7)
    assert {p for p, _ in recs} == {want}
    first, second = (r for _, r in recs)
    assert isinstance(first, RemoteLogSegmentMetadata) and first.state == S.COPY_SEGMENT_STARTED
    assert isinstance(second, RemoteLogSegmentMetadataUpdate) and second.state == S.COPY_SEGMENT_FINISHED
    assert second.remote_log_segment_id == first.remote_log_segment_id
    assert (first.start_offset, first.end_offset, first.broker_id) == (0, 1, 0)
    assert env.topic.created[metadata_serde.METADATA_TOPIC][:2] == (7, 1)
    assert env.topic.created[metadata_serde.METADATA_TOPIC][2]["retention.ms"] == "-1"


def test_local_retention_deletes_only_copied_segments_and_keeps_log_start(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    try:
        e.append(7)  # [0,1] [2,3] [4,5] [6]
        e.clock.advance(10)
        assert e.log.delete_old_segments() == 0  # nothing copied: nothing local may go
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        e.log.update_high_watermark(4)  # only [0,1] and [2,3] are copyable
        rlm.run_once()
        assert e.log.delete_old_segments() == 2
        assert [s.base_offset for s in e.log.segments] == [4, 6]
        assert e.log.log_start_offset == 0 and e.log.local_log_start_offset == 4
        assert e.log.offsets.local_log_start_offset == 4
        with pytest.raises(OffsetMovedToTieredStorageError):
            e.log.read(0, 1 << 20)
        assert e.log.read(4, 1 << 20).records is not None
        e.log.maybe_increment_log_start_offset(1)
        with pytest.raises(OffsetOutOfRangeError) as info:
            e.log.read(0, 1 << 20)
        assert type(info.value) is OffsetOutOfRangeError
    finally:
        e.log.close()


def test_local_retention_minus_two_uses_total_retention(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=5, local_retention_ms=-2))
    try:
        e.append(5, ts=TS - 100)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()  # copies [0,1] [2,3]; expiration ran first over nothing... then deletes next run
        assert e.log.delete_old_segments() == 2
        assert e.log.local_log_start_offset == 4
    finally:
        e.log.close()


def test_log_start_checkpoint_reload_keeps_remote_log_start(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, local_retention_ms=0))
    e.append(5)
    rlm = e.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    rlm.run_once()
    e.clock.advance(10)
    assert e.log.delete_old_segments() == 2
    e.log.close()
    log = Log.open(str(tmp_path / "tiered-0"), e.log.config, clock=e.clock, log_start_offset=0,
                   remote_log_enabled=True, clean_shutdown=True)
    try:
        assert (log.log_start_offset, log.local_log_start_offset) == (0, 4)
    finally:
        log.close()


def test_new_leader_resumes_after_the_highest_copied_offset(env: Env) -> None:
    env.append(5)
    first = env.rlm(broker_id=0)
    first.on_leadership_change({TIP: 3}, set())
    first.run_once()
    first.on_leadership_change({}, {TIP})
    assert len(env.records()) == 4
    env.append(2)  # [4,5] rolls
    second = env.rlm(broker_id=1)
    second.on_leadership_change({TIP: 4}, set())
    second.run_once()
    recs = [r for _, r in env.records()]
    assert len(recs) == 6  # only [4,5] was copied
    started = [r for r in recs if isinstance(r, RemoteLogSegmentMetadata)]
    assert [(r.start_offset, r.broker_id) for r in started] == [(0, 0), (2, 0), (4, 1)]
    # the follower learns the highest copied offset
    follower_log = env.log
    follower_log.highest_offset_in_remote_storage = -1
    first.run_once()
    assert follower_log.highest_offset_in_remote_storage == 5


def test_failed_copy_is_retried_with_a_new_id(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.append(3)
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())

    def fail(*a: object) -> None:
        raise RemoteStorageException("down")

    monkeypatch.setattr(env.rsm, "copy_log_segment_data", fail)
    rlm.run_once()
    assert states(env) == [(0, 1, S.COPY_SEGMENT_STARTED)]
    assert env.log.highest_offset_in_remote_storage == -1
    monkeypatch.undo()
    rlm.run_once()
    assert sorted(st for _, _, st in states(env)) == [S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED]
    assert env.log.highest_offset_in_remote_storage == 1


def test_expiration_deletes_remote_segments_and_advances_log_start(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=1000, local_retention_ms=0))
    try:
        e.append(4, ts=TS - 5000)
        e.append(3)  # [0,1] [2,3] old; [4,5] new; [6] active
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()  # one sweep: the copy task copies the three rolled segments, then expiration runs
        copies = [r for _, r in e.records() if isinstance(r, RemoteLogSegmentMetadata)]
        assert [(r.start_offset, r.end_offset) for r in copies] == [(0, 1), (2, 3), (4, 5)]
        assert states(e) == [(4, 5, S.COPY_SEGMENT_FINISHED)]
        assert e.log.log_start_offset == 4
        kinds = [(type(r).__name__, getattr(r, "state", None)) for _, r in e.records()]
        assert kinds[-4:] == [("RemoteLogSegmentMetadataUpdate", S.DELETE_SEGMENT_STARTED),
                              ("RemoteLogSegmentMetadataUpdate", S.DELETE_SEGMENT_FINISHED)] * 2
        assert sum(n.endswith(".log") for n in e.remote_files()) == 1
    finally:
        e.log.close()


def test_retention_bytes_counts_local_and_remote(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1, retention_bytes=ONE * 4,
                                local_retention_ms=-1, local_retention_bytes=-1))
    try:
        e.append(7)  # 7 batches: [0,1] [2,3] [4,5] [6]
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        # 7 batches (6 remote, 1 only local), limit 4: the oldest segment goes (5 left); the next would leave 3,
        # below the limit, so it stays (Kafka's remainingBreachedSize - segmentSize >= 0)
        assert [s for s, _, _ in states(e)] == [2, 4]
        assert e.log.log_start_offset == 2
        e.append(2)  # [6,7] rolls and is copied: 7 batches from offset 2; [2,3] goes, 5 left; [4,5] stays
        rlm.run_once()
        assert [s for s, _, _ in states(e)] == [4, 6]
        assert e.log.log_start_offset == 4
    finally:
        e.log.close()


def test_deleted_topic_deletes_its_remote_data(env: Env) -> None:
    env.append(5)
    rlm = env.rlm()
    rlm.on_leadership_change({TIP: 3}, set())
    rlm.run_once()
    assert sum(n.endswith(".log") for n in env.remote_files()) == 2
    rlm.stop_partitions({TIP}, delete_remote_log=True)
    assert env.remote_files() == []
    recs = [r for _, r in env.records()]
    deletes = [r.state for r in recs if isinstance(r, RemotePartitionDeleteMetadata)]
    assert deletes == [RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                       RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
                       RemotePartitionDeleteState.DELETE_PARTITION_FINISHED]
    assert states(env) == []
    assert not rlm.leader_copy_tasks and not rlm.leader_expiration_tasks


def test_a_non_tiered_log_is_left_alone(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2))
    e.log.remote_log_enabled = False
    try:
        e.append(5)
        rlm = e.rlm()
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        assert e.records() == []
    finally:
        e.log.close()


def test_copy_quota_defers_the_rest_to_a_later_run(tmp_path: Path) -> None:
    e = Env(tmp_path, LogConfig(segment_bytes=ONE * 2, retention_ms=-1))
    try:
        e.append(7)  # three rolled segments of 2 * ONE bytes
        rlmm = TopicBasedRemoteLogMetadataManager(e.topic)
        rlmm.configure({"remote.log.metadata.topic.num.partitions": 7})
        # 10 windows of 1 s as the floor: 2 * ONE bytes copied is a rate of ONE / 5 per second
        rlm = RemoteLogManager(0, e.rsm, rlmm, lambda t, p: e.log, clock=e.clock, copy_max_bytes_per_second=ONE // 6)
        rlm.on_leadership_change({TIP: 3}, set())
        rlm.run_once()
        assert [s for s, _, _ in states(e)] == [0]
        rlm.run_once()
        assert [s for s, _, _ in states(e)] == [0]
        e.clock.advance(11_000)  # the sample has left the 11 windows
        rlm.run_once()
        assert [s for s, _, _ in states(e)] == [0, 2]
    finally:
        e.log.close()


def test_quota_manager_rate() -> None:
    clock = ManualClock(10_000)
    q = RLMQuotaManager(100, clock.mono_ms, num_windows=11, window_ms=1000)
    assert not q.is_quota_exceeded()
    q.record(1000)
    assert q.rate() == 100.0 and not q.is_quota_exceeded()
    q.record(1)
    assert q.is_quota_exceeded()
    clock.advance(11_000)
    assert q.rate() == 0.0
