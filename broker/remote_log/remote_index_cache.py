"""RemoteIndexCache (Kafka's storage RemoteIndexCache): the offset, time and transaction indexes of remote segments,
fetched from the RemoteStorageManager once and kept as files under ``<log dir>/remote-log-index-cache`` (Kafka's
directory name, in the first log dir as Kafka's KafkaServer passes ``config.logDirs.head``), so a remote fetch or a
ListOffsets by timestamp finds its position with a binary search instead of fetching (or scanning) remote data.

Files, as Kafka names them: ``<start offset>_<segment id>.index`` / ``.timeindex`` / ``.txnindex`` (an empty
``.txnindex`` when the segment has none). Each file is written as ``<name>.tmp`` and renamed, so a crash leaves no
partial index; at start-up ``.tmp`` and ``.deleted`` files are removed and every complete triple becomes an entry
again (least recently used first, by modification time), as Kafka's ``init``.

Bounded by ``remote.log.index.file.cache.total.size.bytes`` (the sum of the three files' sizes; ``resize`` is the
dynamic update, Kafka's ``resizeCacheSize``): the least recently used entries go first. The RemoteLogManager removes
a deleted segment's entry (``remove_all``). An entry that goes has its files renamed to ``.deleted`` on the calling
thread (Kafka's markForCleanup) and is queued for the cache's own thread, ``remote-log-index-cleaner`` (Kafka's
cleaner thread), which deletes them, so a remote read or a retention run never waits for file deletions; ``close``
lets the cleaner drain its queue and joins it.

Thread-safety: any thread (the remote reader pool, the RemoteLogManager's pools and thread). One lock guards the map; a
missing entry is fetched by one thread while others asking for it wait (Kafka's Caffeine ``get`` with a loader),
and lookups of other entries are not held up by that fetch. A lookup holds its entry's lock, which the cleanup takes
before deleting the files, so files never disappear under a lookup; a lookup that finds its entry already cleaned
fetches it again.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Tuple, TypeVar

from broker.storage.index import OffsetIndex, TimeIndex
from broker.storage.remote.metadata import RemoteLogSegmentMetadata, uuid_from_string, uuid_to_string
from broker.storage.remote.storage_manager import IndexType, RemoteResourceNotFoundException, RemoteStorageManager
from broker.storage.txn_index import AbortedTxn, decode_entries

logger = logging.getLogger(__name__)

DIR_NAME = "remote-log-index-cache"
#: Kafka's REMOTE_LOG_INDEX_CACHE_CLEANER_THREAD
CLEANER_THREAD_NAME = "remote-log-index-cleaner"
TMP_SUFFIX = ".tmp"
DELETED_SUFFIX = ".deleted"
INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX = ".index", ".timeindex", ".txnindex"
_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: the index limit Kafka gives the cached indexes (Integer.MAX_VALUE): they are never appended to
_NO_LIMIT = 2 ** 31 - 1

T = TypeVar("T")


def file_name_prefix(md: RemoteLogSegmentMetadata) -> str:
    """Kafka's generateFileNamePrefixForIndex: ``<start offset>_<segment id>``."""
    return f"{md.start_offset}_{uuid_to_string(md.remote_log_segment_id.id)}"


class Entry:
    """One remote segment's three cached index files."""

    def __init__(self, directory: Path, prefix: str, start_offset: int) -> None:
        self.prefix = prefix
        self.start_offset = start_offset
        self.paths = [str(directory / (prefix + s)) for s in _SUFFIXES]
        # read-only, not resident: lookups read the file into the process's bounded index-bytes cache
        self.offset_index = OffsetIndex(self.paths[0], start_offset, _NO_LIMIT, writable=False, resident=False)
        self.time_index = TimeIndex(self.paths[1], start_offset, _NO_LIMIT, writable=False, resident=False)
        self.size_bytes = sum(_size(p) for p in self.paths)
        #: held by a lookup and by the cleanup
        self.lock = threading.Lock()
        #: marked for cleanup (files renamed to .deleted): no lookup uses it any more
        self.cleaned = False
        #: its .deleted files are being or were deleted
        self.clean_started = False

    def lookup_offset(self, offset: int) -> int:
        """The position of the largest indexed offset <= ``offset`` (0 when none)."""
        return self.offset_index.lookup(offset)[1]

    def lookup_timestamp(self, timestamp: int, starting_offset: int) -> int:
        """Kafka's Entry.lookupTimestamp: the time index's entry at or below ``timestamp``, then the offset index's
        position for the larger of its offset and ``starting_offset``."""
        _, offset = self.time_index.lookup(timestamp)
        return self.offset_index.lookup(max(starting_offset, offset))[1]

    def aborted_txns(self) -> List[AbortedTxn]:
        with open(self.paths[2], "rb") as f:
            return decode_entries(f.read())

    def mark_for_cleanup(self) -> None:
        """Kafka's markForCleanup: the files renamed to ``.deleted`` (waits for a lookup under way); a lookup that
        finds the entry marked fetches the segment's indexes again."""
        with self.lock:
            if self.cleaned:
                return
            self.cleaned = True
            self.offset_index.close_handler()
            self.time_index.close_handler()
            for path in self.paths:
                try:
                    os.replace(path, path + DELETED_SUFFIX)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    logger.warning("Could not rename the cached remote index %s: %s", path, exc)

    def cleanup(self) -> None:
        """Kafka's cleanup (the cleaner thread's): marked if not yet, then the ``.deleted`` files deleted."""
        self.mark_for_cleanup()
        with self.lock:
            if self.clean_started:
                return
            self.clean_started = True
            for path in self.paths:
                try:
                    os.unlink(path + DELETED_SUFFIX)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    logger.warning("Could not delete the cached remote index %s: %s", path + DELETED_SUFFIX, exc)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


class RemoteIndexCache:
    """Kafka's RemoteIndexCache (see the module docstring)."""

    def __init__(self, max_size_bytes: int, rsm: RemoteStorageManager, log_dir: str) -> None:
        self.rsm = rsm
        self.cache_dir = Path(log_dir) / DIR_NAME
        self.max_size_bytes = max_size_bytes
        self._lock = threading.Lock()
        #: segment id -> entry, least recently used first
        self._entries: "OrderedDict[uuid.UUID, Entry]" = OrderedDict()
        #: segment ids being fetched -> the fetch's outcome (other threads asking for them wait on it)
        self._loading: "dict[uuid.UUID, Future[Entry]]" = {}
        self._size = 0
        self._closed = False
        #: fetches of indexes from remote storage (entries created), for tests and the log
        self.fetches = 0
        #: entries marked for cleanup, for the cleaner thread; None ends it (Kafka's expiredIndexes)
        self._expired: "queue.Queue[Optional[Entry]]" = queue.Queue()
        self._cleaner = threading.Thread(target=self._clean, name=CLEANER_THREAD_NAME, daemon=True)
        self._cleaner.start()
        self._init()

    # ------------------------------------------------------------------ the cleaner thread
    def _clean(self) -> None:
        while True:
            entry = self._expired.get()
            try:
                if entry is None:
                    return
                entry.cleanup()
            except Exception:  # noqa: BLE001 - as Kafka's: logged, the thread goes on
                logger.exception("Error occurred while cleaning up expired entry %s", getattr(entry, "prefix", ""))
            finally:
                self._expired.task_done()

    def _enqueue_for_cleanup(self, entries: Iterable[Entry]) -> None:
        """Kafka's enqueueEntryForCleanup: each entry marked (renamed) here, deleted by the cleaner thread."""
        for entry in entries:
            entry.mark_for_cleanup()
            self._expired.put(entry)

    def pending_cleanups(self) -> int:
        """Entries queued for the cleaner thread or being cleaned (Kafka's expiredIndexes)."""
        return self._expired.unfinished_tasks

    def wait_for_cleanups(self, timeout_s: float = 5.0) -> bool:
        """Wait (short polls) until the cleaner thread has deleted everything queued; False on timeout (tests)."""
        deadline = time.monotonic() + timeout_s
        while self._expired.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    # ------------------------------------------------------------------ start-up
    def _init(self) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        names = sorted(os.listdir(self.cache_dir))
        for name in names:
            if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX):
                (self.cache_dir / name).unlink(missing_ok=True)
        found: List[Tuple[float, uuid.UUID, Entry]] = []
        seen = set()
        for name in names:
            if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX) or "_" not in name or "." not in name:
                continue
            prefix = name[:name.index(".")]
            if prefix in seen:
                continue
            seen.add(prefix)
            paths = [self.cache_dir / (prefix + s) for s in _SUFFIXES]
            try:
                start = int(prefix[:prefix.index("_")])
                seg_id = uuid_from_string(prefix[prefix.index("_") + 1:])
            except ValueError:
                continue
            if all(p.exists() for p in paths) and paths[0].stat().st_size % 8 == 0 and \
                    paths[1].stat().st_size % 12 == 0:
                found.append((max(p.stat().st_mtime for p in paths), seg_id, Entry(self.cache_dir, prefix, start)))
            else:  # an incomplete (or torn) triple: all of it goes, as Kafka's init
                for p in paths:
                    p.unlink(missing_ok=True)
        victims: List[Entry] = []
        with self._lock:
            for _, seg_id, entry in sorted(found, key=lambda f: f[0]):
                self._entries[seg_id] = entry
                self._size += entry.size_bytes
            victims = self._evict()
        self._enqueue_for_cleanup(victims)
        logger.info("RemoteIndexCache at %s: %d entries, %d bytes", self.cache_dir, len(self._entries), self._size)

    # ------------------------------------------------------------------ entries
    def _evict(self) -> List[Entry]:
        """Under the lock: the least recently used entries out until the size fits; returns them (to clean up
        outside the lock)."""
        victims = []
        while self._size > self.max_size_bytes and self._entries:
            _, entry = self._entries.popitem(last=False)
            self._size -= entry.size_bytes
            victims.append(entry)
        return victims

    def _fetch_file(self, md: RemoteLogSegmentMetadata, index_type: IndexType, path: str) -> None:
        tmp = path + TMP_SUFFIX
        try:
            try:
                src = self.rsm.fetch_index(md, index_type)
            except RemoteResourceNotFoundException:
                if index_type != IndexType.TRANSACTION:
                    raise
                open(tmp, "wb").close()  # no transactional records: an empty file, as Kafka's
            else:
                with src, open(tmp, "wb") as dst:
                    while True:
                        chunk = src.read(1 << 20)
                        if not chunk:
                            break
                        dst.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _create_entry(self, md: RemoteLogSegmentMetadata) -> Entry:
        prefix = file_name_prefix(md)
        for index_type, suffix in ((IndexType.OFFSET, INDEX_SUFFIX), (IndexType.TIMESTAMP, TIME_INDEX_SUFFIX),
                                   (IndexType.TRANSACTION, TXN_INDEX_SUFFIX)):
            path = str(self.cache_dir / (prefix + suffix))
            if not os.path.exists(path):
                self._fetch_file(md, index_type, path)
        self.fetches += 1
        return Entry(self.cache_dir, prefix, md.start_offset)

    def get_entry(self, md: RemoteLogSegmentMetadata) -> Entry:
        """The segment's entry, fetched from remote storage when missing (by one thread; others wait for it)."""
        entry, victims = self._get(md)
        self._enqueue_for_cleanup(victims)
        return entry

    def _get(self, md: RemoteLogSegmentMetadata) -> Tuple[Entry, List[Entry]]:
        seg_id = md.remote_log_segment_id.id
        with self._lock:
            if self._closed:
                raise RuntimeError(f"Unable to fetch index for segment id={uuid_to_string(seg_id)}. "
                                   "Instance is already closed.")
            entry = self._entries.get(seg_id)
            if entry is not None:
                self._entries.move_to_end(seg_id)
                return entry, []
            fut = self._loading.get(seg_id)
            loader = fut is None
            if fut is None:
                fut = self._loading[seg_id] = Future()
        if not loader:
            return fut.result(), []
        try:
            entry = self._create_entry(md)
        except BaseException as exc:
            with self._lock:
                self._loading.pop(seg_id, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self._loading.pop(seg_id, None)
            self._entries[seg_id] = entry
            self._size += entry.size_bytes
            victims = self._evict()
        fut.set_result(entry)
        return entry, victims

    def _with_entry(self, md: RemoteLogSegmentMetadata, fn: Callable[[Entry], T]) -> T:
        """``fn`` on the segment's entry under its lock; what this call evicted is cleaned after ``fn`` (so an
        entry larger than the whole cache still serves the lookup that fetched it)."""
        for _ in range(100):
            entry, victims = self._get(md)
            try:
                with entry.lock:
                    if not entry.cleaned:
                        return fn(entry)
            finally:
                self._enqueue_for_cleanup(victims)
        raise RuntimeError(f"The cached indexes of {uuid_to_string(md.remote_log_segment_id.id)} kept being evicted")

    def lookup_offset(self, md: RemoteLogSegmentMetadata, offset: int) -> int:
        """Kafka's lookupOffset: the position in the remote segment to read ``offset`` from."""
        return self._with_entry(md, lambda e: e.lookup_offset(offset))

    def lookup_timestamp(self, md: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int) -> int:
        """Kafka's lookupTimestamp: the position to scan the remote segment from for ``timestamp``."""
        return self._with_entry(md, lambda e: e.lookup_timestamp(timestamp, starting_offset))

    def lookup_offset_and_next(self, md: RemoteLogSegmentMetadata, offset: int) -> Tuple[int, Optional[int]]:
        """The position for ``offset`` and the position of the first index entry above ``offset`` (the batch
        holding ``offset`` starts before it), or None when the index has none."""
        def look(e: Entry) -> Tuple[int, Optional[int]]:
            idx = e.offset_index
            pos = idx.lookup(offset)[1]
            slot = _slot_above(idx, offset, idx.entries)
            return pos, (idx.entry(slot)[1] if slot is not None else None)
        return self._with_entry(md, look)

    def aborted_txns(self, md: RemoteLogSegmentMetadata) -> List[AbortedTxn]:
        """The segment's transaction index entries (none when it has no transaction index)."""
        return self._with_entry(md, lambda e: e.aborted_txns())

    # ------------------------------------------------------------------ removal, size, close
    def remove(self, seg_id: uuid.UUID) -> None:
        self.remove_all([seg_id])

    def remove_all(self, seg_ids: Iterable[uuid.UUID]) -> None:
        """The segments were deleted from remote storage: their entries and files go."""
        victims = []
        with self._lock:
            for seg_id in seg_ids:
                entry = self._entries.pop(seg_id, None)
                if entry is not None:
                    self._size -= entry.size_bytes
                    victims.append(entry)
        self._enqueue_for_cleanup(victims)

    def resize(self, max_size_bytes: int) -> None:
        """remote.log.index.file.cache.total.size.bytes changed (Kafka's resizeCacheSize)."""
        with self._lock:
            self.max_size_bytes = max_size_bytes
            victims = self._evict()
        self._enqueue_for_cleanup(victims)

    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, seg_id: object) -> bool:
        return seg_id in self._entries

    def close(self, timeout_s: float = 30.0) -> None:
        """No lookups from now on; the cleaner thread deletes what is queued, then ends (joined). The entries'
        files stay (reused at the next start, as Kafka's)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        logger.info("Close initiated for RemoteIndexCache. Cache entries pending delete=%d", self._expired.qsize())
        self._expired.put(None)
        if threading.current_thread() is not self._cleaner:
            self._cleaner.join(timeout_s)


def _slot_above(idx: OffsetIndex, offset: int, n: int) -> Optional[int]:
    """The first slot of ``idx`` whose offset is above ``offset``, or None."""
    lo, hi, found = 0, n - 1, None
    while lo <= hi:
        mid = (lo + hi) >> 1
        if idx.entry(mid)[0] > offset:
            found = mid
            hi = mid - 1
        else:
            lo = mid + 1
    return found


__all__ = ["RemoteIndexCache", "Entry", "DIR_NAME", "CLEANER_THREAD_NAME", "file_name_prefix"]
