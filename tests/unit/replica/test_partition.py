"""Partition: HW rules, ISR expansion/shrink, AlterPartition outcomes, acks=-1 checks (real Log, manual clock)."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, List, Optional

from broker.errors import ErrorCode
from broker.replica.partition import IsrState, LeaderAndIsr, Partition
from broker.storage.config import LogConfig
from broker.storage.log import Log

from .harness import FakeAlterPartition, ManualClock, drive, records, state, wait_until

LAG = 30000


class Env:
    def __init__(self, tmp_path: Any, *, min_isr: int = 1, apm: Optional[FakeAlterPartition] = None,
                 alive: Callable[[int], bool] = lambda _b: True) -> None:
        self.clock = ManualClock()
        self.log = Log.open(os.path.join(str(tmp_path), "t-0"), LogConfig(min_insync_replicas=min_isr),
                            clock=self.clock)
        self.apm = apm if apm is not None else FakeAlterPartition(1)
        self.checks: List[Any] = []
        self.p = Partition("t", 0, 1, log=self.log, clock=self.clock, alter_partition_manager=self.apm,
                           is_broker_alive=alive, on_delayed_check=self.checks.append,
                           replica_lag_time_max_ms=LAG, alter_partition_retry_backoff_ms=1)

    def append(self, n: int = 1, epoch: Optional[int] = None) -> None:
        for _ in range(n):
            self.log.append_as_leader(records(b"v"), self.p.leader_epoch if epoch is None else epoch)

    def fetch(self, replica: int, offset: int, log_start: int = 0) -> bool:
        return self.p.update_follower_fetch_state(replica, -1, offset, log_start, self.clock.mono_ms())

    def close(self) -> None:
        self.log.close()

    async def wait_until(self, cond: Callable[[], bool], what: str = "condition") -> None:
        """:func:`harness.wait_until` on this test's clock."""
        await wait_until(cond, self.clock, what=what)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_hw_is_the_smallest_leo_of_the_isr(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        assert e.p.make_leader(state(1, 0, [1, 2, 3]), None, e.clock.mono_ms())
        e.append(5)
        assert not e.p.maybe_increment_leader_hw()  # followers' LEOs unknown
        assert e.log.high_watermark == 0
        e.fetch(2, 3)
        assert e.log.high_watermark == 0  # follower 3 still unknown
        e.fetch(3, 5)
        assert e.log.high_watermark == 3
        e.fetch(2, 5)
        assert e.log.high_watermark == 5
        assert e.checks  # delayed operations were re-checked on each move
        e.close()

    run(main())


def test_min_isr_blocks_hw_and_effective_min_isr_is_capped_by_replication_factor(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path / "a", min_isr=2)
        e.p.make_leader(state(1, 0, [1], [1, 2, 3]), None, e.clock.mono_ms())
        e.append(2)
        assert e.p.is_under_min_isr
        assert not e.p.maybe_increment_leader_hw()
        assert e.log.high_watermark == 0
        e.close()
        # min.insync.replicas 3 on a single-replica partition: effectively 1.
        e = Env(tmp_path / "b", min_isr=3)
        e.p.make_leader(state(1, 0, [1], [1]), None, e.clock.mono_ms())
        e.append(2)
        assert e.p.effective_min_isr() == 1
        assert e.p.maybe_increment_leader_hw() and e.log.high_watermark == 2
        e.close()

    run(main())


def test_pending_expansion_counts_for_the_hw_at_once(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path, apm=FakeAlterPartition(1, auto=False))
        e.p.make_leader(state(1, 0, [1, 2], [1, 2, 3]), None, e.clock.mono_ms())
        e.append(2)
        e.fetch(3, 0)  # caught up to the HW (0) and into the epoch: expansion proposed
        assert e.p.isr_state.kind == "expand"
        assert e.p.isr == (1, 2) and e.p.maximal_isr == (1, 2, 3)
        await e.wait_until(lambda: len(e.apm.held) == 1)
        assert e.apm.submissions[0][2:4] == (0, [1, 2, 3])
        e.fetch(2, 2)
        assert e.log.high_watermark == 0  # replica 3 (maximal ISR) is at 0
        e.fetch(3, 2)
        assert e.log.high_watermark == 2
        e.apm.commit_held()
        await e.p.wait_alter_partition_idle()
        assert e.p.isr_state.kind == "committed" and e.p.isr == (1, 2, 3) and e.p.partition_epoch == 1
        e.close()

    run(main())


def test_caught_up_replica_outside_the_isr_holds_the_hw_until_it_lags(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        e.apm.error = ErrorCode.INELIGIBLE_REPLICA
        e.p.make_leader(state(1, 0, [1, 2], [1, 2, 3]), None, e.clock.mono_ms())
        e.fetch(3, 0)  # caught up now; its expansion gets rejected
        await e.p.wait_alter_partition_idle()
        assert e.p.isr_state.kind == "committed" and e.p.isr == (1, 2)
        e.apm.error = None
        e.append(3)
        e.fetch(2, 3)
        # Replica 3 is not in the ISR but caught up (within replica.lag.time.max.ms): the HW waits for it.
        assert e.log.high_watermark == 0
        e.clock.advance(LAG + 1)
        assert e.p.maybe_increment_leader_hw()
        assert e.log.high_watermark == 3
        e.close()

    run(main())


def test_a_rejected_expansion_lets_the_hw_move_at_once(tmp_path) -> None:
    """The leader proposes a caught-up follower for the ISR (maximal ISR [1, 2, 3]: the HW waits for it), the broker
    goes away (a controlled shutdown) and the controller rejects the change: the HW moves over the ISR left, and the
    requests waiting on it are checked, at the rejection, not at the next append or follower fetch."""
    async def main() -> None:
        alive = {1, 2, 3}
        e = Env(tmp_path, apm=FakeAlterPartition(1, auto=False), alive=lambda b: b in alive)
        e.p.make_leader(state(1, 0, [1, 2], [1, 2, 3]), None, e.clock.mono_ms())
        e.fetch(3, 0)  # caught up: expansion to [1, 2, 3] proposed and held at the controller
        await e.wait_until(lambda: len(e.apm.held) == 1)
        e.append(3)
        e.fetch(2, 3)
        assert e.p.maximal_isr == (1, 2, 3) and e.log.high_watermark == 0  # waits for replica 3
        alive.discard(3)  # broker 3 shut down
        checks = len(e.checks)
        e.apm.fail_held(ErrorCode.INELIGIBLE_REPLICA)
        await e.p.wait_alter_partition_idle()
        assert e.p.isr_state.kind == "committed" and e.p.isr == (1, 2)
        assert e.log.high_watermark == 3
        assert len(e.checks) > checks
        e.close()

    run(main())


def test_expansion_needs_the_follower_in_the_current_leader_epoch(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        e.append(5, epoch=0)
        e.log.update_high_watermark(2)
        e.p.make_leader(state(1, 1, [1, 2], [1, 2, 3]), None, e.clock.mono_ms(), epoch_start_offset=5)
        assert e.p.leader_epoch_start_offset == 5
        assert e.log.high_watermark == 2  # ISR member 2's LEO is unknown
        e.fetch(3, 3)  # >= HW but before the epoch start: not in sync
        assert e.p.isr_state.kind == "committed"
        assert not e.apm.submissions
        e.fetch(3, 5)
        assert e.p.isr_state.kind == "expand"
        await e.p.wait_alter_partition_idle()
        assert e.p.isr == (1, 2, 3)
        e.close()

    run(main())


def test_isr_shrinks_after_replica_lag_time(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        e.p.make_leader(state(1, 0, [1, 2, 3]), None, e.clock.mono_ms())
        e.append(2)
        e.fetch(2, 2)
        e.fetch(3, 2)
        assert e.log.high_watermark == 2
        e.clock.advance(LAG + 1)
        # Caught up to the leader's LEO: never out of sync, however long ago it fetched.
        assert e.p.out_of_sync_replicas(e.clock.mono_ms()) == []
        e.fetch(3, 2)
        e.append(1)
        e.fetch(2, 3)  # 2 keeps up, 3 stops fetching
        e.clock.advance(LAG // 2)
        assert e.p.out_of_sync_replicas(e.clock.mono_ms()) == []  # 3 was caught up at the time of its last fetch
        e.clock.advance(LAG // 2 + 1)
        assert e.p.out_of_sync_replicas(e.clock.mono_ms()) == [3]
        assert e.p.maybe_shrink_isr()
        # A shrink does not count before it is committed: replica 3 still holds the HW.
        assert e.p.maximal_isr == (1, 2, 3)
        await e.p.wait_alter_partition_idle()
        assert e.p.isr == (1, 2) and e.p.partition_epoch == 1
        assert e.apm.submissions[-1][3] == [1, 2]
        assert e.log.high_watermark == 3
        e.close()

    run(main())


def test_alter_partition_error_handling(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        e.p.make_leader(state(1, 0, [1], [1, 2]), None, e.clock.mono_ms())
        # Fenced: the change stays pending (no retry) until LeaderAndIsr replaces the state.
        e.apm.error = ErrorCode.FENCED_LEADER_EPOCH
        e.fetch(2, 0)
        await e.p.wait_alter_partition_idle()
        assert e.p.isr_state.kind == "expand" and len(e.apm.submissions) == 1
        e.p.make_leader(state(1, 1, [1], [1, 2], partition_epoch=1), None, e.clock.mono_ms())
        assert e.p.isr_state.kind == "committed"
        # Unexpected errors are retried until the controller answers.
        e.apm.error = ErrorCode.UNKNOWN_SERVER_ERROR
        e.fetch(2, 0)
        await e.wait_until(lambda: len(e.apm.submissions) >= 3)
        e.apm.error = None
        await drive(e.clock, e.p.wait_alter_partition_idle())  # the retry comes after its backoff
        assert e.p.isr == (1, 2) and e.p.partition_epoch == 2
        e.close()

    run(main())


def test_alter_partition_answers_for_an_old_state_are_ignored(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path, apm=FakeAlterPartition(1, auto=False))
        e.p.make_leader(state(1, 0, [1], [1, 2]), None, e.clock.mono_ms())
        e.fetch(2, 0)
        await e.wait_until(lambda: len(e.apm.held) == 1)
        # The controller answers with a leader epoch we no longer have: ignored, still pending.
        sub, fut = e.apm.held.pop()
        fut.set_result(LeaderAndIsr(1, 7, (1, 2), 0, 3))
        await e.p.wait_alter_partition_idle()
        assert e.p.isr_state.kind == "expand" and e.p.partition_epoch == 0
        # A LeaderAndIsr replaced the pending state before the (successful) answer came: ignored too.
        e.p.make_leader(state(1, 1, [1], [1, 2], partition_epoch=1), None, e.clock.mono_ms())
        e.fetch(2, 0)
        await e.wait_until(lambda: len(e.apm.held) == 1)
        e.p.make_leader(state(1, 2, [1], [1, 2], partition_epoch=2), None, e.clock.mono_ms())
        e.apm.commit_held()
        await e.p.wait_alter_partition_idle()
        assert e.p.isr == (1,) and e.p.partition_epoch == 2 and e.p.isr_state.kind == "committed"
        e.close()

    run(main())


def test_check_enough_replicas_reach_offset(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path, min_isr=2)
        assert e.p.check_enough_replicas_reach_offset(1) == (False, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        e.p.make_leader(state(1, 0, [1, 2], [1, 2]), None, e.clock.mono_ms())
        e.append(1)
        assert e.p.check_enough_replicas_reach_offset(1) == (False, 0)
        e.fetch(2, 1)
        assert e.p.check_enough_replicas_reach_offset(1) == (True, 0)
        # Replicated, but the ISR shrank below min.insync.replicas meanwhile.
        e.p.isr_state = IsrState.committed([1])
        assert e.p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        e.close()

    run(main())


def test_low_watermark_counts_live_followers_only(tmp_path) -> None:
    async def main() -> None:
        alive = {2: True, 3: True}
        e = Env(tmp_path, alive=lambda b: alive.get(b, True))
        e.p.make_leader(state(1, 0, [1, 2, 3]), None, e.clock.mono_ms())
        e.append(6)
        e.fetch(2, 6, log_start=4)
        e.fetch(3, 6, log_start=1)
        e.log.delete_records_before(5)
        assert e.p.low_watermark_if_leader() == 1
        alive[3] = False
        assert e.p.low_watermark_if_leader() == 4
        e.close()

    run(main())


def test_make_follower_and_partition_epoch_rules(tmp_path) -> None:
    async def main() -> None:
        e = Env(tmp_path)
        assert e.p.make_follower(state(2, 3, [2, 1], partition_epoch=5), None)
        assert (e.p.leader_id, e.p.leader_epoch, e.p.is_leader, e.p.isr) == (2, 3, False, ())
        assert not e.p.make_follower(state(3, 3, [3], partition_epoch=6), None)  # same leader epoch
        assert e.p.leader_id == 3
        # An older partition epoch is ignored entirely.
        assert not e.p.make_leader(state(1, 4, [1], partition_epoch=2), None, e.clock.mono_ms())
        assert e.p.leader_id == 3
        assert e.p.make_leader(state(1, 4, [1], partition_epoch=7), None, e.clock.mono_ms())
        assert e.p.is_leader and e.p.leader_epoch == 4
        e.close()

    run(main())
