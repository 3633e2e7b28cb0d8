"""Real rolled segments for the tiered-storage tests: a partition written with the project's storage Log API (in a
temp dir) and, for each rolled segment, the LogSegmentData and RemoteLogSegmentMetadata a RemoteLogManager would hand
to a RemoteStorageManager (segment, offset/time/transaction indexes, the producer snapshot at the segment's end and
the leader-epoch checkpoint up to it, in Kafka's checkpoint text format)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

from broker.protocol.records.builder import build_batch
from broker.storage import files
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.storage.remote.metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition, random_uuid
from broker.storage.remote.storage_manager import LogSegmentData
from broker.util.clock import ManualClock

BASE_TS = 1_700_000_000_000


@dataclass
class RolledSegment:
    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData


def leader_epoch_checkpoint(entries: Sequence[Tuple[int, int]]) -> bytes:
    """Kafka's leader-epoch checkpoint text: version 0, entry count, then ``<epoch> <start offset>`` lines."""
    return ("0\n%d\n" % len(entries) + "".join(f"{e} {o}\n" for e, o in entries)).encode("ascii")


def write_log(directory: Path, *, batches: int, records_per_batch: int = 10, value_size: int = 100,
              segment_bytes: int = 64 * 1024, epochs: Sequence[int] = (0,), seed: int = 7) -> Log:
    """A partition log with ``batches`` batches spread over ``epochs`` (equal shares), rolled by size."""
    import random

    rnd = random.Random(seed)
    log = Log.open(str(directory), LogConfig(segment_bytes=segment_bytes), clock=ManualClock(BASE_TS))
    per_epoch = max(1, batches // len(epochs))
    for i in range(batches):
        epoch = epochs[min(i // per_epoch, len(epochs) - 1)]
        recs = [(f"k{i}-{j}".encode(), rnd.randbytes(value_size), [], BASE_TS + i * records_per_batch + j)
                for j in range(records_per_batch)]
        log.append_as_leader(bytearray(build_batch(recs)), epoch)  # type: ignore[arg-type]
    log.roll()
    log.flush()
    return log


def rolled_segments(log: Log, tip: TopicIdPartition, broker_id: int = 0) -> List[RolledSegment]:
    """Every segment but the active one, as (metadata, data)."""
    out = []
    epochs = log.leader_epoch_cache.entries
    segs = log.segments
    for seg, nxt in zip(segs, segs[1:]):
        end = nxt.base_offset - 1
        seg_epochs = {}
        for e, start in epochs:
            if start <= seg.base_offset:
                seg_epochs = {e: seg.base_offset}
            elif start <= end:
                seg_epochs[e] = start
        txn = Path(files.file_path(log.dir, seg.base_offset, files.TXN_INDEX_SUFFIX))
        data = LogSegmentData(
            log_segment=Path(seg.path),
            offset_index=Path(files.file_path(log.dir, seg.base_offset, files.INDEX_SUFFIX)),
            time_index=Path(files.file_path(log.dir, seg.base_offset, files.TIME_INDEX_SUFFIX)),
            transaction_index=txn if txn.exists() else None,
            producer_snapshot_index=Path(files.file_path(log.dir, nxt.base_offset, files.PRODUCER_SNAPSHOT_SUFFIX)),
            leader_epoch_index=leader_epoch_checkpoint([(e, o) for e, o in epochs if o <= end]))
        size = os.path.getsize(seg.path)
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, random_uuid()), seg.base_offset, end,
                                      BASE_TS + end, broker_id, BASE_TS, size, seg_epochs)
        out.append(RolledSegment(md, data))
    return out


__all__ = ["write_log", "rolled_segments", "leader_epoch_checkpoint", "RolledSegment"]
