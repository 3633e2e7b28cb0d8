"""LeaderEpochFileCache: leader epoch -> first offset written in that epoch, with its checkpoint.

File ``leader-epoch-checkpoint`` in the partition directory (text, '\\n' line endings)::

    0            <- version
    2            <- number of entries
    0 0          <- "epoch start_offset", ascending in both
    3 1500

Durability: every change is written at once but not fsynced; :meth:`sync` makes it durable and the owning Log
calls it in its flush, before the recovery point moves (the entries of offsets past the recovery point are
rebuilt from the batches by recovery after a crash, and a stale entry past the log end is truncated at load).
This keeps fsyncs out of becoming leader of 10,000 partitions; Kafka 3.9 fsyncs on assign (KAFKA-16541) and
writes truncations asynchronously.

Thread-safety: changed under the owning Log's lock; the entry list is replaced, never changed in place, so
:meth:`end_offset_for`, :meth:`epoch_for_offset` and :attr:`latest_epoch` read one whole list from any thread
without the lock (a follower's fetch on the event loop checks its last fetched epoch with them).
"""
from __future__ import annotations

import bisect
import os

from .checkpoints import fsync_dir, fsync_file, read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
VERSION = 0


class LeaderEpochFileCache:
    """Epoch entries of one partition, kept in memory and flushed to the checkpoint on change."""

    def __init__(self, path: str, read: bool = True) -> None:
        """``read=False``: a new partition directory, nothing to read."""
        self.path = path
        #: written (or marked to be written) since the last sync
        self.unsynced = False
        #: changed in memory, not written yet
        self.unwritten = False
        self._entries: list[tuple[int, int]] = []
        if read and os.path.exists(path):
            self._entries = read_checkpoint(path, VERSION, lambda p: (int(p[0]), int(p[1])))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        entries = self._entries
        return entries[-1][0] if entries else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset``; entries at or after it are replaced."""
        if self._entries:  # first the common case, every leader append: the epoch is already the latest
            last_epoch, last_start = self._entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return
        if epoch < 0 or start_offset < 0:
            raise ValueError("invalid epoch entry (%d, %d)" % (epoch, start_offset))
        entries = list(self._entries)  # a new list: lock-free readers hold the old one
        while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start_offset):
            entries.pop()
        entries.append((epoch, start_offset))
        self._entries = entries
        self.flush()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which ``offset`` was written (None if before the first entry)."""
        entries = self._entries
        starts = [s for _, s in entries]
        i = bisect.bisect_right(starts, offset) - 1
        return entries[i][0] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= requested, first offset after it).

        The latest epoch ends at the LEO; an unknown epoch above all known gives (-1, -1); one
        below all known gives (requested_epoch, first known start offset).
        """
        entries = self._entries  # one list throughout (see Thread-safety)
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e for e, _ in entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = entries[hi][1]
        if hi == 0:
            return requested_epoch, higher_start
        return entries[hi - 1][0], higher_start

    def truncate_from_end(self, end_offset: int, write: bool = True) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to end_offset). ``write=False``
        (log load) leaves the file to the next write or sync (see :attr:`unwritten`)."""
        if end_offset >= 0 and self._entries and self._entries[-1][1] >= end_offset:
            self._entries = [e for e in self._entries if e[1] < end_offset]
            self.flush(write)

    def truncate_from_start(self, start_offset: int, write: bool = True) -> None:
        """Log start moved to ``start_offset``: drop older entries, the last of them re-based."""
        removed = [e for e in self._entries if e[1] <= start_offset]
        if not removed:
            return
        kept = [e for e in self._entries if e[1] > start_offset]
        entries = [(removed[-1][0], start_offset)] + kept
        if entries != self._entries:  # at load the first entry usually starts at the log start offset already
            self._entries = entries
            self.flush(write)

    def clear(self) -> None:
        self._entries = []
        self.flush()

    def flush(self, write: bool = True) -> None:
        """Write the checkpoint (durable at the next :meth:`sync`); ``write=False`` only marks it to be written
        (at load, a broker that last led a partition drops the epoch it began at the log end, as Kafka's
        LogLoader: writing that at once cost a rename per partition at every start)."""
        if write:
            write_checkpoint(self.path, VERSION, ("%d %d" % e for e in self._entries), sync=False)
            self.unwritten = False
        else:
            self.unwritten = True
        self.unsynced = True

    def write_pending(self) -> None:
        """Write the checkpoint if a change was only marked (see :meth:`flush`)."""
        if self.unwritten:
            self.flush()

    def sync(self) -> None:
        """Write a marked change, then fsync the checkpoint and its directory if written since the last sync."""
        self.write_pending()
        if self.unsynced:
            self.unsynced = False
            fsync_file(self.path)
            fsync_dir(os.path.dirname(self.path))
