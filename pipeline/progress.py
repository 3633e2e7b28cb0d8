"""Per-micro-batch progress of the streaming queries: records in and out, lag, watermark, late rows dropped.

:func:`summarize` turns one StreamingQueryProgress (its JSON) into a :class:`BatchProgress`; lag is what the
Kafka source reports: latest offset minus the batch's end offset, summed over partitions. :class:`ProgressPrinter`
is a StreamingQueryListener that prints one line per batch and keeps totals per query for the final summary.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from pyspark.sql.streaming import StreamingQueryListener

from pipeline.progress_summary import BatchProgress, format_line, summarize


@dataclass
class QueryTotals:
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    dropped_by_watermark: int = 0
    last: Optional[BatchProgress] = None


class ProgressPrinter(StreamingQueryListener):
    """Prints each batch's progress with ``emit`` and keeps :class:`QueryTotals` per query name."""

    def __init__(self, emit: Callable[[str], None] = print, quiet_idle: bool = True) -> None:
        self.emit = emit
        self.quiet_idle = quiet_idle
        self.totals: Dict[str, QueryTotals] = {}
        self.failures: List[str] = []
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        self.emit(f"[{event.name}] started (id {event.id}, run {event.runId})")

    def onQueryProgress(self, event: Any) -> None:
        b = summarize(json.loads(event.progress.json))
        with self._lock:
            t = self.totals.setdefault(b.query, QueryTotals())
            t.batches += 1
            t.input_rows += b.input_rows
            t.output_rows += max(0, b.output_rows)
            t.dropped_by_watermark += b.dropped_by_watermark
            t.last = b
        if not (self.quiet_idle and b.input_rows == 0 and b.output_rows <= 0):
            self.emit(format_line(b))

    def drain(self, queries: Sequence[Any], timeout_s: float = 10.0) -> None:
        """Wait until every query's last progress (set synchronously by Spark) reached this listener too: events
        come through Spark's listener bus, after the batch's commit."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pending = False
            for q in queries:
                last = q.lastProgress
                if last is None:
                    continue
                seen = self.totals.get(q.name)
                if seen is None or seen.last is None or seen.last.batch_id < int(last.batchId):
                    pending = True
            if not pending:
                return
            time.sleep(0.05)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            self.failures.append(str(event.exception))
            self.emit(f"[query {event.id}] FAILED: {str(event.exception).splitlines()[0]}")
        else:
            self.emit(f"[query {event.id}] stopped")
