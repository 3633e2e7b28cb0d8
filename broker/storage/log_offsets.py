"""LogOffsets: the offsets a Log's owner publishes after each change, read by any thread without the Log's lock.

A Log's segments, LEO and producer state change only under its lock, on the thread that owns the partition's
writes (its I/O worker; the scheduler and the cleaner take the lock too). At the end of every change it makes
under that lock (append, truncation, roll, retention, DeleteRecords, load) the owner replaces ``Log.offsets`` with
a new LogOffsets: one attribute assignment, atomic under the GIL, so a reader (the event loop above all) sees one
whole publication or the next, never half of one, and never waits for a disk operation.

The high watermark is not in it: the leader's HW is decided on the event loop (Kafka's Partition owns that
decision) and kept by the Log apart (see Log.maybe_increment_high_watermark). What the LSO needs of the producer
state is: the first offset of the oldest open transaction, and the transactions whose marker is written but was
not yet below the HW when this was published (Kafka's "unreplicated" transactions) as (first offset, marker
offset) pairs. The LSO for any HW then follows without the producer state (:meth:`LogOffsets.last_stable_offset`),
so a HW set on the loop moves the LSO at once; the owner drops those transactions from its producer state at
its next change (ProducerStateManager.on_high_watermark_updated), which the LSO does not wait for.

:class:`LogView` is what a reader of the data needs with them, published at the same moment (``Log.view``, one
reference): the segments and their base offsets, the active segment's committed size, and the layout generation
that says whether a truncation, a retention deletion or a cleaner swap started since (``Log.read``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .segment import LogSegment

#: no open transaction
NO_TXN = -1


class LogOffsets(NamedTuple):
    """One publication of a Log's offsets (immutable). ``unreplicated_txns`` is sorted by first offset."""

    log_start_offset: int
    #: the first offset held on local disk: the log start offset unless remote storage holds the offsets below
    local_log_start_offset: int
    log_end_offset: int
    #: first offset of the oldest open transaction, NO_TXN when none is open
    first_open_txn_offset: int = NO_TXN
    #: (first offset, marker offset) of each completed transaction whose marker may not be below the HW yet
    unreplicated_txns: tuple[tuple[int, int], ...] = ()

    def first_unstable_offset(self, high_watermark: int) -> int:
        """The first offset of the oldest transaction open, or completed with its marker not below
        ``high_watermark``; NO_TXN when there is none (Kafka's firstUnstableOffset)."""
        first = self.first_open_txn_offset
        for txn_first, marker in self.unreplicated_txns:  # sorted: the first one still unreplicated is the oldest
            if marker >= high_watermark:
                if first < 0 or txn_first < first:
                    first = txn_first
                break
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO at ``high_watermark``: the first unstable offset, raised to the log start offset, capped by the HW
        (the HW itself when no transaction is unstable)."""
        if self.first_open_txn_offset < 0 and not self.unreplicated_txns:
            return high_watermark
        first = self.first_unstable_offset(high_watermark)
        if first < 0:
            return high_watermark
        if first < self.log_start_offset:
            first = self.log_start_offset
        return first if first < high_watermark else high_watermark


class LogView(NamedTuple):
    """One publication of what a lock-free read needs (immutable; the segments themselves are shared).

    A closed segment's bytes never change while it is in the list; the active one's only grow, and a reader reads
    no further than ``active_size``, the bytes whole batches filled when this was published (its last batch ends at
    ``offsets.log_end_offset``), so it never sees a batch being written. Anything else that changes a segment
    (truncation, deletion, a cleaner swap, close) first raises the Log's layout generation above ``layout``: a read
    that sees it raised after reading does not count (see Log.read)."""

    offsets: LogOffsets
    segments: "tuple[LogSegment, ...]"
    bases: tuple[int, ...]
    #: bytes of the last segment holding whole batches below ``offsets.log_end_offset``
    active_size: int
    #: the Log's layout generation when this was published
    layout: int


__all__ = ["LogOffsets", "LogView", "NO_TXN"]
