"""ZkAlterPartitionManager (IBP < 2.7): compare-and-set ISR writes and batched /isr_change_notification."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Tuple

import pytest

from broker.cluster.zk_alter_partition import ZkAlterPartitionManager
from broker.errors import ErrorCode
from broker.replica.partition import AlterPartitionError
from broker.util.clock import ManualClock


class FakeZk:
    def __init__(self) -> None:
        self.states: Dict[Tuple[str, int], Tuple[Any, int]] = {("t", 0): (None, 3)}
        self.notifications: List[List[Tuple[str, int]]] = []
        self.notified = asyncio.Event()

    def set_partition_state(self, topic: str, partition: int, state: Any, expected: int) -> Optional[int]:
        cur = self.states.get((topic, partition))
        if cur is None or cur[1] != expected:
            return None
        self.states[(topic, partition)] = (state, expected + 1)
        return expected + 1

    def propagate_isr_changes(self, partitions: List[Tuple[str, int]]) -> None:
        self.notifications.append(list(partitions))
        self.notified.set()


class Calls:
    async def run(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


def make() -> Tuple[ZkAlterPartitionManager, FakeZk, ManualClock]:
    zk, clock = FakeZk(), ManualClock(100_000)
    m = ZkAlterPartitionManager(1, zk, Calls(), lambda: 7, clock=clock, check_interval_ms=10)  # type: ignore[arg-type]
    return m, zk, clock


def test_writes_the_state_with_compare_and_set_and_returns_the_new_partition_epoch() -> None:
    async def main() -> None:
        m, zk, _ = make()
        got = await m.submit(("t", 0), None, 5, [(1, 10), (2, 20)], 0, 3)
        assert (got.leader, got.leader_epoch, got.isr, got.partition_epoch) == (1, 5, (1, 2), 4)
        state, version = zk.states[("t", 0)]
        assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch, version) == (1, 5, [1, 2], 7, 4)
        with pytest.raises(AlterPartitionError) as e:  # the controller moved the znode on meanwhile
            await m.submit(("t", 0), None, 5, [(1, 10)], 0, 3)
        assert e.value.error_code == ErrorCode.INVALID_UPDATE_VERSION
        await m.shutdown()
    asyncio.run(main())


def test_notifications_are_batched_until_changes_linger_then_written_once() -> None:
    async def main() -> None:
        m, zk, clock = make()
        zk.states[("t", 1)] = (None, 0)
        await m.submit(("t", 0), None, 1, [(1, -1)], 0, 3)
        await m.submit(("t", 1), None, 1, [(1, -1)], 0, 0)
        assert not m.due() and zk.notifications == []
        for _ in range(100):  # until the notification task waits for its check interval
            if clock.next_deadline_ms() is not None:
                break
            await asyncio.sleep(0)
        clock.advance(5_000)  # LINGER_MS without further changes
        await asyncio.wait_for(zk.notified.wait(), 5)
        assert zk.notifications == [[("t", 0), ("t", 1)]]
        await m.shutdown()
    asyncio.run(main())


def test_shutdown_writes_what_is_still_pending() -> None:
    async def main() -> None:
        m, zk, _ = make()
        await m.submit(("t", 0), None, 1, [(1, -1)], 0, 3)
        await m.shutdown()
        assert zk.notifications == [[("t", 0)]]
    asyncio.run(main())
