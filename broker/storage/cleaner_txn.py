"""Transaction state while the log cleaner walks a log (Kafka's CleanedTransactionMetadata).

The cleaner removes the records of aborted transactions and, later, the markers of transactions whose
data is gone. Walking the log in offset order it tracks, per producer, the aborted transaction in progress
(from the transaction indexes: ``add_aborted_transactions``) and whether a committed transaction's batches
were seen since the producer's last marker:

- a data batch of an aborted transaction can be discarded (``on_batch_read`` returns True);
- an ABORT marker is kept, and its transaction written to the cleaned segment's transaction index, while
  batches of that transaction were still seen in this pass; otherwise it can be discarded;
- a COMMIT marker can be discarded when no batch of its transaction was seen in this pass;
- an empty control batch (already cleaned) can be discarded.

"Can be discarded" for a marker means: it gets a delete horizon (now + delete.retention.ms) the first time,
and goes once a later clean runs past that horizon (see cleaner_pass.py), so a consumer that read the
transaction's data before the clean still sees its marker.

Pure state; the cleaner pass feeds it batches in offset order. No I/O except ``cleaned_index.append``.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Iterable, Optional

from broker.protocol.records.batch_info import BatchInfo
from broker.protocol.records.control import ABORT, COMMIT

from .txn_index import AbortedTxn, TransactionIndex


class _AbortedTxnState:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: Optional[int] = None


class CleanedTransactionMetadata:
    """Ongoing aborted and committed transactions as the cleaner traverses the log."""

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # min-heap by first offset
        self._seq = itertools.count()
        #: where retained aborted transactions go (the cleaned segment's index); None while building the map
        self.cleaned_index: Optional[TransactionIndex] = None

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._aborted, (t.first_offset, next(self._seq), t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._aborted
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            if txn.producer_id not in self._ongoing_aborted:
                self._ongoing_aborted[txn.producer_id] = _AbortedTxnState(txn)

    def on_control_batch_read(self, info: BatchInfo, control_type: Optional[int]) -> bool:
        """A control batch (``control_type`` of its record, None when it has none); True: it may be discarded."""
        self._consume_aborted_up_to(info.last_offset)
        if control_type is None:
            return True  # an empty control batch was already cleaned
        pid = info.producer_id
        if control_type == ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                # batches of the transaction are being removed now: keep the marker and its index entry
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if control_type == COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, info: BatchInfo) -> bool:
        """A data batch; True when it belongs to an aborted transaction (its records can go)."""
        self._consume_aborted_up_to(info.last_offset)
        if not info.is_transactional:
            return False
        state = self._ongoing_aborted.get(info.producer_id)
        if state is not None:
            state.last_observed_batch_offset = info.last_offset
            return True
        self._ongoing_committed.add(info.producer_id)
        return False
