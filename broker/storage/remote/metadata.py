"""Tiered storage's metadata model (Kafka's storage-api: RemoteLogSegmentMetadata, its update,
RemotePartitionDeleteMetadata, their states), with Kafka's invariants and state transitions.

These are the values the RemoteLogMetadataManager stores in ``__remote_log_metadata`` (serde.py encodes them) and
what a RemoteStorageManager is handed to copy, fetch and delete a segment. Ids are Kafka Uuids: 16 bytes, shown as
unpadded base64url (RemoteLogSegmentId.id names the remote files, as in Kafka's LocalTieredStorage).
"""
from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional

#: Kafka's Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID, never issued by Uuid.randomUuid.
_RESERVED_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1))


def uuid_to_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: base64url of the 16 bytes without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_string(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString."""
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"Unable to parse {text!r} as a Kafka Uuid: {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw)


def random_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: random, never a reserved id, never a text form starting with '-'."""
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED_UUIDS and not uuid_to_string(u).startswith("-"):
            return u


class RemoteLogSegmentState(enum.IntEnum):
    """RemoteLogSegmentState ids (the int8 of the metadata records)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(src: Optional["RemoteLogSegmentState"], target: "RemoteLogSegmentState") -> bool:
        """STARTED -> FINISHED or DELETE_STARTED; FINISHED -> DELETE_STARTED -> DELETE_FINISHED; self transitions
        are valid (retries and failover); the first state is COPY_SEGMENT_STARTED."""
        S = RemoteLogSegmentState
        if src is None:
            return target == S.COPY_SEGMENT_STARTED
        if src == target:
            return True
        return (src, target) in ((S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
                                 (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
                                 (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
                                 (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED))


class RemotePartitionDeleteState(enum.IntEnum):
    """RemotePartitionDeleteState ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(src: Optional["RemotePartitionDeleteState"],
                            target: "RemotePartitionDeleteState") -> bool:
        """MARKED -> STARTED -> FINISHED, self transitions valid; the first state is MARKED."""
        if src is None:
            return target == RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return src == target or target == src + 1


@dataclass(frozen=True)
class TopicIdPartition:
    """Kafka's TopicIdPartition: a partition of one incarnation of a topic."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{uuid_to_string(self.topic_id)}:{self.topic}-{self.partition}"


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """A remote segment's id: unique even for the same partition and offsets (each copy attempt gets a new one)."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate(cls, tip: TopicIdPartition) -> "RemoteLogSegmentId":
        return cls(tip, random_uuid())


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """One remote segment (RemoteLogSegmentMetadata): offsets, size, leader epochs, state, custom metadata."""

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: Mapping[int, int]
    custom_metadata: Optional[bytes] = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"Unexpected start offset = {self.start_offset}. StartOffset for a remote segment "
                             "cannot be negative")
        if self.end_offset < self.start_offset:
            raise ValueError(f"Unexpected end offset = {self.end_offset}. EndOffset for a remote segment cannot be "
                             f"less than startOffset = {self.start_offset}")
        if not self.segment_leader_epochs:
            raise ValueError("segmentLeaderEpochs can not be null or empty")
        # a sorted copy (Kafka keeps a TreeMap): serialisation writes the epochs in ascending order
        object.__setattr__(self, "segment_leader_epochs", dict(sorted(self.segment_leader_epochs.items())))
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    def create_with_updates(self, update: "RemoteLogSegmentMetadataUpdate") -> "RemoteLogSegmentMetadata":
        """The segment after ``update`` (same id): its broker, event time, custom metadata and state."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError("Given rlsmUpdate does not have this instance's remoteLogSegmentId.")
        return replace(self, broker_id=update.broker_id, event_timestamp_ms=update.event_timestamp_ms,
                       custom_metadata=update.custom_metadata, state=update.state)


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate:
    """A state change of a remote segment (RemoteLogSegmentMetadataUpdate)."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: Optional[bytes]
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True)
class RemotePartitionDeleteMetadata:
    """A deletion step of a whole partition's remote data (RemotePartitionDeleteMetadata)."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RemotePartitionDeleteState(self.state))


@dataclass(frozen=True)
class RemoteLogSegmentMetadataSnapshot:
    """A segment's metadata without its partition (RemoteLogSegmentMetadataSnapshot, apiKey 3)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: Dict[int, int] = field(default_factory=dict)
    custom_metadata: Optional[bytes] = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        object.__setattr__(self, "segment_leader_epochs", dict(sorted(self.segment_leader_epochs.items())))
        object.__setattr__(self, "state", RemoteLogSegmentState(self.state))


__all__ = ["RemoteLogSegmentState", "RemotePartitionDeleteState", "TopicIdPartition", "RemoteLogSegmentId",
           "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate", "RemotePartitionDeleteMetadata",
           "RemoteLogSegmentMetadataSnapshot", "uuid_to_string", "uuid_from_string", "random_uuid"]
