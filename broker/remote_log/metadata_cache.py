"""RemoteLogMetadataCache: one user partition's remote segments as the metadata records built them, with Kafka's
state checks. The TopicBasedRemoteLogMetadataManager fills it only from what it consumed back from
``__remote_log_metadata``, so every broker that consumes the topic builds the same cache."""
from __future__ import annotations

from typing import Dict, Iterator, Optional

from broker.storage.remote.metadata import (
    RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteState,
)
from broker.storage.remote.storage_manager import RemoteResourceNotFoundException


class RemoteLogMetadataCache:
    """Kafka's RemoteLogMetadataCache (one partition): segments by id; DELETE_SEGMENT_FINISHED removes one."""

    def __init__(self) -> None:
        self._segments: Dict[object, RemoteLogSegmentMetadata] = {}
        self.partition_delete_state: Optional[RemotePartitionDeleteState] = None

    def add_copy_in_progress_segment(self, md: RemoteLogSegmentMetadata) -> None:
        if md.state != RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(f"Given remoteLogSegmentMetadata should have state as "
                             f"{RemoteLogSegmentState.COPY_SEGMENT_STARTED.name} but it contains state as: "
                             f"{md.state.name}")
        self._segments[md.remote_log_segment_id] = md

    def check_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """The segment ``update`` applies to; raises if unknown or if the transition is invalid."""
        current = self._segments.get(update.remote_log_segment_id)
        if current is None:
            raise RemoteResourceNotFoundException(f"No remote log segment metadata found for :"
                                                  f"{update.remote_log_segment_id}")
        if not RemoteLogSegmentState.is_valid_transition(current.state, update.state):
            raise ValueError(f"Current state: {current.state.name}, target state: {update.state.name}")
        return current

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        current = self.check_update(update)
        if update.state == RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self._segments[update.remote_log_segment_id]
        else:
            self._segments[update.remote_log_segment_id] = current.create_with_updates(update)

    def list_all_remote_log_segments(self) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment not yet deleted, in start offset order (copies in progress included, as Kafka)."""
        return iter(sorted(self._segments.values(), key=lambda m: (m.start_offset, m.end_offset)))

    def list_remote_log_segments(self, leader_epoch: int) -> Iterator[RemoteLogSegmentMetadata]:
        return (m for m in self.list_all_remote_log_segments() if leader_epoch in m.segment_leader_epochs)

    def _finished(self) -> Iterator[RemoteLogSegmentMetadata]:
        return (m for m in self._segments.values() if m.state == RemoteLogSegmentState.COPY_SEGMENT_FINISHED)

    def highest_offset_for_epoch(self, leader_epoch: int) -> Optional[int]:
        """The highest end offset of a finished copy holding ``leader_epoch`` (None: none)."""
        ends = [m.end_offset for m in self._finished() if leader_epoch in m.segment_leader_epochs]
        return max(ends) if ends else None

    def highest_offset(self) -> Optional[int]:
        """The highest end offset of any finished copy (what a new leader resumes after)."""
        ends = [m.end_offset for m in self._finished()]
        return max(ends) if ends else None

    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> Optional[RemoteLogSegmentMetadata]:
        """The finished segment holding ``offset`` written in ``leader_epoch``."""
        for m in self._finished():
            if m.start_offset <= offset <= m.end_offset and leader_epoch in m.segment_leader_epochs:
                return m
        return None


__all__ = ["RemoteLogMetadataCache"]
