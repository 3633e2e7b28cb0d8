"""AlterReplicaLogDirs in the replica layer: moving a partition between log dirs while it takes appends, Kafka's
errors, replicas created later in the requested dir, cancelling, changing the destination, resuming after a
restart, following truncations of the current log, and DescribeLogDirs' future replicas."""
from __future__ import annotations

import asyncio
import os
from typing import Callable
from types import SimpleNamespace

from broker.api.describe_log_dirs import _collect
from broker.errors import ErrorCode
from broker.replica.alter_log_dirs import COPIED, SWAPPED, move_step
from broker.replica.config import ReplicaConfig
from broker.replica.manager import ReplicaManager
from broker.replica.replication_quota import ReplicationQuotas
from broker.storage.config import LogConfig
from broker.storage.log_manager import LogManager
from broker.storage.scheduler import Scheduler

from .harness import TOPIC, TOPIC_ID, TP, ManualClock, read_all_bytes, records, state, wait_until

LOG_CONFIG = LogConfig(file_delete_delay_ms=0, segment_bytes=64 * 1024)


def run(coro):
    return asyncio.run(coro)


def values_of(plog) -> list:
    """Every record value from the log start to the LEO, across segments."""
    from broker.accel import record_batch
    from broker.storage.cleaner_batch import iter_stored_records
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 30, None, True).records.read()
        infos, _ = record_batch.scan_batches(data)
        for bi in infos:
            out.extend(bytes(r.value) for r in iter_stored_records(data[bi.position:bi.position + bi.size]))
        offset = infos[-1].base_offset + infos[-1].last_offset_delta + 1
    return out


class Node:
    """One broker with several log dirs and no peers (RF=1)."""

    def __init__(self, root: str, ndirs: int = 2) -> None:
        self.dirs = [os.path.join(root, "d%d" % i) for i in range(ndirs)]
        self.scheduler = Scheduler(threaded=False)  # no thread: the test runs what is due
        self.clock = ManualClock()
        self.start()

    async def wait_until(self, cond: Callable[[], bool], what: str = "condition") -> None:
        """:func:`harness.wait_until` on this test's clock."""
        await wait_until(cond, self.clock, what=what)

    def start(self) -> None:
        self.lm = LogManager(self.dirs, LOG_CONFIG, broker_id=1, cluster_id="c", scheduler=self.scheduler)
        self.rm = ReplicaManager(1, self.lm, io_threads=0, config=ReplicaConfig(replica_fetch_max_bytes=16 * 1024),
                                 clock=self.clock, metadata_has_partition=lambda tp: tp[0] == TOPIC)

    async def lead(self, *tps, epoch: int = 0) -> None:
        async def cfg(_topic: str) -> LogConfig:
            return LOG_CONFIG
        sts = [state(1, epoch, [1], [1], tp=tp) for tp in tps]
        code, errs = await self.rm.become_leader_or_follower(0, 1, sts, {TOPIC: TOPIC_ID}, {}, cfg)
        assert code == 0 and set(errs.values()) == {0}, errs

    def dir_of(self, tp=TP) -> str:
        return self.lm.log_dir_of(tp)

    def moved_to(self, d: str) -> bool:
        """The log is in ``d`` and its mover finished (the old dir is gone)."""
        return self.dir_of() == d and not self.rm.alter_log_dirs.is_moving(TP)

    async def stop(self) -> None:
        await self.rm.stop()
        self.lm.shutdown()
        self.rm.shutdown()

    async def close(self) -> None:
        await self.stop()
        self.scheduler.shutdown()


async def _produce(rm: ReplicaManager, n: int, tag: bytes = b"v") -> list:
    out = []
    for i in range(n):
        v = tag + b"%05d" % i + b"." * 200
        res = (await rm.append_records(1, {TP: records(v)}))[TP]
        assert res.error_code == 0
        out.append(v)
    return out


def test_errors_and_a_replica_created_later_in_the_requested_dir(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path))
        try:
            await n.lead(TP)
            d0, d1 = n.dirs
            res = await n.rm.alter_replica_log_dirs({TP: str(tmp_path / "nope"), (TOPIC, 1): "d1",
                                                    (TOPIC, 5): d1, ("other", 0): d1})
            assert res == {TP: ErrorCode.LOG_DIR_NOT_FOUND, (TOPIC, 1): ErrorCode.LOG_DIR_NOT_FOUND,
                           (TOPIC, 5): ErrorCode.REPLICA_NOT_AVAILABLE,
                           ("other", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert await n.rm.alter_replica_log_dirs({TP: n.dir_of()}) == {TP: 0}  # already there
            assert n.lm.get_future_log(TP) is None
            # LeaderAndIsr for (t, 5) comes later: its log is created in the requested dir, not the emptier one
            await n.lead((TOPIC, 5))
            assert n.dir_of((TOPIC, 5)) == d1
            assert n.dir_of() == d0
        finally:
            await n.close()

    run(main())


def test_move_under_continuous_appends_loses_nothing(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path))
        try:
            await n.lead(TP)
            d0, d1 = n.dirs
            produced = await _produce(n.rm, 300)
            # The quota's clock stands still: two copy steps (16 KiB each) exceed 20000 B/s for good, so the move
            # stops part way, under the appends, until the quota is lifted.
            n.rm.quotas = ReplicationQuotas(1, clock=ManualClock().mono_ms)
            n.rm.quotas.alter_log_dirs.update_quota(20_000)
            assert await n.rm.alter_replica_log_dirs({TP: d1}) == {TP: 0}
            p = n.rm.get_partition(TP)
            assert p.future_log is not None and n.rm.alter_log_dirs.is_moving(TP)
            stop = asyncio.Event()

            async def producer() -> None:
                i = 0
                while not stop.is_set():
                    produced.extend(await _produce(n.rm, 1, b"w%05d" % i))
                    i += 1
                    await asyncio.sleep(0)

            task = asyncio.ensure_future(producer())
            before = len(produced)
            await n.wait_until(lambda: p.future_log.log_end_offset > 0 and n.rm.quotas.alter_log_dirs.rate() > 20_000
                             and len(produced) >= before + 20, what="a throttled copy under appends")
            by_dir, _ = await n.rm.run_io(_collect, n.rm, n.dirs, None)
            cur = by_dir[d0][TOPIC][0]
            fut = by_dir[d1][TOPIC][0]
            assert (cur["is_future_key"], fut["is_future_key"]) == (False, True)
            assert fut["offset_lag"] > 0 and 0 < fut["partition_size"] < cur["partition_size"]
            n.rm.quotas.alter_log_dirs.update_quota(float(2 ** 63 - 1))
            await n.wait_until(lambda: n.moved_to(d1), what="the move to finish")
            swapped = len(produced)
            await n.wait_until(lambda: len(produced) >= swapped + 5, what="appends after the swap")
            stop.set()
            await task
            assert p.future_log is None and n.lm.get_future_log(TP) is None and not n.rm.alter_log_dirs.is_moving(TP)
            assert p.log.dir == os.path.join(d1, "t-0")
            assert [x for x in os.listdir(d0) if x.startswith("t-")] == []
            assert values_of(p.log) == produced  # every acknowledged append, in order
            by_dir, _ = await n.rm.run_io(_collect, n.rm, n.dirs, None)
            assert by_dir[d0] == {} and [e["is_future_key"] for e in by_dir[d1][TOPIC]] == [False]
            leo = p.log.log_end_offset
            await n.stop()
            n.start()
            await n.lead(TP, epoch=1)
            assert n.dir_of() == d1 and n.rm.get_partition(TP).log.log_end_offset == leo
        finally:
            await n.close()

    run(main())


def test_cancel_and_change_of_destination(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path), ndirs=3)
        try:
            await n.lead(TP)
            d0, d1, d2 = n.dirs
            produced = await _produce(n.rm, 200)
            n.rm.quotas.alter_log_dirs.update_quota(20_000)
            assert await n.rm.alter_replica_log_dirs({TP: d1}) == {TP: 0}
            assert n.lm.future_log_dir_of(TP) == d1  # created by the request (inline I/O: no wait)
            # back to the current dir: the move is cancelled
            assert await n.rm.alter_replica_log_dirs({TP: d0 + "/"}) == {TP: 0}
            assert n.lm.get_future_log(TP) is None and not n.rm.alter_log_dirs.is_moving(TP)
            assert [x for x in os.listdir(d1) if x.startswith("t-")] == []
            # to d1, then to d2 instead: only one future at a time
            await n.rm.alter_replica_log_dirs({TP: d1})
            assert n.lm.future_log_dir_of(TP) == d1
            n.rm.quotas.alter_log_dirs.update_quota(float(2 ** 63 - 1))
            assert await n.rm.alter_replica_log_dirs({TP: d2}) == {TP: 0}
            await n.wait_until(lambda: n.moved_to(d2), what="the move to d2")
            assert [x for x in os.listdir(d1) + os.listdir(d0) if x.startswith("t-")] == []
            assert values_of(n.rm.get_partition(TP).log) == produced
        finally:
            await n.close()

    run(main())


def test_move_resumes_after_a_restart(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path))
        try:
            await n.lead(TP)
            d0, d1 = n.dirs
            produced = await _produce(n.rm, 300)
            n.rm.quotas.alter_log_dirs.update_quota(30_000)
            await n.rm.alter_replica_log_dirs({TP: d1})
            await n.wait_until(lambda: n.lm.get_future_log(TP).log_end_offset > 0, what="some copied")
            await n.stop()  # clean shutdown mid-move
            n.start()
            assert n.lm.future_log_dir_of(TP) == d1 and n.dir_of() == d0
            await n.lead(TP, epoch=1)  # LeaderAndIsr after the restart: the move goes on
            assert n.rm.alter_log_dirs.is_moving(TP)
            await n.wait_until(lambda: n.moved_to(d1), what="the resumed move")
            assert values_of(n.rm.get_partition(TP).log) == produced
            assert n.rm.get_partition(TP).log.leader_epoch_cache.entries == [(0, 0), (1, 300)]
        finally:
            await n.close()

    run(main())


def test_stop_replica_deletes_the_future_too(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path))
        try:
            await n.lead(TP)
            d0, d1 = n.dirs
            await _produce(n.rm, 100)
            n.rm.quotas.alter_log_dirs.update_quota(10_000)
            await n.rm.alter_replica_log_dirs({TP: d1})
            code, errs = await n.rm.stop_replicas(0, 1, {TP: (-2, True)})
            assert (code, errs) == (0, {TP: 0})
            assert not n.rm.alter_log_dirs.is_moving(TP) and n.lm.get_future_log(TP) is None
            assert [x for x in os.listdir(d0) + os.listdir(d1) if x.startswith("t-")] == []
        finally:
            await n.close()

    run(main())


def test_the_copy_follows_truncations_of_the_current_log(tmp_path) -> None:
    async def main() -> None:
        n = Node(str(tmp_path))
        try:
            await n.lead(TP)
            d0, d1 = n.dirs
            await _produce(n.rm, 50)
            p = n.rm.get_partition(TP)
            cur = p.log
            on_owner = n.lm.owners.call  # the log's commands run on the partition's worker, as in the broker
            on_owner(TP, cur.pop_truncation_point)
            fut = n.lm.create_future_log(TP, d1)
            part = SimpleNamespace(tp=TP, log=cur, future_log=fut, deleted=False)
            outcome, copied = on_owner(TP, lambda: move_step(n.lm, part, 2000))  # a few batches
            assert outcome == COPIED and copied > 0 and 0 < fut.log_end_offset < 50
            # as a follower would after a leader change: truncate, then take the new leader's records
            on_owner(TP, lambda: cur.truncate_to(3))
            on_owner(TP, lambda: cur.assign_epoch_start_offset(1, 3))
            on_owner(TP, lambda: cur.append_as_leader(records(b"new-a", b"new-b"), 1))
            for _ in range(100):
                outcome, _ = on_owner(TP, lambda: move_step(n.lm, part, 2000))
                if outcome == SWAPPED:
                    break
            assert outcome == SWAPPED and part.future_log is None
            assert cur.dir == os.path.join(d1, "t-0") and n.dir_of() == d1
            assert values_of(cur)[3:] == [b"new-a", b"new-b"] and cur.log_end_offset == 5
            assert cur.leader_epoch_cache.entries == [(0, 0), (1, 3)]
            assert len(read_all_bytes(cur)) > 0
        finally:
            await n.close()

    run(main())
