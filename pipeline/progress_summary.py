"""One streaming micro-batch's progress as a line: records in and out, lag, watermark, late rows dropped.

:func:`summarize` turns one StreamingQueryProgress (its JSON) into a :class:`BatchProgress`; lag is what the
Kafka source reports: latest offset minus the batch's end offset, summed over partitions. Kept apart from
pipeline/progress.py (Spark's StreamingQueryListener) so that it imports without pyspark: the unit tests use it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict


@dataclass(frozen=True)
class BatchProgress:
    query: str
    batch_id: int
    input_rows: int
    output_rows: int
    lag: int
    watermark: str
    dropped_by_watermark: int
    duration_ms: int
    end_offsets: Dict[str, Dict[str, int]]


def _offsets(o: Any) -> Dict[str, Dict[str, int]]:
    if o is None:
        return {}
    if isinstance(o, str):
        o = json.loads(o)
    return {t: {p: int(v) for p, v in parts.items()} for t, parts in o.items()}


def summarize(progress: Dict[str, Any]) -> BatchProgress:
    lag = 0
    ends: Dict[str, Dict[str, int]] = {}
    for s in progress.get("sources", []):
        end, latest = _offsets(s.get("endOffset")), _offsets(s.get("latestOffset"))
        for t, parts in latest.items():
            for p, off in parts.items():
                lag += max(0, off - end.get(t, {}).get(p, 0))
        for t, parts in end.items():
            ends.setdefault(t, {}).update(parts)
    ops = progress.get("stateOperators", [])
    dropped = sum(int(op.get("numRowsDroppedByWatermark", 0)) for op in ops)
    out = int((progress.get("sink") or {}).get("numOutputRows", -1))
    if out < 0 and ops:
        # the file sink reports no row count; in append mode an aggregation emits exactly the rows it evicts
        out = int(ops[-1].get("numRowsRemoved", -1))
    return BatchProgress(progress.get("name") or progress.get("id", "?"), int(progress.get("batchId", -1)),
                         int(progress.get("numInputRows", 0)), out, lag,
                         (progress.get("eventTime") or {}).get("watermark", "-"), dropped,
                         int(progress.get("batchDuration", 0)), ends)


def format_line(b: BatchProgress) -> str:
    out = str(b.output_rows) if b.output_rows >= 0 else "?"
    return (f"[{b.query}] batch {b.batch_id}: in {b.input_rows} records, out {out} rows, lag {b.lag} offsets, "
            f"watermark {b.watermark}, late rows dropped {b.dropped_by_watermark}, {b.duration_ms} ms")
