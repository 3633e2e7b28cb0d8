"""Helpers of the transaction tests: transactional batches, markers, and a read_committed consumer.

``read_committed`` reads a log as Kafka's consumer does at isolation_level=read_committed (its CompletedFetch
logic): per fetch, the aborted transactions returned with the data are consumed in first-offset order; a
transactional batch of a producer with an aborted transaction in progress is skipped, the ABORT marker ends
it, control batches are never returned.
"""
from __future__ import annotations

import heapq
from typing import Optional

from broker.accel import record_batch
from broker.protocol.records.builder import build_batch
from broker.protocol.records.control import ABORT, control_type, end_txn_marker_batch
from broker.storage.cleaner_batch import iter_stored_records
from broker.storage.log import LogAppendInfo, Log

TS = 1_700_000_000_000


def txn_batch(pid: int, seq: int, n: int = 1, epoch: int = 0, key: bytes = b"k", value: bytes = b"v",
              ts: int = TS) -> bytearray:
    return bytearray(build_batch([(key, value + b"%d" % i, [], ts + i) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def plain_batch(n: int = 1, key: bytes = b"p", value: bytes = b"x", ts: int = TS) -> bytearray:
    return bytearray(build_batch([(key, value + b"%d" % i, [], ts + i) for i in range(n)]))


def marker(pid: int, committed: bool, epoch: int = 0, coordinator_epoch: int = 0, ts: int = TS) -> bytearray:
    return bytearray(end_txn_marker_batch(pid, epoch, coordinator_epoch, committed, ts))


def write_marker(log: Log, pid: int, committed: bool, epoch: int = 0, coordinator_epoch: int = 0,
                 leader_epoch: int = 0) -> LogAppendInfo:
    """A marker appended as WriteTxnMarkers does: as leader, with the coordinator's origin."""
    return log.append_as_leader(marker(pid, committed, epoch, coordinator_epoch), leader_epoch, is_from_client=False)


def read_committed(log: Log, max_bytes: int = 1 << 20, start: Optional[int] = None
                   ) -> list[tuple[int, Optional[bytes], Optional[bytes]]]:
    """(offset, key, value) of every record a read_committed consumer gets from ``start`` (the log start) on."""
    out = []
    offset = log.log_start_offset if start is None else start
    while True:
        lso = log.last_stable_offset
        if offset >= lso:
            return out
        info = log.read(offset, max_bytes, lso, True, include_aborted_txns=True)
        if info.records is None:
            return out
        assert info.aborted_transactions is not None
        heap = [(t.first_offset, t.producer_id) for t in info.aborted_transactions]
        heapq.heapify(heap)
        aborted_pids: set[int] = set()
        data = bytearray(info.records.read())
        infos, end = record_batch.scan_batches(data, 0, -1, True)
        assert end == len(data) and infos
        for b in infos:
            recs = iter_stored_records(bytes(data[b.position:b.position + b.size]))
            if b.producer_id >= 0:
                while heap and heap[0][0] <= b.last_offset:
                    aborted_pids.add(heapq.heappop(heap)[1])
                if b.is_control:
                    if recs and control_type(recs[0].key) == ABORT:
                        aborted_pids.discard(b.producer_id)
                elif b.is_transactional and b.producer_id in aborted_pids:
                    continue
            if b.is_control:
                continue
            out.extend((r.offset, r.key, r.value) for r in recs if r.offset >= offset)
        offset = infos[-1].next_offset


def crash(log: Log) -> None:
    """Close the files without the clean-shutdown work (no snapshot at the LEO, nothing flushed)."""
    for seg in log.segments:
        seg.close_handlers()
    log._closed = True
