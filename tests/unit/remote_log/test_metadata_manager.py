"""TopicBasedRemoteLogMetadataManager: its cache comes only from the records it reads back, with Kafka's state
checks, so a second manager on the same topic sees the same segments."""
from __future__ import annotations

import uuid

import pytest

from broker.remote_log import metadata_serde
from broker.remote_log.metadata_manager import InMemoryMetadataTopic, TopicBasedRemoteLogMetadataManager
from broker.storage.remote.metadata import (
    RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
    RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
)
from broker.storage.remote.storage_manager import RemoteResourceNotFoundException, RemoteStorageException

S = RemoteLogSegmentState
TP0 = TopicIdPartition(uuid.UUID(int=0xAB), "foo", 0)
TP1 = TopicIdPartition(uuid.UUID(int=0xAB), "foo", 1)


def manager(topic: InMemoryMetadataTopic, partitions: int = 3) -> TopicBasedRemoteLogMetadataManager:
    m = TopicBasedRemoteLogMetadataManager(topic)
    m.configure({"remote.log.metadata.topic.num.partitions": partitions})
    return m


def segment(tip: TopicIdPartition, start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tip), start, end, -1, 0, 1, 100, epochs)


def finish(m: TopicBasedRemoteLogMetadataManager, md: RemoteLogSegmentMetadata, state: S = S.COPY_SEGMENT_FINISHED
           ) -> None:
    m.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 2, None, state, 0))


def test_defaults_and_topic_creation() -> None:
    topic = InMemoryMetadataTopic()
    m = TopicBasedRemoteLogMetadataManager(topic)
    with pytest.raises(RemoteStorageException):
        m.add_remote_log_segment_metadata(segment(TP0, 0, 9, {0: 0}))
    m.configure({})
    assert topic.created[metadata_serde.METADATA_TOPIC] == (
        50, 3, {"retention.ms": "-1", "cleanup.policy": "delete", "retention.bytes": "-1"})


def test_highest_offset_counts_finished_copies_only_and_a_second_manager_agrees() -> None:
    topic = InMemoryMetadataTopic()
    a = manager(topic)
    s0, s1 = segment(TP0, 0, 9, {0: 0}), segment(TP0, 10, 19, {0: 10, 1: 15})
    a.add_remote_log_segment_metadata(s0)
    a.add_remote_log_segment_metadata(s1)
    assert a.highest_offset_for_epoch(TP0, 0) is None
    finish(a, s0)
    assert a.highest_offset_for_epoch(TP0, 0) == 9
    finish(a, s1)
    assert (a.highest_offset_for_epoch(TP0, 1), a.highest_offset(TP0)) == (19, 19)
    assert a.remote_log_segment_metadata(TP0, 1, 16) == s1.create_with_updates(
        RemoteLogSegmentMetadataUpdate(s1.remote_log_segment_id, 2, None, S.COPY_SEGMENT_FINISHED, 0))
    b = manager(topic)
    assert [m.start_offset for m in b.list_remote_log_segments(TP0)] == [0, 10]
    assert [m.start_offset for m in b.list_remote_log_segments(TP0, 1)] == [10]
    assert list(b.list_remote_log_segments(TP1)) == []
    # every record is in TP0's metadata partition
    want = metadata_serde.metadata_partition(TP0, 3)
    assert [len(p) for i, p in enumerate(topic.topics[metadata_serde.METADATA_TOPIC]) if i != want] == [0, 0]


def test_invalid_transitions_and_unknown_segments_are_refused() -> None:
    m = manager(InMemoryMetadataTopic())
    s0 = segment(TP0, 0, 9, {0: 0})
    with pytest.raises(RemoteResourceNotFoundException):
        finish(m, s0)
    m.add_remote_log_segment_metadata(s0)
    with pytest.raises(ValueError):
        finish(m, s0, S.DELETE_SEGMENT_FINISHED)
    finish(m, s0, S.DELETE_SEGMENT_STARTED)
    finish(m, s0, S.DELETE_SEGMENT_FINISHED)
    assert list(m.list_remote_log_segments(TP0)) == []


def test_partition_delete_finished_clears_the_partition() -> None:
    topic = InMemoryMetadataTopic()
    m = manager(topic)
    s0 = segment(TP0, 0, 9, {0: 0})
    m.add_remote_log_segment_metadata(s0)
    finish(m, s0)
    for state in RemotePartitionDeleteState:
        m.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata(TP0, state, 3, 0))
    assert list(m.list_remote_log_segments(TP0)) == []
    assert list(manager(topic).list_remote_log_segments(TP0)) == []


def test_a_record_the_cache_refuses_is_skipped_by_consumers() -> None:
    topic = InMemoryMetadataTopic()
    m = manager(topic)
    s0 = segment(TP0, 0, 9, {0: 0})
    stray = RemoteLogSegmentMetadataUpdate(s0.remote_log_segment_id, 2, None, S.COPY_SEGMENT_FINISHED, 7)
    topic.append(metadata_serde.METADATA_TOPIC, m.metadata_partition(TP0), metadata_serde.serialize(stray))
    m.add_remote_log_segment_metadata(s0)
    finish(m, s0)
    assert [x.state for x in manager(topic).list_remote_log_segments(TP0)] == [S.COPY_SEGMENT_FINISHED]
