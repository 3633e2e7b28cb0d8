"""KafkaConnection mutes like Kafka's processor where it matters: once a second request is waiting behind one in the
broker (pipelining), and for a throttle time; a lone request does not pause reading (its client waits for the
answer), which saves two epoll_ctl calls per request.

A fake transport records pause/resume calls; a fake dispatcher holds each request until the test
releases it, so the test can look at the connection's state in the middle of a request.
"""
from __future__ import annotations

import asyncio
import struct
from typing import Any, List, Optional

from broker.api.registry import CLOSE_CONNECTION
from broker.network.connection import KafkaConnection
from broker.util.clock import ManualClock


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.events: List[str] = []
        self.written: List[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.9", 5555), "sockname": ("127.0.0.1", 9092)}.get(name, default)

    def pause_reading(self) -> None:
        self.events.append("pause")

    def resume_reading(self) -> None:
        self.events.append("resume")

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))
        self.events.append("write")

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


class HeldDispatcher:
    """Answers each frame with its own bytes once the test sets the frame's event."""

    CLOSE = CLOSE_CONNECTION

    def __init__(self) -> None:
        self.seen: List[bytes] = []
        self.release: List[asyncio.Event] = []
        self.throttle_ms = 0

    async def handle(self, connection: Any, frame: memoryview) -> Optional[List[bytes]]:
        self.seen.append(bytes(frame))
        ev = asyncio.Event()
        self.release.append(ev)
        await ev.wait()
        connection.throttle_time_ms = self.throttle_ms
        return [b"R" + bytes(frame)]


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make(clock: Optional[ManualClock] = None) -> tuple:
    d = HeldDispatcher()
    conn = KafkaConnection(d, "PLAINTEXT", 1 << 20, clock=clock or ManualClock())  # type: ignore[arg-type]
    t = FakeTransport()
    conn.connection_made(t)
    return d, conn, t


def test_a_lone_request_is_answered_without_pausing_reading() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"one"))
        await settle()
        assert t.events == [] and d.seen == [b"one"]
        d.release[0].set()
        await settle()
        assert t.events == ["write"]
        assert t.written == [b"Rone"]
    asyncio.run(main())


def test_a_request_arriving_while_one_is_in_the_broker_stops_reading_until_both_are_answered() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"a"))
        await settle()
        conn.data_received(frame(b"b"))
        await settle()
        assert d.seen == [b"a"] and t.events == ["pause"]  # b waits, and nothing more is read
        d.release[0].set()
        await settle()
        assert d.seen == [b"a", b"b"] and t.events == ["pause", "write"]
        d.release[1].set()
        await settle()
        assert t.events == ["pause", "write", "write", "resume"] and t.written == [b"Ra", b"Rb"]
    asyncio.run(main())


def test_pipelined_requests_are_handled_one_at_a_time_while_muted() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"a") + frame(b"b") + frame(b"c")[:3])  # two whole frames and a partial one
        await settle()
        assert d.seen == [b"a"] and t.events == ["pause"]
        d.release[0].set()
        await settle()
        assert d.seen == [b"a", b"b"] and "resume" not in t.events  # still muted: b is in the broker
        d.release[1].set()
        await settle()
        assert t.events == ["pause", "write", "write", "resume"]
        conn.data_received(frame(b"c")[3:])  # the rest of c arrives after unmuting: a lone request
        await settle()
        assert d.seen == [b"a", b"b", b"c"] and t.events[-1] == "resume"
        d.release[2].set()
        await settle()
        assert t.written == [b"Ra", b"Rb", b"Rc"] and t.events[-1] == "write"
    asyncio.run(main())


def test_a_partial_request_does_not_mute() -> None:
    async def main() -> None:
        d, conn, t = make()
        conn.data_received(frame(b"abcdef")[:5])
        await settle()
        assert t.events == [] and d.seen == []
    asyncio.run(main())


def test_throttle_time_keeps_the_connection_muted_after_the_response() -> None:
    async def main() -> None:
        clock = ManualClock()
        d, conn, t = make(clock)
        d.throttle_ms = 50
        conn.data_received(frame(b"x"))
        await settle()
        d.release[0].set()
        await settle()
        assert t.events == ["write", "pause"]  # answered, then muted for the throttle time
        clock.advance(49)
        await settle()
        assert t.events == ["write", "pause"]
        clock.advance(1)  # unmuted once the 50 ms have passed
        await settle()
        assert t.events == ["write", "pause", "resume"]
        assert conn.context is not None and conn.context.throttle_time_ms == 0
    asyncio.run(main())


class ClosingDispatcher(HeldDispatcher):
    async def handle(self, connection: Any, frame: memoryview) -> Any:
        return CLOSE_CONNECTION


def test_close_answer_closes_without_unmuting() -> None:
    async def main() -> None:
        conn = KafkaConnection(ClosingDispatcher(), "PLAINTEXT", 1 << 20)  # type: ignore[arg-type]
        t = FakeTransport()
        conn.connection_made(t)
        conn.data_received(frame(b"bad"))
        await settle()
        assert t.closed and "resume" not in t.events
    asyncio.run(main())
