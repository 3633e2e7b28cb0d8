"""A log slice that cannot go out with sendfile (TLS) is read and written in chunks of COPY_CHUNK_BYTES.

On a fake transport: the chunks, in order, make the slice; no chunk is written while the transport is above its
high-water mark; a connection lost in the wait stops the copy; a slice past the file's end closes the connection.
On real TLS sockets (asyncio's loop and uvloop's): the bytes on the wire are the response's, large slices and
bytes between them in order, and many small pipelined responses in request order.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import struct
import subprocess
from typing import Any, List, Optional

import pytest

from broker.network import connection as connection_module
from broker.network.connection import COPY_CHUNK_BYTES, KafkaConnection
from broker.network.socket_server import ListenerSpec, SocketServer
from broker.util.clock import ManualClock
from broker.util.file_slice import FileSlice
from tests.unit.network.test_connection_sendfile import LOOPS, SliceDispatcher, run

FILE_BYTES = bytes(range(256)) * 4096 * 3  # 3 MiB of known bytes


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture()
def segment(tmp_path: Any) -> str:
    path = os.path.join(str(tmp_path), "segment.log")
    with open(path, "wb") as f:
        f.write(FILE_BYTES)
    return path


class TlsLikeTransport(asyncio.Transport):
    """Reports an SSL context (so no sendfile) and records writes; the test drives its flow control."""

    def __init__(self, high_water: Optional[int] = None) -> None:
        super().__init__()
        self.written: List[bytes] = []
        self.closed = False
        self.protocol: Any = None
        self.high_water = high_water
        self.buffered = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.9", 5555), "sockname": ("127.0.0.1", 9093),
                "sslcontext": object()}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))
        self.buffered += len(data)
        if self.high_water is not None and self.buffered > self.high_water:
            self.protocol.pause_writing()

    def drain(self) -> None:
        self.buffered = 0
        self.protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def close(self) -> None:
        self.closed = True


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _connection(transport: TlsLikeTransport) -> KafkaConnection:
    conn = KafkaConnection(object(), "SSL", 1 << 20, security_protocol="SSL",  # type: ignore[arg-type]
                           clock=ManualClock())
    transport.protocol = conn
    conn.connection_made(transport)
    return conn


def test_a_slice_is_written_in_chunks_that_make_it_up(segment: str) -> None:
    length = 2 * COPY_CHUNK_BYTES + 12_345  # not a multiple of the chunk

    async def main() -> None:
        t = TlsLikeTransport()
        conn = _connection(t)
        with open(segment, "rb") as f:
            await conn._write([b"head", FileSlice(f, 777, length), b"tail"])
        assert t.written[0] == b"head" and t.written[-1] == b"tail"
        chunks = t.written[1:-1]
        assert [len(c) for c in chunks] == [COPY_CHUNK_BYTES, COPY_CHUNK_BYTES, 12_345]
        assert b"".join(chunks) == FILE_BYTES[777:777 + length]
        assert not t.closed
    asyncio.run(main())


def test_no_chunk_is_written_while_the_transport_is_above_its_high_water_mark(segment: str) -> None:
    async def main() -> None:
        t = TlsLikeTransport(high_water=COPY_CHUNK_BYTES)  # the second chunk in the buffer passes the mark
        conn = _connection(t)
        with open(segment, "rb") as f:
            task = asyncio.create_task(conn._write([FileSlice(f, 0, 5 * COPY_CHUNK_BYTES)]))
            await settle()
            assert len(t.written) == 2 and not task.done()
            await settle()
            assert len(t.written) == 2  # still waiting for the drain
            t.drain()
            await settle()
            assert len(t.written) == 4 and not task.done()
            t.drain()
            await asyncio.wait_for(task, 5)
        assert len(t.written) == 5
        assert b"".join(t.written) == FILE_BYTES[:5 * COPY_CHUNK_BYTES]
    asyncio.run(main())


def test_a_connection_lost_in_the_wait_stops_the_copy(segment: str) -> None:
    async def main() -> None:
        t = TlsLikeTransport(high_water=0)
        conn = _connection(t)
        with open(segment, "rb") as f:
            task = asyncio.create_task(conn._write([FileSlice(f, 0, 4 * COPY_CHUNK_BYTES)]))
            await settle()
            assert len(t.written) == 1
            conn.connection_lost(None)
            await asyncio.wait_for(task, 5)
        assert len(t.written) == 1
    asyncio.run(main())


def test_a_slice_past_the_end_of_its_file_closes_the_connection(segment: str) -> None:
    async def main() -> None:
        t = TlsLikeTransport()
        conn = _connection(t)
        with open(segment, "rb") as f:
            await conn._write([b"head", FileSlice(f, len(FILE_BYTES) - 100, 1000), b"tail"])
        assert t.closed
        assert b"".join(t.written) == b"head" + FILE_BYTES[-100:]  # what there was, then no tail: the client resets
    asyncio.run(main())


# ------------------------------------------------------------------------------------------------ real TLS sockets
@pytest.fixture(scope="module")
def tls_contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed (scripts/install-test.sh installs it)")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "k.pem"), "-out",
                    str(d / "c.pem"), "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(d / "c.pem"), str(d / "k.pem"))
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(str(d / "c.pem"))
    client_ctx.check_hostname = False
    return server_ctx, client_ctx


def _tls_exchange(loop_name: str, segment: str, contexts: tuple, dispatcher_parts: Any, requests: List[bytes],
                  expect: bytes) -> None:
    server_ctx, client_ctx = contexts
    d = SliceDispatcher(dispatcher_parts, segment)

    def client(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
                client_ctx.wrap_socket(raw, server_hostname="localhost") as c:
            c.sendall(b"".join(frame(r) for r in requests))  # pipelined
            data = bytearray()
            while len(data) < len(expect):
                chunk = c.recv(1 << 20)
                if not chunk:
                    raise ConnectionResetError("closed by the broker after %d of %d bytes" % (len(data), len(expect)))
                data += chunk
            return bytes(data)

    async def main() -> None:
        server = SocketServer(d, [ListenerSpec("SSL", "127.0.0.1", 0, "SSL", server_ctx)], 1 << 20)  # type: ignore
        await server.start()
        try:
            port = server.bound_ports["SSL"]
            got = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, client, port), 60)
            assert got == expect
        finally:
            await server.stop()

    try:
        run(loop_name, main)
    finally:
        d.close()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_large_slices_and_the_bytes_between_them_arrive_whole_over_tls(loop_name: str, segment: str,
                                                                        tls_contexts: tuple) -> None:
    header, middle = b"H" * 100, b"M" * (3 << 20)  # the middle is past the transport's high-water mark

    def parts(f: Any) -> List[Any]:
        return [header, FileSlice(f, 5, 2 << 20), middle, FileSlice(f, 1_000_001, COPY_CHUNK_BYTES + 1), b"T"]

    _tls_exchange(loop_name, segment, tls_contexts, parts, [b"fetch"],
                  header + FILE_BYTES[5:5 + (2 << 20)] + middle + FILE_BYTES[1_000_001:1_000_002 + COPY_CHUNK_BYTES]
                  + b"T")


@pytest.mark.parametrize("loop_name", LOOPS)
def test_many_small_pipelined_responses_stay_in_order_over_tls(loop_name: str, segment: str,
                                                               tls_contexts: tuple) -> None:
    n = 200
    served = [0]

    def parts(f: Any) -> List[Any]:
        i = served[0]
        served[0] += 1
        return [b"%05d" % i, FileSlice(f, i * 1000, 10 + i), FileSlice(f, 0, 0)]

    expect = b"".join(b"%05d" % i + FILE_BYTES[i * 1000:i * 1000 + 10 + i] for i in range(n))
    _tls_exchange(loop_name, segment, tls_contexts, parts, [b"r%d" % i for i in range(n)], expect)


def test_the_chunk_is_small_enough_to_stay_out_of_mmap() -> None:
    """glibc serves allocations under its mmap threshold (128 KiB at start) from the heap, where they are reused:
    larger chunks come back as fresh pages every time (measured: 680 page faults per MB consumed over TLS)."""
    assert 16 * 1024 <= connection_module.COPY_CHUNK_BYTES <= 128 * 1024
