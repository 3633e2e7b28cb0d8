"""SocketServer on real sockets (127.0.0.1, ephemeral ports), on asyncio's loop and uvloop's.

The dispatcher echoes each request frame, so a test sees exactly which bytes reached the broker's connection:
bytes that arrive before the acceptor hands the socket over (uvloop reads right after connection_made) must not
be lost; the descriptor budget refuses with one line; a failed accept() (EMFILE) is one WARN line, not
asyncio's traceback per retry; connections.max.idle.ms closes idle connections only.
"""
from __future__ import annotations

import asyncio
import logging
import resource
import socket
import struct
from typing import Any, Awaitable, Callable, List, Optional

import pytest

from broker.network.socket_server import ConnectionLimits, ListenerSpec, SocketServer
from broker.util import fd_budget
from broker.util.clock import SYSTEM_CLOCK, Clock, ManualClock
from broker.util.fd_budget import DescriptorBudget, count_open_descriptors

LOOPS = ["asyncio"]
try:
    import uvloop  # noqa: F401
    LOOPS.append("uvloop")
except ImportError:  # uvloop is an optional extra
    pass


class EchoDispatcher:
    CLOSE = object()

    def __init__(self) -> None:
        self.frames: List[bytes] = []

    async def handle(self, connection: Any, frame: memoryview) -> Any:
        self.frames.append(bytes(frame))
        return [struct.pack(">i", len(frame)) + bytes(frame)]


def run(loop_name: str, main: Callable[[], Awaitable[None]]) -> None:
    if loop_name == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def start(limits: Optional[ConnectionLimits] = None, budget: Optional[DescriptorBudget] = None,
                idle_ms: int = 600000, clock: Clock = SYSTEM_CLOCK) -> tuple:
    d = EchoDispatcher()
    server = SocketServer(d, [ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], 1 << 20, limits=limits, budget=budget,
                          connections_max_idle_ms=idle_ms, clock=clock)  # type: ignore[arg-type]
    await server.start()
    return d, server, server.bound_ports["PLAINTEXT"]


def _blocking_exchange(port: int, payload: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(frame(payload))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = c.recv(65536)
            if not chunk:
                raise ConnectionResetError("closed by the broker")
            data += chunk
        return data[4:]


async def exchange(port: int, payload: bytes, timeout: float = 5.0) -> bytes:
    """Connect and send at once from another thread (so the bytes can arrive before the loop has handed the
    socket to its connection, as with a client process), then read the echoed frame."""
    return await asyncio.get_running_loop().run_in_executor(None, _blocking_exchange, port, payload, timeout)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_request_sent_with_the_connect_is_answered(loop_name: str) -> None:
    async def main() -> None:
        d, server, port = await start()
        try:
            for i in range(20):
                assert await exchange(port, b"hello-%d" % i) == b"hello-%d" % i
        finally:
            await server.stop()
    run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_bytes_read_while_the_connection_waits_for_its_creation_rate_are_replayed(loop_name: str) -> None:
    async def main() -> None:
        d, server, port = await start(ConnectionLimits(max_creation_rate=lambda: 5))
        try:
            got = await asyncio.gather(*(exchange(port, b"req-%d" % i) for i in range(8)))  # 3 wait ~0.2-0.6 s
            assert got == [b"req-%d" % i for i in range(8)]
        finally:
            await server.stop()
    run(loop_name, main)


async def _until(cond: Callable[[], bool]) -> None:
    """Loop turns until ``cond`` holds (a socket event the loop has to read; bound it with asyncio.wait_for)."""
    while not cond():
        await asyncio.sleep(0)


def test_the_budget_refuses_with_one_line_then_admits_again(caplog: pytest.LogCaptureFixture) -> None:
    open_now = [990]
    clock = ManualClock(1_000_000)  # the budget's clock, moved by hand
    budget = DescriptorBudget(lambda: 10, limit=lambda: 1000, count=lambda: open_now[0], clock=clock)
    caplog.set_level(logging.INFO, logger="broker.util.fd_budget")

    async def main() -> None:
        d, server, port = await start(budget=budget)
        try:
            for _ in range(3):
                with pytest.raises(ConnectionError):
                    await exchange(port, b"refused")
            assert d.frames == [] and budget.refused_total == 3
            open_now[0] = 500
            # past it (no float edge): the next refusal recounts first
            clock.advance(2 * fd_budget.CONFIRM_INTERVAL_S * 1000)
            assert await exchange(port, b"admitted") == b"admitted"
            # the count (500) included the admitted socket, which closes again once the client has gone
            await asyncio.wait_for(_until(lambda: budget.open == 499), 5)
        finally:
            await server.stop()
    asyncio.run(main())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("Refusing new connections on listener PLAINTEXT: 991 of 1000 file descriptors")
    assert lines[1].startswith("Accepting new connections again") and "2 connections refused" in lines[1]


def test_a_failed_accept_is_one_warning_and_pending_connections_are_served_after(
        caplog: pytest.LogCaptureFixture) -> None:
    """asyncio's loop (uvloop's libuv closes the pending connections instead and reports nothing)."""
    caplog.set_level(logging.INFO)

    async def main() -> None:
        d, server, port = await start()
        loop = asyncio.get_running_loop()
        # Count asyncio's failed-accept rounds on their way to the server's handler: in one round (one readiness of
        # the listener) asyncio reports every accept() it tried, all in one callback; then it pauses the listener
        # and retries a second later.
        server_handler = loop.get_exception_handler()
        failed_rounds = [0]
        in_round = [False]

        def round_over() -> None:
            in_round[0] = False

        def counting(loop_: asyncio.AbstractEventLoop, context: dict) -> None:
            if context.get("message") == "socket.accept() out of system resource" and not in_round[0]:
                in_round[0] = True
                failed_rounds[0] += 1
                loop_.call_soon(round_over)
            server_handler(loop_, context)

        loop.set_exception_handler(counting)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        clients = [socket.socket() for _ in range(3)]
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (count_open_descriptors(), hard))  # not one more
            for c in clients:
                c.setblocking(False)
                try:
                    c.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
            # the first failed round, then two more after asyncio's retries
            await asyncio.wait_for(_until(lambda: failed_rounds[0] >= 3), 20)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            loop.set_exception_handler(server_handler)
        try:
            for i, c in enumerate(clients):
                await loop.sock_sendall(c, frame(b"late-%d" % i))
                head = await asyncio.wait_for(loop.sock_recv(c, 4), 5)
                assert await asyncio.wait_for(loop.sock_recv(c, 100), 5) == b"late-%d" % i, head
        finally:
            for c in clients:
                c.close()
            await server.stop()
    asyncio.run(main())
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].getMessage().startswith("Error while accepting connections on listener PLAINTEXT: Too many "
                                               "open files")


def test_an_accept_retry_after_the_listener_closed_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio schedules one accept retry per failed accept() a second later; after a shutdown in that second the
    retry finds the listener closed and raises ValueError (fd -1) into the loop's handler: no ERROR, no traceback.
    Any other exception still reaches the handler that was there before."""
    caplog.set_level(logging.DEBUG)

    async def main() -> None:
        d, server, port = await start()
        loop = asyncio.get_running_loop()
        passed_on: List[dict] = []
        loop.set_exception_handler(lambda _loop, context: passed_on.append(context))
        server._accept_errors.uninstall()  # the handler of start() was installed before ours: put it back on top
        server._accept_errors.install(loop)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        client = socket.socket()
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (count_open_descriptors(), hard))  # not one more
            client.setblocking(False)
            try:
                client.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            await asyncio.wait_for(_until(lambda: any("Error while accepting" in r.getMessage()
                                                      for r in caplog.records)), 20)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            client.close()
        await server.stop()
        closed = socket.socket()
        closed.close()
        done = loop.create_future()
        # what asyncio's retry runs a second later, now, on a closed listener
        loop.call_soon(loop._start_serving, lambda: None, closed, None, None, 50)  # type: ignore[attr-defined]
        loop.call_soon(lambda: loop.call_soon(done.set_result, None))
        await done
        assert passed_on == []
        loop.call_soon(_raise_other)
        other = loop.create_future()
        loop.call_soon(lambda: loop.call_soon(other.set_result, None))
        await other
        assert [type(c.get("exception")) for c in passed_on] == [RuntimeError]
    asyncio.run(main())
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any("An accept retry after its listener was closed" in r.getMessage() for r in caplog.records)


def _raise_other() -> None:
    raise RuntimeError("not an accept retry")


async def advance(clock: ManualClock, ms: int, step: int = 10) -> None:
    """Move ``clock`` by ``ms`` a step at a time, letting the loop run the tasks each step wakes (the idle reaper
    sets its next timer only once it has run)."""
    for _ in range(ms // step):
        clock.advance(step)
        for _ in range(5):
            await asyncio.sleep(0)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_connections_idle_longer_than_connections_max_idle_ms_are_closed(loop_name: str) -> None:
    """On the server's ManualClock: a connection silent for connections.max.idle.ms (300) is closed at the next
    reaper pass after it, one that talked meanwhile is not."""
    clock = ManualClock()

    async def main() -> None:
        d, server, port = await start(idle_ms=300, clock=clock)
        try:
            idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
            busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
            idle_closed = asyncio.ensure_future(idle_r.read())
            busy_w.write(frame(b"ping"))
            assert await asyncio.wait_for(busy_r.readexactly(8), 5) == frame(b"ping")
            await advance(clock, 250)
            assert not idle_closed.done() and len(server._connections) == 2  # not idle for 300 ms yet
            busy_w.write(frame(b"ping"))
            assert await asyncio.wait_for(busy_r.readexactly(8), 5) == frame(b"ping")
            await advance(clock, 150)  # the idle one 400 ms, the busy one 150 ms
            assert await asyncio.wait_for(idle_closed, 5) == b""  # closed by the broker
            busy_w.write(frame(b"still"))
            assert await asyncio.wait_for(busy_r.readexactly(9), 5) == frame(b"still")
            busy_w.close()
            idle_w.close()
        finally:
            await server.stop()
    run(loop_name, main)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    import shutil
    import subprocess
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed (scripts/install-test.sh installs it)")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "k.pem"), "-out",
                    str(d / "c.pem"), "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
    return str(d / "c.pem"), str(d / "k.pem")


@pytest.mark.parametrize("loop_name", LOOPS)
def test_tls_requests_sent_with_the_handshake_are_answered(loop_name: str, tls_files: tuple) -> None:
    import ssl
    cert, key = tls_files
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cert)
    client_ctx.check_hostname = False

    def client(port: int, payload: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                client_ctx.wrap_socket(raw, server_hostname="localhost") as c:
            c.sendall(frame(payload))
            data = b""
            while len(data) < 4 + len(payload):
                chunk = c.recv(65536)
                if not chunk:
                    raise ConnectionResetError("closed by the broker")
                data += chunk
            return data[4:]

    async def main() -> None:
        d = EchoDispatcher()
        server = SocketServer(d, [ListenerSpec("SSL", "127.0.0.1", 0, "SSL", server_ctx)], 1 << 20)  # type: ignore
        await server.start()
        port = server.bound_ports["SSL"]
        loop = asyncio.get_running_loop()
        try:
            got = await asyncio.gather(*(loop.run_in_executor(None, client, port, b"tls-%d" % i) for i in range(6)))
            assert got == [b"tls-%d" % i for i in range(6)]
        finally:
            await server.stop()
    run(loop_name, main)
