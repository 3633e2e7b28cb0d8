"""Reads a streaming query's checkpoint: Spark's offset log (``offsets/<batch>``) and commit log (``commits/<batch>``).

An offset-log entry is written before a micro-batch runs (line 1 ``v1``, line 2 the batch metadata with
``batchWatermarkMs``, then one line per source: the Kafka end offsets ``{"topic": {"partition": offset}}``); the
commit-log entry after its sink finished. A batch with offsets but no commit is replayed on restart. Used by the
runner (where a restarted query resumes) and by the tests (what a killed query had committed).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

TopicPartitionOffsets = Dict[Tuple[str, int], int]


@dataclass(frozen=True)
class BatchOffsets:
    batch_id: int
    watermark_ms: int
    timestamp_ms: int
    #: end offsets of the batch, over every Kafka source of the query
    end_offsets: TopicPartitionOffsets


def _ids(d: Path) -> List[int]:
    if not d.is_dir():
        return []
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit())


def offset_batches(checkpoint: Path) -> List[int]:
    return _ids(Path(checkpoint) / "offsets")


def committed_batches(checkpoint: Path) -> List[int]:
    return _ids(Path(checkpoint) / "commits")


def read_offsets(checkpoint: Path, batch_id: int) -> BatchOffsets:
    lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
    meta = json.loads(lines[1])
    ends: TopicPartitionOffsets = {}
    for line in lines[2:]:
        if not line.strip().startswith("{"):
            continue  # "-": a source without offsets yet
        for topic, parts in json.loads(line).items():
            for p, off in parts.items():
                ends[(topic, int(p))] = int(off)
    return BatchOffsets(batch_id, int(meta.get("batchWatermarkMs", 0)), int(meta.get("batchTimestampMs", 0)), ends)


def last_committed(checkpoint: Path) -> Optional[BatchOffsets]:
    """The offsets of the last committed batch (None before the first commit)."""
    ids = committed_batches(checkpoint)
    return read_offsets(checkpoint, ids[-1]) if ids else None


def uncommitted(checkpoint: Path) -> Optional[BatchOffsets]:
    """The planned batch a restart will replay, if any."""
    planned, done = offset_batches(checkpoint), set(committed_batches(checkpoint))
    if planned and planned[-1] not in done:
        return read_offsets(checkpoint, planned[-1])
    return None
