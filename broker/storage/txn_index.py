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
No descriptor is held between calls.
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
    """The ``.txnindex`` file of one segment; created by its first entry, never held open.

    Each operation opens the file and closes it again (aborted transactions are rare, and a descriptor per
    segment would not fit 10,000 partitions in a process's descriptor limit); the decoded entries are kept
    once read, since read_committed fetches of the active segment read them again and again."""

    __slots__ = ("path", "start_offset", "_entries", "_unsynced", "_size_known")

    def __init__(self, path: str, start_offset: int, exists: Optional[bool] = None) -> None:
        """``exists``: whether the file is known to exist (False spares a stat per segment at load)."""
        self.path = path
        self.start_offset = start_offset
        self._entries: Optional[list[AbortedTxn]] = None
        self._unsynced = False
        self._size_known: Optional[int] = 0 if exists is False else None

    # ------------------------------------------------------------------ file
    @property
    def _size(self) -> int:
        size = self._size_known
        if size is None:
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = 0
            self._size_known = size
        return size

    @_size.setter
    def _size(self, value: int) -> None:
        self._size_known = value

    @property
    def size_bytes(self) -> int:
        return self._size

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def _read_all(self) -> bytes:
        if self._size == 0:
            return b""
        try:
            with open(self.path, "rb", buffering=0) as f:
                return f.read(self._size)
        except FileNotFoundError:
            return b""

    # ------------------------------------------------------------------ entries
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; last offsets must grow (markers are appended in offset order)."""
        entries = self.all_aborted_txns()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError("the last offset of appended transactions must grow, but %d is not above %d in %s"
                             % (txn.last_offset, entries[-1].last_offset, self.path))
        data = txn.encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], self._size + written)
        finally:
            os.close(fd)
        self._size += len(data)
        self._unsynced = True
        self._entries = entries + [txn]

    def all_aborted_txns(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            entries = self._entries = decode_entries(self._read_all())
        return list(entries)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset); True when the search is complete.

        Called by lock-free readers too, so it writes nothing: the owner's entries when it holds them (a list it
        replaces, never changes), else the file's whole entries, read each time as Kafka's reader does."""
        entries = self._entries
        if entries is None:
            if self._size_known == 0:
                return [], False
            try:
                with open(self.path, "rb", buffering=0) as f:
                    entries = decode_entries(f.read())
            except FileNotFoundError:
                return [], False
        if not entries:
            return [], False
        return overlapping(entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker is at or above ``offset``."""
        if self._size == 0:
            return
        entries = self.all_aborted_txns()
        for i, t in enumerate(entries):
            if t.last_offset >= offset:
                self._truncate(i * ENTRY_SIZE)
                self._entries = entries[:i]
                return

    def reset(self) -> None:
        """Remove every entry (the segment is being recovered); an existing file stays, empty."""
        if self._size or os.path.exists(self.path):
            self._truncate(0)
        self._entries = []

    def _truncate(self, size: int) -> None:
        try:
            os.truncate(self.path, size)
        except FileNotFoundError:
            size = 0
        self._size = size
        self._entries = None

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file cannot be a valid index of this segment."""
        if self._size == 0:
            return
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
        if not self._unsynced:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced = False

    def close(self) -> None:
        """Nothing stays open; kept for the segment's close."""

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._size = 0
        self._entries = []

    def set_path(self, path: str) -> None:
        """The file was renamed (a segment retired)."""
        self.path = path

    def rename_to(self, path: str) -> None:
        """Move the file (when it exists); the index uses ``path`` from now on either way."""
        try:
            os.rename(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def __repr__(self) -> str:
        return "TransactionIndex(%s, entries=%d)" % (self.path, self._size // ENTRY_SIZE)
