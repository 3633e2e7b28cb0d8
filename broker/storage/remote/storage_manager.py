"""The RemoteStorageManager plug-in interface (Kafka's storage-api RemoteStorageManager): copy a rolled segment with
its indexes to remote storage, read it (or a byte range of it) and its indexes back, delete it.

The RemoteLogManager calls it with a RemoteLogSegmentMetadata whose segment id is new for every copy attempt, and
records COPY_SEGMENT_FINISHED only after ``copy_log_segment_data`` returned: an implementation must return only
once every object of the segment is durably written, and raise RemoteStorageException otherwise. Copy and delete
are idempotent. Implementations: local_tiered_storage.LocalTieredStorage (Kafka's LocalTieredStorage layout),
s3_storage.S3RemoteStorageManager.
"""
from __future__ import annotations

import abc
import enum
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Mapping, Optional

from broker.storage.remote.metadata import RemoteLogSegmentMetadata


class RemoteStorageException(Exception):
    """RemoteStorageException: the remote storage failed (retriable by the caller)."""


class RemoteResourceNotFoundException(RemoteStorageException):
    """RemoteResourceNotFoundException: the segment or index asked for is not in remote storage."""


class IndexType(enum.Enum):
    """RemoteStorageManager.IndexType."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"


@dataclass(frozen=True)
class LogSegmentData:
    """LogSegmentData: the files of one rolled segment, the producer snapshot as of its end and the leader-epoch
    checkpoint (bytes of Kafka's checkpoint text format) up to its end."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Optional[Path]
    producer_snapshot_index: Path
    leader_epoch_index: bytes


class RemoteStorageManager(abc.ABC):
    """Kafka's RemoteStorageManager. ``configure`` receives the broker keys under
    ``remote.log.storage.manager.impl.prefix`` (prefix stripped) plus ``broker.id``."""

    @abc.abstractmethod
    def configure(self, configs: Mapping[str, object]) -> None:
        """Called once, before any other method."""

    @abc.abstractmethod
    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> Optional[bytes]:
        """Copy the segment and its indexes; return custom metadata (or None). Overwrites what an earlier attempt
        with the same segment id left. Raises RemoteStorageException unless everything was written."""

    @abc.abstractmethod
    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: Optional[int] = None) -> BinaryIO:
        """A stream of the segment's bytes from ``start_position`` to ``end_position`` inclusive (None: to the end).
        Raises RemoteResourceNotFoundException when the segment is not there."""

    @abc.abstractmethod
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """A stream of one index of the segment. A segment without a transaction index raises
        RemoteResourceNotFoundException for TRANSACTION (never an empty stream)."""

    @abc.abstractmethod
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete every object of the segment; deleting what is already gone succeeds."""

    def close(self) -> None:
        """Release resources."""


def check_fetch_range(metadata: RemoteLogSegmentMetadata, start: int, end: Optional[int]) -> int:
    """The checks Kafka's LocalTieredStorage makes on a fetch range (IllegalArgumentException: ValueError); returns
    the inclusive end position."""
    end_pos = metadata.segment_size_in_bytes if end is None else end
    if start < 0:
        raise ValueError(f"Start position must be positive: [{start}]")
    if end_pos < start:
        raise ValueError(f"End position cannot be less than startPosition: [{start}, {end_pos}]")
    if metadata.segment_size_in_bytes < end_pos:
        raise ValueError(f"End position cannot be greater than segment size: [{end_pos}, "
                         f"{metadata.segment_size_in_bytes}]")
    return end_pos


class BoundedReader(io.RawIOBase):
    """A readable stream over at most ``limit`` bytes of another one (closes it when closed)."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        super().__init__()
        self._inner = inner
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: "bytearray | memoryview") -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        n = min(len(b), self._left)
        chunk = self._inner.read(n)
        b[:len(chunk)] = chunk
        self._left -= len(chunk)
        return len(chunk)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


__all__ = ["RemoteStorageManager", "RemoteStorageException", "RemoteResourceNotFoundException", "IndexType",
           "LogSegmentData", "check_fetch_range", "BoundedReader"]
