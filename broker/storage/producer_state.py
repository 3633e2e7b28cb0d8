"""ProducerStateManager: idempotent-producer state (epoch + last 5 batches per producer id).

Snapshot file ``<20-digit offset>.snapshot`` (Kafka's format, version 1, big-endian)::

    version                   int16   (1)
    crc                       uint32  CRC-32C of everything after this field
    entry count               int32
    entries:                          one per producer id, its last batch only
      producer_id             int64
      epoch                   int16
      last_sequence           int32
      last_offset             int64
      offset_delta            int32   last_sequence - first_sequence of that batch
      timestamp               int64
      coordinator_epoch       int32
      current_txn_first_offset int64  (-1 when no transaction is open)

The snapshot at offset N holds the state after every batch below N.

Transactions (Kafka's ProducerStateManager): a producer's first transactional batch opens a transaction
(``current_txn_first_offset``, also kept in ``ongoing_txns`` by first offset); its COMMIT or ABORT marker
completes it as a ``CompletedTxn`` (producer id, first offset, last offset = the marker's, aborted?). A
completed transaction stays "unreplicated" until the high watermark passes its marker, so the first
unstable offset (the LSO before it is capped by the HW) only moves once the marker is replicated. The
LSO written into the transaction index with an ABORT is ``last_stable_offset(completed)``: the first
offset of the oldest transaction of another producer still open, else the marker offset + 1.

Validation by append origin, as Kafka's AppendOrigin: CLIENT (produce) checks epochs and sequences;
COORDINATOR (transaction markers, the group coordinator's transactional offset commits) checks epochs and,
for markers, the coordinator epoch (an older one is TRANSACTION_COORDINATOR_FENCED; a newer producer epoch
is accepted and becomes the producer's); REPLICATION (followers, recovery, reloads) checks nothing.

Thread-safety: called under the owning Log's lock.
"""
from __future__ import annotations

import bisect
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Optional

from broker.accel import crc32c

from . import files
from .checkpoints import atomic_write
from .errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                     TransactionCoordinatorFencedError)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_VERSION = 1
INT32_MAX = 2147483647
_SNAP_HEADER = struct.Struct(">hI")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")

#: Kafka's AppendOrigin: how much an append is validated
CLIENT = "client"
COORDINATOR = "coordinator"
REPLICATION = "replication"


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: ``last_offset`` is the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerStateEntry:
    """What the log remembers about one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN), self.coordinator_epoch,
                                  self.current_txn_first_offset, self.last_timestamp)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> Optional[BatchMetadata]:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
                  timestamp: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.last_timestamp = timestamp


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of a batch's last record (int32 wraparound to 0, as DefaultRecordBatch)."""
    s = base_sequence + last_offset_delta
    return s - INT32_MAX - 1 if s > INT32_MAX else s


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates and collects the producer-state changes of one append before they are applied."""

    def __init__(self, producer_id: int, current: Optional[ProducerStateEntry], origin: str = CLIENT) -> None:
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.copy() if current is not None else ProducerStateEntry(producer_id)
        #: first offsets of the transactions this append opened
        self.started_transactions: list[int] = []
        self._appended_in_this = False

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int, first_offset: int,
                          last_offset: int, is_transactional: bool) -> None:
        if self.origin != REPLICATION:
            self._check_epoch(epoch)
            if self.origin == CLIENT:
                self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, first_seq, last_seq, first_offset, last_offset, timestamp)
        self._appended_in_this = True
        if self.updated.current_txn_first_offset >= 0 and not is_transactional:
            if self.origin != REPLICATION:
                raise InvalidTxnStateError("expected a transactional write from producer %d at offset %d"
                                           % (self.producer_id, first_offset))
        elif self.updated.current_txn_first_offset < 0 and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, epoch: int, coordinator_epoch: int, committed: bool, offset: int,
                              timestamp: int) -> Optional[CompletedTxn]:
        """Apply a COMMIT/ABORT marker at ``offset``; the transaction it completes, if one was open."""
        if self.origin != REPLICATION:
            self._check_epoch(epoch)
            if self.updated.coordinator_epoch > coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    "invalid coordinator epoch for producer %d at offset %d: %d (zombie), %d (current)"
                    % (self.producer_id, offset, coordinator_epoch, self.updated.coordinator_epoch))
        upd = self.updated
        completed = None
        if upd.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, upd.current_txn_first_offset, offset, not committed)
        if epoch != upd.producer_epoch:
            upd.batches.clear()
            upd.producer_epoch = epoch
        upd.coordinator_epoch = coordinator_epoch
        upd.current_txn_first_offset = -1
        upd.last_timestamp = timestamp
        return completed

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.updated.producer_epoch:
            raise InvalidProducerEpochError(
                "epoch %d of producer %d is older than the current epoch %d"
                % (epoch, self.producer_id, self.updated.producer_epoch))

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        upd = self.updated
        if epoch != upd.producer_epoch:
            if first_seq != 0 and upd.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    "invalid sequence %d for new epoch %d of producer %d (current epoch %d), expected 0"
                    % (first_seq, epoch, self.producer_id, upd.producer_epoch))
            return
        if self._appended_in_this or upd.batches:
            current_last = upd.last_seq
        else:
            current_last = NO_SEQUENCE
        cur_epoch = self.current.producer_epoch if self.current is not None else NO_PRODUCER_EPOCH
        if not (cur_epoch == NO_PRODUCER_EPOCH or _in_sequence(current_last, first_seq)):
            raise OutOfOrderSequenceError(
                "out of order sequence %d for producer %d at offset %d, expected %d"
                % (first_seq, self.producer_id, offset, current_last + 1))


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, with snapshots in the partition directory."""

    def __init__(self, log_dir: str, producer_id_expiration_ms: int = 86400000) -> None:
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._known_names: "list[str] | frozenset[str] | None" = None
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        #: open transactions: first offset -> producer id
        self.ongoing_txns: dict[int, int] = {}
        #: completed transactions whose marker is not below the HW yet: first offset -> (producer id, last offset)
        self.unreplicated_txns: dict[int, tuple[int, int]] = {}

    # ----------------------------------------------------------- state
    def last_entry(self, producer_id: int) -> Optional[ProducerStateEntry]:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: str = CLIENT) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self.producers.get(producer_id), origin)

    def update(self, info: ProducerAppendInfo) -> None:
        self.producers[info.producer_id] = info.updated
        for first in info.started_transactions:
            self.ongoing_txns[first] = info.producer_id

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def replay_batch(self, producer_id: int, epoch: int, base_sequence: int, last_offset_delta: int,
                     base_offset: int, max_timestamp: int, is_transactional: bool, is_control: bool,
                     coordinator_epoch: int = -1, committed: Optional[bool] = None) -> Optional[CompletedTxn]:
        """Apply a batch already in the log, without validation (recovery, follower appends).

        A control batch needs its marker (``committed``; None for an empty or unknown control batch, which
        changes nothing but the producer's presence). Returns the transaction a marker completed; the caller
        records it (``complete_txn``, and the transaction index where the log is written).
        """
        if producer_id < 0:
            return None
        info = self.prepare_update(producer_id, REPLICATION)
        completed = None
        if is_control:
            if committed is not None:
                completed = info.append_end_txn_marker(epoch, coordinator_epoch, committed, base_offset,
                                                       max_timestamp)
        else:
            info.append_data_batch(epoch, base_sequence, last_sequence(base_sequence, last_offset_delta),
                                   max_timestamp, base_offset, base_offset + last_offset_delta, is_transactional)
        self.update(info)
        return completed

    # ----------------------------------------------------------- transactions
    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO recorded with ``completed``'s index entry: the oldest open transaction of another producer,
        else the marker offset + 1 (Kafka's lastStableOffset(completedTxn))."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The marker of ``completed`` is in the log: it stays unstable until the HW passes the marker."""
        self.ongoing_txns.pop(completed.first_offset, None)
        self.unreplicated_txns[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if self.unreplicated_txns:
            self._remove_unreplicated_txns(high_watermark)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        if self.unreplicated_txns:
            for first in [f for f, (_, last) in self.unreplicated_txns.items() if last < offset]:
                del self.unreplicated_txns[first]

    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the oldest transaction open, or completed with its marker not yet below the HW."""
        best: Optional[int] = None
        if self.ongoing_txns:
            best = min(self.ongoing_txns)
        if self.unreplicated_txns:
            u = min(self.unreplicated_txns)
            best = u if best is None else min(best, u)
        return best

    def _reset_txns_from_entries(self) -> None:
        self.ongoing_txns = {e.current_txn_first_offset: pid for pid, e in self.producers.items()
                             if e.current_txn_first_offset >= 0}
        self.unreplicated_txns = {}

    def remove_expired_producers(self, now_ms: int) -> None:
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.producer_id_expiration_ms]
        for pid in expired:
            del self.producers[pid]

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget producers whose last write is below the new log start offset (retention, DeleteRecords)."""
        gone = [pid for pid, e in self.producers.items()
                if e.batches and e.last_data_offset < log_start_offset and e.current_txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        self._remove_unreplicated_txns(log_start_offset)
        self.delete_snapshots_before(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for off in self.list_snapshot_offsets():
            self._delete_snapshot(off)
        self.map_end_offset = offset

    # ----------------------------------------------------------- snapshots
    def list_snapshot_offsets(self) -> list[int]:
        names = self._known_names
        if names is not None:  # the loading log's own listing, used once
            self._known_names = None
        else:
            names = os.listdir(self.log_dir)
        out = []
        for name in names:
            if name.endswith(files.PRODUCER_SNAPSHOT_SUFFIX) and files.is_segment_stem(name):
                out.append(files.offset_from_file_name(name))
        return sorted(out)

    def _snapshot_path(self, offset: int) -> str:
        return files.file_path(self.log_dir, offset, files.PRODUCER_SNAPSHOT_SUFFIX)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self._snapshot_path(offset))
        except FileNotFoundError:
            pass

    def take_snapshot(self, offset: Optional[int] = None, sync: bool = True) -> Optional[str]:
        """Write the state as of ``offset`` (default: map end offset), unless that snapshot exists; returns the
        path written. ``sync=False`` (a roll, under the log's lock) leaves the fsync to the flush that follows
        the roll, as Kafka since KAFKA-15046."""
        off = self.map_end_offset if offset is None else offset
        path = self._snapshot_path(off)
        if os.path.exists(path):
            return None
        atomic_write(path, encode_snapshot(self.producers.values()), sync)
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        for off in self.list_snapshot_offsets():
            if off < offset:
                self._delete_snapshot(off)

    def use_listing(self, names: "list[str] | frozenset[str]") -> None:
        """The partition dir's file names, just listed by the loading log: the next snapshot listing uses them
        instead of listing the dir again (a listdir per partition saved at start-up)."""
        self._known_names = names

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Drop snapshots outside (log start, LEO], load the latest remaining; returns its offset.

        The caller replays the log from the returned offset to ``log_end_offset``.
        """
        offsets = self.list_snapshot_offsets()
        kept = []
        for off in offsets:
            if off > log_end_offset or off < log_start_offset:
                self._delete_snapshot(off)
            else:
                kept.append(off)
        return self.load_latest_snapshot_at_or_below(log_end_offset, log_start_offset, now_ms, kept)

    def load_latest_snapshot_at_or_below(self, offset: int, log_start_offset: int, now_ms: int,
                                         offsets: Optional[list[int]] = None) -> int:
        """Replace the state with the newest readable snapshot in [log start, ``offset``] (none: empty state at
        the log start offset), deleting unreadable ones; returns the offset the state is as of. ``offsets``: the
        snapshot offsets, when the caller just listed them."""
        self.producers.clear()
        for off in reversed(offsets if offsets is not None else self.list_snapshot_offsets()):
            if off > offset or off < log_start_offset:
                continue
            try:
                with open(self._snapshot_path(off), "rb") as f:
                    entries = decode_snapshot(f.read())
            except ValueError:
                self._delete_snapshot(off)
                continue
            for e in entries:
                if e.current_txn_first_offset >= 0 or now_ms - e.last_timestamp < self.producer_id_expiration_ms:
                    self.producers[e.producer_id] = e
            self.map_end_offset = off
            self._reset_txns_from_entries()
            return off
        self.map_end_offset = log_start_offset
        self._reset_txns_from_entries()
        return log_start_offset

    def latest_snapshot_offset(self) -> Optional[int]:
        offs = self.list_snapshot_offsets()
        return offs[-1] if offs else None

    def snapshot_offset_at_or_below(self, offset: int) -> Optional[int]:
        offs = self.list_snapshot_offsets()
        i = bisect.bisect_right(offs, offset) - 1
        return offs[i] if i >= 0 else None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's producer snapshot bytes (version 1) for ``entries``."""
    body = bytearray()
    items = list(entries)
    body += struct.pack(">i", len(items))
    for e in items:
        if e.batches:
            b = e.batches[-1]
            last_seq, last_off, delta = b.last_seq, b.last_offset, b.last_offset - b.first_offset
        else:
            last_seq, last_off, delta = NO_SEQUENCE, -1, 0
        body += _SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, last_seq, last_off, delta, e.last_timestamp,
                                 e.coordinator_epoch, e.current_txn_first_offset)
    return _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; ValueError when the version, CRC or length is wrong."""
    if len(data) < 10:
        raise ValueError("snapshot too short")
    version, crc = _SNAP_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError("unsupported producer snapshot version %d" % version)
    if crc32c.crc32c(data[6:]) != crc:
        raise ValueError("producer snapshot CRC mismatch")
    (count,) = struct.unpack_from(">i", data, 6)
    if count < 0 or 10 + count * _SNAP_ENTRY.size != len(data):
        raise ValueError("producer snapshot length mismatch")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord_epoch, txn_first = _SNAP_ENTRY.unpack_from(
            data, 10 + i * _SNAP_ENTRY.size)
        e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, current_txn_first_offset=txn_first,
                               last_timestamp=ts)
        if last_off >= 0:
            e.batches.append(BatchMetadata(last_seq - delta, last_seq, last_off - delta, last_off, ts))
        out.append(e)
    return out
