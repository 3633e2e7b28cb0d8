"""Shared helpers of the log cleaner tests: filling a compacted log and reading it back."""
from __future__ import annotations

import os
from typing import Optional

from broker.accel import record_batch
from broker.protocol.records.batch_info import BatchInfo
from broker.protocol.records.builder import build_batch
from broker.storage.cleaner_batch import iter_stored_records
from broker.storage.config import LogConfig
from broker.storage.log import Log

T0 = 1_700_000_000_000


def compact_config(**kw: object) -> LogConfig:
    base = dict(cleanup_policy=("compact",), segment_bytes=2048, index_interval_bytes=256, file_delete_delay_ms=0,
                min_cleanable_dirty_ratio=0.01)
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def append(log: Log, records: list[tuple[bytes, Optional[bytes]]], ts: int = T0, **kw: object) -> int:
    """Append one batch of (key, value) records; returns its base offset. The HW follows the LEO."""
    info = log.append_as_leader(bytearray(build_batch([(k, v, [], ts) for k, v in records],
                                                      **kw)), 0)  # type: ignore[arg-type]
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def read_batches(log: Log) -> list[tuple[BatchInfo, list]]:
    """Every batch from the log start to the LEO with its records."""
    out = []
    for seg in list(log.segments):
        data = bytearray(os.pread(seg.log_file.fileno(), seg.size, 0))
        infos, end = record_batch.scan_batches(data, 0, -1, True)
        assert end == len(data)
        for info in infos:
            out.append((info, iter_stored_records(bytes(data[info.position:info.position + info.size]))))
    return out


def read_records(log: Log) -> list[tuple[int, Optional[bytes], Optional[bytes]]]:
    return [(r.offset, r.key, r.value) for _, recs in read_batches(log) for r in recs]


def latest_by_key(records: list[tuple[int, Optional[bytes], Optional[bytes]]]) -> dict:
    out: dict = {}
    for _, k, v in records:
        out[k] = v
    return out
