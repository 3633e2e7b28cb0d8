"""Partitions hosted by this broker: leadership, append, read, offsets (Kafka's ReplicaManager).

The API handlers call in here with plain values (topic-partitions, record buffers, offsets);
this module calls the storage layer on a worker thread, so no disk access runs on the event
loop. Partition state carries what replication needs (leader epoch, replicas, ISR, LEO,
high watermark); with one replica in the ISR the high watermark follows the log end offset.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from broker.errors import ErrorCode
from broker.replica.errors import error_code_for
from broker.replica.io_workers import IoWorkers
from broker.replica.purgatory import FetchPurgatory

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]


@dataclass
class Partition:
    """One hosted partition and its replication state."""

    topic: str
    partition: int
    topic_id: Any
    log: Any  # broker.storage.log.Log
    leader_id: int = -1
    leader_epoch: int = 0
    replicas: Tuple[int, ...] = ()
    isr: Tuple[int, ...] = ()
    min_insync_replicas: int = 1

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class ProduceResult:
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: List[Tuple[int, Optional[str]]] = field(default_factory=list)
    error_message: Optional[str] = None


@dataclass
class ReadResult:
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # FileSlice | bytes | None
    size: int = 0
    log_end_offset: int = -1


class ReplicaManager:
    """Owns :class:`Partition` objects and the thread pool that touches their logs."""

    def __init__(self, broker_id: int, log_manager: Any, io_threads: int = 4) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: Dict[TopicPartition, Partition] = {}
        self.purgatory = FetchPurgatory()
        self._workers = IoWorkers(io_threads)

    # --- threading helper ----------------------------------------------------------
    async def run_io(self, fn: Callable[..., Any], *args: Any, key: Any = None) -> Any:
        """Run blocking (disk) work on a worker thread; same ``key``, same thread."""
        return await self._workers.submit(fn, *args, key=key)

    def shutdown(self) -> None:
        self._workers.shutdown()

    # --- leadership ----------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Optional[Partition]:
        return self.partitions.get(tp)

    async def make_leader(self, topic: str, partition: int, topic_id: Any, leader_epoch: int,
                          replicas: Iterable[int], isr: Iterable[int], log_config: Any,
                          min_insync_replicas: int = 1) -> Partition:
        """Host ``topic-partition`` as its leader (creating the log on first use)."""
        tp = (topic, partition)
        p = self.partitions.get(tp)
        if p is None:
            plog = await self.run_io(self.log_manager.get_or_create_log, topic, partition, log_config, topic_id)
            p = Partition(topic, partition, topic_id, plog)
            self.partitions[tp] = p
        p.leader_id = self.broker_id
        p.replicas = tuple(replicas)
        p.isr = tuple(isr)
        p.min_insync_replicas = min_insync_replicas
        if leader_epoch != p.leader_epoch or p.log.high_watermark < p.log.log_end_offset:
            p.leader_epoch = leader_epoch
            await self.run_io(self._on_become_leader, p)
        return p

    def _on_become_leader(self, p: Partition) -> None:
        assign = getattr(p.log, "assign_epoch_start_offset", None)
        if assign is not None:
            assign(p.leader_epoch, p.log.log_end_offset)
        self._maybe_advance_hw(p)

    def _maybe_advance_hw(self, p: Partition) -> None:
        # With only this broker in the ISR, everything written is replicated.
        if p.isr == (self.broker_id,) or len(p.isr) <= 1:
            if p.log.high_watermark != p.log.log_end_offset:
                p.log.update_high_watermark(p.log.log_end_offset)

    async def stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        """Stop hosting ``topic-partition``; its log is deleted or stays open in the log manager."""
        self.partitions.pop((topic, partition), None)
        if delete:
            await self.run_io(self.log_manager.delete_log, topic, partition)
        self.purgatory.check_and_complete((topic, partition))

    def update_config(self, topic: str, log_config: Any) -> None:
        """Apply a topic's new effective config (AlterConfigs, dynamic broker defaults) to its logs."""
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(log_config)

    # --- produce -------------------------------------------------------------------
    async def append_records(self, acks: int, entries: Dict[TopicPartition, Any]) -> Dict[TopicPartition, ProduceResult]:
        """Append each partition's (validated-here) record buffer as leader; one worker-thread hop."""
        results: Dict[TopicPartition, ProduceResult] = {}
        work: List[Tuple[Partition, Any]] = []
        for tp, buf in entries.items():
            p = self.partitions.get(tp)
            if p is None:
                results[tp] = ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif p.leader_id != self.broker_id:
                results[tp] = ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif acks == -1 and len(p.isr) < p.min_insync_replicas:
                results[tp] = ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS)
            else:
                work.append((p, buf))
        if work:
            done = await self.run_io(self._append_all, work, key=work[0][0].tp if len(work) == 1 else None)
            results.update(done)
            for p, _ in work:
                if results[p.tp].error_code == 0:
                    self.purgatory.check_and_complete(p.tp)
        return results

    def _append_all(self, work: List[Tuple[Partition, Any]]) -> Dict[TopicPartition, ProduceResult]:
        out: Dict[TopicPartition, ProduceResult] = {}
        for p, buf in work:
            try:
                info = p.log.append_as_leader(buf, p.leader_epoch)
                self._maybe_advance_hw(p)
                out[p.tp] = ProduceResult(0, info.first_offset, info.log_append_time, info.log_start_offset)
            except Exception as exc:  # storage errors become per-partition codes
                code = error_code_for(exc)
                if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("Unexpected error appending to %s-%d", p.topic, p.partition)
                else:
                    log.debug("Append to %s-%d rejected: %s", p.topic, p.partition, exc)
                record_errors = list(getattr(exc, "record_errors", []) or [])
                out[p.tp] = ProduceResult(code, -1, -1, p.log.log_start_offset, record_errors, str(exc) or None)
        return out

    # --- fetch ---------------------------------------------------------------------
    def _read_all(self, reads: List[Tuple[TopicPartition, int, int]], max_bytes: int, isolation_level: int,
                  fetch_only_from_leader: bool = True) -> Dict[TopicPartition, ReadResult]:
        out: Dict[TopicPartition, ReadResult] = {}
        budget = max_bytes
        first = True
        for tp, offset, partition_max in reads:
            p = self.partitions.get(tp)
            if p is None:
                out[tp] = ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if fetch_only_from_leader and p.leader_id != self.broker_id:
                out[tp] = ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            plog = p.log
            hw = plog.high_watermark
            lso = hw  # no transactions yet: last stable offset == high watermark
            upper = lso if isolation_level == 1 else hw
            res = ReadResult(0, hw, lso, plog.log_start_offset, None, 0, plog.log_end_offset)
            limit = min(partition_max, budget)
            try:
                if offset < upper or offset > plog.log_end_offset or offset < plog.log_start_offset:
                    info = plog.read(offset, max(limit, 0), upper, first or limit > 0)
                    recs = getattr(info, "records", info)
                    if recs is not None and len(recs) > 0:
                        res.records = recs
                        res.size = len(recs)
                        budget -= res.size
                        first = False
            except Exception as exc:
                res.error_code = error_code_for(exc)
                if res.error_code == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("Unexpected error reading %s-%d at %d", tp[0], tp[1], offset)
            out[tp] = res
        return out

    async def fetch_messages(self, reads: List[Tuple[TopicPartition, int, int]], max_bytes: int, min_bytes: int,
                             max_wait_ms: int, isolation_level: int) -> Dict[TopicPartition, ReadResult]:
        """Read, and long-poll until ``min_bytes`` are available or ``max_wait_ms`` passes."""
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000.0
        while True:
            # Watch before reading so an append between the read and the wait is not missed.
            waiter = self.purgatory.watch([tp for tp, _, _ in reads]) if max_wait_ms > 0 else None
            results = await self.run_io(self._read_all, reads, max_bytes, isolation_level)
            total = sum(r.size for r in results.values())
            errors = any(r.error_code for r in results.values())
            remaining = deadline - time.monotonic()
            if waiter is None or total >= min_bytes or errors or remaining <= 0 or not reads:
                if waiter is not None:
                    waiter.cancel()
                return results
            try:
                await asyncio.wait_for(waiter, remaining)
            except asyncio.TimeoutError:
                pass
            if time.monotonic() >= deadline:
                return await self.run_io(self._read_all, reads, max_bytes, isolation_level)

    # --- offsets -------------------------------------------------------------------
    async def list_offset(self, tp: TopicPartition, timestamp: int, isolation_level: int
                          ) -> Tuple[int, int, int, int]:
        """(error_code, timestamp, offset, leader_epoch) for ListOffsets."""
        p = self.partitions.get(tp)
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        if p.leader_id != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        if timestamp == -1:  # latest: what a consumer can read
            return 0, -1, p.log.high_watermark, p.leader_epoch
        try:
            found = await self.run_io(p.log.fetch_offset_by_timestamp, timestamp)
        except Exception as exc:
            return error_code_for(exc), -1, -1, -1
        if found is None:
            return 0, -1, -1, -1
        offset, ts, epoch = found[0], found[1], found[2]
        if timestamp >= 0 and offset >= p.log.high_watermark:
            return 0, -1, -1, -1
        return 0, ts, offset, epoch if epoch is not None else -1

    async def delete_records(self, tp: TopicPartition, offset: int) -> Tuple[int, int]:
        """(error_code, low_watermark) for DeleteRecords; offset -1 means the high watermark."""
        p = self.partitions.get(tp)
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if p.leader_id != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        target = p.log.high_watermark if offset == -1 else offset
        if target < 0 or target > p.log.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        try:
            await self.run_io(p.log.delete_records_before, target)
        except Exception as exc:
            return error_code_for(exc), -1
        return 0, p.log.log_start_offset

    async def end_offset_for_epoch(self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
                                   ) -> Tuple[int, int, int]:
        """(error_code, epoch, end_offset) for OffsetForLeaderEpoch."""
        p = self.partitions.get(tp)
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if p.leader_id != self.broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        if current_leader_epoch >= 0:
            if current_leader_epoch < p.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH, -1, -1
            if current_leader_epoch > p.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1
        epoch, end = await self.run_io(p.log.end_offset_for_epoch, leader_epoch)
        return 0, epoch, end

    def check_leader_epoch(self, p: Partition, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH as Kafka validates a client's epoch (-1 = not sent)."""
        if current_leader_epoch < 0 or current_leader_epoch == p.leader_epoch:
            return 0
        return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < p.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
