"""BrokerMetadataTopic's retries (remote.log.metadata.initialization.retry.interval.ms / .max.timeout.ms) on its
Clock: the RemoteLogManager thread calling it waits each interval on the clock's timer on the event loop, so a
ManualClock moved by the test releases it and no real time passes."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Optional

import pytest

from broker.replica.remote_log_metadata_topic import BrokerMetadataTopic
from broker.storage.remote.storage_manager import RemoteStorageException
from broker.util.broker_channel import BrokerNode
from broker.util.clock import ManualClock, Timer

NODE = BrokerNode(1, "broker1", 9092)


class SignallingClock(ManualClock):
    """A ManualClock that sets ``armed`` whenever a timer is set on it (the thread is waiting on the clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = asyncio.Event()

    def call_later_ms(self, ms: float, callback: Callable[[], Any]) -> Timer:
        self.armed.set()
        return super().call_later_ms(ms, callback)


async def on_thread(clock: SignallingClock, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread (as the RemoteLogManager does); each time it waits on the clock, move the clock to
    that timer's deadline. Real time only bounds the wait for the thread's next step."""
    fut = asyncio.get_running_loop().run_in_executor(None, fn)
    while not fut.done():
        armed = asyncio.ensure_future(clock.armed.wait())
        await asyncio.wait_for(asyncio.wait([fut, armed], return_when=asyncio.FIRST_COMPLETED), 10)
        armed.cancel()
        if clock.armed.is_set():
            clock.armed.clear()
            deadline = clock.next_deadline_ms()
            assert deadline is not None
            clock.advance(deadline - clock.mono_ms())
    return fut.result()


def port(clock: ManualClock, leader: Callable[[str, int], Optional[BrokerNode]], ensured: List[str],
         timeout_ms: int = 1000) -> BrokerMetadataTopic:
    async def ensure(name: str, n: int, rf: int, configs: Dict[str, str]) -> int:
        ensured.append(name)
        return 0
    return BrokerMetadataTopic(asyncio.get_running_loop(), None, leader, ensure,  # type: ignore[arg-type]
                               retry_timeout_ms=timeout_ms, retry_interval_ms=100, clock=clock)


def test_create_topic_retries_every_interval_on_the_clock_until_the_leaders_are_known() -> None:
    async def main() -> None:
        clock, ensured = SignallingClock(), []
        start = clock.mono_ms()
        # the partitions get their leader at the fourth look (after three intervals)
        leader = lambda t, p: NODE if len(ensured) >= 4 else None  # noqa: E731
        p = port(clock, leader, ensured)
        await on_thread(clock, lambda: p.create_topic("__remote_log_metadata", 2, 1, {}))
        assert len(ensured) == 4 and p.num_partitions == {"__remote_log_metadata": 2}
        assert clock.mono_ms() - start == 300  # three retry intervals of fake time
    asyncio.run(main())


def test_create_topic_gives_up_after_the_retry_timeout_of_clock_time() -> None:
    async def main() -> None:
        clock, ensured = SignallingClock(), []
        start = clock.mono_ms()
        p = port(clock, lambda t, pt: None, ensured, timeout_ms=1000)
        with pytest.raises(RemoteStorageException, match="did not succeed within 1000 ms"):
            await on_thread(clock, lambda: p.create_topic("__remote_log_metadata", 2, 1, {}))
        assert clock.mono_ms() - start == 1000 and len(ensured) == 11  # an attempt at 0, 100, ..., 1000 ms
    asyncio.run(main())
