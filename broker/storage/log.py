"""Log: one partition's log (Kafka's UnifiedLog role) over a directory of LogSegments.

Owns the segments, LEO, high watermark, log start offset, recovery point, the leader epoch
cache and the producer state. The directory holds ``<20-digit offset>.log/.index/.timeindex``,
``<20-digit offset>.txnindex`` (aborted transactions, only in segments holding ABORT markers),
``<20-digit offset>.snapshot`` (producer state), ``leader-epoch-checkpoint`` and
``partition.metadata`` (written by the LogManager).

Transactions, as Kafka's UnifiedLog: every append (leader, follower, recovery) feeds the producer
state; a COMMIT/ABORT marker completes its producer's open transaction and an ABORT is recorded in the
transaction index of the segment holding the marker. The last stable offset (LSO) is the first offset of
the oldest transaction that is open or whose marker is not yet below the HW, clamped to the log start
offset and capped by the HW; read_committed reads stop there and carry the aborted transactions
overlapping what they return (``read(..., include_aborted_txns=True)``).

I/O errors (KIP-112): an OSError on the disk (not EMFILE/ENFILE/ENOMEM) is reported to the LogDirFailureChannel
(Kafka's message, e.g. ``Error while appending records to <tp> in dir <dir>``) and raised as KafkaStorageError
(``handles_io``; the append and read paths catch inline). From then on every Log of that dir refuses I/O with
``The log dir <dir> is already offline due to a previous IO exception.`` without touching the disk.

Thread-safety: every method that changes the log takes the Log's lock (one per Log); callers run them on worker
threads, never on the event loop. At the end of every change made under the lock the owner publishes a new
:class:`~broker.storage.log_offsets.LogOffsets` (``offsets``: log start, LEO, what the LSO needs of the producer
state) and, just before it, a :class:`~broker.storage.log_offsets.LogView` (``view``: those offsets with the
segment list and the active segment's committed size), so the offsets, the HW, the LSO and the data are read on
any thread without the lock. ``read`` works from the view: it reads no further than the published size and LEO
(never a batch being written), and a change that could make a published segment's bytes differ (truncation,
retention deletion, a cleaner swap, close) first bumps the layout generation (``_begin_layout_change``); a read
that finds it moved after reading is discarded and made again, so it returns only bytes read before any such
change began (Kafka's reader gets OffsetOutOfRange when its offset has gone; so does this one, on the retry).
The high watermark is kept apart: a leader's is raised on the event loop without the lock
(``maybe_increment_high_watermark``); the owner sets it under the lock (a follower's, a truncation's clamp), and a
loop write that raced such a set does not count (the generation check below). fsync happens only in ``flush``
(and in appends when flush.messages says so).
"""
from __future__ import annotations

import bisect
import errno
import functools
import logging
import os
import shutil
import threading
from typing import Any, Callable, NamedTuple, NoReturn, Optional, Sequence, TypeVar

from broker.accel import record_batch
from broker.protocol.records import errors as record_errors
from broker.protocol.records.batch_info import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, BatchInfo
from broker.protocol.records.control import EndTxnMarker, parse_end_txn_marker
from broker.util.clock import SYSTEM_CLOCK, Clock

from . import files, tiered_log
from .config import LogConfig
from .errors import (InvalidRecordError, KafkaStorageError, LogBusyError, OffsetMovedToTieredStorageError,
                     OffsetOutOfRangeError, UnexpectedAppendOffsetError)
from .checkpoints import atomic_write, fsync_dir, fsync_file
from .cleaner_batch import iter_stored_records
from .leader_epoch_file import LeaderEpochFileCache
from .log_offsets import NO_TXN, LogOffsets, LogView
from .log_owner import CHECK_OWNER, InlineLogOwners, LogOwners, NotLogOwnerError
from .partition_log import ActiveProducer, FetchDataInfo, LogAppendInfo
from .log_dir_failure_channel import LogDirFailureChannel, describe_cause
from .producer_state import (CLIENT, COORDINATOR, REPLICATION, CompletedTxn, ProducerAppendInfo, ProducerStateManager,
                             last_sequence)
from .segment import LogOffsetMetadata, LogSegment
from .txn_index import AbortedTxn, CorruptIndexError
from .validator import parse_batches, recompress_if_needed, validate_and_assign_offsets

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
NO_TIMESTAMP = -1

Scheduler = Callable[[float, Callable[[], None]], None]
SwapHook = Callable[[str], None]


# ``<base>.swapend``: the end offset of the segment group a committed cleaner swap replaces (text).
SWAP_END_SUFFIX = ".swapend"

#: OSErrors that say nothing about the disk (no descriptor or memory left): raised as they are, the log dir stays
#: online (Kafka 3.9 takes the dir offline on any IOException, "Too many open files" included)
NOT_DIR_FAILURES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})

_F = TypeVar("_F", bound=Callable[..., Any])


def handles_io(what: str, check_offline: bool = True) -> Callable[[_F], _F]:
    """Kafka's maybeHandleIOException for a Log method: refuse at once when the log's dir is already offline, and
    turn an OSError into the log dir going offline (reported to the LogDirFailureChannel as ``what``, formatted with
    ``tp`` and ``dir``) plus KafkaStorageError. Not for the produce path (its try/except is inline, free)."""
    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(self: "Log", *args: Any, **kwargs: Any) -> Any:
            if check_offline and self._dir_offline:
                raise self.offline_error()
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                self._raise_io_error(what, exc)
        return wrapper  # type: ignore[return-value]
    return deco


def owner_command(fn: _F) -> _F:
    """Marks a Log command: run only by the partition's owner (``log_owner.py``). With BROKER_CHECK_LOG_OWNER (the
    test suites) it asserts that; otherwise it is the method itself, at no cost."""
    if not CHECK_OWNER:
        return fn

    @functools.wraps(fn)
    def wrapper(self: "Log", *args: Any, **kwargs: Any) -> Any:
        if not self.owners.is_owner(self.owner_key):
            raise NotLogOwnerError("%s of %s-%d ran on thread %s, not on the partition's owner" % (
                fn.__name__, self.owner_key[0], self.owner_key[1], threading.current_thread().name))
        return fn(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


_INLINE_OWNERS = InlineLogOwners()

# tuple.__new__ builds a NamedTuple (every field given) without its Python-level __new__: once per append
_tuple_new = tuple.__new__


class FlushPlan(NamedTuple):
    """A flush taken by the owner (``Log.begin_flush``): the fsyncs another thread may do, then ``end_flush``."""

    up_to: int
    segments: tuple[LogSegment, ...]
    unflushed: int
    unsynced: tuple[list[str], bool]


class Log:
    """One partition's log. Create with ``Log.open``."""

    def __init__(self, dir_path: str, config: LogConfig, clock: Clock,
                 scheduler: Optional[Scheduler], producer_id_expiration_ms: int, new: bool = False) -> None:
        self.dir = dir_path
        self.config = config
        #: wall time (append time, roll by time, retention, producer expiration); the log measures no interval
        self.clock = clock
        self._wall_ms = clock.wall_ms
        self._scheduler = scheduler
        self._lock = threading.RLock()
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start_offset = 0
        #: what lock-free readers see of the offsets; replaced (never changed) by ``_publish`` under the lock
        self.offsets = LogOffsets(0, 0, 0)
        #: bumped (under the lock) before anything that may change the bytes of a published segment
        self._layout = 0
        #: what lock-free reads see of the data (the offsets with the segments); replaced with ``offsets``
        self._view = LogView(self.offsets, (), (), 0, 0)
        # The high watermark, as (generation, offset). The owner (under the lock) sets it with a new generation:
        # ``_owner_hw``, then ``_hw_gen``, then ``_hw_state``. The loop raises it lock-free by writing ``_hw_state``
        # with the generation it read first; a reader takes ``_hw_state`` only while its generation is current, else
        # ``_owner_hw``, so a loop write that raced an owner's set (a truncation, a follower's HW) never counts.
        self._hw_gen = 0
        self._owner_hw: tuple[int, int] = (0, 0)
        self._hw_state: tuple[int, int] = (0, 0)
        self._recovery_point = 0
        self._unflushed_messages = 0
        #: files of this partition written without fsync since the last flush (see note_unsynced_file)
        self._unsynced_files: set[str] = set()
        self._closed = False
        #: the log dir had an I/O error (Kafka's hasOfflineLogDir): every I/O raises KafkaStorageError; ``_closed``
        #: is set with it so the append path needs no check of its own
        self._dir_offline = False
        #: where I/O errors are reported (set by the LogManager; None: errors are only raised)
        self.failure_channel: Optional[LogDirFailureChannel] = None
        #: lowest offset truncated to since the last ``pop_truncation_point`` (a log dir move's copy follows it)
        self._truncated_to: Optional[int] = None
        self.on_roll: Optional[Callable[["Log", int], None]] = None
        #: tiered storage (KIP-405): set before load by the owner. The log start offset may then lie below the first
        #: local segment (the rest is remote), and local deletion never raises it (see broker.storage.tiered_log).
        self.remote_log_enabled = False
        #: highest offset whose segment is committed (COPY_SEGMENT_FINISHED) to remote storage; -1: none
        self.highest_offset_in_remote_storage = -1
        self.leader_epoch_cache = LeaderEpochFileCache(os.path.join(dir_path, files.LEADER_EPOCH_CHECKPOINT),
                                                       read=not new)
        self.producer_state = ProducerStateManager(dir_path, producer_id_expiration_ms)
        name = os.path.basename(dir_path)
        tp = files.parse_topic_partition_dir(name)
        self.topic_partition = tp if tp is not None else (name, -1)
        #: who runs this log's commands, and its key there (the partition; a future log's is its partition's too):
        #: set by the LogManager. Inline (the caller is the owner) for a Log used alone.
        self.owners: LogOwners = _INLINE_OWNERS
        self.owner_key = self.topic_partition

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, dir_path: str, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
             clean_shutdown: bool = False, clock: Clock = SYSTEM_CLOCK,
             scheduler: Optional[Scheduler] = None, producer_id_expiration_ms: int = 86400000,
             high_watermark: int = 0, existing: bool = False,
             log_dir_failure_channel: Optional[LogDirFailureChannel] = None,
             remote_log_enabled: bool = False) -> "Log":
        """Load (and, after an unclean shutdown, recover) the log in ``dir_path``, creating it if needed.

        ``scheduler(delay_s, fn)`` runs deferred segment file deletion (file.delete.delay.ms); without
        one, deleted segments are removed at once. ``clock``: the log reads ``clock.wall_ms()`` for append times,
        roll by time, retention and producer expiration.
        """
        new = False
        channel = log_dir_failure_channel
        parent = os.path.dirname(os.path.abspath(dir_path))
        if channel is not None and channel.has_offline_log_dir(parent):
            raise KafkaStorageError(_already_offline(parent))
        try:
            if not existing:  # the loader knows its dirs exist; anyone else may be creating the partition
                try:
                    os.mkdir(dir_path)
                    new = True
                except FileExistsError:
                    pass
                except FileNotFoundError:
                    os.makedirs(dir_path, exist_ok=True)
                    new = True
            log = cls(dir_path, config, clock, scheduler, producer_id_expiration_ms, new=new)
            log.remote_log_enabled = remote_log_enabled
        except OSError as e:
            _report(channel, parent, "Error while creating log for %s in dir %s" % (os.path.basename(dir_path),
                                                                                  parent), e)
            raise KafkaStorageError("cannot create log %s: %s" % (dir_path, describe_cause(e))) from e
        log.failure_channel = channel
        try:
            if new:  # nothing to list, load or recover: one file to create (a new partition at scale)
                log.segments.append(log._new_segment(max(log_start_offset, 0)))
                log._bases = [log.segments[0].base_offset]
                log._leo = log._log_start_offset = log._recovery_point = log.segments[0].base_offset
                log.producer_state.update_map_end_offset(log._leo)
            else:
                log._load(recovery_point, log_start_offset, clean_shutdown)
            log._publish()
        except OSError as e:
            _report(channel, parent, ("Error while creating log for %s in dir %s" if new else
                                      "Error while loading log %s in dir %s") % (os.path.basename(dir_path), parent), e)
            raise KafkaStorageError("cannot load log %s: %s" % (dir_path, describe_cause(e))) from e
        log.update_high_watermark(high_watermark)
        return log

    # ------------------------------------------------------------------ log dir failure (KIP-112)
    @property
    def parent_dir(self) -> str:
        """The log dir holding this partition's directory."""
        return os.path.dirname(self.dir)

    def offline_error(self) -> KafkaStorageError:
        return KafkaStorageError(_already_offline(self.parent_dir))

    def mark_dir_offline(self) -> None:
        """The log dir failed: refuse every further I/O without touching the disk (any thread; no lock: a bool)."""
        self._dir_offline = True
        self._closed = True

    @property
    def dir_offline(self) -> bool:
        return self._dir_offline

    def _raise_io_error(self, what: str, exc: OSError) -> NoReturn:
        """Report ``exc`` (an I/O error on this log) to the LogDirFailureChannel and raise KafkaStorageError;
        an error that is not the disk's (NOT_DIR_FAILURES) is raised as it is."""
        if exc.errno in NOT_DIR_FAILURES:
            raise exc
        parent = self.parent_dir
        msg = what % {"tp": "%s-%d" % self.topic_partition, "dir": parent}
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(parent, msg, exc)
            self.mark_dir_offline()
        raise KafkaStorageError("%s: %s" % (msg, describe_cause(exc))) from exc

    def close_handlers(self) -> None:
        """Close every file of this log without writing anything (its dir failed: Kafka's closeHandlers)."""
        with self._lock:
            self.mark_dir_offline()
            self._begin_layout_change()
            for seg in self.segments:
                try:
                    seg.close_handlers()
                except Exception:  # noqa: BLE001 - the dir is gone; closing what can be closed
                    pass

    def _now_ms(self) -> int:
        return self._wall_ms()

    def _new_segment(self, base_offset: int, exists: bool = False,
                     existing_files: Optional[frozenset[str]] = None) -> LogSegment:
        """A new active segment, or (``exists``) a closed segment already on disk, touching no file yet."""
        return LogSegment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, now_ms=self._now_ms(),
                          file_already_exists=exists, active=not exists, existing_files=existing_files)

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        names = os.listdir(self.dir)
        if any(n.endswith(files.SWAP_SUFFIX) for n in names):
            self._complete_interrupted_swaps()
            names = os.listdir(self.dir)
        bases = []
        kept = []
        for name in names:
            if name.endswith((files.DELETED_SUFFIX, files.CLEANED_SUFFIX, files.SWAP_SUFFIX, ".tmp",
                              SWAP_END_SUFFIX)):
                os.unlink(os.path.join(self.dir, name))
                continue
            kept.append(name)
            if name.endswith(files.LOG_SUFFIX) and files.is_segment_stem(name):
                bases.append(files.offset_from_file_name(name))
        base_set = set(bases)
        for name in kept:
            if name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)) \
                    and files.is_segment_stem(name) and files.offset_from_file_name(name) not in base_set:
                os.unlink(os.path.join(self.dir, name))
        existing = frozenset(kept)
        self.producer_state.use_listing(existing)
        bases.sort()
        rebuild: set[int] = set()
        for base in bases:
            prefix = files.filename_prefix(base)
            missing_index = (prefix + files.INDEX_SUFFIX not in existing
                             or prefix + files.TIME_INDEX_SUFFIX not in existing)
            seg = self._new_segment(base, exists=True, existing_files=existing)
            # As Kafka's LogSegment.sanityCheck at load: offset and time indexes are checked when read (segments
            # from the recovery point on are rebuilt anyway after a crash); the transaction index is checked here.
            if missing_index or not seg.sanity_check_indexes():
                logger.warning("Rebuilding indexes of segment %d in %s", base, self.dir)
                rebuild.add(base)
            self.segments.append(seg)
        self._bases = [s.base_offset for s in self.segments]
        unflushed_from: Optional[int] = None
        if not clean_shutdown and self.segments:
            start = max(bisect.bisect_right(self._bases, recovery_point) - 1, 0)
            unflushed_from = self._bases[start]
            logger.info("Recovering unflushed segments from offset %d (segment %d of %d) in %s after an unclean "
                        "shutdown", recovery_point, start + 1, len(self.segments), self.dir)
            rebuild.update(self._bases[start:])
        if rebuild:
            self._recover_segments(rebuild, log_start_offset, unflushed_from)
        if not self.segments:
            self.segments.append(self._new_segment(max(log_start_offset, 0)))
            self._bases = [self.segments[0].base_offset]
        for seg in self.segments[:-1]:
            seg.release()  # recovered segments write their rebuilt indexes out and drop them
        active = self.segments[-1]
        try:
            active.activate()
        except CorruptIndexError:
            logger.warning("Rebuilding indexes of the active segment %d in %s", active.base_offset, self.dir)
            self._recover_segments({active.base_offset}, log_start_offset, None)
            active = self.segments[-1]
            active.activate()
        active.resize_indexes(self.config.segment_index_bytes)
        self._leo = max(active.next_offset, active.base_offset)
        self._log_start_offset = (max(log_start_offset, 0) if self.remote_log_enabled
                                  else max(log_start_offset, self.segments[0].base_offset))
        if self._log_start_offset > self._leo:
            self._log_start_offset = self._leo
        self._recovery_point = min(recovery_point, self._leo) if clean_shutdown else min(recovery_point, self._leo)
        self.leader_epoch_cache.truncate_from_end(self._leo, write=False)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset, write=False)
        self._rebuild_producer_state()

    def _complete_interrupted_swaps(self) -> None:
        """Finish a cleaner swap that a crash interrupted after its commit point (Kafka's swap recovery).

        A ``<base>.log.swap`` file next to its ``<base>.swapend`` marker means the cleaned data was
        committed: every other segment whose base offset lies in [base, end) is removed (end = the
        larger of the swap file's next offset and the group end recorded in the marker, which also
        covers groups whose last records were all compacted away) and the swap files take the final
        names. A ``.swap`` without a marker was never committed and is deleted with the other
        temporary files.
        ``.cleaned`` files (not yet committed) are removed by the caller, keeping the old segments.
        """
        names = os.listdir(self.dir)
        swap_log = files.LOG_SUFFIX + files.SWAP_SUFFIX
        for name in sorted(n for n in names if n.endswith(swap_log) and files.is_segment_stem(n)):
            base = files.offset_from_file_name(name)
            swap_path = os.path.join(self.dir, name)
            end_path = files.file_path(self.dir, base, SWAP_END_SUFFIX)
            try:
                with open(end_path, "r", encoding="ascii") as f:
                    recorded_end = int(f.read().strip())
            except (FileNotFoundError, ValueError):
                continue  # not a swap this broker committed (the marker precedes the commit): deleted later
            end = max(_next_offset_of_log_file(swap_path), base + 1, recorded_end)
            logger.info("Completing the interrupted swap of cleaned segment %d (offsets up to %d) in %s",
                        base, end, self.dir)
            for other in os.listdir(self.dir):
                if not files.is_segment_stem(other) or other.endswith(files.SWAP_SUFFIX):
                    continue
                if not other.endswith((files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX,
                                       files.TXN_INDEX_SUFFIX)):
                    continue
                if base <= files.offset_from_file_name(other) < end:
                    os.unlink(os.path.join(self.dir, other))
            for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
                idx = files.file_path(self.dir, base, suffix)
                if os.path.exists(idx + files.SWAP_SUFFIX):
                    os.rename(idx + files.SWAP_SUFFIX, idx)
            os.rename(swap_path, files.file_path(self.dir, base, files.LOG_SUFFIX))
            try:
                os.unlink(end_path)
            except FileNotFoundError:
                pass
        fsync_dir(self.dir)

    def _recover_segments(self, bases: set[int], log_start_offset: int, unflushed_from: Optional[int]) -> None:
        """Recover the segments whose base offsets are in ``bases``: indexes rebuilt with CRC checks, a torn
        tail truncated, the transaction index rebuilt by replaying the markers (Kafka's recoverSegment).

        The producer state needed for the transaction index comes from the newest snapshot at or below the
        first such segment, replayed forward. A bad tail in an unflushed segment (base >= ``unflushed_from``)
        drops every later segment; leader epochs of recovered batches go to the epoch cache.
        """
        cache = self.leader_epoch_cache
        psm = ProducerStateManager(self.dir, self.producer_state.producer_id_expiration_ms)
        todo = set(bases)
        first = min(todo)
        start = psm.load_latest_snapshot_at_or_below(first, log_start_offset, self._now_ms())
        i = max(min(bisect.bisect_right(self._bases, start), bisect.bisect_right(self._bases, first)) - 1, 0)
        while i < len(self.segments) and todo:
            seg = self.segments[i]
            if seg.base_offset not in todo:
                self._replay_segment(psm, seg, start)
                i += 1
                continue
            todo.discard(seg.base_offset)

            def on_batch(info: BatchInfo, seg: LogSegment = seg) -> None:
                ple = info.partition_leader_epoch
                if ple >= 0 and (cache.latest_epoch is None or ple > cache.latest_epoch):
                    cache.assign(ple, info.base_offset)
                if info.producer_id >= 0:
                    completed = self._replay_batch(psm, seg, info)
                    if completed is not None:
                        seg.update_txn_index(completed, psm.last_stable_offset(completed))
                        psm.complete_txn(completed)

            truncated = seg.recover(on_batch)
            if truncated:
                logger.warning("Truncated %d invalid bytes at the end of segment %d in %s", truncated,
                               seg.base_offset, self.dir)
                if unflushed_from is not None and seg.base_offset >= unflushed_from:
                    for later in self.segments[i + 1:]:
                        later.delete()
                    del self.segments[i + 1:]
                    break
            i += 1
        # an empty non-first trailing segment is fine; segments whose base is below the previous end are not
        self._bases = [s.base_offset for s in self.segments]

    def _replay_segment(self, psm: ProducerStateManager, seg: LogSegment, start: int) -> None:
        """Feed ``seg``'s batches from offset ``start`` on into ``psm`` (no index is written)."""
        pos = 0
        if seg.base_offset < start:
            found = seg.translate_offset(start)
            if found is None:
                return
            pos = found.position
        for info in seg.iter_headers(pos):
            if info.base_offset < start or info.producer_id < 0:
                continue
            completed = self._replay_batch(psm, seg, info)
            if completed is not None:
                psm.complete_txn(completed)

    def _replay_batch(self, psm: ProducerStateManager, seg: LogSegment, info: BatchInfo) -> Optional[CompletedTxn]:
        committed, coordinator_epoch = None, -1
        if info.is_control:
            marker = self._read_marker(seg, info)
            if marker is not None:
                committed, coordinator_epoch = marker.committed, marker.coordinator_epoch
        return psm.replay_batch(info.producer_id, info.producer_epoch, info.base_sequence, info.last_offset_delta,
                                info.base_offset, info.max_timestamp, info.is_transactional, info.is_control,
                                coordinator_epoch, committed)

    @staticmethod
    def _read_marker(seg: LogSegment, info: BatchInfo) -> Optional[EndTxnMarker]:
        if info.record_count <= 0:
            return None
        try:
            return parse_end_txn_marker(iter_stored_records(bytearray(seg.read_batch(info))))
        except Exception:
            return None

    def _rebuild_producer_state(self) -> None:
        """Load the latest usable snapshot, then replay batch headers (and markers) up to the LEO."""
        psm = self.producer_state
        start = psm.truncate_and_reload(self._log_start_offset, self._leo, self._now_ms())
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for seg in self.segments[i:]:
            self._replay_segment(psm, seg, start)
        psm.update_map_end_offset(self._leo)
        psm.on_high_watermark_updated(self.high_watermark)

    # ------------------------------------------------------------------ properties
    @property
    def log_start_offset(self) -> int:
        return self.offsets.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.offsets.log_end_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (Kafka's localLogStartOffset): the log start offset unless tiered storage
        holds the segments below it."""
        return self.offsets.local_log_start_offset

    @property
    def high_watermark(self) -> int:
        """The HW, without the lock. Never above the published LEO: a truncation publishes its LEO before it clamps
        the HW, and a reader between the two gets the LEO."""
        st = self._hw_state
        if st[0] != self._hw_gen:
            st = self._owner_hw
        hw = st[1]
        leo = self.offsets.log_end_offset
        return hw if hw <= leo else leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def view(self) -> LogView:
        """The last published view (any thread, no lock)."""
        return self._view

    @property
    def size_bytes(self) -> int:
        """The segments' bytes, without the lock (DescribeLogDirs and the metrics read it): the segment list is
        copied in one step (atomic under the GIL) and each size is one field, so a roll or a deletion running
        meanwhile at worst leaves one segment in or out of the sum."""
        return sum([s.size for s in self.segments[:]])

    @property
    def last_stable_offset(self) -> int:
        """LSO: the first unstable offset (oldest transaction open or with its marker not yet below the HW),
        clamped to the log start offset, capped by the HW; from the published offsets, without the lock. The HW is
        read first, so a transaction starting meanwhile starts at or above it."""
        hw = self.high_watermark
        offsets = self.offsets
        if offsets[3] < 0 and not offsets[4]:  # no transaction: the HW (LogOffsets.last_stable_offset's first test)
            return hw
        return offsets.last_stable_offset(hw)

    def _last_stable_offset_locked(self) -> int:
        psm = self.producer_state
        hw = self.high_watermark
        psm.on_high_watermark_updated(hw)  # the owner's share of a HW the loop moved since the last change
        first = psm.first_unstable_offset()
        if first is None:
            return hw
        first = max(first, self._log_start_offset)
        return first if first < hw else hw

    @property
    def latest_epoch(self) -> Optional[int]:
        return self.leader_epoch_cache.latest_epoch

    def _publish(self) -> None:
        """Under the lock, at the end of a change: replace ``offsets`` for the lock-free readers. Transactions the HW
        has passed since the last change leave the producer state here (Kafka does it in onHighWatermarkUpdated,
        under the log's lock; here the HW may have moved on the loop, which takes no lock)."""
        psm = self.producer_state
        start = self._log_start_offset
        bases = self._bases
        local = bases[0] if bases and bases[0] > start else start  # the local log start (tiered logs only differ)
        if psm.ongoing_txns or psm.unreplicated_txns:
            if psm.unreplicated_txns:
                psm.on_high_watermark_updated(self.high_watermark)
            first = min(psm.ongoing_txns) if psm.ongoing_txns else NO_TXN
            unreplicated = tuple(sorted((f, last) for f, (_pid, last) in psm.unreplicated_txns.items()))
            offsets = _tuple_new(LogOffsets, (start, local, self._leo, first, unreplicated))
        else:
            offsets = _tuple_new(LogOffsets, (start, local, self._leo, NO_TXN, ()))
        self._view = self._new_view(offsets)  # the view first: whoever sees these offsets sees their data
        self.offsets = offsets

    def _new_view(self, offsets: LogOffsets) -> LogView:
        """Under the lock: the view of the segments as they are now, with ``offsets``."""
        segs = self.segments
        old = self._view
        layout = self._layout
        if not segs:
            return _tuple_new(LogView, (offsets, (), (), 0, layout))
        active = segs[-1]
        size = active._size
        if size is None:
            size = active.size
        if old.layout == layout and len(old.segments) == len(segs) and old.segments[-1] is active:
            return _tuple_new(LogView, (offsets, old.segments, old.bases, size, layout))  # appends only
        return _tuple_new(LogView, (offsets, tuple(segs), tuple(self._bases), size, layout))

    def _begin_layout_change(self) -> None:
        """Under the lock, before truncating, deleting, renaming or swapping a segment: lock-free reads that started
        before this no longer count (Log.read makes them again); the next ``_publish`` carries the new layout."""
        self._layout += 1

    def _set_high_watermark_locked(self, hw: int) -> int:
        """The owner sets the HW (clamped to [log start offset, LEO]) with a new generation: a loop write racing this
        one no longer counts. Call after ``_publish`` when the LEO went down (the loop reads the generation first,
        then the LEO)."""
        hw = max(self._log_start_offset, min(hw, self._leo))
        gen = self._hw_gen + 1
        st = (gen, hw)
        self._owner_hw = st
        self._hw_gen = gen
        self._hw_state = st
        if self.producer_state.unreplicated_txns:
            self._publish()
        return hw

    @owner_command
    def update_high_watermark(self, hw: int) -> int:
        """Set the HW, clamped to [log start offset, LEO]; returns the value stored (a follower's HW, on its
        worker; a log opening)."""
        with self._lock:
            return self._set_high_watermark_locked(hw)

    def maybe_increment_high_watermark(self, hw: Optional[int]) -> bool:
        """Raise the HW to ``hw`` (None: the LEO; never above the LEO) if that is above it; True if it moved.

        The leader's HW, decided on the event loop (Partition.maybe_increment_leader_hw): no lock. The generation is
        read before the LEO and written with the new HW; an owner's set (truncation, follower HW) bumps it after
        publishing its LEO, so a write based on an LEO older than that set carries an old generation and readers
        ignore it; the loop then tries again from the owner's value. Only the loop raises a HW this way, so within
        one generation nobody else writes it and it only goes up. The LSO follows without the producer state
        (LogOffsets.last_stable_offset); the owner drops the transactions the HW passed at its next change.
        """
        while True:
            gen = self._hw_gen
            st = self._hw_state
            cur = st[1] if st[0] == gen else self._owner_hw[1]
            leo = self.offsets.log_end_offset
            target = leo if hw is None or hw > leo else hw
            if target <= cur:
                return False
            self._hw_state = (gen, target)
            if self._hw_gen == gen:
                return True
            # an owner set the HW while this ran: that write does not count; look again from the owner's value

    def update_config(self, config: LogConfig) -> None:
        """A new topic config (AlterConfigs, on the event loop): one attribute, no lock. A change under the lock reads
        ``config`` once where its steps must agree (an append, a retention pass)."""
        self.config = config

    @owner_command
    @handles_io("Error while writing the leader epoch checkpoint of %(tp)s in dir %(dir)s")
    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (on becoming leader)."""
        with self._lock:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                self.leader_epoch_cache.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: where ``leader_epoch`` ended in this log. No lock, as
        Kafka's UnifiedLog.endOffsetForEpoch: the published LEO, then one whole list of epoch entries (the event
        loop checks a follower's last fetched epoch with it)."""
        leo = self.offsets.log_end_offset
        return self.leader_epoch_cache.end_offset_for(leader_epoch, leo)

    def has_ongoing_txn(self, producer_id: int, producer_epoch: int) -> bool:
        """The log holds an open transaction of this producer at this epoch (KIP-890: no verification needed). Read on
        the event loop without the lock (one dict lookup, as Kafka's, which reads its producer map unlocked); an
        append with a verification guard checks it again on the owner."""
        entry = self.producer_state.last_entry(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == producer_epoch

    @owner_command
    def active_producers(self) -> list[ActiveProducer]:
        """Idempotent/transactional producers with state in this log (DescribeProducers)."""
        with self._lock:
            return [ActiveProducer(e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp,
                                   e.coordinator_epoch, e.current_txn_first_offset)
                    for e in self.producer_state.producers.values()]

    # ------------------------------------------------------------------ appends
    @owner_command
    def append_as_leader(self, buf: "bytearray | memoryview", leader_epoch: int, *, is_from_client: bool = True,
                         wait: bool = True) -> LogAppendInfo:
        """Validate ``buf`` (whole batches), assign offsets in place, append; see LogAppendInfo.

        ``wait`` False: LogBusyError, nothing done, if another thread holds the lock (the event loop appending as the
        borrowed owner never waits for it; it hands the append to the worker instead).

        Raises the storage errors of errors.py (CorruptRecordError, InvalidRecordError,
        RecordTooLargeError, InvalidProducerEpochError, OutOfOrderSequenceError, ...). A batch
        already written by the same producer (same epoch and sequence range) is not written again.
        The HW is not moved here, even for a leader without followers: the event loop raises it after the append
        (Partition.maybe_increment_leader_hw), without the lock.
        """
        # a compacted topic's null keys are found by the same walk that checks an uncompressed batch's records
        null_keys: Optional[dict[int, list[int]]] = {} if self.config.compact else None
        batches = parse_batches(buf, True, null_keys)
        lock = self._lock
        # not ``with``: the context-manager protocol costs as much again as the lock itself
        if not lock.acquire(wait):
            raise LogBusyError("the log %s is locked by another thread" % self.dir)
        try:
            return self._append_as_leader_locked(buf, batches, leader_epoch, is_from_client, null_keys)
        except OSError as exc:
            self._raise_io_error(APPEND_ERROR, exc)
        finally:
            lock.release()

    def _append_as_leader_locked(self, buf: "bytearray | memoryview", batches: list[BatchInfo], leader_epoch: int,
                                 is_from_client: bool, null_keys: Optional[dict[int, list[int]]] = None
                                 ) -> LogAppendInfo:
        """append_as_leader under the lock. Every step of a plain append (one batch, no producer id, the topic's
        codec kept) is a field read or one call: this runs once per partition of every Produce, and a Python call
        costs more than most steps."""
        if self._closed:
            self._check_open()
        if not batches:
            return LogAppendInfo(-1, -1, -1, self._log_start_offset)
        now = self._wall_ms()  # _now_ms
        config = self.config
        records_checked: frozenset[int] = frozenset()
        if config.compression_type != "producer":
            converted = recompress_if_needed(buf, batches, config.compression_type, config.compact)
            if converted is not None:
                buf, records_checked = converted
                batches = parse_batches(buf, False)  # built here: CRCs computed, rebuilt records already walked
                null_keys = None
        (_, appended, first_offset, last_offset, max_timestamp, offset_of_max_timestamp, num_records,
         valid_bytes) = validate_and_assign_offsets(buf, batches, self._leo, leader_epoch, config, now,
                                                    is_from_client, null_keys, records_checked)
        updates: Optional[dict[int, ProducerAppendInfo]] = None
        completed: list[CompletedTxn] = []
        if len(batches) > 1 or batches[0].producer_id >= 0:  # else no producer state to check or keep
            found = self._leader_producer_updates(buf, batches, appended, is_from_client, completed)
            if isinstance(found, LogAppendInfo):  # a duplicate: nothing written
                return found
            updates = found
        seg = self._maybe_roll(valid_bytes, max_timestamp, last_offset, now)
        seg.append(buf, appended)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        if updates is not None:
            self._apply_producer_updates(seg, updates, completed)
        leo = self._leo = last_offset + 1
        self.producer_state.update_map_end_offset(leo)
        old = self.offsets
        if updates is None and not old[4]:  # _publish, without a producer state this append did not change
            start = self._log_start_offset
            offsets = _tuple_new(LogOffsets, (start, start, leo, old[3], ()))
            view = self._view
            if view[1] and view[1][-1] is seg and view[4] == self._layout:  # _new_view, no roll: the size moved
                self._view = _tuple_new(LogView, (offsets, view[1], view[2], seg._size, view[4]))
            else:
                self._view = self._new_view(offsets)
            self.offsets = offsets
        else:
            self._publish()
        self._unflushed_messages += num_records  # _after_append
        if self._unflushed_messages >= config.flush_messages:
            self._flush_locked(leo)
        return _tuple_new(LogAppendInfo, (first_offset, last_offset, now if config.log_append_time else -1,
                                          self._log_start_offset, False, num_records, valid_bytes,
                                          max_timestamp, offset_of_max_timestamp))

    def _leader_producer_updates(self, buf: "bytearray | memoryview", batches: list[BatchInfo],
                                 appended: list[tuple[int, int, int]], is_from_client: bool,
                                 completed: list[CompletedTxn]) -> "dict[int, ProducerAppendInfo] | LogAppendInfo":
        """The producer-state changes of a leader append, checked (epoch, sequence, transaction state), or, when a
        client batch repeats one already in the log, that batch's LogAppendInfo (Kafka's duplicate answer).

        Markers that complete a transaction go to ``completed``. Called under the lock, before anything is written.
        """
        origin = CLIENT if is_from_client else COORDINATOR
        updates: dict[int, ProducerAppendInfo] = {}
        psm = self.producer_state
        for info, (last, max_ts, _size) in zip(batches, appended):
            pid = info.producer_id
            if pid < 0:
                continue
            first = last - info.last_offset_delta
            if is_from_client:
                entry = psm.last_entry(pid)
                if entry is not None:
                    dup = entry.find_duplicate(info.producer_epoch, info.base_sequence,
                                               last_sequence(info.base_sequence, info.last_offset_delta))
                    if dup is not None:
                        # as Kafka's UnifiedLog.append: the original batch's offsets, and its (max)
                        # timestamp as the log append time
                        return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                             self._log_start_offset, True, 0, 0)
            upd = updates.get(pid)
            if upd is None:
                upd = updates[pid] = psm.prepare_update(pid, origin)
            if info.is_control:
                marker = _batch_marker(buf, info)
                if marker is None:
                    raise InvalidRecordError("a control batch must hold one COMMIT or ABORT marker")
                done = upd.append_end_txn_marker(info.producer_epoch, marker.coordinator_epoch, marker.committed,
                                                 first, max_ts)
                if done is not None:
                    completed.append(done)
            else:
                upd.append_data_batch(info.producer_epoch, info.base_sequence,
                                      last_sequence(info.base_sequence, info.last_offset_delta), max_ts, first,
                                      last, info.is_transactional)
        return updates

    @owner_command
    def try_hold(self) -> bool:
        """The owner's run of several commands as one step, without waiting for the lock (the event loop as the
        borrowed owner): the lock taken if free, the commands then re-entering it; False, nothing taken, where
        another thread holds it. Each True is paired with :meth:`release_hold`."""
        return self._lock.acquire(False)

    @owner_command
    def release_hold(self) -> None:
        self._lock.release()

    @owner_command
    def append_as_follower(self, buf: "bytes | bytearray") -> LogAppendInfo:
        """Append replicated batches keeping their offsets and epochs (CRC checked; offsets >= LEO)."""
        batches = parse_batches(buf)
        with self._lock:
            try:
                return self._append_as_follower_locked(buf, batches)
            except OSError as exc:
                self._raise_io_error(APPEND_ERROR, exc)

    def _append_as_follower_locked(self, buf: "bytes | bytearray", batches: list[BatchInfo]) -> LogAppendInfo:
        self._check_open()
        if not batches:
            return LogAppendInfo(-1, -1, -1, self._log_start_offset)
        first = batches[0].base_offset
        last = batches[-1].base_offset + batches[-1].last_offset_delta
        if first < self._leo:
            raise UnexpectedAppendOffsetError(
                "first offset %d is below the log end offset %d" % (first, self._leo), first, last)
        prev = first - 1
        appended = []
        max_ts, off_max = -1, -1
        n = 0
        for info in batches:
            if info.base_offset <= prev and info is not batches[0]:
                raise InvalidRecordError("follower batch offsets are not increasing")
            lo = info.base_offset + info.last_offset_delta
            appended.append((lo, info.max_timestamp, info.size))
            if info.max_timestamp > max_ts:
                max_ts, off_max = info.max_timestamp, lo
            prev = lo
            n += info.record_count
        seg = self._maybe_roll(len(buf), max_ts, last, self._now_ms(), first)
        seg.append(buf, appended)
        cache = self.leader_epoch_cache
        psm = self.producer_state
        updates: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for info in batches:
            ple = info.partition_leader_epoch
            if ple >= 0 and (cache.latest_epoch is None or ple > cache.latest_epoch):
                cache.assign(ple, info.base_offset)
            pid = info.producer_id
            if pid < 0:
                continue
            upd = updates.get(pid)
            if upd is None:
                upd = updates[pid] = psm.prepare_update(pid, REPLICATION)
            if info.is_control:
                marker = _batch_marker(buf, info)
                if marker is not None:
                    done = upd.append_end_txn_marker(info.producer_epoch, marker.coordinator_epoch,
                                                     marker.committed, info.base_offset, info.max_timestamp)
                    if done is not None:
                        completed.append(done)
            else:
                upd.append_data_batch(info.producer_epoch, info.base_sequence,
                                      last_sequence(info.base_sequence, info.last_offset_delta),
                                      info.max_timestamp, info.base_offset, info.last_offset, info.is_transactional)
        self._apply_producer_updates(seg, updates, completed)
        self._leo = last + 1
        psm.update_map_end_offset(self._leo)
        self._publish()
        self._after_append(n)
        return LogAppendInfo(first, last, -1, self._log_start_offset, False, n, len(buf), max_ts, off_max)

    def _apply_producer_updates(self, seg: LogSegment, updates: dict[int, ProducerAppendInfo],
                                completed: list[CompletedTxn]) -> None:
        """Commit an append's producer-state changes; each completed transaction is recorded (an ABORT in the
        transaction index of ``seg``, the segment holding its marker) with the LSO Kafka computes for it."""
        psm = self.producer_state
        for upd in updates.values():
            psm.update(upd)
        for txn in completed:
            seg.update_txn_index(txn, psm.last_stable_offset(txn))
            psm.complete_txn(txn)

    def _after_append(self, num_records: int) -> None:
        self._unflushed_messages += num_records
        if self._unflushed_messages >= self.config.flush_messages:
            self._flush_locked(self._leo)

    def _check_open(self) -> None:
        if self._closed:
            if self._dir_offline:
                raise self.offline_error()
            raise KafkaStorageError("log %s is closed" % self.dir)

    def _maybe_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int,
                    first_offset: Optional[int] = None) -> LogSegment:
        seg = self.segments[-1]
        config = self.config
        roll_ms = config.segment_ms - self._roll_jitter(seg.base_offset) if config.segment_jitter_ms > 0 \
            else config.segment_ms
        if seg.should_roll(messages_size, max_timestamp, max_offset, now_ms, config.segment_bytes, roll_ms):
            base = self._leo if first_offset is None else max(first_offset, self._leo)
            if seg.size == 0 and seg.base_offset == base:
                return seg
            return self._roll(base)
        return seg

    def _roll_jitter(self, base_offset: int) -> int:
        j = self.config.segment_jitter_ms
        return (hash(base_offset) % j) if j > 0 else 0

    @owner_command
    @handles_io("Error while rolling log segment for %(tp)s in dir %(dir)s")
    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active segment is empty)."""
        with self._lock:
            seg = self.segments[-1]
            if seg.size == 0:
                return seg
            return self._roll(self._leo)

    @handles_io("Error while rolling log segment for %(tp)s in dir %(dir)s", check_offline=False)
    def _roll(self, new_base: int) -> LogSegment:
        old = self.segments[-1]
        # The new segment's file first: if it cannot be created (no descriptor left, disk full) the append fails
        # and the old segment stays the active one, whole.
        seg = self._new_segment(new_base)
        if old.size == 0:
            # replace an empty active segment rather than leaving an empty one behind
            self._begin_layout_change()
            old.delete()
            self.segments.pop()
            self._bases.pop()
        else:
            old.on_become_inactive()
        snapshot = self.producer_state.take_snapshot(new_base, sync=False)  # fsynced by the flush after the roll
        if snapshot is not None:
            self._unsynced_files.add(snapshot)
        self.segments.append(seg)
        self._bases.append(new_base)
        self._publish()  # the new segment is readable (empty) at once; the old one's bytes stay as they were
        logger.info("Rolled new log segment at offset %d in %s", new_base, self.dir)
        if self.on_roll is not None:
            self.on_roll(self, new_base)
        return seg

    # ------------------------------------------------------------------ reads
    def read(self, start_offset: int, max_bytes: int, max_offset_exclusive: Optional[int] = None,
             min_one_message: bool = True, include_aborted_txns: bool = False, wait: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, bounded by ``max_offset_exclusive``.

        Raises OffsetOutOfRangeError outside [log start offset, LEO]. At least one whole batch is
        returned with ``min_one_message`` even when larger than ``max_bytes`` (KIP-74).
        ``include_aborted_txns`` (read_committed) adds the aborted transactions overlapping the read, from
        ``start_offset`` to the first offset-index entry past the data (Kafka's addAbortedTransactions).

        Without the lock, from the published view (see the module's Thread-safety): an append, roll or flush
        running meanwhile is not waited for. A read that a truncation, deletion or swap overtook is made again
        from the next view; while such a change is under way (its view not published yet) the read waits for the
        lock and reads under it, or, with ``wait=False`` (the event loop), raises LogBusyError.
        """
        if self._dir_offline:
            raise self.offline_error()
        for _ in range(3):
            view = self._view
            if view.layout != self._layout:
                break  # a change of the segment list is under way
            try:
                res = self._read_view(view, start_offset, max_bytes, max_offset_exclusive, min_one_message,
                                      include_aborted_txns)
            except Exception as exc:
                if self._layout != view.layout:
                    continue  # overtaken by a truncation, deletion or swap: whatever failed, read again
                if isinstance(exc, OSError):
                    self._raise_io_error("Exception while reading from %(tp)s in dir %(dir)s", exc)
                raise
            if self._layout == view.layout:
                return res
        if not wait:
            raise LogBusyError("the segments of %s are changing" % self.dir)
        with self._lock:
            if self._dir_offline:
                raise self.offline_error()
            try:
                return self._read_view(self._new_view(self.offsets), start_offset, max_bytes, max_offset_exclusive,
                                       min_one_message, include_aborted_txns)
            except OSError as exc:
                self._raise_io_error("Exception while reading from %(tp)s in dir %(dir)s", exc)

    def _read_view(self, view: LogView, start_offset: int, max_bytes: int, max_offset_exclusive: Optional[int],
                   min_one_message: bool, include_aborted_txns: bool) -> FetchDataInfo:
        """``read`` from ``view``: nothing past its LEO, nor past the active segment's published size."""
        offsets = view.offsets
        leo = offsets.log_end_offset
        log_start = offsets.log_start_offset
        if start_offset > leo or start_offset < log_start:
            raise OffsetOutOfRangeError(
                "offset %d is out of range [%d, %d] for %s" % (start_offset, log_start, leo, self.dir))
        if start_offset < offsets.local_log_start_offset:
            raise OffsetMovedToTieredStorageError(
                "offset %d is below the local log start offset %d of %s: it is in remote storage"
                % (start_offset, offsets.local_log_start_offset, self.dir))
        max_off = leo if max_offset_exclusive is None else min(max_offset_exclusive, leo)
        segs = view.segments
        last = len(segs) - 1
        i = max(bisect.bisect_right(view.bases, start_offset) - 1, 0)
        if start_offset >= max_off:
            seg = segs[i]
            return FetchDataInfo(LogOffsetMetadata(start_offset, seg.base_offset, _known_size(view, i)), None,
                                 False, [] if include_aborted_txns else None)
        while i <= last:
            seg = segs[i]
            size = view.active_size if i == last else seg.readable_size()
            max_position = self._max_position(view, i, size, max_off)
            res = seg.read(start_offset, max_bytes, max_position, min_one_message, size)
            if res is not None:
                fs, meta = res
                aborted = (self._aborted_txns_for_read(view, start_offset, i, meta.relative_position_in_segment,
                                                       fs.length) if include_aborted_txns else None)
                return FetchDataInfo(meta, fs if fs.length > 0 else None, False, aborted)
            i += 1
        seg = segs[-1]
        return FetchDataInfo(LogOffsetMetadata(start_offset, seg.base_offset, view.active_size), None)

    def _aborted_txns_for_read(self, view: LogView, start_offset: int, i: int, position: int, size: int
                               ) -> list[AbortedTxn]:
        segs = view.segments
        leo = view.offsets.log_end_offset
        upper = segs[i].fetch_upper_bound_offset(position, size)
        if upper is None:
            upper = segs[i + 1].base_offset if i + 1 < len(segs) else leo
        # an index entry past the view (the active segment grew since) says nothing about what was read
        return _collect_aborted_txns(segs, start_offset, min(upper, leo), i)

    @owner_command
    @handles_io("Exception while reading from %(tp)s in dir %(dir)s")
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the segment holding
        ``start_offset`` on (Kafka's UnifiedLog.collectAbortedTransactions)."""
        with self._lock:
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            return _collect_aborted_txns(self.segments, start_offset, upper_bound_offset, i)

    @staticmethod
    def _max_position(view: LogView, i: int, size: int, max_offset_exclusive: int) -> int:
        """Where a read of segment ``i`` of ``view`` (``size`` bytes readable) must stop for
        ``max_offset_exclusive``."""
        if max_offset_exclusive >= view.offsets.log_end_offset:
            return size
        j = max(bisect.bisect_right(view.bases, max_offset_exclusive) - 1, 0)
        if j != i:
            return size if i < j else 0
        found = view.segments[i].translate_offset(max_offset_exclusive, 0, size)
        return size if found is None else found.position

    @owner_command
    @handles_io("Error while fetching offset by timestamp for %(tp)s in dir %(dir)s")
    def fetch_offset_by_timestamp(self, timestamp: int) -> Optional[tuple[int, int, int]]:
        """ListOffsets: (offset, timestamp, leader_epoch or -1), or None when nothing matches.

        Special timestamps: -2 earliest (log start offset), -4 earliest local (the local log start offset; the log
        start offset of an untiered log), -5 latest tiered (the highest offset in remote storage; -1 with epoch -1
        for an untiered log), -1 latest (LEO), -3 the record with the largest timestamp.
        """
        with self._lock:
            cache = self.leader_epoch_cache

            def epoch_of(offset: int) -> int:
                e = cache.epoch_for_offset(offset)
                return -1 if e is None else e

            if timestamp == EARLIEST_LOCAL_TIMESTAMP and self.remote_log_enabled:  # the first offset on local disk
                local = self.offsets.local_log_start_offset
                return local, NO_TIMESTAMP, epoch_of(local)
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return self._log_start_offset, NO_TIMESTAMP, epoch_of(self._log_start_offset)
            if timestamp == LATEST_TIERED_TIMESTAMP:  # UnifiedLog: -1 with epoch -1 when nothing is tiered
                if not self.remote_log_enabled:
                    return -1, NO_TIMESTAMP, -1
                highest = self.highest_offset_in_remote_storage
                return highest, NO_TIMESTAMP, epoch_of(highest) if highest >= 0 else -1
            if timestamp == LATEST_TIMESTAMP:
                latest = cache.latest_epoch
                return self._leo, NO_TIMESTAMP, -1 if latest is None else latest
            if timestamp == MAX_TIMESTAMP:
                return self._max_timestamp_and_offset()
            if timestamp < 0:
                return None
            for seg in self.segments:
                if seg.size == 0:
                    continue
                if seg.largest_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
                    if found is not None:
                        return found[0], found[1], epoch_of(found[0])
            return None

    def _max_timestamp_and_offset(self) -> Optional[tuple[int, int, int]]:
        best = None
        for seg in self.segments:
            if seg.size and seg.max_timestamp_so_far >= 0 and (best is None or
                                                               seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        if best is None:
            return None
        target_ts, batch_last = best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far
        info = best.translate_offset(batch_last)
        if info is None:
            return None
        for candidate in best.iter_headers(info.position):
            if candidate.max_timestamp == target_ts:
                info = candidate
                break
        ple = info.partition_leader_epoch if info.partition_leader_epoch >= 0 else -1
        if info.timestamp_type == 1:
            return info.base_offset, target_ts, ple
        for rec in iter_stored_records(best.read_batch(info)):
            if rec.timestamp == target_ts:
                return rec.offset, target_ts, ple
        return info.base_offset + info.last_offset_delta, target_ts, ple

    # ------------------------------------------------------------------ log start, truncation
    @owner_command
    @handles_io("Exception while increasing log start offset for %(tp)s in dir %(dir)s")
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` (<= HW); returns the new low watermark."""
        with self._lock:
            hw = self.high_watermark
            if offset > hw:
                raise OffsetOutOfRangeError(
                    "cannot increment the log start offset to %d above the high watermark %d" % (offset, hw))
            self._increment_log_start_offset(offset)
            return self._log_start_offset

    @owner_command
    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Raise the log start offset (the RemoteLogManager's expiration: remote segments below ``offset`` are
        gone); never above the LEO, never down."""
        with self._lock:
            self._increment_log_start_offset(min(offset, self._leo))

    @owner_command
    def note_highest_offset_in_remote_storage(self, offset: int) -> None:
        """The RemoteLogManager's copy (or, on a follower, the metadata) reached ``offset``: local retention may now
        delete the segments below it. Never goes down."""
        if offset > self.highest_offset_in_remote_storage:
            self.highest_offset_in_remote_storage = offset

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)
        if self._recovery_point < offset:
            self._recovery_point = offset
        self._publish()

    @owner_command
    @handles_io("Error while truncating log for %(tp)s in dir %(dir)s")
    def truncate_to(self, offset: int) -> bool:
        """Remove every batch with offsets >= ``offset`` (follower truncation); False if nothing to do."""
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset %d" % offset)
        with self._lock:
            if offset >= self._leo:
                # As Kafka's UnifiedLog.truncateTo: truncate the epoch cache all the same. A broker that became
                # leader (assigning its epoch at the log end) and lost leadership before appending keeps an epoch
                # the new leader never had; left there, the follower reports it as its last fetched epoch, is told
                # it diverged, "truncates" to the log end again, and loops without ever fetching.
                self.leader_epoch_cache.truncate_from_end(self._leo)
                return False
            self._note_truncation(offset)
            if self.segments[0].base_offset > offset:
                self._truncate_fully_locked(offset)
                return True
            self._begin_layout_change()
            while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
                self.segments.pop().delete()
                self._bases.pop()
            active = self.segments[-1]
            active.activate()  # a closed segment becomes the active one again
            active.truncate_to(offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self._leo = max(active.next_offset, active.base_offset)
            self._log_start_offset = min(self._log_start_offset, self._leo)
            self._recovery_point = min(self._recovery_point, self._leo)
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self._rebuild_producer_state()
            self._publish()  # the LEO first: see _set_high_watermark_locked
            self._set_high_watermark_locked(self.high_watermark)
            return True

    @owner_command
    @handles_io("Error while truncating the entire log for %(tp)s in dir %(dir)s")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        with self._lock:
            self._truncate_fully_locked(offset)

    @owner_command
    @handles_io("Error while rebuilding the log of %(tp)s from remote storage in dir %(dir)s")
    def restore_remote_aux_state(self, next_offset: int, log_start_offset: int, epochs: list[tuple[int, int]],
                                 producer_snapshot: bytes) -> None:
        """Tiered follower: start empty at ``next_offset`` with the leader-epoch entries and producer snapshot of
        the remote segment ending before it (broker.storage.tiered_log.restore_aux_state)."""
        with self._lock:
            tiered_log.restore_aux_state(self, next_offset, log_start_offset, epochs, producer_snapshot)

    def _note_truncation(self, offset: int) -> None:
        self._truncated_to = offset if self._truncated_to is None else min(self._truncated_to, offset)

    @owner_command
    def pop_truncation_point(self) -> Optional[int]:
        """The lowest offset this log was truncated to since the last call (None: no truncation since)."""
        with self._lock:
            t, self._truncated_to = self._truncated_to, None
            return t

    def _truncate_fully_locked(self, offset: int) -> None:
        self._note_truncation(offset)
        self._begin_layout_change()
        for seg in self.segments:
            seg.delete()
        self.segments = [self._new_segment(offset)]
        self._bases = [offset]
        self._leo = self._log_start_offset = self._recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        self._publish()
        self._set_high_watermark_locked(offset)

    # ------------------------------------------------------------------ retention
    @owner_command
    @handles_io("Error while deleting segments for %(tp)s in dir %(dir)s")
    def delete_old_segments(self, now_ms: Optional[int] = None) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns segments deleted.

        Never deletes the active segment, nor data at or above the high watermark.
        """
        with self._lock:
            now = self._now_ms() if now_ms is None else now_ms
            if self.remote_log_enabled:
                return tiered_log.delete_local_segments(self, now)
            cfg = self.config
            deleted = 0
            if cfg.delete and cfg.retention_ms >= 0:
                deleted += self._delete_segments(lambda seg, nxt: now - seg.largest_timestamp > cfg.retention_ms)
            if cfg.delete and cfg.retention_bytes >= 0:
                excess = [self.size_bytes - cfg.retention_bytes]

                def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(over_size)
            deleted += self._delete_segments(lambda seg, nxt: nxt.base_offset <= self._log_start_offset)
            return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment], bool]) -> int:
        doomed: list[LogSegment] = []
        hw = self.high_watermark
        for seg, nxt in zip(self.segments, self.segments[1:]):
            if nxt.base_offset > hw or not predicate(seg, nxt):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        self._begin_layout_change()
        del self.segments[:len(doomed)]
        del self._bases[:len(doomed)]
        if not self.remote_log_enabled:  # tiered: the deleted segments are still readable from remote storage
            self._increment_log_start_offset(self.segments[0].base_offset)
        self._publish()  # the log start offset may not have moved (it was above the segments already)
        for seg in doomed:
            self._schedule_delete(seg)
        return len(doomed)

    def _schedule_delete(self, seg: LogSegment) -> None:
        """Rename the segment's files to ``.deleted``; remove them after file.delete.delay.ms."""
        renamed = seg.rename_files(files.DELETED_SUFFIX)

        def remove() -> None:
            try:
                seg.close_handlers()
            except Exception:  # already closed
                pass
            for path in renamed:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass

        delay = self.config.file_delete_delay_ms
        if self._scheduler is not None and delay > 0:
            self._scheduler(delay / 1000.0, remove)
        else:
            remove()

    # ------------------------------------------------------------------ log cleaner support
    @owner_command
    def cleaner_view(self) -> tuple[list[LogSegment], int, int, dict[int, tuple[int, int]]]:
        """(segments, log start offset, first uncleanable offset bound, {producer id: (last data offset, epoch)}).

        The bound is min(active segment base, LSO); the producer map drives which emptied batches the
        cleaner keeps (a producer's last batch carries its last sequence and epoch; with no data batch left
        (last data offset -1), its last marker carries the epoch).
        """
        with self._lock:
            self._check_open()
            bound = min(self.segments[-1].base_offset, self._last_stable_offset_locked())
            producers = {pid: (e.last_data_offset, e.producer_epoch)
                         for pid, e in self.producer_state.producers.items()}
            return list(self.segments), self._log_start_offset, bound, producers

    def cleaner_bounds(self) -> tuple[tuple[LogSegment, ...], int, int]:
        """(segments, log start offset, min(active segment base, LSO)) from the published view, on any thread: what
        the cleaner measures to choose a log (``cleaner_view``, on the owner, is what it then cleans)."""
        self._check_open()
        view = self._view
        segs = view.segments
        return segs, view.offsets.log_start_offset, min(segs[-1].base_offset, self.last_stable_offset)

    @owner_command
    @handles_io("Error while replacing segments of %(tp)s in dir %(dir)s")
    def replace_segments(self, old: list[LogSegment], old_sizes: list[int], base_offset: int, end_offset: int,
                         hook: Optional[SwapHook] = None) -> bool:
        """Swap the closed cleaned segment ``<base_offset>.log.cleaned`` in for ``old`` (Kafka's replaceSegments).

        Holds the lock only for renames. Steps: record ``end_offset`` in ``<base>.swapend``; rename the
        cleaned log to ``.swap`` (the commit point: recovery completes the swap from here on); rename
        the cleaned indexes; rename the old segments to ``.deleted`` (removed after
        file.delete.delay.ms, so FileSlices already handed out stay readable); give the swap files
        their final names. Returns False, discarding the cleaned files, when ``old`` is no longer a
        run of this log's inactive segments of the sizes the cleaner read (retention, truncation,
        or deletion happened meanwhile). ``hook(step)`` lets tests simulate a crash at each step.
        """
        step = hook if hook is not None else (lambda _s: None)
        with self._lock:
            try:
                i = next(j for j, seg in enumerate(self.segments) if seg is old[0])
            except StopIteration:
                i = -1
            run = self.segments[i:i + len(old)] if i >= 0 else []
            if (self._closed or i < 0 or len(run) != len(old) or any(a is not b for a, b in zip(run, old))
                    or i + len(old) >= len(self.segments) or [s.size for s in old] != list(old_sizes)
                    or old[0].base_offset != base_offset):
                discard_cleaned_files(self.dir, base_offset)
                return False
            step("before_swap")
            atomic_write(files.file_path(self.dir, base_offset, SWAP_END_SUFFIX), b"%d\n" % end_offset)
            step("after_swap_end_written")
            cleaned_log = files.file_path(self.dir, base_offset, files.LOG_SUFFIX)
            os.rename(cleaned_log + files.CLEANED_SUFFIX, cleaned_log + files.SWAP_SUFFIX)
            fsync_dir(self.dir)
            step("after_log_swap_renamed")
            for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
                path = files.file_path(self.dir, base_offset, suffix)
                try:
                    os.rename(path + files.CLEANED_SUFFIX, path + files.SWAP_SUFFIX)
                except FileNotFoundError:
                    if suffix != files.TXN_INDEX_SUFFIX:  # a transaction index exists only with aborted txns
                        raise
            step("after_index_swap_renamed")
            self._begin_layout_change()  # the old segments' names go, and old[0]'s name is the cleaned file's next
            for n, seg in enumerate(old):
                self._schedule_delete(seg)
                step("after_old_deleted_%d" % n)
            for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX, files.LOG_SUFFIX):
                path = files.file_path(self.dir, base_offset, suffix)
                try:
                    os.rename(path + files.SWAP_SUFFIX, path)
                except FileNotFoundError:
                    if suffix != files.TXN_INDEX_SUFFIX:
                        raise
            fsync_dir(self.dir)
            step("after_swap_renamed")
            try:
                os.unlink(files.file_path(self.dir, base_offset, SWAP_END_SUFFIX))
            except FileNotFoundError:
                pass
            new = self._new_segment(base_offset, exists=True)
            self.segments[i:i + len(old)] = [new]
            self._bases = [s.base_offset for s in self.segments]
            self._publish()
            return True

    # ------------------------------------------------------------------ flush / close
    @owner_command
    @handles_io("Error while flushing log for %(tp)s in dir %(dir)s")
    def flush(self, up_to_offset: Optional[int] = None) -> None:
        """fsync segments holding offsets below ``up_to_offset`` (default LEO); advances the recovery point. All on
        the owner (a log dir move's copy); the LogManager's flushes do the fsyncs on their own thread instead
        (``begin_flush``, ``flush_files``, ``end_flush``), so the owner's appends do not wait for the disk."""
        plan = self.begin_flush(up_to_offset)
        if plan is not None:
            self.flush_files(plan)
            self.end_flush(plan)

    @owner_command
    def begin_flush(self, up_to_offset: Optional[int] = None) -> Optional[FlushPlan]:
        """What a flush to ``up_to_offset`` must fsync (None: nothing below the recovery point is left); takes the
        small files written without fsync with it."""
        with self._lock:
            up_to = self._leo if up_to_offset is None else min(up_to_offset, self._leo)
            if up_to <= self._recovery_point:
                return None
            lo = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
            todo = tuple(seg for seg in self.segments[lo:] if seg.base_offset < up_to)
            return FlushPlan(up_to, todo, self._unflushed_messages, self._take_unsynced())

    @handles_io("Error while flushing log for %(tp)s in dir %(dir)s")
    def flush_files(self, plan: FlushPlan) -> None:
        """The fsyncs of ``plan``, on any thread (they change no state of the log). A segment deleted meanwhile is
        fine; any other error is a storage failure."""
        for seg in plan.segments:
            try:
                seg.flush()
            except (ValueError, OSError):
                if not (self._closed or all(seg is not s for s in self._view.segments)):
                    raise
        self._sync_metadata_files(plan.unsynced)

    @owner_command
    def end_flush(self, plan: FlushPlan) -> None:
        """After ``flush_files``: the recovery point reaches the plan's offset."""
        with self._lock:
            if plan.up_to > self._recovery_point:
                self._recovery_point = plan.up_to
            if plan.up_to >= self._leo:
                self._unflushed_messages = max(0, self._unflushed_messages - plan.unflushed)

    def _flush_locked(self, up_to: int) -> None:
        if up_to <= self._recovery_point:
            return
        lo = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        for seg in self.segments[lo:]:
            if seg.base_offset >= up_to:
                break
            seg.flush()
        self._sync_metadata_files(self._take_unsynced())
        self._recovery_point = up_to
        if up_to >= self._leo:
            self._unflushed_messages = 0

    # ------------------------------------------------------------------ small files made durable with the segments
    @owner_command
    def note_unsynced_file(self, path: str) -> None:
        """``path`` (a file of this partition written without fsync) becomes durable with the next flush."""
        with self._lock:
            self._unsynced_files.add(path)

    def _take_unsynced(self) -> tuple[list[str], bool]:
        paths = list(self._unsynced_files)
        self._unsynced_files.clear()
        cache = self.leader_epoch_cache
        cache.write_pending()  # under the log's lock: the file holds the entries as of now
        epochs = cache.unsynced
        if epochs:
            cache.unsynced = False
            paths.append(cache.path)
        return paths, bool(paths)

    def _sync_metadata_files(self, taken: tuple[list[str], bool]) -> None:
        paths, any_ = taken
        if not any_:
            return
        for path in paths:
            fsync_file(path)
        fsync_dir(self.dir)

    @owner_command
    @handles_io("Error while writing the leader epoch checkpoint of %(tp)s in dir %(dir)s")
    def take_unsynced_files(self) -> list[str]:
        """The small files written without fsync since the last sync (a marked leader-epoch change written now),
        handed to a caller that makes them durable itself (LogManager: one syncfs for thousands of partitions)."""
        with self._lock:
            return self._take_unsynced()[0]

    @owner_command
    @handles_io("Error while flushing the metadata files of %(tp)s in dir %(dir)s")
    def sync_metadata_files(self) -> None:
        """fsync the small files (leader epochs, producer snapshots, partition.metadata) written without fsync
        since the last call: run by every flush before the recovery point moves, and periodically."""
        with self._lock:
            taken = self._take_unsynced()
        self._sync_metadata_files(taken)

    @owner_command
    def remove_expired_producers(self, now_ms: Optional[int] = None) -> None:
        with self._lock:
            self.producer_state.remove_expired_producers(self._now_ms() if now_ms is None else now_ms)

    @owner_command
    @handles_io("Error while closing %(tp)s in dir %(dir)s", check_offline=False)
    def close(self, sync: bool = True) -> None:
        """Snapshot producer state at the LEO and close every segment (indexes trimmed).

        ``sync=False`` (broker shutdown) writes without fsync; the caller makes the whole filesystem durable
        at once and then calls :meth:`mark_flushed`."""
        with self._lock:
            if self._closed:
                return
            if self._leo > self._log_start_offset or self.producer_state.producers:
                # as Kafka's takeSnapshot, none for an empty log (10,000 fewer files at a 10,000-partition shutdown)
                self.producer_state.take_snapshot(self._leo, sync=sync)
            self._begin_layout_change()
            for seg in self.segments:
                seg.close()
            if sync:
                self._sync_metadata_files(self._take_unsynced())
            else:
                self.leader_epoch_cache.write_pending()
            self._closed = True

    @owner_command
    def mark_flushed(self) -> None:
        """Everything of this log was made durable by the caller (``sync_filesystem`` after ``close(False)``):
        the recovery point is the LEO."""
        with self._lock:
            self._unsynced_files.clear()
            self.leader_epoch_cache.unsynced = False
            self._recovery_point = self._leo
            self._unflushed_messages = 0

    @owner_command
    @handles_io("Error while deleting log for %(tp)s in dir %(dir)s")
    def delete(self) -> None:
        """Close and remove the whole directory."""
        with self._lock:
            self._begin_layout_change()
            if not self._closed:
                for seg in self.segments:
                    seg.close_handlers()
                self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    @owner_command
    @handles_io("Error while renaming dir for %(tp)s in log dir %(dir)s")
    def rename_dir(self, new_dir: str) -> None:
        with self._lock:
            self._begin_layout_change()  # the segments' paths go: reads from here on take the lock, as before
            os.rename(self.dir, new_dir)
            self.dir = new_dir

    @owner_command
    @handles_io("Error while replacing the log of %(tp)s in dir %(dir)s with its future log")
    def replace_with_future(self, future: "Log", new_dir: str, retired_dir: str,
                            reopen: Callable[[str, int, int, int], "Log"],
                            hook: Optional[SwapHook] = None) -> list[LogSegment]:
        """Continue this Log from ``future``'s files: the end of an AlterReplicaLogDirs move.

        This Log object stays the partition's log (every holder keeps using it); what changes under its lock
        is where its data lives. ``future`` must hold exactly this log's offsets (the caller runs this on the
        partition's I/O worker, so no append or truncation can interleave). Steps: the future gets this log's
        leader epochs (an epoch may start at the LEO with no batch yet), log start offset and HW, is flushed
        and closed; this log's directory is renamed to ``retired_dir`` (the commit point: a restart from
        here on promotes the future directory), the future's to ``new_dir``; ``reopen(new_dir,
        recovery_point, log_start_offset, high_watermark)`` loads it and its segments, indexes, epochs and
        producer state become this log's. Returns the retired segments, still open so reads already handed
        out stay valid; the caller closes them and removes ``retired_dir`` later. A failure before the
        commit point leaves everything as it was; after it, the renames are undone where possible.
        """
        step = hook if hook is not None else (lambda _s: None)
        with self._lock:
            self._check_open()
            with future._lock:
                future._check_open()
                if future._leo != self._leo or future._log_start_offset > self._log_start_offset:
                    raise KafkaStorageError("the future log %s [%d, %d) does not match %s [%d, %d)" % (
                        future.dir, future._log_start_offset, future._leo, self.dir, self._log_start_offset,
                        self._leo))
                future._increment_log_start_offset(self._log_start_offset)
                self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
                entries = [e for e in self.leader_epoch_cache.entries if e[1] <= self._leo]
                future.leader_epoch_cache._entries = list(entries)
                future.leader_epoch_cache.flush()
                future._set_high_watermark_locked(self.high_watermark)
                future._flush_locked(future._leo)
            future.close()
            step("future_closed")
            self._begin_layout_change()
            old_dir = self.dir
            future_dir = future.dir
            os.rename(old_dir, retired_dir)
            fsync_dir(os.path.dirname(old_dir))
            step("current_retired")
            try:
                os.rename(future_dir, new_dir)
                fsync_dir(os.path.dirname(new_dir))
                step("future_renamed")
                fresh = reopen(new_dir, self._leo, self._log_start_offset, self.high_watermark)
            except Exception:
                try:
                    if os.path.isdir(new_dir) and not os.path.exists(future_dir):
                        os.rename(new_dir, future_dir)
                    os.rename(retired_dir, old_dir)
                except OSError:
                    logger.exception("Could not undo the log dir move of %s", old_dir)
                raise
            retired = self.segments
            self.dir = fresh.dir
            self.segments = fresh.segments
            self._bases = fresh._bases
            self._leo = fresh._leo
            self._log_start_offset = fresh._log_start_offset
            self._recovery_point = fresh._recovery_point
            self._unflushed_messages = 0
            self.leader_epoch_cache = fresh.leader_epoch_cache
            if self.leader_epoch_cache.entries != entries:  # loading drops an epoch that starts at the LEO
                self.leader_epoch_cache._entries = list(entries)
                self.leader_epoch_cache.flush()
            self.producer_state = fresh.producer_state
            self._publish()
            self._set_high_watermark_locked(self.high_watermark)
            fresh.segments = []
            fresh._closed = True
            return retired

    def __repr__(self) -> str:
        return "Log(dir=%s, log_start_offset=%d, leo=%d, hw=%d)" % (
            self.dir, self._log_start_offset, self._leo, self.high_watermark)


APPEND_ERROR = "Error while appending records to %(tp)s in dir %(dir)s"


def _known_size(view: LogView, i: int) -> int:
    """Segment ``i``'s readable size where it is known without touching its file (-1 otherwise)."""
    if i == len(view.segments) - 1:
        return view.active_size
    size = view.segments[i]._size
    return -1 if size is None else size


def _collect_aborted_txns(segments: "Sequence[LogSegment]", start_offset: int, upper_bound_offset: int, i: int
                          ) -> list[AbortedTxn]:
    out: list[AbortedTxn] = []
    for seg in segments[i:]:
        txns, complete = seg.collect_aborted_txns(start_offset, upper_bound_offset)
        out.extend(txns)
        if complete:
            break
    return out


def _already_offline(log_dir: str) -> str:
    return "The log dir %s is already offline due to a previous IO exception." % log_dir


def _report(channel: Optional[LogDirFailureChannel], log_dir: str, msg: str, exc: OSError) -> None:
    if channel is not None and exc.errno not in NOT_DIR_FAILURES:
        channel.maybe_add_offline_log_dir(log_dir, msg, exc)


def discard_cleaned_files(dir_path: str, base_offset: int) -> None:
    """Remove an uncommitted cleaned segment (``<base>.log/.index/.timeindex/.txnindex.cleaned``)."""
    for suffix in (files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
        try:
            os.unlink(files.file_path(dir_path, base_offset, suffix) + files.CLEANED_SUFFIX)
        except FileNotFoundError:
            pass


def _next_offset_of_log_file(path: str) -> int:
    """The offset after the last whole batch of a segment file (its base offset if it has none)."""
    base = files.offset_from_file_name(path)
    nxt = base
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            try:
                info = record_batch.batch_header(os.pread(fd, RECORD_BATCH_OVERHEAD, pos))
            except record_errors.CorruptRecordError:
                break
            if info.size <= LOG_OVERHEAD or pos + info.size > size:
                break
            nxt = info.next_offset
            pos += info.size
    return nxt


def _batch_marker(buf: "bytes | bytearray | memoryview", info: BatchInfo) -> Optional[EndTxnMarker]:
    """The COMMIT/ABORT marker of a control batch in ``buf``; None when it has none (cleaned, other type)."""
    if info.record_count <= 0:
        return None
    try:
        return parse_end_txn_marker(iter_stored_records(bytes(buf[info.position:info.position + info.size])))
    except Exception:
        return None
