"""TransactionIndex: the aborted transactions whose ABORT marker lies in one segment (``<base>.txnindex``).

Kafka's format, one entry per aborted transaction in marker order (34 bytes, big-endian)::

    version             int16   0
    producer_id         int64
    first_offset        int64   first offset of the transaction
    last_offset         int64   offset of its ABORT marker
    last_stable_offset  int64   the LSO once the marker was written: first offset of the oldest transaction of
                                another producer still open then, else last_offset + 1

A read_committed fetch returns the entries overlapping its range so the client can drop the aborted
records: a transaction may start segments before its marker, so the search goes on into later segments
until an entry's LSO reaches the fetch's upper bound (``collect_aborted_txns`` says when it is complete).

As in Kafka the file is created by the first entry (a segment without aborted transactions has none) and
never preallocated; it is truncated, renamed and deleted with its segment, rebuilt when the segment is
recovered (replaying the markers, see Log), and checked on open (whole entries of version 0, no last offset
below the segment's base offset).

Thread-safety: under the owning Log's lock. ``read_aborted_txns`` reads a file by path (the cleaner's worker).
"""
from __future__ import annotations

import os
import struct
from typing import Iterable, NamedTuple, Optional

from .errors import StorageError

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


class CorruptIndexError(StorageError):
    """An index file cannot be valid; the segment is recovered, which rebuilds it."""


class AbortedTxn(NamedTuple):
    """One entry of a transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries in ``data`` (a torn trailing entry is left out)."""
    whole = len(data) - len(data) % ENTRY_SIZE
    return [AbortedTxn(pid, first, last, lso, version)
            for version, pid, first, last, lso in ENTRY.iter_unpack(memoryview(data)[:whole])]


def read_aborted_txns(path: str) -> list[AbortedTxn]:
    """Every whole entry of the index file at ``path``; none when the file does not exist."""
    try:
        with open(path, "rb") as f:
            return decode_entries(f.read())
    except FileNotFoundError:
        return []


def overlapping(txns: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
                ) -> tuple[list[AbortedTxn], bool]:
    """Kafka's collectAbortedTxns over ``txns``: those overlapping [fetch_offset, upper_bound_offset), and
    whether no later segment can hold one (an entry's LSO reached the upper bound)."""
    out = []
    for t in txns:
        if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
            out.append(t)
        if t.last_stable_offset >= upper_bound_offset:
            return out, True
    return out, False


class TransactionIndex:
    """The ``.txnindex`` file of one segment; opened (and created) lazily."""

    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._fd = -1
        self._last_offset: Optional[int] = None
        try:
            self._size = os.stat(path).st_size
        except FileNotFoundError:
            self._size = 0

    # ------------------------------------------------------------------ file
    @property
    def size_bytes(self) -> int:
        return self._size

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def _read_all(self) -> bytes:
        if self._size == 0 and self._fd < 0:
            return b""
        try:
            fd = self._open()
        except FileNotFoundError:
            return b""
        return os.pread(fd, self._size, 0)

    # ------------------------------------------------------------------ entries
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; last offsets must grow (markers are appended in offset order)."""
        if self._last_offset is None and self._size >= ENTRY_SIZE:
            entries = decode_entries(self._read_all())
            self._last_offset = entries[-1].last_offset if entries else None
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError("the last offset of appended transactions must grow, but %d is not above %d in %s"
                             % (txn.last_offset, self._last_offset, self.path))
        fd = self._open()
        data = txn.encode()
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], self._size + written)
        self._size += len(data)
        self._last_offset = txn.last_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return decode_entries(self._read_all())

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset); True when the search is complete."""
        if self._size == 0:
            return [], False
        return overlapping(self.all_aborted_txns(), fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at or above ``offset``."""
        if self._size == 0:
            return
        entries = self.all_aborted_txns()
        for i, t in enumerate(entries):
            if t.last_offset >= offset:
                self._truncate(i * ENTRY_SIZE)
                self._last_offset = entries[i - 1].last_offset if i else None
                return

    def reset(self) -> None:
        """Remove every entry (the segment is being recovered); an existing file stays, empty."""
        if self._size or self._fd >= 0:
            self._truncate(0)
        self._last_offset = None

    def _truncate(self, size: int) -> None:
        try:
            fd = self._open()
        except FileNotFoundError:
            self._size = 0
            return
        os.ftruncate(fd, size)
        self._size = size

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file cannot be a valid index of this segment."""
        if self._size % ENTRY_SIZE:
            raise CorruptIndexError("transaction index %s has a size of %d, not a multiple of %d"
                                    % (self.path, self._size, ENTRY_SIZE))
        for t in self.all_aborted_txns():
            if t.version != CURRENT_VERSION:
                raise CorruptIndexError("unexpected aborted transaction version %d in %s" % (t.version, self.path))
            if t.last_offset < self.start_offset:
                raise CorruptIndexError("last offset of aborted transaction %r in index %s is less than start "
                                        "offset %d" % (t, self.path, self.start_offset))

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._size = 0
        self._last_offset = None

    def rename_to(self, path: str) -> None:
        """Move the file (when it exists); the index uses ``path`` from now on either way."""
        try:
            os.rename(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def __repr__(self) -> str:
        return "TransactionIndex(%s, entries=%d)" % (self.path, self._size // ENTRY_SIZE)
