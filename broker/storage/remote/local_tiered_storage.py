"""A RemoteStorageManager on a local (or shared) directory, laid out as Kafka's test LocalTieredStorage, so a Kafka
3.9 broker configured with ``org.apache.kafka.server.log.remote.storage.LocalTieredStorage`` and ``rsm.config.dir``
and this broker can share one directory::

    <dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<20-digit start offset>-<segment id>.log
                                                              ... .index .timeindex .txnindex (when present)
                                                              ... .leader_epoch_checkpoint .snapshot

Ids are Kafka's Uuid text (base64url, 22 characters). Keys (under ``rsm.config.``): ``dir`` (a temporary
directory when unset, as Kafka's), ``delete.enable`` (default true), ``delete.on.close`` (default false),
``broker.id`` (required, as Kafka's).
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Dict, Mapping, Optional

from broker.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition, uuid_to_string
from broker.storage.remote.storage_manager import (
    BoundedReader, IndexType, LogSegmentData, RemoteResourceNotFoundException, RemoteStorageException,
    RemoteStorageManager, check_fetch_range,
)

log = logging.getLogger(__name__)

ROOT_STORAGE_DIR_NAME = "kafka-tiered-storage"
#: RemoteLogSegmentFileType suffixes (LogFileUtils' and the leader-epoch checkpoint's).
SEGMENT, OFFSET_INDEX, TIME_INDEX = ".log", ".index", ".timeindex"
TRANSACTION_INDEX, LEADER_EPOCH_CHECKPOINT, PRODUCER_SNAPSHOT = ".txnindex", ".leader_epoch_checkpoint", ".snapshot"
_INDEX_SUFFIX: Dict[IndexType, str] = {
    IndexType.OFFSET: OFFSET_INDEX, IndexType.TIMESTAMP: TIME_INDEX, IndexType.PRODUCER_SNAPSHOT: PRODUCER_SNAPSHOT,
    IndexType.TRANSACTION: TRANSACTION_INDEX, IndexType.LEADER_EPOCH: LEADER_EPOCH_CHECKPOINT}
ALL_SUFFIXES = (SEGMENT, OFFSET_INDEX, TIME_INDEX, TRANSACTION_INDEX, LEADER_EPOCH_CHECKPOINT, PRODUCER_SNAPSHOT)


def partition_dir_name(tip: TopicIdPartition) -> str:
    """RemoteTopicPartitionDirectory: ``<topic>-<partition>-<topic id>``."""
    return f"{tip.topic}-{tip.partition}-{uuid_to_string(tip.topic_id)}"


def segment_file_name(metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
    """RemoteLogSegmentFileType.toFilename: ``<20-digit start offset>-<segment id><suffix>``."""
    return f"{metadata.start_offset:020d}-{uuid_to_string(metadata.remote_log_segment_id.id)}{suffix}"


def _truthy(value: object) -> bool:
    return str(value).strip().lower() == "true"


class LocalTieredStorage(RemoteStorageManager):
    """Kafka's LocalTieredStorage, for tests and single machines (or a directory shared by several)."""

    def __init__(self) -> None:
        self.storage_directory: Optional[Path] = None
        self.broker_id = -1
        self.delete_enabled = True
        self.delete_on_close = False

    def configure(self, configs: Mapping[str, object]) -> None:
        if self.storage_directory is not None:
            raise RemoteStorageException(f"This instance of local remote storage is already configured. The existing "
                                         f"storage directory is {self.storage_directory}. Ensure the method "
                                         "configure() is only called once.")
        if configs.get("broker.id") is None:
            raise RemoteStorageException("Broker ID is required to configure the LocalTieredStorage manager.")
        self.broker_id = int(str(configs["broker.id"]))
        if configs.get("delete.on.close") is not None:
            self.delete_on_close = _truthy(configs["delete.on.close"])
        if configs.get("delete.enable") is not None:
            self.delete_enabled = _truthy(configs["delete.enable"])
        storage_dir = configs.get("dir")
        if storage_dir is None:
            self.storage_directory = Path(tempfile.mkdtemp(prefix=ROOT_STORAGE_DIR_NAME + "-"))
        else:
            self.storage_directory = Path(str(storage_dir)) / ROOT_STORAGE_DIR_NAME
            if self.storage_directory.exists():
                log.warning("Remote storage with ID [%s] already exists on the file system. Any data already in the "
                            "remote storage will not be deleted and may result in an inconsistent state and/or "
                            "provide stale data.", storage_dir)
            self.storage_directory.mkdir(parents=True, exist_ok=True)
        log.info("Created local tiered storage manager [%d]:[%s]", self.broker_id, self.storage_directory.name)

    def _root(self) -> Path:
        if self.storage_directory is None:
            raise RemoteStorageException("No storage directory was defined for the local remote storage. Make sure "
                                         "the instance was configured correctly via the configure() method.")
        return self.storage_directory

    def _file(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> Path:
        return self._root() / partition_dir_name(metadata.topic_id_partition) / segment_file_name(metadata, suffix)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> Optional[bytes]:
        directory = self._root() / partition_dir_name(metadata.topic_id_partition)
        written = []
        try:
            directory.mkdir(parents=True, exist_ok=True)
            sources = [(data.log_segment, SEGMENT), (data.offset_index, OFFSET_INDEX), (data.time_index, TIME_INDEX)]
            if data.transaction_index is not None:
                sources.append((data.transaction_index, TRANSACTION_INDEX))
            for src, suffix in sources:
                dst = self._file(metadata, suffix)
                written.append(dst)
                shutil.copyfile(src, dst)
            dst = self._file(metadata, LEADER_EPOCH_CHECKPOINT)
            written.append(dst)
            dst.write_bytes(data.leader_epoch_index)
            dst = self._file(metadata, PRODUCER_SNAPSHOT)
            written.append(dst)
            shutil.copyfile(data.producer_snapshot_index, dst)
            for path in written:  # durable before the copy is reported (and recorded as finished)
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            _fsync_dir(directory)
        except OSError as exc:
            for path in written:
                path.unlink(missing_ok=True)
            raise RemoteStorageException(f"Internal error in local remote storage: {exc}") from exc
        log.info("Offloaded log segment for %s from segment=%s", metadata.topic_id_partition, data.log_segment)
        return None

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: Optional[int] = None) -> BinaryIO:
        end = check_fetch_range(metadata, start_position, end_position)
        path = self._file(metadata, SEGMENT)
        try:
            f = open(path, "rb")
        except FileNotFoundError as exc:
            raise RemoteResourceNotFoundException(str(exc)) from exc
        except OSError as exc:
            raise RemoteStorageException(f"Internal error in local remote storage: {exc}") from exc
        f.seek(start_position)
        limit = min(end, metadata.segment_size_in_bytes - 1) - start_position + 1
        return BoundedReader(f, limit)  # type: ignore[return-value]

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        path = self._file(metadata, _INDEX_SUFFIX[index_type])
        try:
            return open(path, "rb")
        except FileNotFoundError as exc:
            raise RemoteResourceNotFoundException(f"Index file for type: {index_type.value} not found for segment "
                                                  f"{uuid_to_string(metadata.remote_log_segment_id.id)}") from exc
        except OSError as exc:
            raise RemoteStorageException(f"Internal error in local remote storage: {exc}") from exc

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not self.delete_enabled:
            return
        try:
            for suffix in ALL_SUFFIXES:
                self._file(metadata, suffix).unlink(missing_ok=True)
        except OSError as exc:
            raise RemoteStorageException(f"Failed to delete remote log segment with id:"
                                         f"{uuid_to_string(metadata.remote_log_segment_id.id)}: {exc}") from exc

    def delete_partition(self, tip: TopicIdPartition) -> None:
        """LocalTieredStorage.deletePartition: the partition's directory, when deletes are enabled."""
        if not self.delete_enabled:
            return
        shutil.rmtree(self._root() / partition_dir_name(tip), ignore_errors=True)

    def close(self) -> None:
        if self.delete_on_close and self.storage_directory is not None:
            shutil.rmtree(self.storage_directory, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["LocalTieredStorage", "partition_dir_name", "segment_file_name", "ROOT_STORAGE_DIR_NAME"]
