"""OffsetIndex and TimeIndex: the sparse index files of a segment, held in memory while the segment is active.

``.index`` entries (8 bytes, big-endian)::

    relative offset  int32   (offset - segment base offset)
    position         int32   byte position of a batch start in the .log file

``.timeindex`` entries (12 bytes, big-endian)::

    timestamp        int64   largest batch max timestamp seen so far in the segment
    relative offset  int32   last offset of the batch carrying that timestamp

The files are Kafka's: trimmed to their entries when the segment is rolled or closed, never checksummed,
rebuilt from the log after a crash (every segment from the one holding the recovery point on is recovered, so an
active segment's index on disk never has to be current). Kafka preallocates an active segment's index files to
segment.index.bytes when it creates the segment; here they are written at the segment's first flush, roll or
close (creating a partition then costs one file, its ``.log``), and a loader that finds them missing rebuilds
them, as Kafka's LogLoader does.

Unlike Kafka, no index keeps a descriptor or a mapping (Kafka maps each index it touches; at 10,000 partitions
of 20 segments that is 400,000 mappings, beyond vm.max_map_count):

- *resident* (the active segment, a segment being recovered or built by the cleaner): the entries live in a
  ``bytearray``; appends go there, and :meth:`flush`/:meth:`trim_to_valid_size` write what is new with one
  open–pwrite–close (fsync on flush). Index appends happen every index.interval.bytes, flushes far less often.
- *closed* (every other segment): nothing is read until a lookup needs it; then the whole file is read into
  the process's :data:`~broker.storage.file_cache.INDEXES` cache (bounded, least recently used out). A closed
  segment's index never changes, so cached bytes never go stale.

As Kafka (KAFKA-7283), a closed index is not sanity-checked at load; a resident one loaded from disk gets Kafka's
cheap check (whole entries, last entry not below the base offset) plus: its last position inside the log.
Lookups use ``accel.offset_index`` (binary search over the bytes).

Thread-safety: changed only under the owning Log's lock. Lookups are also made by lock-free readers (Log.read)
while the owner appends: a resident index's bytearray only grows at its end between truncations, and every lookup
takes its length once and searches that prefix (the native search holds the GIL, the pure one unpacks one entry per
call), so a lookup sees a consistent prefix; an entry past a reader's published size is never reached, since the
reader looks up offsets below its published LEO. Whatever makes the bytes of the file differ from the cached ones
(residency, truncation, a rename, a close) bumps ``_gen`` before it drops the cached copy, and a reader caches the
bytes it read only while ``_gen`` has not moved (:meth:`IndexCache.get`'s ``valid``), so no stale copy survives.
"""
from __future__ import annotations

import os
import struct
from typing import Optional, Union

from broker.accel import offset_index

from .errors import IndexFullError
from .file_cache import INDEXES

_ENTRY = struct.Struct(">ii")
_TENTRY = struct.Struct(">qi")

Buffer = Union[bytes, bytearray]


class _Index:
    """Entry bookkeeping, residency and file writes common to the two index kinds."""

    ENTRY_SIZE = 8
    __slots__ = ("path", "base_offset", "_max_size", "_writable", "_buf", "_written", "_file_len", "_gen",
                 "__weakref__")
    #: entries kept free when deciding that the index is full
    RESERVED_ENTRIES = 0
    #: full when fewer bytes than this are left: (RESERVED_ENTRIES + 1) * ENTRY_SIZE
    _FULL_BELOW = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int, writable: bool = True, *,
                 resident: bool = True, load: bool = True) -> None:
        """``resident``: hold the entries in memory (``load``: read them from the file, else start empty);
        otherwise nothing is touched until a lookup."""
        self.path = path
        self.base_offset = base_offset
        self._max_size = self._round(max_index_size)
        self._writable = writable
        self._buf: Optional[bytearray] = None
        #: bytes of ``_buf`` known to be in the file as they are in memory
        self._written = 0
        #: the file's length as this index last set it (-1: unknown)
        self._file_len = -1
        #: bumped by whatever may make the cached bytes stale (see the module's Thread-safety)
        self._gen = 0
        if resident:
            self.make_resident(load)

    def _round(self, size: int) -> int:
        return max(size, self.ENTRY_SIZE) // self.ENTRY_SIZE * self.ENTRY_SIZE

    # ------------------------------------------------------------------ residency
    @property
    def resident(self) -> bool:
        return self._buf is not None

    def make_resident(self, load: bool = True) -> None:
        """Hold the entries in memory (the segment becomes active, or is being rebuilt): read the file when
        ``load``, else start with no entries (the file is written at the next flush, roll or close)."""
        if self._buf is not None:
            return
        data = b""
        if load:
            try:
                with open(self.path, "rb", buffering=0) as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
        self._file_len = len(data) if load else -1
        whole = len(data) - len(data) % self.ENTRY_SIZE
        self._buf = bytearray(memoryview(data)[:whole])
        self._written = whole
        self._forget_cached()

    def _forget_cached(self) -> None:
        """The cached bytes may be stale from now on: no reader may cache what it read before this."""
        self._gen += 1
        INDEXES.discard(self)

    def set_path(self, path: str) -> None:
        """The file was renamed (a segment retired): lookups read it by its new name."""
        self.path = path
        self._forget_cached()

    def release(self) -> None:
        """Write out and trim the entries, then drop them from memory (the segment is no longer active)."""
        if self._buf is None:
            return
        self._write_out(sync=False, trim=True)
        self._buf = None
        self._forget_cached()

    def _data(self) -> Buffer:
        gen = self._gen
        buf = self._buf
        if buf is not None:
            return buf
        return INDEXES.get(self, self._read_file, lambda: self._gen == gen)

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb", buffering=0) as f:
                data = f.read()
        except FileNotFoundError:
            return b""
        return data[:len(data) - len(data) % self.ENTRY_SIZE]

    # ------------------------------------------------------------------ size
    @property
    def entries(self) -> int:
        return len(self._data()) // self.ENTRY_SIZE

    @property
    def max_entries(self) -> int:
        if self._buf is None:
            return self.entries
        return max(self._max_size, len(self._buf)) // self.ENTRY_SIZE

    @property
    def size_bytes(self) -> int:
        buf = self._buf
        if buf is not None:
            return len(buf)
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
        return size - size % self.ENTRY_SIZE

    def is_full(self) -> bool:
        """No room for another entry (``entries >= max_entries - RESERVED_ENTRIES``), computed without the
        properties: every append asks it, through LogSegment.should_roll."""
        buf = self._buf
        if buf is None:  # not resident: max_entries is the number of entries
            return True
        # the resident entries and the size limit are both whole entries: room for fewer than RESERVED_ENTRIES + 1
        return self._max_size - len(buf) < self._FULL_BELOW

    def resize(self, new_size: int) -> None:
        """The most bytes this index may grow to (segment.index.bytes; never below its entries)."""
        self._max_size = self._round(new_size) if new_size > 0 else 0

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (segment rolled or closed), writing what is new."""
        if self._buf is not None:
            self._write_out(sync=False, trim=True)

    def _resident(self) -> bytearray:
        if self._buf is None:
            raise ValueError("index %s is not active" % self.path)
        return self._buf

    def truncate_entries(self, entries: int) -> None:
        buf = self._resident()
        keep = max(0, min(entries, len(buf) // self.ENTRY_SIZE)) * self.ENTRY_SIZE
        del buf[keep:]
        self._written = min(self._written, keep)

    def reset(self) -> None:
        """Drop every entry (the index is about to be rebuilt)."""
        if self._buf is None:
            self.make_resident(load=False)
        self.truncate_entries(0)

    # ------------------------------------------------------------------ file
    def _write_out(self, sync: bool, trim: bool) -> None:
        """Write the entries not yet in the file and make the file exactly the entries long (after a
        truncation, or where Kafka preallocated it); fsync with ``sync``. ``trim`` is implied: the file never
        holds more than the entries once written out."""
        buf = self._buf
        if buf is None or not self._writable:
            return
        n = len(buf)
        if self._written == n and self._file_len == n and not sync:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if self._written < n:
                view = memoryview(buf)
                pos = self._written
                while pos < n:
                    pos += os.pwrite(fd, view[pos:n], pos)
                self._written = n
            if self._file_len != n:
                os.ftruncate(fd, n)
                self._file_len = n
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Write the new entries and fsync the file (the segment's data is being flushed)."""
        self._write_out(sync=True, trim=False)

    def close(self) -> None:
        """Write out, trim and drop from memory (broker shutdown, segment rolled)."""
        self.release()
        self._forget_cached()

    def close_handler(self) -> None:
        """Forget the entries without writing them (the files are being deleted or replaced, or a crash)."""
        self._buf = None
        self._written = 0
        self._forget_cached()

    def delete(self) -> None:
        self.close_handler()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.set_path(path)


class OffsetIndex(_Index):
    """Maps offsets to batch-start positions in the segment's .log file, one entry per index.interval.bytes."""

    ENTRY_SIZE = 8
    __slots__ = ()

    def _entry(self, buf: Buffer, slot: int) -> tuple[int, int]:
        rel, pos = _ENTRY.unpack_from(buf, slot * 8)
        return self.base_offset + rel, pos

    def entry(self, slot: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``slot``."""
        return self._entry(self._data(), slot)

    @property
    def last_offset(self) -> int:
        buf = self._data()
        n = len(buf) // 8
        return self._entry(buf, n - 1)[0] if n else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must grow. Raises IndexFullError when there is no room."""
        buf = self._resident()
        n = len(buf) // 8
        rel = offset - self.base_offset
        if n:
            last_rel = _ENTRY.unpack_from(buf, n * 8 - 8)[0]
            if rel <= last_rel:
                raise ValueError("index offset %d not above the last entry %d" % (offset, last_rel + self.base_offset))
        if n >= self.max_entries:
            raise IndexFullError("offset index %s is full" % self.path)
        buf += _ENTRY.pack(rel, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target, or (base offset, 0) when there is none."""
        if target_offset < self.base_offset:
            return self.base_offset, 0
        buf = self._data()
        n = len(buf) // 8
        if not n:
            return self.base_offset, 0
        slot = offset_index.index_lookup(buf, n, target_offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        return self._entry(buf, slot)

    def lookup_by_position(self, max_position: int) -> tuple[int, int]:
        """Largest entry with position <= max_position, or (base offset, 0)."""
        buf = self._data()
        lo, hi, found = 0, len(buf) // 8 - 1, -1
        unpack = _ENTRY.unpack_from
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * 8)[1] <= max_position:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return self._entry(buf, found) if found >= 0 else (self.base_offset, 0)

    def first_at_or_after_position(self, target_position: int) -> Optional[int]:
        """Offset of the first entry whose position is >= ``target_position``, or None."""
        buf = self._data()
        lo, hi, found = 0, len(buf) // 8 - 1, -1
        unpack = _ENTRY.unpack_from
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * 8)[1] >= target_position:
                found = mid
                hi = mid - 1
            else:
                lo = mid + 1
        return self._entry(buf, found)[0] if found >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        buf = self._resident()
        n = len(buf) // 8
        if not n:
            return
        slot = offset_index.index_lookup(buf, n, offset - self.base_offset)
        if slot < 0:
            self.truncate_entries(0)
        elif self._entry(buf, slot)[0] == offset:
            self.truncate_entries(slot)
        else:
            self.truncate_entries(slot + 1)

    def sanity_check(self, log_size: int = -1) -> bool:
        """Kafka's cheap check (whole entries, last offset not below the base), plus the last position inside
        the log when ``log_size`` is known; False means the segment is recovered, which rebuilds the index."""
        if self._buf is None:
            return self.size_bytes % 8 == 0 or not os.path.exists(self.path)
        buf = self._buf
        n = len(buf) // 8
        if not n:
            return True
        rel, pos = _ENTRY.unpack_from(buf, n * 8 - 8)
        return rel >= 0 and pos >= 0 and (log_size < 0 or pos < log_size or (pos == 0 and log_size == 0))


class TimeIndex(_Index):
    """Maps the growing max timestamp of a segment to the offset that carried it."""

    ENTRY_SIZE = 12
    __slots__ = ()
    #: one slot stays free for the final entry written when the segment becomes inactive
    RESERVED_ENTRIES = 1
    _FULL_BELOW = 24

    def _entry(self, buf: Buffer, slot: int) -> tuple[int, int]:
        ts, rel = _TENTRY.unpack_from(buf, slot * 12)
        return ts, self.base_offset + rel

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry ``slot``."""
        return self._entry(self._data(), slot)

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset); a closed index reads only that entry."""
        buf = self._buf
        if buf is None:
            return self._read_last_entry()
        n = len(buf) // 12
        return self._entry(buf, n - 1) if n else (-1, self.base_offset)

    def _read_last_entry(self) -> tuple[int, int]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return -1, self.base_offset
        try:
            size = os.fstat(fd).st_size
            size -= size % 12
            if size <= 0:
                return -1, self.base_offset
            return self._entry(os.pread(fd, 12, size - 12), 0)
        finally:
            os.close(fd)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        buf = self._resident()
        n = len(buf) // 12
        if not skip_full_check and n >= self.max_entries - 1:
            raise IndexFullError("time index %s is full" % self.path)
        rel = offset - self.base_offset
        if n:
            last_ts, last_rel = _TENTRY.unpack_from(buf, n * 12 - 12)
            if rel < last_rel:
                raise ValueError("time index offset %d below the last entry %d" % (offset, last_rel + self.base_offset))
            if timestamp <= last_ts:
                return
        buf += _TENTRY.pack(timestamp, rel)

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target, or (-1, base offset)."""
        buf = self._data()
        n = len(buf) // 12
        if not n:
            return -1, self.base_offset
        slot = offset_index.time_index_lookup(buf, n, target_ts)
        if slot < 0:
            return -1, self.base_offset
        return self._entry(buf, slot)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= ``offset``."""
        buf = self._resident()
        n = len(buf) // 12
        while n > 0 and self._entry(buf, n - 1)[1] >= offset:
            n -= 1
        self.truncate_entries(n)

    def sanity_check(self, log_size: int = -1) -> bool:
        """Whole entries and the last offset not below the base (Kafka's TimeIndex.sanityCheck)."""
        if self._buf is None:
            return self.size_bytes % 12 == 0 or not os.path.exists(self.path)
        buf = self._buf
        n = len(buf) // 12
        return not n or _TENTRY.unpack_from(buf, n * 12 - 12)[1] >= 0
