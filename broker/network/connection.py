"""One client connection: bytes in, frames to the request handler, responses out.

As Kafka's processor does, a connection is *muted* as soon as a whole request has arrived:
reading from the socket pauses until that request's response is written (and, once quotas
exist, until its throttle time has passed: KIP-219), then it is unmuted. So one request per
connection is in flight inside the broker, responses stay in request order, a client that
pipelines requests is held back by TCP itself, and a throttled client simply waits. Bytes that
had already arrived with the request (the start of a pipelined one) stay buffered in the framer.
Responses are lists of ``bytes`` and ``FileSlice`` parts; slices go out with ``os.sendfile``
(zero-copy on plaintext sockets), or over TLS read and written through the transport 64 KiB at a time.

An idle connection costs little (measured: about 2.1 KB of RSS in all, asyncio's transport and socket
included, and about a dozen objects for the garbage collector to walk): no task (a task runs only
while requests are being handled), no request queue, no frame buffer, no write-ready event (a future
exists only while the socket pushes back), no closure, and no second descriptor (``sendfile`` writes
through a dup of the socket's descriptor made for one response and closed after it, so an idle
consumer does not hold two descriptors).

``connections.max.idle.ms``: :attr:`KafkaConnection.last_active` (the clock's mono_ms) moves with
every read and every written response; the socket server closes connections idle longer.

Loop affinity: everything here runs on the broker's event loop.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, Optional, cast

from broker.api.dispatcher import ConnectionContext
from broker.api.sasl_authenticator import RespondAndClose
from broker.protocol.framing import FrameTooLargeError, InvalidFrameError, RequestFramer
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.util.file_slice import FileSlice

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestDispatcher

log = logging.getLogger(__name__)

#: a log slice that cannot go out with sendfile (TLS) is read and written this many bytes at a time
COPY_CHUNK_BYTES = 64 * 1024


def _set_done(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol for one accepted socket."""

    __slots__ = ("_dispatcher", "_listener_name", "_security_protocol", "_authenticator_factory", "_framer",
                 "_max_request_bytes",
                 "_queue", "_transport", "_task", "_muted", "_closed", "_on_close", "context", "_dup_fd",
                 "_write_ready", "_paused_writing", "last_active", "client_ip", "_clock")

    _counter = 0

    def __init__(self, dispatcher: "RequestDispatcher", listener_name: str, max_request_bytes: int,
                 on_close: Optional[Callable[["KafkaConnection"], None]] = None, security_protocol: str = "PLAINTEXT",
                 authenticator_factory: Optional[Callable[[], Any]] = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self._dispatcher = dispatcher
        #: what the throttle time and a failed login's delay sleep on
        self._clock = clock
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        self._authenticator_factory = authenticator_factory
        self._max_request_bytes = max_request_bytes
        #: holds a partly received frame; None between requests (most connections, most of the time)
        self._framer: Optional[RequestFramer] = None
        #: whole frames not handled yet (None while there are none: most connections, most of the time)
        self._queue: Optional[Deque[memoryview]] = None
        self._transport: Optional[asyncio.Transport] = None
        self._task: Optional[asyncio.Task[None]] = None
        self._muted = False
        self._closed = False
        self._on_close = on_close
        self.context: Optional[ConnectionContext] = None
        self._dup_fd: Optional[int] = None
        #: set while the transport's buffer is above its high-water mark and someone waits for it to drain
        self._write_ready: Optional[asyncio.Future[None]] = None
        self._paused_writing = False
        self.last_active = self._clock.mono_ms()
        #: the IP the socket server counts this connection against (max.connections.per.ip)
        self.client_ip = ""

    # asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("sockname") or ("?", 0)
        KafkaConnection._counter += 1
        conn_id = f"{sock[0]}:{sock[1]}-{peer[0]}:{peer[1]}-{KafkaConnection._counter}"
        self.context = ConnectionContext(conn_id, str(peer[0]), int(peer[1]), self._listener_name,
                                         self._security_protocol)
        if self._authenticator_factory is not None:
            self.context.authenticator = self._authenticator_factory()
        if self._queue:  # requests that came first (TLS: with the handshake's last flight, before start_tls returned)
            self._mute()
            self._task = asyncio.get_running_loop().create_task(self._process())

    def start(self, transport: asyncio.Transport, early: Optional[bytes] = None) -> None:
        """Take over an accepted transport whose reading the acceptor paused, with any bytes it read meanwhile."""
        transport.set_protocol(self)
        self.connection_made(transport)
        if early:
            self.data_received(early)
        if not self._muted and not self._closed:
            transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self.last_active = self._clock.mono_ms()
        framer = self._framer
        if framer is None:
            framer = self._framer = RequestFramer(self._max_request_bytes)
        try:
            frames = framer.feed(data)
        except (FrameTooLargeError, InvalidFrameError) as exc:
            log.warning("Closing connection %s: %s", self.context and self.context.connection_id, exc)
            self.close()
            return
        if not framer.buffered_bytes:
            self._framer = None
        if not frames:
            return
        if self._queue is None:
            self._queue = deque(frames)
        else:
            self._queue.extend(frames)
        if self.context is None:  # connection_made has not run yet (TLS): it starts processing
            return
        self.context.received_ns = time.monotonic_ns()  # request queue time (RequestMetrics) starts here
        if self._task is None and len(self._queue) == 1:
            # A lone request: the client waits for its answer, so reading on costs nothing, and not muting saves
            # the two epoll_ctl calls of pausing and resuming per request (Kafka mutes each time; what its mute
            # protects, one request in the broker per connection and back-pressure, holds as well below).
            self._task = asyncio.get_running_loop().create_task(self._process())
            return
        # Pipelined requests: stop reading until the queued ones are answered, as Kafka's processor does.
        self._mute()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._process())

    @property
    def busy(self) -> bool:
        """A request is being handled or its response written (never idle, whatever the clock says)."""
        return self._task is not None

    def _mute(self) -> None:
        if not self._muted and self._transport is not None:
            self._muted = True
            self._transport.pause_reading()

    def _unmute(self) -> None:
        if self._muted and not self._closed and self._transport is not None:
            self._muted = False
            self._transport.resume_reading()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._task is None:  # else the request's task closes the dup once it stops using it
            self._close_dup()
        pending = self._framer.buffered_bytes if self._framer is not None else 0
        if pending and not self._closed:
            # The peer went away in the middle of a frame: worth one line, as it hints at a broken client.
            log.info("Connection %s closed by the peer with %d bytes of an incomplete request buffered",
                     self.context.connection_id if self.context else "?", pending)
        self._closed = True
        self._queue = None
        self._wake_writer()
        if self._on_close is not None:
            self._on_close(self)

    # processing --------------------------------------------------------------------
    async def _process(self) -> None:
        try:
            while self._queue and not self._closed:
                frame = self._queue.popleft()
                assert self.context is not None
                result = await self._dispatcher.handle(self.context, frame)
                if result is self._dispatcher.CLOSE:
                    self.close()
                    return
                if isinstance(result, RespondAndClose):  # failed login: answer after the delay, then close
                    self._queue = None
                    await self._clock.sleep_ms(result.delay_s * 1000.0)
                    if result.parts:
                        await self._write(result.parts)
                    self.close()
                    return
                if result is not None:  # None: e.g. acks=0 produce, no response
                    await self._write(cast(list, result))
                throttle_ms = self.context.throttle_time_ms
                if throttle_ms > 0:  # KIP-219: stay muted for the throttle time after answering
                    self.context.throttle_time_ms = 0
                    self._mute()
                    await self._clock.sleep_ms(throttle_ms)
                self.context.received_ns = time.monotonic_ns()  # a pipelined request counts as read only now
            self._queue = None
            self.last_active = self._clock.mono_ms()
            self._unmute()
        except Exception:  # a bug in a handler must not kill the broker
            log.exception("Unexpected error on connection %s; closing it",
                          self.context.connection_id if self.context else "?")
            self.close()
        finally:
            self._task = None
            self._close_dup()
            if self._queue and not self._closed:
                self._task = asyncio.get_running_loop().create_task(self._process())

    async def _write(self, parts: list) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        for part in parts:
            if isinstance(part, FileSlice):
                if part.length == 0:
                    continue
                try:
                    await self._sendfile(part)
                except (ValueError, OSError) as exc:  # segment deleted/closed under us
                    log.warning("sendfile failed on %s (%s); closing connection",
                                self.context.connection_id if self.context else "?", exc)
                    self.close()
                    return
            else:
                transport.write(part)
        # Respect socket back-pressure: asyncio calls pause_writing() above the high-water mark.
        if self._paused_writing and not self._closed:
            if self._write_ready is None:
                self._write_ready = asyncio.get_running_loop().create_future()
            await self._write_ready

    async def _sendfile(self, part: FileSlice) -> None:
        """Zero-copy ``os.sendfile`` of a log slice, after the bytes already queued on the transport.

        Works the same on asyncio's and uvloop's loops: the socket is written through a dup of its
        fd, so the loop can watch that fd for writability while the transport keeps the original.
        The dup lives for one response (closed when the request is done); when there is no
        descriptor left for it (EMFILE), or no raw socket (TLS), the slice is read and written
        (:meth:`_write_copied`).
        """
        transport = self._transport
        assert transport is not None
        out_fd = self._socket_fd()
        if out_fd is None:
            await self._write_copied(part)
            return
        if transport.get_write_buffer_size():
            await self._drained(transport)  # the header (and any earlier slice copy) goes out first
            if self._closed:
                return
        in_fd = part.file.fileno()
        offset, remaining = part.position, part.length
        while remaining > 0 and not self._closed:
            try:
                n = os.sendfile(out_fd, in_fd, offset, remaining)
            except BlockingIOError:
                n = -1
            if n == 0:
                raise OSError(f"log segment ended {remaining} bytes before the slice did")
            if n > 0:
                offset += n
                remaining -= n
            else:
                await self._wait_writable(out_fd)

    async def _write_copied(self, part: FileSlice) -> None:
        """Write a log slice through the transport (TLS: encrypted by it), read :data:`COPY_CHUNK_BYTES` at a time.

        One read and one ``transport.write`` of a whole slice (up to a fetch's worth of megabytes) costs more than
        the encryption itself: every buffer on the way (the read, OpenSSL's output BIO, the ciphertext read from it,
        the socket transport's remainder) is a fresh allocation of that size, so the broker spends its time in page
        faults, and the first byte is sent only after the last is encrypted. Chunks keep every buffer small (reused
        by malloc), let the socket send one chunk while the next is encrypted, and wait while the transport's
        buffer is above its high-water mark, as a slice sent by ``sendfile`` does. The bytes written are the same.
        Measured (tools/bench/tls_consume_bench.py, 1 MB fetches, 2 busy cores): 3.3-3.7 -> 1.6-2.0 ms of broker CPU
        per MB consumed over TLS and 700-800 -> 0 page faults per MB while malloc maps each whole-slice buffer
        afresh (the first few hundred MB read, and all along with 10 KB records); about 1.9 -> 1.6 ms once it has
        stopped doing so. 120 KiB chunks measured the same as 64 KiB; past 128 KiB (glibc's first mmap threshold)
        the faults can come back.
        """
        transport = self._transport
        assert transport is not None
        in_fd = part.file.fileno()
        offset, remaining = part.position, part.length
        while remaining > 0 and not self._closed:
            data = os.pread(in_fd, min(remaining, COPY_CHUNK_BYTES), offset)
            if not data:
                raise OSError(f"log segment ended {remaining} bytes before the slice did")
            transport.write(data)
            offset += len(data)
            remaining -= len(data)
            if remaining and self._paused_writing and not self._closed:
                if self._write_ready is None:
                    self._write_ready = asyncio.get_running_loop().create_future()
                await self._write_ready

    def _socket_fd(self) -> Optional[int]:
        if self._dup_fd is None:
            assert self._transport is not None
            if self._transport.get_extra_info("sslcontext") is not None:
                return None
            sock = self._transport.get_extra_info("socket")
            if sock is None:
                return None
            try:
                self._dup_fd = os.dup(sock.fileno())
            except OSError:  # out of descriptors: a copy through memory still answers the fetch
                return None
        return self._dup_fd

    def _close_dup(self) -> None:
        if self._dup_fd is not None:
            try:
                os.close(self._dup_fd)
            except OSError:
                pass
            self._dup_fd = None

    async def _drained(self, transport: asyncio.Transport) -> None:
        """Wait until the transport has written everything queued on it, woken by asyncio's flow control.

        Its buffer limits go to zero meanwhile, so the transport calls :meth:`pause_writing` at once (the buffer
        is not empty) and :meth:`resume_writing` when its last byte is sent (asyncio's and uvloop's transports
        both); connection_lost wakes the wait too. The limits are put back after.
        """
        low, high = transport.get_write_buffer_limits()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._write_ready = fut
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            if transport.get_write_buffer_size() and not self._closed:
                await fut
        finally:
            if self._write_ready is fut:
                self._write_ready = None
            if not transport.is_closing():
                transport.set_write_buffer_limits(high=high, low=low)

    async def _wait_writable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._write_ready = fut  # connection_lost wakes it too: the dup keeps the socket open after a close
        loop.add_writer(fd, _set_done, fut)
        try:
            await fut
        finally:
            loop.remove_writer(fd)
            self._write_ready = None

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        self._wake_writer()

    def _wake_writer(self) -> None:
        fut, self._write_ready = self._write_ready, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def close(self) -> None:
        if not self._closed and self._transport is not None:
            self._closed = True
            self._transport.close()
