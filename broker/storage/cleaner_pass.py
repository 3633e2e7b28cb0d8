"""One cleaning pass over segment files: build the offset map, then write ``<base>.log.cleaned`` files.

Works only on files and a picklable ``CleanPlan`` (no Log object, no lock), so it runs on the
cleaner thread or in a worker process (which keeps the broker's GIL free for produce and fetch).
The caller swaps each written group in with ``Log.replace_segments``.

Rules (Kafka's Cleaner): the offset map (key -> latest offset) covers whole dirty segments from the
first dirty offset until the map is full or the plan's segments end; every segment from the log
start up to the mapped end is then rewritten in groups (Kafka's groupSegmentsBySize). A record is
kept when it is the latest for its key; a tombstone also needs its batch's delete horizon not to
have passed (the horizon is set to now + delete.retention.ms the first time a batch keeping a
tombstone is cleaned, as KIP-534). A producer's last batch is kept, empty if need be (its last data
batch, or its last marker when it has no data batch left).

Transactions (cleaner_txn.py, Kafka's rules): the transaction indexes of the log say which transactions
were aborted; their batches stay out of the map and are removed, committed transactional records are
compacted like any other. A marker is kept while its transaction's batches were seen in this pass (an
ABORT then keeps its entry in the cleaned segment's ``.txnindex``); after that it gets a delete horizon
(now + delete.retention.ms) and is removed by a clean past it. The caller's bound keeps the pass below
the LSO, so every transaction it sees is decided.
"""
from __future__ import annotations

import bisect
import os
import time as _time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

from broker.accel import record_batch
from broker.protocol.records.batch_info import BatchInfo, Record
from broker.protocol.records.control import control_type
from broker.protocol.records.errors import CorruptRecordError

from . import files
from .cleaner_batch import build_empty_batch, build_retained_batch, delete_horizon_ms, iter_stored_records
from .cleaner_txn import CleanedTransactionMetadata
from .log import discard_cleaned_files
from .segment import LogSegment
from .txn_index import AbortedTxn, overlapping, read_aborted_txns

INT32_MAX = 2147483647
_READ_CHUNK = 4 << 20
_WRITE_CHUNK = 1 << 20


class LogCleaningAbortedError(Exception):
    """The partition was deleted, or the broker is shutting down, while it was cleaned."""


@dataclass(frozen=True)
class SegmentRef:
    """What the pass needs of one inactive segment, read under the Log lock by the caller."""

    base_offset: int
    size: int
    next_base_offset: int
    index_bytes: int
    time_index_bytes: int
    last_modified_ms: int


@dataclass(frozen=True)
class CleanPlan:
    """Input of one pass (picklable)."""

    dir: str
    segments: tuple[SegmentRef, ...]  # every inactive segment below the uncleanable bound, from the log start
    first_dirty_offset: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    map_capacity: int
    producers: dict[int, tuple[int, int]]  # producer id -> (last data offset or -1, epoch)
    #: base offsets of every segment of the log (active included): whose transaction indexes to search
    txn_index_bases: tuple[int, ...] = ()


@dataclass
class CleanerStats:
    """What one clean did (logged like Kafka's LogCleaner stats)."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    start_s: float = field(default_factory=_time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0
    buffer_utilization: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_s - self.start_s, 1e-9)

    def summary(self, name: str, first_dirty: int, end_offset: int) -> str:
        mb = 1024.0 * 1024.0
        total = self.elapsed_s
        map_s = max(self.map_done_s - self.start_s, 0.0)
        clean_s = max(self.end_s - self.map_done_s, 0.0)
        reduction = 100.0 * (1.0 - self.bytes_written / self.bytes_read) if self.bytes_read else 0.0
        fewer = 100.0 * (1.0 - self.messages_written / self.messages_read) if self.messages_read else 0.0
        return ("Log cleaner cleaned log %s (dirty section = [%d, %d])\n"
                "\t%.1f MB of log processed in %.3f seconds (%.1f MB/sec).\n"
                "\tIndexed %.1f MB in %.3f seconds (%.1f Mb/sec, %.1f%% of total time)\n"
                "\tBuffer utilization: %.1f%%\n"
                "\tCleaned %.1f MB in %.3f seconds (%.1f Mb/sec, %.1f%% of total time)\n"
                "\tStart size: %.1f MB (%d messages)\n"
                "\tEnd size: %.1f MB (%d messages)\n"
                "\t%.1f%% size reduction (%.1f%% fewer messages)"
                % (name, first_dirty, end_offset,
                   (self.map_bytes_read + self.bytes_read) / mb, total,
                   (self.map_bytes_read + self.bytes_read) / mb / total,
                   self.map_bytes_read / mb, map_s, self.map_bytes_read / mb / max(map_s, 1e-9),
                   100.0 * map_s / total, 100.0 * self.buffer_utilization,
                   self.bytes_read / mb, clean_s, self.bytes_read / mb / max(clean_s, 1e-9), 100.0 * clean_s / total,
                   self.bytes_read / mb, self.messages_read, self.bytes_written / mb, self.messages_written,
                   reduction, fewer))


@dataclass(frozen=True)
class CleanedGroup:
    """A written ``<base_offset>.log.cleaned`` replacing the segments ``old_bases`` (of ``old_sizes``)."""

    base_offset: int
    old_bases: tuple[int, ...]
    old_sizes: tuple[int, ...]
    end_offset: int


@dataclass
class PassResult:
    end_offset: int  # the next first dirty offset
    groups: list[CleanedGroup]
    stats: CleanerStats
    min_delete_horizon_ms: Optional[int]


class OffsetMap:
    """key -> offset of its latest record in the dirty section, bounded to ``capacity`` keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._map: dict[bytes, int] = {}

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        return len(self._map) / self.capacity

    def is_full(self) -> bool:
        return len(self._map) >= self.capacity


def group_segments_by_size(segments: list[SegmentRef], max_size: int, max_index_size: int) -> list[list[SegmentRef]]:
    """Consecutive segments merged while their log and index sizes fit (Kafka's groupSegmentsBySize);
    a group's offsets must stay within int32 of its base offset."""
    groups: list[list[SegmentRef]] = []
    i, n = 0, len(segments)
    while i < n:
        group = [segments[i]]
        log_size, index_size, time_size = segments[i].size, segments[i].index_bytes, segments[i].time_index_bytes
        i += 1
        while i < n:
            seg = segments[i]
            if (log_size + seg.size > max_size or index_size + seg.index_bytes > max_index_size
                    or time_size + seg.time_index_bytes > max_index_size
                    or seg.next_base_offset - 1 - group[0].base_offset > INT32_MAX):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.index_bytes
            time_size += seg.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def iter_segment_batches(dir_path: str, seg: SegmentRef) -> Iterator[tuple[BatchInfo, bytes]]:
    """(header, bytes) of each whole batch in the first ``seg.size`` bytes of the segment's .log file."""
    with open(files.file_path(dir_path, seg.base_offset, files.LOG_SUFFIX), "rb", buffering=0) as f:
        fd = f.fileno()
        pos = 0
        while pos < seg.size:
            data = os.pread(fd, min(_READ_CHUNK, seg.size - pos), pos)
            infos, end = record_batch.scan_batches(data, 0, -1, False)
            if not infos:
                if len(data) < 12:
                    raise CorruptRecordError("truncated batch at %d in segment %d" % (pos, seg.base_offset))
                need = record_batch.batch_size(data)
                if need <= len(data) or pos + need > seg.size:
                    raise CorruptRecordError("invalid batch at %d in segment %d" % (pos, seg.base_offset))
                data = os.pread(fd, need, pos)
                infos, end = record_batch.scan_batches(data, 0, -1, False)
                if not infos:
                    raise CorruptRecordError("invalid batch at %d in segment %d" % (pos, seg.base_offset))
            for info in infos:
                yield info, data[info.position:info.position + info.size]
            pos += end


def collect_aborted_txns(dir_path: str, bases: Sequence[int], start: int, upper: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [start, upper) from the transaction index files, starting at the segment
    holding ``start`` (Kafka's collectAbortedTransactions, reading the files by path)."""
    i = max(bisect.bisect_right(list(bases), start) - 1, 0)
    out: list[AbortedTxn] = []
    for base in bases[i:]:
        txns, complete = overlapping(read_aborted_txns(files.file_path(dir_path, base, files.TXN_INDEX_SUFFIX)),
                                     start, upper)
        out.extend(txns)
        if complete:
            break
    return out


def run_clean_pass(plan: CleanPlan, check_abort: Callable[[], None] = lambda: None) -> PassResult:
    """Build the map, write every group's cleaned files; returns what to swap in (nothing swapped here).

    On an exception every cleaned file written so far is removed.
    """
    stats = CleanerStats()
    offset_map = OffsetMap(plan.map_capacity)
    segs = list(plan.segments)
    bases = plan.txn_index_bases or tuple(s.base_offset for s in segs)
    first_dirty = plan.first_dirty_offset
    end_offset = max(first_dirty, segs[0].base_offset) if segs else first_dirty
    map_txns = CleanedTransactionMetadata()
    if segs:
        map_txns.add_aborted_transactions(collect_aborted_txns(plan.dir, bases, first_dirty,
                                                               segs[-1].next_base_offset))
    for seg in segs:
        if seg.next_base_offset <= first_dirty:
            continue
        check_abort()
        if offset_map.size and offset_map.is_full():
            break
        _build_offset_map(plan.dir, seg, first_dirty, offset_map, map_txns, stats)
        end_offset = seg.next_base_offset
    stats.buffer_utilization = offset_map.utilization
    stats.map_done_s = _time.monotonic()
    to_clean = [s for s in segs if s.next_base_offset <= end_offset]
    horizon_ms = plan.now_ms + plan.delete_retention_ms
    min_horizon: list[Optional[int]] = [None]
    written: list[CleanedGroup] = []
    txns = CleanedTransactionMetadata()  # carried from group to group, as Kafka's doClean
    try:
        for group in group_segments_by_size(to_clean, plan.segment_bytes, plan.segment_index_bytes):
            check_abort()
            _write_group(plan, group, bases, offset_map, txns, horizon_ms, stats, min_horizon, check_abort)
            written.append(CleanedGroup(group[0].base_offset, tuple(s.base_offset for s in group),
                                        tuple(s.size for s in group), group[-1].next_base_offset))
    except BaseException:
        for g in written:
            discard_cleaned_files(plan.dir, g.base_offset)
        raise
    stats.end_s = _time.monotonic()
    return PassResult(end_offset, written, stats, min_horizon[0])


def _control_type(data: bytes, info: BatchInfo) -> Optional[int]:
    """The control record type of a control batch; None when the batch holds no record."""
    if info.record_count <= 0:
        return None
    records = iter_stored_records(data)
    return control_type(records[0].key) if records else None


def _build_offset_map(dir_path: str, seg: SegmentRef, start: int, offset_map: OffsetMap,
                      txns: CleanedTransactionMetadata, stats: CleanerStats) -> None:
    put = offset_map.put
    for info, data in iter_segment_batches(dir_path, seg):
        stats.map_bytes_read += info.size
        if info.is_control:
            txns.on_control_batch_read(info, _control_type(data, info))
            continue
        if txns.on_batch_read(info) or info.last_offset < start or info.record_count == 0:
            continue  # an aborted transaction's records never enter the map
        _time.sleep(0)  # on a thread: let produce/fetch take the GIL between batches
        for rec in iter_stored_records(data):
            stats.map_messages_read += 1
            if rec.key is not None and rec.offset >= start:
                put(rec.key, rec.offset)


def _write_group(plan: CleanPlan, group: list[SegmentRef], bases: Sequence[int], offset_map: OffsetMap,
                 txns: CleanedTransactionMetadata, horizon_ms: int, stats: CleanerStats,
                 min_horizon: list[Optional[int]], check_abort: Callable[[], None]) -> None:
    base = group[0].base_offset
    discard_cleaned_files(plan.dir, base)
    cleaned = LogSegment(plan.dir, base, index_interval_bytes=plan.index_interval_bytes,
                         max_index_size=plan.segment_index_bytes, now_ms=plan.now_ms,
                         file_suffix=files.CLEANED_SUFFIX)
    txns.cleaned_index = cleaned.txn_index
    try:
        buf = bytearray()
        entries: list[tuple[int, int, int]] = []
        for seg in group:
            check_abort()
            # the whole segment's range: the cleaned segment's transaction index is rebuilt from these
            txns.add_aborted_transactions(collect_aborted_txns(plan.dir, bases, seg.base_offset,
                                                               seg.next_base_offset))
            for info, data in iter_segment_batches(plan.dir, seg):
                _time.sleep(0)
                out = _filter_batch(info, data, offset_map, plan.now_ms, horizon_ms, plan.producers, txns, stats,
                                    min_horizon)
                if out is None:
                    continue
                buf += out
                entries.append((info.last_offset, info.max_timestamp, len(out)))
                if len(buf) >= _WRITE_CHUNK:
                    cleaned.append(buf, entries)
                    stats.bytes_written += len(buf)
                    buf, entries = bytearray(), []
        if buf:
            cleaned.append(buf, entries)
            stats.bytes_written += len(buf)
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close()
        mtime_ns = group[-1].last_modified_ms * 1_000_000
        os.utime(files.file_path(plan.dir, base, files.LOG_SUFFIX) + files.CLEANED_SUFFIX, ns=(mtime_ns, mtime_ns))
    except BaseException:
        cleaned.close_handlers()
        discard_cleaned_files(plan.dir, base)
        raise
    finally:
        txns.cleaned_index = None


def _is_last_of_producer(info: BatchInfo, producers: dict[int, tuple[int, int]]) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holding a live producer's last data offset, or (when it
    has no data left) a marker of its current epoch; kept, empty if need be, for the producer state."""
    if info.producer_id < 0:
        return False
    last = producers.get(info.producer_id)
    if last is None:
        return False
    if last[0] >= 0:
        return info.last_offset == last[0]
    return info.is_control and info.producer_epoch == last[1]


def _filter_batch(info: BatchInfo, data: bytes, offset_map: OffsetMap, now: int, horizon_ms: int,
                  producers: dict[int, tuple[int, int]], txns: CleanedTransactionMetadata, stats: CleanerStats,
                  min_horizon: list[Optional[int]]) -> Optional[bytes]:
    """The bytes to keep for one batch: the original, a rewritten batch, an empty batch, or None."""
    stats.bytes_read += info.size
    existing = delete_horizon_ms(info)
    if info.is_control:
        can_discard = txns.on_control_batch_read(info, _control_type(data, info))
        discard_records = can_discard and existing is not None and existing <= now
    else:
        can_discard = txns.on_batch_read(info)
        discard_records = can_discard
    retain_empty = _is_last_of_producer(info, producers)
    if discard_records and not retain_empty:
        stats.messages_read += info.record_count
        return None
    marker_for_empty_txn = can_discard and info.is_control
    records = iter_stored_records(data) if info.record_count else []
    stats.messages_read += len(records)
    if discard_records:
        retained: list[Record] = []
    elif info.is_control:
        retained = list(records)
    else:
        keep_tombstones = existing is None or now < existing
        retained = []
        get = offset_map.get
        for rec in records:
            key = rec.key
            if key is None:
                stats.invalid_messages += 1
                continue
            if get(key) > rec.offset:
                continue
            if rec.value is None and not keep_tombstones:
                continue
            retained.append(rec)
    stats.messages_written += len(retained)
    if not retained:
        return build_empty_batch(info) if retain_empty else None
    tombstones = any(r.value is None for r in retained)
    need_horizon = (tombstones or marker_for_empty_txn) and existing is None
    new_horizon = horizon_ms if need_horizon else existing
    if new_horizon is not None and (tombstones or marker_for_empty_txn) \
            and (min_horizon[0] is None or new_horizon < min_horizon[0]):
        min_horizon[0] = new_horizon
    if len(retained) == len(records) and not need_horizon:
        return data
    return build_retained_batch(info, retained, new_horizon)
