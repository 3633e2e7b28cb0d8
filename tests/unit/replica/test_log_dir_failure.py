"""ReplicaManager on a log dir failure (KIP-112): the dir's partitions go offline and answer KAFKA_STORAGE_ERROR to
every request, a waiting acks=all produce fails instead of succeeding, the controller is notified once per dir, and
the process halts when the last dir fails."""
from __future__ import annotations

import asyncio
import errno
import os
from typing import Any, Callable, List, Tuple

from broker.errors import ErrorCode
from broker.replica.config import ReplicaConfig
from broker.replica.manager import ReplicaManager
from broker.replica.partition import LeaderAndIsrPartitionState
from broker.storage.config import LogConfig
from broker.storage.log_manager import LogManager
from broker.storage.scheduler import Scheduler

from .harness import TOPIC, TOPIC_ID, ManualClock, records, wait_until, drive

KSE = int(ErrorCode.KAFKA_STORAGE_ERROR)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Setup:
    """One broker (id 1) with two log dirs, a counting controller notifier and a recording halt."""

    def __init__(self, root: str) -> None:
        self.a, self.b = os.path.join(root, "a"), os.path.join(root, "b")
        self.lm = LogManager([self.a, self.b], LogConfig(file_delete_delay_ms=0), broker_id=1, cluster_id="c",
                             scheduler=Scheduler(threaded=False))
        self.notified = 0
        self.clock = ManualClock()
        self.halted: List[int] = []
        self.resigned: List[Tuple[str, int]] = []
        self.rm = ReplicaManager(1, self.lm, io_threads=0, config=ReplicaConfig(), clock=self.clock,
                                 log_dir_event_notifier=self.notify, halt=self.halted.append)
        self.rm.add_leadership_listener(self)

    async def wait_until(self, cond: Callable[[], bool], what: str = "condition") -> None:
        """:func:`harness.wait_until` on this test's clock."""
        await wait_until(cond, self.clock, what=what)

    async def notify(self) -> None:
        self.notified += 1

    def on_resign(self, topic: str, partition: int) -> None:
        self.resigned.append((topic, partition))

    async def leader_and_isr(self, *states: LeaderAndIsrPartitionState) -> Tuple[int, dict]:
        async def cfg(_topic: str) -> LogConfig:
            return self.lm.default_config

        return await self.rm.become_leader_or_follower(0, 1, list(states), {TOPIC: TOPIC_ID}, {}, cfg)

    async def close(self) -> None:
        await self.rm.stop()
        self.lm.shutdown()
        self.rm.shutdown()


def st(partition: int, epoch: int = 0, isr: Tuple[int, ...] = (1,), *, is_new: bool = True
       ) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(TOPIC, partition, 1, 1, epoch, list(isr), 0, list(isr), is_new=is_new)


def test_partitions_of_a_failed_dir_answer_kafka_storage_error_and_the_controller_is_told(tmp_path) -> None:
    async def main() -> None:
        s = Setup(str(tmp_path))
        rm = s.rm
        try:
            rm.startup()
            # partition 0 has a follower (acks=all waits for it), 1..3 are led alone; spread over both dirs
            _, errors = await s.leader_and_isr(st(0, isr=(1, 2)), st(1), st(2), st(3))
            assert set(errors.values()) == {0}
            dirs = {p: s.lm.log_dir_of((TOPIC, p)) for p in range(4)}
            failed = dirs[0]
            live = s.b if failed == s.a else s.a
            in_failed = sorted(p for p, d in dirs.items() if d == failed)
            in_live = sorted(p for p, d in dirs.items() if d == live)
            assert in_live
            waiting = asyncio.ensure_future(rm.append_records(-1, {(TOPIC, 0): records(b"x")}, timeout_ms=30000))
            await s.wait_until(lambda: rm.delayed_produce_purgatory.num_delayed() == 1, what="a waiting acks=all produce")
            s.lm.failure_channel.maybe_add_offline_log_dir(failed, "Error while appending records to t-0 in dir "
                                                           + failed, OSError(errno.ENOSPC, "No space left on device"))
            # the waiting produce fails at once (no timeout): its write can no longer be read
            res = (await asyncio.wait_for(waiting, 10))[(TOPIC, 0)]
            assert res.error_code == KSE
            await s.wait_until(lambda: s.notified == 1, what="the log dir event notification")
            assert sorted(tp[1] for tp in rm.offline_partitions) == in_failed
            assert all(s.lm.get_log((TOPIC, p)) is None for p in in_failed)
            assert s.halted == [] and s.lm.live_log_dirs == [live]
            assert sorted(s.resigned) == [(TOPIC, p) for p in in_failed]
            for p in in_failed:
                tp = (TOPIC, p)
                assert (await rm.append_records(1, {tp: records(b"y")}))[tp].error_code == KSE
                assert (await rm.fetch_messages([(tp, 0, 1 << 20)], 1 << 20, 1, 0))[tp].error_code == KSE
                assert (await rm.fetch_messages([(tp, 0, 1 << 20)], 1 << 20, 1, 0, replica_id=2))[tp].error_code \
                    == KSE
                assert (await rm.list_offset(tp, -2, 0))[0] == KSE
                assert (await rm.end_offset_for_epoch(tp, -1, 0))[0] == KSE
                assert (await drive(rm, rm.delete_records(tp, 0)))[0] == KSE
            # LeaderAndIsr for them is refused; a replica that is not new is not created while a dir is offline
            _, errors = await s.leader_and_isr(*(st(p, epoch=1) for p in in_failed), st(9, is_new=False))
            assert errors == {**{(TOPIC, p): KSE for p in in_failed}, (TOPIC, 9): KSE}
            assert s.lm.get_log((TOPIC, 9)) is None
            # the other dir serves on; a new partition goes there
            for p in in_live:
                tp = (TOPIC, p)
                assert (await rm.append_records(-1, {tp: records(b"z")}))[tp].error_code == 0
            _, errors = await s.leader_and_isr(st(10, is_new=True))
            assert errors == {(TOPIC, 10): 0} and s.lm.log_dir_of((TOPIC, 10)) == live
            # the last dir fails: halt(1), and no notification (the ZooKeeper session ends with the process)
            s.lm.failure_channel.maybe_add_offline_log_dir(live, "boom", OSError(errno.EIO, "Input/output error"))
            await s.wait_until(lambda: s.halted == [1], what="the halt")
            assert s.notified == 1
        finally:
            await s.close()

    run(main())


def test_a_produce_that_hits_a_full_disk_answers_kafka_storage_error_and_takes_the_dir_offline(tmp_path,
                                                                                                  monkeypatch) -> None:
    async def main() -> None:
        s = Setup(str(tmp_path))
        rm = s.rm
        try:
            rm.startup()
            await s.leader_and_isr(st(0), st(1))
            tp0 = (TOPIC, 0)
            failed = s.lm.log_dir_of(tp0)
            assert (await rm.append_records(-1, {tp0: records(b"before")}))[tp0].error_code == 0
            real = os.pwrite

            def pwrite(fd: int, data: Any, offset: int) -> int:
                if os.readlink("/proc/self/fd/%d" % fd).startswith(failed + os.sep):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real(fd, data, offset)

            monkeypatch.setattr("broker.storage.segment.os.pwrite", pwrite)
            assert (await rm.append_records(-1, {tp0: records(b"lost")}))[tp0].error_code == KSE
            await s.wait_until(lambda: s.notified == 1, what="the log dir event notification")
            assert tp0 in rm.offline_partitions and s.lm.offline_log_dirs == [failed]
            assert s.halted == []
        finally:
            monkeypatch.undo()
            await s.close()

    run(main())
