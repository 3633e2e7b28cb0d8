"""Moving a replica between this broker's log dirs while it serves (Kafka's ReplicaAlterLogDirsManager/Thread).

AlterReplicaLogDirs creates the partition's future log in the target dir (LogManager.create_future_log);
one mover task per moving partition then copies the current log into it, as Kafka's
ReplicaAlterLogDirsThread fetches from the local log, one step at a time. Each step runs on the
partition's I/O worker, the thread that also runs every append and truncation of that partition, so
within a step the current log cannot change:

- the future follows the current log's truncations (``Log.pop_truncation_point``) and log start offset;
- up to ``replica.fetch.max.bytes`` of whole batches are read from the current log at the future's end
  and appended there with their offsets and epochs (``append_as_follower``); the future's HW follows;
- when the future has every offset, the swap happens in the same step
  (``LogManager.replace_current_with_future``): the partition's Log object continues from the future's
  files, renamed to the real dir name, and the old dir is deleted. No append can fall between the last
  copy and the swap.

``replica.alter.log.dirs.io.max.bytes.per.second`` (the alter-log-dirs quota) throttles the copy. A
storage error stops the move (the future log stays, as in Kafka, until the request is repeated or the
broker restarts, which resumes it).

Loop affinity: event loop; disk work on the ReplicaManager's I/O workers.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Dict, Iterable, Set, Tuple

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager
    from broker.replica.partition import Partition
    from broker.storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]

COPIED, SWAPPED, GONE = "copied", "swapped", "gone"
#: how long to wait before looking at an exceeded alter-log-dirs quota again
THROTTLE_POLL_MS = 100


def move_step(log_manager: LogManager, partition: Partition, max_bytes: int) -> Tuple[str, int]:
    """Worker thread (the partition's): one copy step, and the swap once caught up. (outcome, bytes copied)."""
    from broker.storage.errors import UnexpectedAppendOffsetError
    tp = partition.tp
    cur, fut = partition.log, partition.future_log
    if partition.deleted or cur is None or fut is None or log_manager.get_future_log(tp) is not fut:
        return GONE, 0
    truncated = cur.pop_truncation_point()
    if truncated is not None:
        if truncated <= cur.log_start_offset:
            if fut.log_end_offset != cur.log_start_offset or fut.log_start_offset != cur.log_start_offset:
                fut.truncate_fully_and_start_at(cur.log_start_offset)
        elif truncated < fut.log_end_offset:
            fut.truncate_to(truncated)
    if cur.log_start_offset > fut.log_end_offset:
        fut.truncate_fully_and_start_at(cur.log_start_offset)
    elif fut.log_end_offset > cur.log_end_offset:
        fut.truncate_to(cur.log_end_offset)
    copied = 0
    if fut.log_end_offset < cur.log_end_offset:
        info = cur.read(fut.log_end_offset, max_bytes, None, True)
        if info.records is not None:
            buf = info.records.read()
            try:
                fut.append_as_follower(buf)
            except UnexpectedAppendOffsetError as e:
                # The current log's batches changed shape under the copy (compaction): recopy from that batch.
                fut.truncate_to(e.first_offset)
                fut.append_as_follower(buf)
            copied = len(buf)
    fut.update_high_watermark(cur.high_watermark)
    if cur.log_start_offset > fut.log_start_offset and cur.log_start_offset <= fut.high_watermark:
        fut.delete_records_before(cur.log_start_offset)
    if fut.log_end_offset == cur.log_end_offset:
        fut.flush()  # most of the fsync before the swap takes the log's lock
        log_manager.replace_current_with_future(tp)
        partition.future_log = None
        return SWAPPED, copied
    return COPIED, copied


class ReplicaAlterLogDirsManager:
    """One mover task per partition with a future log."""

    def __init__(self, replica_manager: "ReplicaManager") -> None:
        self.rm = replica_manager
        self._tasks: Dict[TopicPartition, "asyncio.Task[None]"] = {}
        self._stop: Dict[TopicPartition, asyncio.Event] = {}
        #: partitions whose move stopped on an error (the future log stays until a new request)
        self.failed: Set[TopicPartition] = set()

    def is_moving(self, tp: TopicPartition) -> bool:
        t = self._tasks.get(tp)
        return t is not None and not t.done()

    def add(self, tp: TopicPartition) -> None:
        """Start (or keep) moving ``tp``'s data into its future log."""
        if self.is_moving(tp):
            return
        self.failed.discard(tp)
        self._stop[tp] = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run(tp), name="ReplicaAlterLogDirs-%s-%d" % tp)
        self._tasks[tp] = task
        task.add_done_callback(functools.partial(self._done, tp))

    def _done(self, tp: TopicPartition, task: "asyncio.Task[None]") -> None:
        if self._tasks.get(tp) is task:
            del self._tasks[tp]
            self._stop.pop(tp, None)

    async def remove(self, tps: Iterable[TopicPartition]) -> None:
        """Stop moving ``tps``; when this returns no step of theirs runs any more."""
        waits = []
        for tp in tps:
            self.failed.discard(tp)
            task = self._tasks.get(tp)
            if task is None:
                continue
            ev = self._stop.get(tp)
            if ev is not None:
                ev.set()
            waits.append(task)
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)

    async def shutdown(self) -> None:
        await self.remove(list(self._tasks))

    async def _run(self, tp: TopicPartition) -> None:
        rm = self.rm
        stop = self._stop[tp]
        quota = rm.quotas.alter_log_dirs
        total = 0
        while not stop.is_set() and not rm.is_shutting_down:
            p = rm.partitions.get(tp)
            if p is None or p.future_log is None or p.log is None:
                return
            if quota.is_quota_exceeded():
                try:
                    await rm.time.wait_for_ms(stop.wait(), THROTTLE_POLL_MS)
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                outcome, n = await rm.run_io(move_step, rm.log_manager, p, rm.config.replica_fetch_max_bytes, key=tp)
            except Exception as exc:
                log.error("Moving %s-%d between log dirs failed: %s", tp[0], tp[1], exc,
                          exc_info=type(exc).__name__ != "KafkaStorageError")
                self.failed.add(tp)
                return
            total += n
            quota.record(n)
            if outcome == SWAPPED:
                log.info("Moved %s-%d to %s (%d bytes copied)", tp[0], tp[1], rm.log_manager.log_dir_of(tp), total)
                return
            if outcome == GONE:
                return
            await rm.time.sleep_ms(0 if n else 10)


__all__ = ["ReplicaAlterLogDirsManager", "move_step"]
