"""PartitionLog: what the layers above storage may do with a partition's log (issue 20's one owner per partition log).

The replica layer (Partition, ReplicaManager, the fetchers, the log-dir mover), the coordinators' loaders and the API
handlers hold a partition's log as this type, never as ``storage.log.Log``: mypy then refuses any reach into the
Log's internals (its lock, segment list, producer-state manager, epoch cache) from outside ``storage/``.

Two kinds of members:

- **published state**, read on any thread without a lock (the event loop reads them for every Produce and Fetch):
  ``offsets``/``view`` and the properties derived from them, the HW and LSO; ``read`` and ``end_offset_for_epoch``
  work from the published view; ``maybe_increment_high_watermark`` is the loop's lock-free HW raise and
  ``update_config`` one attribute store;
- **commands**, run only by the partition's owner (``storage/log_owner.py``: its I/O worker): appends, truncation,
  retention by DeleteRecords, epochs, flushes, lookups of mutable state (ListOffsets by timestamp, DescribeProducers).

A process boundary would fall here: a partition served by another process would be a PartitionLog whose commands
are messages to that process's owner and whose published state is a snapshot it sends back after each command.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional, Protocol

from broker.util.file_slice import FileSlice

from .segment import LogOffsetMetadata
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .config import LogConfig
    from .errors import KafkaStorageError
    from .leader_epoch_file import LeaderEpochFileCache
    from .log_offsets import LogOffsets, LogView
    from .log_owner import TopicPartition

__all__ = ["PartitionLog", "ActiveProducer", "LogAppendInfo", "FetchDataInfo"]


class ActiveProducer(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class LogAppendInfo(NamedTuple):
    """Outcome of an append; for a duplicate, the offsets of the original write."""

    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False
    num_records: int = 0
    valid_bytes: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1


class FetchDataInfo(NamedTuple):
    """A read: ``records`` is None when there is nothing to return (e.g. start offset == LEO).

    ``aborted_transactions``: with ``include_aborted_txns``, the aborted transactions overlapping the read
    (None otherwise, as Kafka leaves it unset for read_uncommitted)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: Optional[FileSlice]
    first_entry_incomplete: bool = False
    aborted_transactions: Optional[list[AbortedTxn]] = None


class PartitionLog(Protocol):
    """One partition's log as the layers above storage see it (implemented by ``storage.log.Log``)."""

    # --- identity and published state: any thread, no lock ------------------------------------------------------
    topic_partition: "TopicPartition"
    #: the partition's directory (its log dir is ``parent_dir``)
    dir: str
    config: "LogConfig"
    offsets: "LogOffsets"
    #: tiered storage (KIP-405): the topic's segments go to remote storage
    remote_log_enabled: bool
    #: the epoch entries (copy-on-write: readers on any thread see one whole list); for the remote reader, which maps
    #: an offset to its epoch to find the remote segment
    leader_epoch_cache: "LeaderEpochFileCache"

    @property
    def parent_dir(self) -> str: ...
    @property
    def view(self) -> "LogView": ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def latest_epoch(self) -> Optional[int]: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def dir_offline(self) -> bool: ...

    def offline_error(self) -> "KafkaStorageError": ...
    def read(self, start_offset: int, max_bytes: int, max_offset_exclusive: Optional[int] = None,
             min_one_message: bool = True, include_aborted_txns: bool = False, wait: bool = True
             ) -> "FetchDataInfo": ...
    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]: ...
    def maybe_increment_high_watermark(self, hw: Optional[int]) -> bool: ...
    def update_config(self, config: "LogConfig") -> None: ...

    # --- commands: on the partition's owner only ------------------------------------------------------------------
    def append_as_leader(self, buf: "bytearray | memoryview", leader_epoch: int, *, is_from_client: bool = True,
                         wait: bool = True) -> "LogAppendInfo": ...
    def try_hold(self) -> bool: ...
    def release_hold(self) -> None: ...
    def append_as_follower(self, buf: "bytes | bytearray") -> "LogAppendInfo": ...
    def truncate_to(self, offset: int) -> bool: ...
    def truncate_fully_and_start_at(self, offset: int) -> None: ...
    def restore_remote_aux_state(self, next_offset: int, log_start_offset: int, epochs: list[tuple[int, int]],
                                 producer_snapshot: bytes) -> None: ...
    def delete_records_before(self, offset: int) -> int: ...
    def update_high_watermark(self, hw: int) -> int: ...
    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None: ...
    def pop_truncation_point(self) -> Optional[int]: ...
    def flush(self, up_to_offset: Optional[int] = None) -> None: ...
    def note_unsynced_file(self, path: str) -> None: ...
    def fetch_offset_by_timestamp(self, timestamp: int) -> Optional[tuple[int, int, int]]: ...
    def active_producers(self) -> list["ActiveProducer"]: ...
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list["AbortedTxn"]: ...
    def has_ongoing_txn(self, producer_id: int, producer_epoch: int) -> bool: ...
