"""A lone request runs at once, inside ``data_received``: a request answered without waiting (ApiVersions, a Produce
appended on the loop) is written before ``data_received`` returns, with no task made; one that waits continues as a
task from where it stopped, gets what it waited for, and a cancellation of that task reaches it."""
from __future__ import annotations

import asyncio
from typing import Any, List, Optional

from broker.api.registry import CLOSE_CONNECTION
from broker.network.connection import KafkaConnection
from broker.util.clock import ManualClock

from .test_connection_mute import FakeTransport, frame, settle


class Dispatcher:
    """Answers b"now" at once; b"wait" after the test resolves ``self.waiting`` (its value is in the answer)."""

    CLOSE = CLOSE_CONNECTION

    def __init__(self) -> None:
        self.waiting: Optional["asyncio.Future[bytes]"] = None
        self.cancelled: List[bytes] = []

    async def handle(self, connection: Any, frame: memoryview) -> Optional[List[bytes]]:
        body = bytes(frame)
        if body == b"now":
            return [b"R-now"]
        self.waiting = asyncio.get_running_loop().create_future()
        try:
            got = await self.waiting
        except asyncio.CancelledError:
            self.cancelled.append(body)
            raise
        return [b"R-" + got]


def make() -> tuple:
    d = Dispatcher()
    conn = KafkaConnection(d, "PLAINTEXT", 1 << 20, clock=ManualClock())  # type: ignore[arg-type]
    t = FakeTransport()
    conn.connection_made(t)
    return d, conn, t


def test_a_request_answered_without_waiting_is_written_inside_data_received_with_no_task() -> None:
    async def main() -> None:
        d, conn, t = make()
        tasks_before = len(asyncio.all_tasks())
        conn.data_received(frame(b"now"))
        assert t.written == [b"R-now"] and not conn.busy
        assert len(asyncio.all_tasks()) == tasks_before
        conn.data_received(frame(b"now"))  # and the next one the same way
        assert t.written == [b"R-now", b"R-now"] and t.events == ["write", "write"]
    asyncio.run(main())


def test_a_request_that_waits_continues_as_a_task_with_what_it_waited_for() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"wait"))
        assert conn.busy and t.written == []
        assert d.waiting is not None
        d.waiting.set_result(b"value")
        await settle()
        assert t.written == [b"R-value"] and not conn.busy
        conn.data_received(frame(b"now"))
        assert t.written == [b"R-value", b"R-now"]
    asyncio.run(main())


def test_an_exception_waited_for_reaches_the_request_and_the_connection_closes() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"wait"))
        assert d.waiting is not None
        d.waiting.set_exception(RuntimeError("handler bug"))
        await settle()
        assert t.closed and t.written == [] and not conn.busy  # _process logs it and closes, as for a task
    asyncio.run(main())


def test_cancelling_the_continued_task_cancels_the_request() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"wait"))
        task = conn._task
        assert task is not None
        task.cancel()
        await settle()
        assert d.cancelled == [b"wait"] and task.cancelled() and t.written == []
    asyncio.run(main())
