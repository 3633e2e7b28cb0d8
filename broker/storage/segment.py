"""LogSegment: one ``<20-digit base offset>.log`` file with its ``.index``, ``.timeindex`` and ``.txnindex``.

The ``.log`` file is a plain concatenation of magic-2 record batches exactly as they appear on
the wire (see broker/protocol/records/batch_info.py for the 61-byte batch header). Appends are
one ``pwrite`` of already validated and offset-stamped batch bytes at the end of the file.
The indexes get an entry for a batch when more than index.interval.bytes were appended since
the last entry: offset index (batch last offset -> batch start position) and time index
(max timestamp so far -> offset carrying it), as Kafka 3.9's LogSegment.append.

Reads return a FileSlice of whole batches. Finding the batch holding an offset is an index
lookup followed by a scan of batch headers (61 bytes each, read with pread in chunks). Where a read's whole
batches end within its byte budget is one ``record_batch.whole_batches_end`` call over a pread of the window
(the offset index is asked again only for a window past 64 KiB, to skip to near its end).

The transaction index (txn_index.py) holds the aborted transactions whose ABORT marker is in this
segment; the Log appends to it after each marker and reads it for read_committed fetches.

Descriptors: only the active segment keeps its ``.log`` open (and no index file); a closed segment opens its
data file through a bounded cache when read (file_cache.py) and reads its indexes on demand (index.py).

Thread-safety: changed only under the owning Log's lock. ``read`` (with an explicit ``size``), ``translate_offset``,
``iter_headers`` (with an end), ``fetch_upper_bound_offset``, ``collect_aborted_txns`` and ``readable_size`` are
also called by lock-free readers (Log.read) while the owner appends, rolls, truncates or deletes: they write no
field the owner writes (the lazily made index objects are made under one small lock), read no further than the
size they are given, and hold the FileHandle object (not its number) for as long as they use its descriptor.
Descriptors are pinned by reference: a FileHandle closes when its last reference goes, so a reader's handle (or
a FileSlice's) stays open however the cache or the segment lets go of it, and a descriptor number is never read
after it was closed and reused. A read that raced a truncation, deletion or swap may have read another file's
bytes through a stale path; the Log discards such a read (its layout generation moved) and reads again.
"""
from __future__ import annotations

import os
import threading
import time as _time
from typing import Callable, Iterator, NamedTuple, Optional, Sequence

from broker.accel import record_batch
from broker.stats import LOG_FLUSH_STATS
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, BatchInfo
from broker.util.file_slice import FileSlice

from . import files
from .cleaner_batch import iter_stored_records
from .errors import LogSegmentOffsetOverflowError
from .file_cache import SEGMENT_FILES, FileHandle, open_handle
from .index import OffsetIndex, TimeIndex
from .producer_state import CompletedTxn
from .txn_index import AbortedTxn, CorruptIndexError, TransactionIndex

_SCAN_CHUNK = 16384
_RECOVER_CHUNK = 8 << 20
#: bytes of a Fetch window read per scanner call; a larger window starts its scan at the offset index
_FETCH_SCAN_CHUNK = 65536
INT32_MAX = 2147483647
#: taken to make a segment's index objects on first use: the owner and a lock-free reader must get the same one
_LAZY = threading.Lock()


class LogOffsetMetadata(NamedTuple):
    """Where an offset lives: its segment and the byte position of its batch in that segment."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class LogSegment:
    """A segment of a partition's log; the active (last) segment takes appends.

    Only the active segment holds anything open: its ``.log`` descriptor (pinned) and its index entries in
    memory. Every other segment is a path, a base offset and whatever was learnt about it lazily (size, max
    timestamp); a read opens its data file through the process's bounded
    :data:`~broker.storage.file_cache.SEGMENT_FILES` cache and its index through
    :data:`~broker.storage.file_cache.INDEXES`. :meth:`activate` and :meth:`on_become_inactive` move a segment
    between the two states.
    """

    __slots__ = ("dir", "base_offset", "index_interval_bytes", "max_index_size", "created_ms", "_suffix",
                 "_handle", "_size", "_oi", "_ti", "_xi", "_txn_exists", "bytes_since_last_index_entry",
                 "_rolling_based_timestamp", "_max_ts", "next_offset", "_fgen", "__weakref__")

    def __init__(self, dir_path: str, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
                 now_ms: int, file_already_exists: bool = False, file_suffix: str = "", active: bool = True,
                 existing_files: Optional[frozenset[str]] = None) -> None:
        """``file_suffix`` (e.g. ``.cleaned``) names a segment being built by the log cleaner. An existing
        segment loaded with ``active=False`` touches no file until it is read (``existing_files``, the names in
        the partition dir, spares the stats of its transaction index). Its index objects are made when first
        used: a closed segment nobody reads is a few hundred bytes (190,000 of them at 10,000 partitions)."""
        self.dir = dir_path
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.created_ms = now_ms
        #: added to every file name: ``.cleaned`` while the cleaner builds it, ``.deleted`` once retired
        self._suffix = file_suffix
        self._handle: Optional[FileHandle] = None
        self._size: Optional[int] = None
        self._oi: Optional[OffsetIndex] = None
        self._ti: Optional[TimeIndex] = None
        self._xi: Optional[TransactionIndex] = None
        self._txn_exists: Optional[bool] = None
        #: bumped whenever the segment lets go of, renames or reopens its data file: a handle a reader opened
        #: meanwhile is used for that read only, never cached (it may be a file about to go)
        self._fgen = 0
        if not file_already_exists:
            self._handle = open_handle(self.path, os.O_RDWR | os.O_CREAT)
            self._size = 0
            self._txn_exists = os.path.exists(self._file(files.TXN_INDEX_SUFFIX))
        elif existing_files is not None:
            self._txn_exists = files.filename_prefix(base_offset) + files.TXN_INDEX_SUFFIX in existing_files
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: Optional[int] = None
        self._max_ts: Optional[tuple[int, int]] = None
        self.next_offset = base_offset
        if not file_already_exists:
            self._max_ts = (-1, base_offset)
            self.offset_index.make_resident(load=False)
            self.time_index.make_resident(load=False)
        elif active:
            self.activate()

    # ------------------------------------------------------------------ state
    def _file(self, kind_suffix: str) -> str:
        return files.file_path(self.dir, self.base_offset, kind_suffix) + self._suffix

    @property
    def path(self) -> str:
        """The ``.log`` file's current path."""
        return self._file(files.LOG_SUFFIX)

    @property
    def offset_index(self) -> OffsetIndex:
        oi = self._oi
        if oi is None:
            with _LAZY:  # a reader making it while the owner makes it resident must not replace the owner's
                oi = self._oi
                if oi is None:
                    oi = self._oi = OffsetIndex(self._file(files.INDEX_SUFFIX), self.base_offset,
                                                self.max_index_size, resident=False)
        return oi

    @property
    def time_index(self) -> TimeIndex:
        ti = self._ti
        if ti is None:
            with _LAZY:
                ti = self._ti
                if ti is None:
                    ti = self._ti = TimeIndex(self._file(files.TIME_INDEX_SUFFIX), self.base_offset,
                                              self.max_index_size, resident=False)
        return ti

    @property
    def txn_index(self) -> TransactionIndex:
        xi = self._xi
        if xi is None:
            with _LAZY:
                xi = self._xi
                if xi is None:
                    xi = self._xi = TransactionIndex(self._file(files.TXN_INDEX_SUFFIX), self.base_offset,
                                                     self._txn_exists)
        return xi

    @property
    def active(self) -> bool:
        """Whether this segment holds its data file and index entries (it takes appends)."""
        return self._handle is not None

    @property
    def log_file(self) -> FileHandle:
        """The open data file: pinned while active, else from the bounded cache (hold it only while reading)."""
        h = self._handle
        if h is not None:
            return h
        gen = self._fgen
        return SEGMENT_FILES.get(self, self._path_of, lambda: self._fgen == gen)

    def _path_of(self) -> str:
        return self.path

    def readable_size(self) -> int:
        """The bytes of a closed segment, for a lock-free reader: the known size, else the open file's (never
        stored: a reader writes no field the owner writes)."""
        size = self._size
        if size is not None:
            return size
        handle = self.log_file
        return os.fstat(handle.fd).st_size

    @property
    def size(self) -> int:
        size = self._size
        if size is None:
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = 0
            self._size = size
        return size

    @size.setter
    def size(self, value: int) -> None:
        self._size = value

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp()[0]

    @max_timestamp_so_far.setter
    def max_timestamp_so_far(self, value: int) -> None:
        self._max_ts = (value, self._max_timestamp()[1])

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp()[1]

    @offset_of_max_timestamp_so_far.setter
    def offset_of_max_timestamp_so_far(self, value: int) -> None:
        self._max_ts = (self._max_timestamp()[0], value)

    def _max_timestamp(self) -> tuple[int, int]:
        """(max timestamp, its offset); for a closed segment the time index's last entry (as Kafka's
        maxTimestampAndOffsetSoFar), read once."""
        m = self._max_ts
        if m is None:
            m = self._max_ts = self.time_index.last_entry
        return m

    def activate(self) -> None:
        """Become the active segment: pin the data file, hold the index entries, find the next offset."""
        if self._handle is not None:
            return
        self._fgen += 1
        SEGMENT_FILES.discard(self)
        self._handle = open_handle(self.path, os.O_RDWR | os.O_CREAT)
        self._size = os.fstat(self._handle.fd).st_size
        self.offset_index.make_resident(load=True)
        self.time_index.make_resident(load=True)
        if not self.offset_index.sanity_check(self._size) or not self.time_index.sanity_check(self._size):
            raise CorruptIndexError("index of segment %d in %s cannot be valid" % (self.base_offset, self.dir))
        self._max_ts = None
        self._load_tail_state()

    def _load_tail_state(self) -> None:
        """Derive the next offset and max timestamp from the indexes plus a scan of the unindexed tail."""
        ts, off = self.time_index.last_entry
        self._max_ts = (ts, off) if self.time_index.entries else (-1, self.base_offset)
        _, pos = self.offset_index.lookup_by_position(self.size)
        max_ts, max_off = self._max_ts
        for info in self.iter_headers(pos):
            self.next_offset = info.base_offset + info.last_offset_delta + 1
            if info.max_timestamp > max_ts:
                max_ts, max_off = info.max_timestamp, self.next_offset - 1
        self._max_ts = (max_ts, max_off)

    def sanity_check_indexes(self) -> bool:
        """Kafka's load-time check (LogSegment.sanityCheck): the offset index exists and the transaction index
        is valid; offset and time indexes are checked when the segment becomes active (the caller checks that
        the index files exist)."""
        if self._txn_exists is False:
            return True
        try:
            self.txn_index.sanity_check()
        except CorruptIndexError:
            return False
        return True

    # ------------------------------------------------------------------ transactions
    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Record an aborted transaction whose marker this segment holds (Kafka's updateTxnIndex)."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                             last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> Optional[int]:
        """Offset of the first offset-index entry at or after ``start_position + fetch_size`` (Kafka's
        fetchUpperBoundOffset: a cheap bound past the data a fetch returns), or None when there is none."""
        return self.offset_index.first_at_or_after_position(start_position + fetch_size)

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp of the segment, or the file's mtime when it has none (as Kafka)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms()

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (drives segment.ms rolls), -1 when empty."""
        if self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = -1
            for info in self.iter_headers(0):
                self._rolling_based_timestamp = info.max_timestamp
                break
        return self._rolling_based_timestamp

    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int,
                    segment_bytes: int, roll_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: size, segment.ms (minus jitter), full index, offset overflow.

        Asked before every append, so it reads fields rather than the properties and helpers that say the same.
        """
        size = self._size
        if size is None:
            size = self.size
        if size > segment_bytes - messages_size:
            return True
        if size > 0:
            first_ts = self._rolling_based_timestamp
            if first_ts is None:
                first_ts = self.first_batch_timestamp()
            waited = max_timestamp - first_ts if first_ts >= 0 else now_ms - self.created_ms
            if waited > roll_ms:
                return True
        oi, ti = self._oi, self._ti  # an active segment has both (the properties make them on first use)
        if oi is None or ti is None:
            oi, ti = self.offset_index, self.time_index
        return (oi.is_full() or ti.is_full()
                or not 0 <= max_offset - self.base_offset <= INT32_MAX)  # can_convert_to_relative_offset

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # ------------------------------------------------------------------ append
    def append(self, buf: "bytes | bytearray | memoryview", batches: Sequence[tuple[int, int, int]]) -> None:
        """Write ``buf`` (whole batches) at the end; ``batches`` = (last_offset, max_timestamp, size) each.

        Then the bookkeeping of Kafka 3.9's LogSegment.append: the max timestamp and its offset, an index entry
        every index.interval.bytes, the size and next offset. One call per append: the fields are read directly.
        """
        if not batches:
            return
        last = batches[-1][0]
        if not 0 <= last - self.base_offset <= INT32_MAX:  # can_convert_to_relative_offset
            raise LogSegmentOffsetOverflowError("offset %d does not fit in segment %d" % (last, self.base_offset))
        position = self._size
        if position is None:
            position = self.size
        if position == 0:
            self._rolling_based_timestamp = batches[0][1]
        handle = self._handle
        if handle is None:
            raise ValueError("segment %d of %s is not active" % (self.base_offset, self.dir))
        written = os.pwrite(handle.fd, buf, position)
        if written < len(buf):
            _write_rest(handle.fd, buf, position, written)
        since = self.bytes_since_last_index_entry
        interval = self.index_interval_bytes
        old = self._max_ts
        if old is None:
            old = self._max_timestamp()
        max_ts, offset_of_max_ts = old
        for last_offset, batch_max_ts, size in batches:
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max_ts = last_offset
            if since > interval:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(max_ts, offset_of_max_ts)
                since = 0
            position += size
            since += size
        if max_ts != old[0]:
            self._max_ts = (max_ts, offset_of_max_ts)
        self.bytes_since_last_index_entry = since
        self._size = position
        self.next_offset = last + 1

    # ------------------------------------------------------------------ reads
    def iter_headers(self, start_position: int = 0, end_position: int = -1) -> Iterator[BatchInfo]:
        """Headers of the batches from ``start_position`` (a batch start) to the end, read in chunks and decoded by
        the record_batch header view (a legacy magic 0/1 entry as a one-record batch). Stops at the first header
        that is torn, of an unknown magic or reaching past the end."""
        end = self.size if end_position < 0 else end_position  # a reader's end: no look at the owner's size
        pos = start_position
        if end - pos <= LOG_OVERHEAD:
            return
        chunk = b""
        chunk_start = pos
        handle = self.log_file  # held for the whole walk
        fd = handle.fd
        header = record_batch.batch_header
        while end - pos > LOG_OVERHEAD:
            rel = pos - chunk_start
            if rel < 0 or rel + min(RECORD_BATCH_OVERHEAD, end - pos) > len(chunk):
                chunk = os.pread(fd, _SCAN_CHUNK, pos)
                chunk_start, rel = pos, 0
            try:
                info = header(chunk, rel, pos)
            except record_errors.CorruptRecordError:
                return
            size = info.size
            if size <= LOG_OVERHEAD or pos + size > end:
                return
            yield info
            pos += size

    def translate_offset(self, offset: int, starting_position: int = 0, end_position: int = -1
                         ) -> Optional[BatchInfo]:
        """The first batch whose last offset is >= ``offset`` (its position is in the result), or None; no batch
        past ``end_position`` (the segment's size when negative) is looked at."""
        _, pos = self.offset_index.lookup(offset)
        for info in self.iter_headers(max(pos, starting_position), end_position):
            if info.base_offset + info.last_offset_delta >= offset:
                return info
        return None

    def _whole_batches_end(self, fd: int, pos: int, limit: int) -> int:
        """The last batch boundary <= ``limit`` reached from the boundary ``pos`` (``pos`` if none).

        The batches' length fields are walked by the record_batch scanner (Cython when built) over a ``pread`` of
        the window: one chunk and one call for a window up to :data:`_FETCH_SCAN_CHUNK`, the usual Fetch at the
        log's end. A larger window (a consumer or follower catching up) first moves ``pos`` to the offset
        index's last entry before ``limit``: copying a MiB of page cache to find its last boundary costs 3 to 6
        times the lookup (measured). Chunk by chunk from there, stepping over a batch longer than what is left of
        its chunk without reading it.
        """
        if limit - pos > _FETCH_SCAN_CHUNK:
            pos = max(pos, self.offset_index.lookup_by_position(limit)[1])
        while pos < limit:
            want = min(limit - pos, _FETCH_SCAN_CHUNK)
            chunk = os.pread(fd, want, pos)
            end, next_size = record_batch.whole_batches_end(chunk)
            pos += end
            if len(chunk) < want:
                break  # the file ended early (truncated meanwhile): what was whole stands
            if end == want:
                continue  # the chunk ended on a boundary: on with the next one
            if next_size < 0:
                if want - end >= LOG_OVERHEAD or want < _FETCH_SCAN_CHUNK:
                    break  # not a batch length, or ``limit`` reached
                continue  # the next length field straddles the chunk's end: the next chunk starts at it
            if pos + next_size > limit:
                break
            pos += next_size  # whole within ``limit`` but longer than what is left of the chunk
        return pos

    def read(self, start_offset: int, max_size: int, max_position: int = -1,
             min_one_message: bool = False, size: int = -1) -> Optional[tuple[FileSlice, LogOffsetMetadata]]:
        """Whole batches from the one holding ``start_offset``, up to ``max_size`` bytes and ``max_position``.

        Returns None when ``start_offset`` is past this segment's last batch. With ``min_one_message``
        the first batch is returned whole even when larger than ``max_size`` (KIP-74). ``size``: the bytes
        that may be read (a lock-free reader's published size; the segment's own when negative).
        """
        if max_size < 0:
            raise ValueError("invalid max size %d" % max_size)
        if size < 0:
            size = self.size
        if max_position < 0 or max_position > size:
            max_position = size
        first = self.translate_offset(start_offset, 0, size)
        if first is None:
            return None
        start = first.position
        meta = LogOffsetMetadata(start_offset, self.base_offset, start)
        handle = self.log_file
        if start >= max_position:
            return FileSlice(handle, start, 0), meta
        limit = min(max_position, start + max_size)
        if first.size > limit - start:
            if min_one_message and start + first.size <= max_position:
                return FileSlice(handle, start, first.size), meta
            return FileSlice(handle, start, 0), meta
        end = self._whole_batches_end(handle.fd, start + first.size, limit)
        return FileSlice(handle, start, end - start), meta

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first record at or after ``starting_offset`` with timestamp >= target."""
        _, index_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(index_offset, starting_offset))
        for info in self.iter_headers(pos):
            if info.max_timestamp >= timestamp and info.base_offset + info.last_offset_delta >= starting_offset:
                handle = self.log_file  # held across the pread: its descriptor cannot be closed and reused
                data = bytearray(os.pread(handle.fd, info.size, info.position))
                for rec in iter_stored_records(data):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp
        return None

    def read_batch(self, info: BatchInfo) -> bytes:
        handle = self.log_file  # held across the pread: its descriptor cannot be closed and reused
        return os.pread(handle.fd, info.size, info.position)

    # ------------------------------------------------------------------ recovery / truncation
    def recover(self, on_batch: Optional[Callable[[BatchInfo], None]] = None) -> int:
        """Rebuild the indexes from the log with CRC checks; truncate a torn or corrupt tail.

        Returns the number of bytes truncated. ``on_batch`` sees every valid batch (producer state
        and leader epoch cache rebuild).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.resize_indexes(self.max_index_size)
        self._max_ts = (-1, self.base_offset)
        self.next_offset = self.base_offset
        self.bytes_since_last_index_entry = 0
        handle = self._handle if self._handle is not None else open_handle(self.path, os.O_RDWR)
        self._fgen += 1
        SEGMENT_FILES.discard(self)
        fd = handle.fd
        file_size = os.fstat(fd).st_size
        self.size = 0
        pos = 0
        needed = 0
        expected_next = self.base_offset
        valid_end = 0
        while pos < file_size:
            want = min(file_size - pos, max(_RECOVER_CHUNK, needed))
            data = os.pread(fd, want, pos)
            infos, vend = record_batch.scan_batches(data, 0, -1, True)
            good: list[tuple[int, int, int]] = []
            stop = False
            for info in infos:
                if (info.magic != 2 or info.base_offset < expected_next
                        or not self.can_convert_to_relative_offset(info.base_offset + info.last_offset_delta)):
                    stop = True
                    break
                expected_next = info.base_offset + info.last_offset_delta + 1
                good.append((expected_next - 1, info.max_timestamp, info.size))
                if on_batch is not None:
                    on_batch(info._replace(position=pos + info.position))
            if good:
                self._index_existing(good)
                consumed = sum(g[2] for g in good)
                pos += consumed
                valid_end = pos
                needed = 0
                if stop:
                    break
                continue
            if stop or len(data) < LOG_OVERHEAD:
                break
            size = record_batch.batch_size(data)
            if size > LOG_OVERHEAD and size > len(data) and pos + size <= file_size and needed < size:
                needed = size  # a batch larger than the chunk: read it whole
                continue
            break
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(fd, valid_end)
        self.size = valid_end
        self._rolling_based_timestamp = None
        return truncated

    def _index_existing(self, batches: list[tuple[int, int, int]]) -> None:
        """Index already written batches (recovery): the same rule as append, without the write."""
        position = self.size
        since = self.bytes_since_last_index_entry
        for last_offset, batch_max_ts, size in batches:
            if batch_max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far = batch_max_ts
                self.offset_of_max_timestamp_so_far = last_offset
            if since > self.index_interval_bytes:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                since = 0
            position += size
            since += size
        self.bytes_since_last_index_entry = since
        self.size = position
        self.next_offset = batches[-1][0] + 1

    def truncate_to(self, offset: int) -> int:
        """Drop batches whose last offset is >= ``offset``; returns the bytes removed."""
        first = self.translate_offset(offset)
        if first is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - first.position
        handle = self._handle
        if handle is None:
            raise ValueError("segment %d of %s is not active" % (self.base_offset, self.dir))
        os.ftruncate(handle.fd, first.position)
        self.size = first.position
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self.next_offset = self.base_offset
        self._max_ts = (-1, self.base_offset)
        self._load_tail_state()
        return removed

    # ------------------------------------------------------------------ lifecycle
    def on_become_inactive(self) -> None:
        """The segment was rolled: final time index entry, indexes written and trimmed to their entries and
        dropped from memory, the data file handed to the bounded cache (still hot: the next reads want it)."""
        if self._buf_resident():
            max_ts, max_off = self._max_timestamp()
            if max_ts >= 0:
                self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self.release()

    def _buf_resident(self) -> bool:
        return (self._oi is not None and self._oi.resident) or (self._ti is not None and self._ti.resident)

    def _indexes(self) -> tuple["OffsetIndex | TimeIndex | TransactionIndex", ...]:
        """The index objects made so far (a closed segment nobody read has none)."""
        return tuple(i for i in (self._oi, self._ti, self._xi) if i is not None)

    def release(self) -> None:
        """Write out and drop the in-memory index entries; unpin the data file (into the cache)."""
        for idx in (self._oi, self._ti):
            if idx is not None:
                idx.release()
        h, self._handle = self._handle, None
        if h is not None:
            SEGMENT_FILES.put(self, h)

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        """fsync the segment and its indexes, timed as Kafka's LogFlushStats.LogFlushRateAndTimeMs."""
        start = _time.monotonic_ns()
        handle = self.log_file  # held across the fsync (flush runs outside the Log's lock)
        os.fsync(handle.fd)
        for idx in self._indexes():
            idx.flush()
        LOG_FLUSH_STATS.update((_time.monotonic_ns() - start) / 1e6)

    def close(self) -> None:
        """Write out and trim the indexes (with the final time index entry) and let go of the files."""
        if self._buf_resident():
            max_ts, max_off = self._max_timestamp()
            if max_ts >= 0:
                try:
                    self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
                except ValueError:
                    pass
        for idx in self._indexes():
            idx.close()
        self._drop_files()

    def _drop_files(self) -> None:
        """Let go of the data file; a reader still holding it (a FileSlice in flight) keeps it open."""
        self._handle = None
        self._fgen += 1
        SEGMENT_FILES.discard(self)

    def close_handlers(self) -> None:
        """Let go of every file without writing the indexes (the files are being deleted or replaced)."""
        for idx in (self._oi, self._ti):
            if idx is not None:
                idx.close_handler()
        self._drop_files()

    def rename_files(self, suffix: str) -> list[str]:
        """Add ``suffix`` (``.deleted``) to each file of the segment; reads go on through the new names.
        Returns the renamed paths (the transaction index's even when it does not exist)."""
        renamed = []
        for kind, idx in ((files.LOG_SUFFIX, None), (files.INDEX_SUFFIX, self._oi), (files.TIME_INDEX_SUFFIX, self._ti),
                          (files.TXN_INDEX_SUFFIX, self._xi)):
            src = self._file(kind)
            try:
                os.rename(src, src + suffix)
                renamed.append(src + suffix)
            except FileNotFoundError:
                if kind == files.TXN_INDEX_SUFFIX:  # lazily created: renamed only when it exists
                    renamed.append(src + suffix)
            if idx is not None:
                idx.set_path(src + suffix)
        self._suffix += suffix
        self._fgen += 1
        SEGMENT_FILES.discard(self)  # a handle opened by the old name is the same file: readers holding it go on
        return renamed

    def delete(self) -> None:
        """Let go of and remove the segment's files."""
        for idx in (self._oi, self._ti):
            if idx is not None:
                idx.close_handler()
        if self._xi is not None:
            self._xi.delete()
        self._drop_files()
        for kind in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX, files.LOG_SUFFIX):
            try:
                os.unlink(self._file(kind))
            except FileNotFoundError:
                pass

    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def __repr__(self) -> str:
        return "LogSegment(base_offset=%d, size=%d)" % (self.base_offset, self.size)


def _write_rest(fd: int, buf: "bytes | bytearray | memoryview", position: int, written: int) -> None:
    """Finish a pwrite of ``buf`` at ``position`` that wrote only ``written`` bytes (a signal, a full disk)."""
    view = memoryview(buf)
    while written < len(view):
        written += os.pwrite(fd, view[written:], position + written)
