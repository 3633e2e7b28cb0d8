"""Binary search over offset/time index entries; pure twin of ``pyx/offset_index.pyx``.

Offset index entry (8 bytes, big-endian): relative offset int32, position int32.
Time index entry (12 bytes, big-endian): timestamp int64, relative offset int32.
Entries are sorted by their first field. ``buf`` may be bytes, bytearray, memoryview or mmap.
"""
from __future__ import annotations

import struct
from typing import Any

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _check(buf: Any, entries: int, entry_size: int) -> None:
    if entries < 0 or entries * entry_size > len(buf):
        raise ValueError("index buffer holds fewer than %d entries" % entries)


def index_lookup(buf: Any, entries: int, target: int) -> int:
    """Slot of the largest entry whose relative offset is <= ``target``, or -1."""
    _check(buf, entries, 8)
    unpack = _I32.unpack_from
    lo, hi = 0, entries - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * 8)[0] <= target:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def time_index_lookup(buf: Any, entries: int, target_ts: int) -> int:
    """Slot of the largest entry whose timestamp is <= ``target_ts``, or -1."""
    _check(buf, entries, 12)
    unpack = _I64.unpack_from
    lo, hi = 0, entries - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * 12)[0] <= target_ts:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found
