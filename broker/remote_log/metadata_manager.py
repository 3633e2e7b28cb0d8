"""RemoteLogMetadataManager (Kafka's storage-api interface) and TopicBasedRemoteLogMetadataManager, Kafka's default:
every event is a record of ``__remote_log_metadata`` (metadata_serde's bytes) in the partition
RemoteLogMetadataTopicPartitioner picks, and the cache is built only by consuming that topic back, so the
brokers that follow a partition see the copies its leader made.

The manager reaches the topic through MetadataTopicPort, a small typed port: the server wires it to the
ReplicaManager (append as leader with acks=all, read up to the high watermark); unit tests use
InMemoryMetadataTopic. Nothing here imports replica or api code.
"""
from __future__ import annotations

import abc
import logging
import threading
from typing import Dict, Iterator, Mapping, Optional, Protocol, Sequence, Set

from broker.remote_log import metadata_serde
from broker.remote_log.metadata_cache import RemoteLogMetadataCache
from broker.remote_log.metadata_serde import METADATA_TOPIC, RemoteLogMetadata, metadata_partition
from broker.storage.remote.metadata import (
    RemoteLogSegmentMetadata, RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
)
from broker.storage.remote.storage_manager import RemoteResourceNotFoundException, RemoteStorageException

REPLICATION_FACTOR = "remote.log.metadata.topic.replication.factor"
NUM_PARTITIONS = "remote.log.metadata.topic.num.partitions"
RETENTION_MS = "remote.log.metadata.topic.retention.ms"

logger = logging.getLogger(__name__)


class MetadataTopicPort(Protocol):
    """What the manager needs of ``__remote_log_metadata``: create it, append a value to one partition (returning
    once committed, with its offset), read the committed values of a partition from an offset."""

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None: ...

    def append(self, topic: str, partition: int, value: bytes) -> int: ...

    def read(self, topic: str, partition: int, offset: int) -> Sequence[tuple[int, bytes]]: ...


class RemoteLogMetadataManager(abc.ABC):
    """Kafka's RemoteLogMetadataManager: stores and serves the remote segments' metadata."""

    @abc.abstractmethod
    def configure(self, configs: Mapping[str, object]) -> None: ...

    @abc.abstractmethod
    def add_remote_log_segment_metadata(self, md: RemoteLogSegmentMetadata) -> None:
        """A new copy (state COPY_SEGMENT_STARTED)."""

    @abc.abstractmethod
    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None: ...

    @abc.abstractmethod
    def put_remote_partition_delete_metadata(self, md: RemotePartitionDeleteMetadata) -> None: ...

    @abc.abstractmethod
    def remote_log_segment_metadata(self, tip: TopicIdPartition, leader_epoch: int,
                                    offset: int) -> Optional[RemoteLogSegmentMetadata]: ...

    @abc.abstractmethod
    def highest_offset_for_epoch(self, tip: TopicIdPartition, leader_epoch: int) -> Optional[int]: ...

    @abc.abstractmethod
    def list_remote_log_segments(self, tip: TopicIdPartition,
                                 leader_epoch: Optional[int] = None) -> Iterator[RemoteLogSegmentMetadata]: ...

    @abc.abstractmethod
    def on_partition_leadership_changes(self, leaders: Set[TopicIdPartition],
                                        followers: Set[TopicIdPartition]) -> None: ...

    @abc.abstractmethod
    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None: ...

    def close(self) -> None:
        """Release resources."""


class TopicBasedRemoteLogMetadataManager(RemoteLogMetadataManager):
    """Kafka's TopicBasedRemoteLogMetadataManager over a MetadataTopicPort. A publish returns once the record is
    committed and consumed back into the cache (Kafka waits for its consumer to reach the record's offset)."""

    def __init__(self, port: MetadataTopicPort) -> None:
        self._port = port
        self._lock = threading.RLock()
        self.num_partitions = 50
        self.replication_factor = 3
        self.retention_ms = -1
        self._configured = False
        self._assigned: Set[TopicIdPartition] = set()
        self._caches: Dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        #: next offset to consume in each metadata partition
        self._positions: Dict[int, int] = {}
        self._partition_of: Dict[TopicIdPartition, int] = {}

    def configure(self, configs: Mapping[str, object]) -> None:
        """Takes the ``rlmm.config.``-stripped keys (broker.config.tiered_storage.rlmm_config) and creates the
        topic: retention.ms from the key (-1: kept forever), delete policy, as Kafka's createRemoteLogMetadataTopic."""
        self.num_partitions = int(str(configs.get(NUM_PARTITIONS, 50)))
        self._partition_of.clear()
        self.replication_factor = int(str(configs.get(REPLICATION_FACTOR, 3)))
        self.retention_ms = int(str(configs.get(RETENTION_MS, -1)))
        self._port.create_topic(METADATA_TOPIC, self.num_partitions, self.replication_factor,
                                {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete",
                                 "retention.bytes": "-1"})
        self._configured = True

    def metadata_partition(self, tip: TopicIdPartition) -> int:
        """The ``__remote_log_metadata`` partition of ``tip`` (a murmur2 hash, remembered: a leadership change of
        10,000 partitions asks for each many times)."""
        known = self._partition_of.get(tip)
        if known is None:
            known = self._partition_of[tip] = metadata_partition(tip, self.num_partitions)
        return known

    # ------------------------------------------------------------------ publishing
    def _publish(self, tip: TopicIdPartition, md: RemoteLogMetadata) -> None:
        if not self._configured:
            raise RemoteStorageException("This instance is not yet configured")
        partition = self.metadata_partition(tip)
        offset = self._port.append(METADATA_TOPIC, partition, metadata_serde.serialize(md))
        with self._lock:
            self._assign({tip})
            self._consume(partition)
            if self._positions.get(partition, 0) <= offset:
                raise RemoteStorageException(f"Metadata record at offset {offset} of {METADATA_TOPIC}-{partition} "
                                             "was not consumed back")

    def add_remote_log_segment_metadata(self, md: RemoteLogSegmentMetadata) -> None:
        self._publish(md.topic_id_partition, md)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Checked against the cache first (the publisher's own cache is current for its partition), so an update
        the consumers would refuse never enters the topic."""
        if update.state == RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("Given remoteLogSegmentMetadataUpdate should not have the state as: "
                             f"{RemoteLogSegmentState.COPY_SEGMENT_STARTED.name}")
        self._cache(update.topic_id_partition).check_update(update)
        self._publish(update.topic_id_partition, update)

    def put_remote_partition_delete_metadata(self, md: RemotePartitionDeleteMetadata) -> None:
        self._publish(md.topic_id_partition, md)

    # ------------------------------------------------------------------ consuming
    def _consume(self, partition: int) -> None:
        """Read ``partition`` from where it was left into the caches of the assigned user partitions. Records of
        other partitions are skipped (Kafka's consumer task filters the same way)."""
        pos = self._positions.get(partition, 0)
        for offset, value in self._port.read(METADATA_TOPIC, partition, pos):
            pos = offset + 1
            try:
                self._apply(metadata_serde.deserialize(value))
            except (ValueError, RemoteResourceNotFoundException) as exc:  # Kafka's consumer task logs and goes on
                logger.error("Error applying %s-%d offset %d: %s", METADATA_TOPIC, partition, offset, exc)
        self._positions[partition] = pos

    def _apply(self, md: RemoteLogMetadata) -> None:
        if isinstance(md, RemoteLogSegmentMetadataSnapshot):
            return  # written only by the snapshot-based manager (KIP-405's later phase), never by Kafka 3.9
        tip = md.topic_id_partition
        if tip not in self._assigned:
            return
        cache = self._caches.setdefault(tip, RemoteLogMetadataCache())
        if isinstance(md, RemoteLogSegmentMetadata):
            cache.add_copy_in_progress_segment(md)
        elif isinstance(md, RemoteLogSegmentMetadataUpdate):
            cache.update_remote_log_segment_metadata(md)
        else:
            cache.partition_delete_state = md.state
            if md.state == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._caches[tip] = RemoteLogMetadataCache()  # the partition's remote data is gone

    def _cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        with self._lock:
            if tip not in self._assigned:
                self._assign({tip})
            self._consume(self.metadata_partition(tip))
            return self._caches.setdefault(tip, RemoteLogMetadataCache())

    def _assign(self, tips: Set[TopicIdPartition]) -> None:
        """Start following ``tips``: their metadata partitions are re-read from the start so their caches hold
        every event (Kafka's consumer task reassigns and seeks the same way)."""
        new = tips - self._assigned
        if not new:
            return
        self._assigned |= new
        for tip in new:
            self._caches.pop(tip, None)
        partitions = {self.metadata_partition(t) for t in new}
        for tip in self._assigned - new:  # the others of those partitions are rebuilt by the re-read too
            if self.metadata_partition(tip) in partitions:
                self._caches.pop(tip, None)
        for partition in partitions:
            self._positions[partition] = 0
            self._consume(partition)

    # ------------------------------------------------------------------ queries
    # each under the lock: the RemoteLogManager's pools, the remote readers and the leadership thread query and
    # fill the caches at once (a listing is a list made under it)
    def remote_log_segment_metadata(self, tip: TopicIdPartition, leader_epoch: int,
                                    offset: int) -> Optional[RemoteLogSegmentMetadata]:
        with self._lock:
            return self._cache(tip).remote_log_segment_metadata(leader_epoch, offset)

    def highest_offset_for_epoch(self, tip: TopicIdPartition, leader_epoch: int) -> Optional[int]:
        with self._lock:
            return self._cache(tip).highest_offset_for_epoch(leader_epoch)

    def highest_offset(self, tip: TopicIdPartition) -> Optional[int]:
        """The highest offset of any finished copy of ``tip`` (not in Kafka's interface: its RLMCopyTask walks the
        epochs with highest_offset_for_epoch; one lookup does here)."""
        with self._lock:
            return self._cache(tip).highest_offset()

    def list_remote_log_segments(self, tip: TopicIdPartition,
                                 leader_epoch: Optional[int] = None) -> Iterator[RemoteLogSegmentMetadata]:
        with self._lock:
            cache = self._cache(tip)
            return iter(list(cache.list_all_remote_log_segments() if leader_epoch is None
                             else cache.list_remote_log_segments(leader_epoch)))

    def on_partition_leadership_changes(self, leaders: Set[TopicIdPartition],
                                        followers: Set[TopicIdPartition]) -> None:
        with self._lock:
            self._assign(leaders | followers)

    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        with self._lock:
            self._assigned -= partitions
            for tip in partitions:
                self._caches.pop(tip, None)
                self._partition_of.pop(tip, None)


class InMemoryMetadataTopic:
    """A MetadataTopicPort over lists (tests, and a single process with no replication)."""

    def __init__(self) -> None:
        self.topics: Dict[str, list[list[bytes]]] = {}
        self.created: Dict[str, tuple[int, int, Dict[str, str]]] = {}

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None:
        if name not in self.topics:
            self.topics[name] = [[] for _ in range(num_partitions)]
            self.created[name] = (num_partitions, replication_factor, dict(configs))

    def append(self, topic: str, partition: int, value: bytes) -> int:
        log = self.topics[topic][partition]
        log.append(value)
        return len(log) - 1

    def read(self, topic: str, partition: int, offset: int) -> Sequence[tuple[int, bytes]]:
        log = self.topics[topic][partition]
        return [(i, log[i]) for i in range(offset, len(log))]


__all__ = ["RemoteLogMetadataManager", "TopicBasedRemoteLogMetadataManager", "MetadataTopicPort",
           "InMemoryMetadataTopic"]
