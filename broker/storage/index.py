"""OffsetIndex and TimeIndex: sparse, memory-mapped, preallocated index files of a segment.

``.index`` entries (8 bytes, big-endian)::

    relative offset  int32   (offset - segment base offset)
    position         int32   byte position of a batch start in the .log file

``.timeindex`` entries (12 bytes, big-endian)::

    timestamp        int64   largest batch max timestamp seen so far in the segment
    relative offset  int32   last offset of the batch carrying that timestamp

Both files are preallocated to segment.index.bytes (rounded down to a whole entry) while the
segment is active and trimmed to their entries when it is rolled or closed, as Kafka does.
They are never checksummed: after a crash they are rebuilt from the log. Lookups use
``accel.offset_index`` (binary search over the mapped file).

Thread-safety: called under the owning Log's lock.
"""
from __future__ import annotations

import mmap
import os
import struct

from broker.accel import offset_index

from .errors import IndexFullError

_ENTRY = struct.Struct(">ii")
_TENTRY = struct.Struct(">qi")


class _MappedIndex:
    """Common file, mmap and entry bookkeeping for the two index kinds."""

    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int, writable: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self._mm: mmap.mmap | None = None
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        length = os.fstat(self._fd).st_size
        self._entries = 0 if new else length // self.ENTRY_SIZE
        if new and writable:
            length = self._round(max_index_size)
            os.ftruncate(self._fd, length)
        self._length = length
        self._map()

    def _round(self, size: int) -> int:
        return max(size, self.ENTRY_SIZE) // self.ENTRY_SIZE * self.ENTRY_SIZE

    def _map(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._length > 0:
            self._mm = mmap.mmap(self._fd, self._length)

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def size_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def resize(self, new_size: int) -> None:
        """Grow or shrink the file (never below its entries); used when a segment becomes active."""
        # No entries means an empty file, as Kafka's trimToValidSize leaves it: rounding up to one entry would
        # keep a stale entry from before a truncation, which a reopen then reads as real.
        length = max(new_size - new_size % self.ENTRY_SIZE, self._entries * self.ENTRY_SIZE)
        if length != self._length:
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            os.ftruncate(self._fd, length)
            self._length = length
            self._map()

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (segment rolled or closed)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def truncate_entries(self, entries: int) -> None:
        self._entries = max(0, min(entries, self._entries))

    def reset(self) -> None:
        """Drop every entry (the index is about to be rebuilt)."""
        self._entries = 0

    def flush(self) -> None:
        mm = self._mm
        if mm is not None:
            try:
                mm.flush()
            except ValueError:
                pass  # remapped or closed by a concurrent roll/close: nothing left to flush here

    def close(self) -> None:
        if self._fd < 0:
            return
        self.trim_to_valid_size()
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def close_handler(self) -> None:
        """Close without trimming (the file is being deleted)."""
        if self._fd < 0:
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        self.close_handler()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename_to(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path


class OffsetIndex(_MappedIndex):
    """Maps offsets to batch-start positions in the segment's .log file, one entry per index.interval.bytes."""

    ENTRY_SIZE = 8

    def entry(self, slot: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``slot``."""
        assert self._mm is not None
        rel, pos = _ENTRY.unpack_from(self._mm, slot * 8)
        return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        return self.entry(self._entries - 1)[0] if self._entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must grow. Raises IndexFullError when there is no room."""
        n = self._entries
        rel = offset - self.base_offset
        if n:
            last_rel = _ENTRY.unpack_from(self._mm, n * 8 - 8)[0]  # type: ignore[arg-type]
            if rel <= last_rel:
                raise ValueError("index offset %d not above the last entry %d" % (offset, last_rel + self.base_offset))
        if n * 8 >= self._length:
            raise IndexFullError("offset index %s is full" % self.path)
        _ENTRY.pack_into(self._mm, n * 8, rel, position)  # type: ignore[arg-type]
        self._entries = n + 1

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target, or (base offset, 0) when there is none."""
        if not self._entries or target_offset < self.base_offset:
            return self.base_offset, 0
        slot = offset_index.index_lookup(self._mm, self._entries, target_offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    def lookup_by_position(self, max_position: int) -> tuple[int, int]:
        """Largest entry with position <= max_position, or (base offset, 0)."""
        lo, hi, found = 0, self._entries - 1, -1
        mm = self._mm
        while lo <= hi:
            mid = (lo + hi) >> 1
            if _ENTRY.unpack_from(mm, mid * 8)[1] <= max_position:  # type: ignore[arg-type]
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return self.entry(found) if found >= 0 else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        if not self._entries:
            return
        slot = offset_index.index_lookup(self._mm, self._entries, offset - self.base_offset)
        if slot < 0:
            self._entries = 0
        elif self.entry(slot)[0] == offset:
            self._entries = slot
        else:
            self._entries = slot + 1

    def sanity_check(self) -> bool:
        """False when the file cannot be a valid index (it is then rebuilt)."""
        if self._length % 8 != 0:
            return False
        prev = -1
        for i in range(self._entries):
            rel, pos = _ENTRY.unpack_from(self._mm, i * 8)  # type: ignore[arg-type]
            if rel <= prev or pos < 0 or (i == 0 and rel < 0):
                return False
            prev = rel
        return True


class TimeIndex(_MappedIndex):
    """Maps the growing max timestamp of a segment to the offset that carried it."""

    ENTRY_SIZE = 12

    def is_full(self) -> bool:
        # one slot stays free for the final entry written when the segment becomes inactive
        return self._entries >= self.max_entries - 1

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry ``slot``."""
        assert self._mm is not None
        ts, rel = _TENTRY.unpack_from(self._mm, slot * 12)
        return ts, self.base_offset + rel

    @property
    def last_entry(self) -> tuple[int, int]:
        return self.entry(self._entries - 1) if self._entries else (-1, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        n = self._entries
        if not skip_full_check and n * 12 >= self._length - 12:
            raise IndexFullError("time index %s is full" % self.path)
        rel = offset - self.base_offset
        if n:
            last_ts, last_rel = _TENTRY.unpack_from(self._mm, n * 12 - 12)  # type: ignore[arg-type]
            if rel < last_rel:
                raise ValueError("time index offset %d below the last entry %d" % (offset, last_rel + self.base_offset))
            if timestamp <= last_ts:
                return
        if (n + 1) * 12 > self._length:
            self.resize((n + 1) * 12)
        _TENTRY.pack_into(self._mm, n * 12, timestamp, rel)  # type: ignore[arg-type]
        self._entries = n + 1

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target, or (-1, base offset)."""
        if not self._entries:
            return -1, self.base_offset
        slot = offset_index.time_index_lookup(self._mm, self._entries, target_ts)
        if slot < 0:
            return -1, self.base_offset
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= ``offset``."""
        n = self._entries
        while n > 0 and self.entry(n - 1)[1] >= offset:
            n -= 1
        self._entries = n

    def sanity_check(self) -> bool:
        if self._length % 12 != 0:
            return False
        prev_ts, prev_off = -(1 << 63), -1
        for i in range(self._entries):
            ts, off = self.entry(i)
            if ts <= prev_ts or off < prev_off:
                return False
            prev_ts, prev_off = ts, off
        return True
