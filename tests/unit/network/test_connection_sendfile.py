"""A Fetch answer's log slices go out with sendfile after the bytes queued before them, on real sockets (asyncio's
loop and uvloop's): the connection waits for the transport to drain through flow control (pause_writing /
resume_writing), not by sleeping and looking again.

The response header is made larger than what the kernel takes at once, so the transport still holds part of it
when the slice's turn comes: without the wait the slice's bytes would overtake it on the wire.
"""
from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
from typing import Any, Awaitable, Callable, List

import pytest

from broker.network.connection import KafkaConnection
from broker.network.socket_server import ListenerSpec, SocketServer
from broker.util.file_slice import FileSlice

LOOPS = ["asyncio", "uvloop"]  # uvloop is in requirements-test.txt: its absence fails these tests, loudly

HEADER_BYTES = 8 << 20  # well past a loopback socket's send and receive buffers together


def run(loop_name: str, main: Callable[[], Awaitable[None]]) -> None:
    if loop_name == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class SliceDispatcher:
    """Answers every request with ``parts(file)``: bytes and slices of one file."""

    CLOSE = object()

    def __init__(self, parts: Callable[[Any], List[Any]], path: str) -> None:
        self._parts = parts
        self._file = open(path, "rb")

    async def handle(self, connection: Any, frame_bytes: memoryview) -> Any:
        return self._parts(self._file)

    def close(self) -> None:
        self._file.close()


def _read_all(port: int, request: bytes, expect: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(frame(request))
        data = bytearray()
        while len(data) < expect:
            chunk = c.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("closed by the broker after %d of %d bytes" % (len(data), expect))
            data += chunk
        return bytes(data)


def _exchange(loop_name: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
              parts: Callable[[Any], List[Any]], expect: bytes) -> dict:
    """Serve one request answered with ``parts``; check the bytes on the wire; return the waits seen."""
    path = os.path.join(str(tmp_path), "segment.log")
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * 4096)  # 1 MiB of known bytes
    seen = {"drained": 0, "sleeps": 0}
    real_drained, real_sleep = KafkaConnection._drained, asyncio.sleep

    async def counting_drained(self: KafkaConnection, transport: Any) -> None:
        seen["drained"] += 1
        await real_drained(self, transport)

    def counting_sleep(*args: Any, **kw: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__") == "broker.network.connection":
            seen["sleeps"] += 1
        return real_sleep(*args, **kw)

    monkeypatch.setattr(KafkaConnection, "_drained", counting_drained)
    monkeypatch.setattr(asyncio, "sleep", counting_sleep)
    d = SliceDispatcher(parts, path)

    async def main() -> None:
        server = SocketServer(d, [ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], 1 << 20)  # type: ignore[arg-type]
        await server.start()
        try:
            port = server.bound_ports["PLAINTEXT"]
            got = await asyncio.wait_for(
                asyncio.get_running_loop().run_in_executor(None, _read_all, port, b"fetch", len(expect)), 60)
            assert got == expect
        finally:
            await server.stop()

    try:
        run(loop_name, main)
    finally:
        d.close()
    return seen


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_slice_goes_out_after_the_header_queued_before_it(loop_name: str, tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    header = b"H" * HEADER_BYTES
    file_bytes = bytes(range(256)) * 4096

    def parts(f: Any) -> List[Any]:
        return [header, FileSlice(f, 1000, 300_000), b"T" * 10]

    seen = _exchange(loop_name, tmp_path, monkeypatch, parts, header + file_bytes[1000:301_000] + b"T" * 10)
    assert seen["drained"] >= 1  # the transport still held part of the header: the wait was exercised
    assert seen["sleeps"] == 0  # and it was not a sleep


@pytest.mark.parametrize("loop_name", LOOPS)
def test_bytes_between_two_slices_stay_between_them(loop_name: str, tmp_path: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    header, middle = b"H" * 100, b"M" * HEADER_BYTES
    file_bytes = bytes(range(256)) * 4096

    def parts(f: Any) -> List[Any]:
        return [header, FileSlice(f, 0, 200_000), middle, FileSlice(f, 500_000, 400_000)]

    seen = _exchange(loop_name, tmp_path, monkeypatch, parts,
                     header + file_bytes[:200_000] + middle + file_bytes[500_000:900_000])
    assert seen["drained"] >= 1
    assert seen["sleeps"] == 0


def test_the_write_buffer_limits_are_put_back(tmp_path: Any) -> None:
    """The zero limits that make the transport report its drain are the connection's for one wait only."""
    async def main() -> None:
        a, b = socket.socketpair()
        loop = asyncio.get_running_loop()
        conn = KafkaConnection(object(), "PLAINTEXT", 1 << 20)  # type: ignore[arg-type]
        transport, _ = await loop.connect_accepted_socket(lambda: conn, a)
        before = transport.get_write_buffer_limits()
        b.setblocking(False)
        transport.write(b"x" * HEADER_BYTES)
        assert transport.get_write_buffer_size() > 0

        async def reader() -> int:
            n = 0
            while n < HEADER_BYTES:
                n += len(await loop.sock_recv(b, 1 << 20))
            return n

        read = loop.create_task(reader())
        await asyncio.wait_for(conn._drained(transport), 30)
        assert transport.get_write_buffer_size() == 0
        assert transport.get_write_buffer_limits() == before
        assert await asyncio.wait_for(read, 30) == HEADER_BYTES
        transport.close()
        b.close()

    asyncio.run(main())
