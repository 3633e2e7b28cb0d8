"""DelayedRemoteFetch (Kafka's): completes when the remote read is done, when a partition of the fetch is no longer
hosted here, or at remote.fetch.max.wait.ms on the purgatory's clock, when it cancels the read."""
from __future__ import annotations

import asyncio
from typing import Set

from broker.replica.purgatory import DelayedOperationPurgatory, DelayedRemoteFetch
from broker.util.clock import ManualClock

A, B = ("t", 0), ("t", 1)


def _setup(hosted: Set[object]) -> tuple:
    clock = ManualClock()
    purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] = DelayedOperationPurgatory("RemoteFetch", clock)
    read: "asyncio.Future[bytes]" = asyncio.get_running_loop().create_future()
    op = DelayedRemoteFetch(500, read, [A, B], hosted.__contains__)
    assert not purgatory.try_complete_else_watch(op, [A])
    return clock, purgatory, read, op


def test_completes_when_the_read_is_done() -> None:
    async def main() -> None:
        clock, purgatory, read, op = _setup({A, B})
        assert purgatory.check_and_complete(A) == 0
        read.set_result(b"x")
        assert purgatory.check_and_complete(A) == 1
        assert op.completed and op.outcome == "read" and len(purgatory) == 0
        assert purgatory.expired == 0  # DelayedRemoteFetchMetrics ExpiresPerSec counts expirations only
    asyncio.run(main())


def test_completes_when_any_partition_of_the_fetch_is_no_longer_hosted() -> None:
    async def main() -> None:
        hosted = {A, B}
        clock, purgatory, read, op = _setup(hosted)
        hosted.discard(B)  # the other partition of the fetch (Kafka checks every one) was deleted
        assert purgatory.check_and_complete(A) == 1
        assert op.outcome == "partition" and not read.cancelled()  # the read is left to finish (not expired)
    asyncio.run(main())


def test_expires_on_the_clock_and_cancels_the_read() -> None:
    async def main() -> None:
        clock, purgatory, read, op = _setup({A, B})
        assert (purgatory.watched(), purgatory.num_delayed()) == (1, 1)  # PurgatorySize, NumDelayedOperations
        clock.advance(499)
        assert not op.completed
        clock.advance(1)
        assert op.completed and op.outcome == "expired" and read.cancelled()
        assert purgatory.expired == 1 and (purgatory.watched(), purgatory.num_delayed()) == (0, 0)
    asyncio.run(main())
