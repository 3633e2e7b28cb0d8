"""Bounded caches of what a closed segment needs only when it is read: its open data file and its index bytes.

Why: Kafka keeps one descriptor per segment (every ``.log`` channel stays open) and maps every index it has
touched; at 10,000 partitions of 20 segments that is 200,000 descriptors and 400,000 mappings, beyond the
20,000 open files a process may have here (and vm.max_map_count). This broker keeps open only what the active
segment of each partition needs (its ``.log``, about one descriptor per partition); a closed segment is a path
and its offsets until someone reads it. Then:

- :class:`FileHandle` is one open descriptor. It is closed when the last reference to it goes, never
  explicitly while shared, so a FileSlice already handed to the network (``sendfile`` later, on the event loop)
  stays valid even when the cache has dropped the handle or the segment was deleted meanwhile (the data of an
  unlinked file stays readable through an open descriptor).
- :class:`OpenFileCache` keeps at most ``capacity`` handles of closed segments open (least recently used out;
  ``broker.storage.segment.file.cache.size``). Descriptors held = active segments + capacity + slices in flight.
- :class:`IndexCache` keeps the bytes of closed segments' ``.index``/``.timeindex`` files read on demand, up to
  a byte budget (least recently used out); a closed segment's index never changes, so its bytes never go stale.

When ``open`` fails with EMFILE/ENFILE the file cache drops the handles nobody else holds and tries once more,
so a client connection storm cannot make a log read or a log roll fail while cached descriptors could be freed.

Thread-safety: both caches take their own lock; handles may be used from any thread. A reader that holds the
FileHandle object (not only its number) while it uses the descriptor pins it: eviction, ``discard`` and
``release_idle`` only drop the cache's reference, so the descriptor cannot be closed, and its number reused by
another file, under a read (lock-free Log reads rely on this rather than on a refcount of their own). What a
reader opens or reads while the owner is retiring the segment is not cached (the ``valid`` check of ``get``).
"""
from __future__ import annotations

import errno
import logging
import os
import sys
import threading
from collections import OrderedDict
from typing import Callable, Hashable, Optional

logger = logging.getLogger(__name__)

DEFAULT_SEGMENT_FILE_CACHE_SIZE = 1024
DEFAULT_INDEX_CACHE_BYTES = 64 << 20
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class FileHandle:
    """An open file descriptor, closed when the handle is garbage (or by :meth:`close` when unshared)."""

    __slots__ = ("fd", "name", "__weakref__")

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name

    def fileno(self) -> int:
        if self.fd < 0:
            raise ValueError("I/O operation on closed file %s" % self.name)
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        """Close now; only for a handle nobody else can hold (a file being written by one owner)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # os.close bound at definition: at interpreter exit module globals may already be gone
        fd = self.fd
        if fd >= 0:
            self.fd = -1
            try:
                _close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return "FileHandle(%s, fd=%d)" % (self.name, self.fd)


def open_handle(path: str, flags: int, mode: int = 0o644, cache: Optional["OpenFileCache"] = None) -> FileHandle:
    """``os.open`` as a FileHandle; on EMFILE/ENFILE, free the unshared cached handles and retry once."""
    try:
        return FileHandle(os.open(path, flags, mode), path)
    except OSError as e:
        if e.errno not in _OUT_OF_DESCRIPTORS:
            raise
        freed = (cache if cache is not None else SEGMENT_FILES).release_idle()
        logger.warning("Out of file descriptors opening %s; released %d cached segment files and retrying",
                       path, freed)
        return FileHandle(os.open(path, flags, mode), path)


class OpenFileCache:
    """The open data files of closed segments, at most ``capacity`` of them (least recently used out)."""

    def __init__(self, capacity: int = DEFAULT_SEGMENT_FILE_CACHE_SIZE) -> None:
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()
        self._handles: "OrderedDict[Hashable, FileHandle]" = OrderedDict()
        self.opens = 0
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        with self._lock:
            self._capacity = max(1, capacity)
            self._trim()

    def __len__(self) -> int:
        return len(self._handles)

    def get(self, key: Hashable, path_of: Callable[[], str], valid: Optional[Callable[[], bool]] = None
            ) -> FileHandle:
        """The open handle of ``key``, opening ``path_of()`` read-only when it is not cached. A handle opened
        while ``valid()`` turned false (checked under the cache's lock: the owner changes what it depends on, then
        discards) is returned for this use only and not cached: its file may be on its way out."""
        with self._lock:
            h = self._handles.get(key)
            if h is not None:
                self._handles.move_to_end(key)
                return h
        h = open_handle(path_of(), os.O_RDONLY, cache=self)
        with self._lock:
            other = self._handles.get(key)
            if other is not None:  # opened by another thread meanwhile: keep one
                self._handles.move_to_end(key)
                return other
            if valid is not None and not valid():
                return h
            self._handles[key] = h
            self.opens += 1
            self._trim()
        return h

    def put(self, key: Hashable, handle: FileHandle) -> None:
        """Keep ``handle`` (e.g. the file of a segment just rolled, still hot) as ``key``'s cached handle."""
        with self._lock:
            self._handles[key] = handle
            self._handles.move_to_end(key)
            self._trim()

    def discard(self, key: Hashable) -> None:
        """Forget ``key``'s handle (segment deleted, renamed or replaced); readers holding it keep it open."""
        with self._lock:
            self._handles.pop(key, None)

    def release_idle(self) -> int:
        """Drop every cached handle nobody else holds (their descriptors close at once); returns how many."""
        with self._lock:
            idle = []
            for k in list(self._handles):
                h = self._handles[k]
                if sys.getrefcount(h) <= 3:  # the dict, ``h`` and the call's argument: nobody else
                    idle.append(k)
                del h
            for k in idle:
                del self._handles[k]
            return len(idle)

    def _trim(self) -> None:
        while len(self._handles) > self._capacity:
            self._handles.popitem(last=False)
            self.evictions += 1


class IndexCache:
    """Bytes of closed segments' index files, read on demand, at most ``capacity_bytes`` of them."""

    def __init__(self, capacity_bytes: int = DEFAULT_INDEX_CACHE_BYTES) -> None:
        self._capacity = max(0, capacity_bytes)
        self._lock = threading.Lock()
        self._data: "OrderedDict[Hashable, bytes]" = OrderedDict()
        self._bytes = 0
        self.reads = 0

    def set_capacity(self, capacity_bytes: int) -> None:
        with self._lock:
            self._capacity = max(0, capacity_bytes)
            self._trim()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable, read: Callable[[], bytes], valid: Optional[Callable[[], bool]] = None) -> bytes:
        """``key``'s bytes, from ``read()`` when not cached (read outside the lock); not kept when ``valid()``
        turned false meanwhile (checked under the lock; the owner changes what it depends on, then discards)."""
        with self._lock:
            data = self._data.get(key)
            if data is not None:
                self._data.move_to_end(key)
                return data
        data = read()
        with self._lock:
            if key not in self._data and (valid is None or valid()):
                self._data[key] = data
                self._bytes += len(data)
                self.reads += 1
                self._trim()
        return data

    def discard(self, key: Hashable) -> None:
        with self._lock:
            data = self._data.pop(key, None)
            if data is not None:
                self._bytes -= len(data)

    def _trim(self) -> None:
        while self._bytes > self._capacity and self._data:
            _, data = self._data.popitem(last=False)
            self._bytes -= len(data)


#: The process's caches; the LogManager sizes them from the broker's configuration.
SEGMENT_FILES = OpenFileCache()
INDEXES = IndexCache()
