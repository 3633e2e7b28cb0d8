"""One client connection: bytes in, frames to the request handler, responses out.

As Kafka's processor does, a connection is *muted* as soon as a whole request has arrived:
reading from the socket pauses until that request's response is written (and, once quotas
exist, until its throttle time has passed: KIP-219), then it is unmuted. So one request per
connection is in flight inside the broker, responses stay in request order, a client that
pipelines requests is held back by TCP itself, and a throttled client simply waits. Bytes that
had already arrived with the request (the start of a pipelined one) stay buffered in the framer.
Responses are lists of ``bytes`` and ``FileSlice`` parts; slices go out with ``os.sendfile``
(zero-copy on plaintext sockets).

Loop affinity: everything here runs on the broker's event loop.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, Optional

from broker.api.dispatcher import ConnectionContext
from broker.api.sasl_authenticator import RespondAndClose
from broker.protocol.framing import FrameTooLargeError, InvalidFrameError, RequestFramer
from broker.util.file_slice import FileSlice

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestDispatcher

log = logging.getLogger(__name__)


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol for one accepted socket."""

    _counter = 0

    def __init__(self, dispatcher: "RequestDispatcher", listener_name: str, max_request_bytes: int,
                 on_close: Optional[callable] = None, security_protocol: str = "PLAINTEXT",  # type: ignore
                 authenticator_factory: Optional[Callable[[], Any]] = None) -> None:
        self._dispatcher = dispatcher
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        self._authenticator_factory = authenticator_factory
        self._framer = RequestFramer(max_request_bytes)
        self._queue: Deque[memoryview] = deque()
        self._transport: Optional[asyncio.Transport] = None
        self._task: Optional[asyncio.Task[None]] = None
        self._muted = False
        self._closed = False
        self._on_close = on_close
        self.context: Optional[ConnectionContext] = None
        self._dup_fd: Optional[int] = None
        self._can_write = asyncio.Event()
        self._can_write.set()

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

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self._framer.feed(data)
        except (FrameTooLargeError, InvalidFrameError) as exc:
            log.warning("Closing connection %s: %s", self.context and self.context.connection_id, exc)
            self.close()
            return
        if not frames:
            return
        if self.context is not None:
            self.context.received_ns = time.monotonic_ns()  # request queue time (RequestMetrics) starts here
        self._queue.extend(frames)
        self._mute()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._process())

    def _mute(self) -> None:
        if not self._muted and self._transport is not None:
            self._muted = True
            self._transport.pause_reading()

    def _unmute(self) -> None:
        if self._muted and not self._closed and self._transport is not None:
            self._muted = False
            self._transport.resume_reading()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._dup_fd is not None:
            try:
                os.close(self._dup_fd)
            except OSError:
                pass
            self._dup_fd = None
        pending = self._framer.buffered_bytes
        if pending and not self._closed:
            # The peer went away in the middle of a frame: worth one line, as it hints at a broken client.
            log.info("Connection %s closed by the peer with %d bytes of an incomplete request buffered",
                     self.context.connection_id if self.context else "?", pending)
        self._closed = True
        self._queue.clear()
        self._can_write.set()
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
                    self._queue.clear()
                    await asyncio.sleep(result.delay_s)
                    if result.parts:
                        await self._write(result.parts)
                    self.close()
                    return
                if result is not None:  # None: e.g. acks=0 produce, no response
                    await self._write(result)
                throttle_ms = self.context.throttle_time_ms
                if throttle_ms > 0:  # KIP-219: stay muted for the throttle time after answering
                    self.context.throttle_time_ms = 0
                    await asyncio.sleep(throttle_ms / 1000.0)
                self.context.received_ns = time.monotonic_ns()  # a pipelined request counts as read only now
            self._unmute()
        except Exception:  # a bug in a handler must not kill the broker
            log.exception("Unexpected error on connection %s; closing it",
                          self.context.connection_id if self.context else "?")
            self.close()
        finally:
            self._task = None
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
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def _sendfile(self, part: FileSlice) -> None:
        """Zero-copy ``os.sendfile`` of a log slice, after the bytes already queued on the transport.

        Works the same on asyncio's and uvloop's loops: the socket is written through a dup of its
        fd, so the loop can watch that fd for writability while the transport keeps the original.
        """
        transport = self._transport
        assert transport is not None
        while transport.get_write_buffer_size() and not self._closed:
            await asyncio.sleep(0.0005)  # let the loop flush the response header first
        out_fd = self._socket_fd()
        if out_fd is None:  # no raw socket (e.g. TLS): read and write instead
            transport.write(part.read())
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

    def _socket_fd(self) -> Optional[int]:
        if self._dup_fd is None:
            assert self._transport is not None
            if self._transport.get_extra_info("sslcontext") is not None:
                return None
            sock = self._transport.get_extra_info("socket")
            if sock is None:
                return None
            self._dup_fd = os.dup(sock.fileno())
        return self._dup_fd

    async def _wait_writable(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            loop.remove_writer(fd)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def close(self) -> None:
        if not self._closed and self._transport is not None:
            self._closed = True
            self._transport.close()
