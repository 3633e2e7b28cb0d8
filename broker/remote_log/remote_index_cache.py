"""RemoteIndexCache: the remote segments' offset and transaction indexes a RemoteLogReader fetched, kept so that the
next fetch of the same segment does not ask the remote store again (Kafka 3.9's RemoteIndexCache, bounded by
``remote.log.index.file.cache.total.size.bytes``, dynamic).

Kafka keeps these files on the broker's disk; here they are bytes in memory, least recently used first out once the
total passes the bound. A remote segment's files never change (each copy attempt has its own segment id), so an
entry never goes stale: a deleted segment's entries are merely never asked for again and age out. As in Kafka, a
transaction index the store does not have (a segment without transactions) is cached as an empty index, so a
read_committed fetch that walks the following segments' transaction indexes (RemoteLogManager's
collectAbortedTransactions) costs no request per segment after the first time.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Tuple

from broker.storage.remote.metadata import RemoteLogSegmentMetadata
from broker.storage.remote.storage_manager import IndexType, RemoteResourceNotFoundException, RemoteStorageManager

#: remote.log.index.file.cache.total.size.bytes' default
DEFAULT_TOTAL_SIZE_BYTES = 1024 * 1024 * 1024
#: what an entry counts beyond its bytes (an empty transaction index is an entry too)
ENTRY_OVERHEAD = 64


class RemoteIndexCache:
    """(segment id, index type) -> the index's bytes, LRU within ``total_size_bytes``; safe across reader threads."""

    def __init__(self, rsm: RemoteStorageManager, total_size_bytes: int = DEFAULT_TOTAL_SIZE_BYTES) -> None:
        self.rsm = rsm
        self._total = total_size_bytes
        self._entries: "OrderedDict[Tuple[uuid.UUID, IndexType], bytes]" = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        #: lookups answered from the cache / from the remote store
        self.hits = 0
        self.misses = 0

    @property
    def total_size_bytes(self) -> int:
        return self._total

    def resize(self, total_size_bytes: int) -> None:
        """remote.log.index.file.cache.total.size.bytes changed (Kafka's RemoteIndexCache.resizeCacheSize)."""
        with self._lock:
            self._total = total_size_bytes
            self._evict()

    @property
    def size_bytes(self) -> int:
        return self._size

    def get(self, md: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The index of the segment, fetched once; raises what the RemoteStorageManager raises (a missing
        transaction index is an empty one)."""
        key = (md.remote_log_segment_id.id, index_type)
        with self._lock:
            data = self._entries.get(key)
            if data is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
        try:
            with self.rsm.fetch_index(md, index_type) as f:
                data = bytes(f.read())
        except RemoteResourceNotFoundException:
            if index_type is not IndexType.TRANSACTION:
                raise
            data = b""
        with self._lock:
            old = self._entries.pop(key, None)  # another reader fetched it meanwhile
            if old is not None:
                self._size -= len(old) + ENTRY_OVERHEAD
            self._entries[key] = data
            self._size += len(data) + ENTRY_OVERHEAD
            self._evict()
        return data

    def _evict(self) -> None:
        """Under the lock: least recently used entries out until the total fits (the newest stays even if alone
        it is larger, as one segment's indexes must be readable)."""
        while self._size > self._total and len(self._entries) > 1:
            _, data = self._entries.popitem(last=False)
            self._size -= len(data) + ENTRY_OVERHEAD

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["RemoteIndexCache", "DEFAULT_TOTAL_SIZE_BYTES"]
