"""NetworkClient: the real :class:`~broker.util.broker_channel.BrokerChannel`, Kafka requests to other brokers.

The controller, the replica fetchers and the broker-to-controller channel each own one client
(as each Kafka component owns its NetworkClient), so a replica Fetch parked on the leader never
delays a controller request. Per peer broker id there is one TCP connection, opened lazily by the
first ``send`` and shared by every later one.

Requests are pipelined: several may be in flight on a connection. A Kafka broker answers the
requests of one connection in the order it received them, so the responses are matched against a
FIFO of in-flight requests and each response's correlation id must equal the head's; anything else
means the stream is out of step, and the connection is closed with every pending request failed.
For the same reason a request that times out closes its connection (a late answer must never be
taken for the answer to a later request) and a cancelled ``send`` leaves its entry in the FIFO: its
response is still read off the socket, then dropped.

After a failed connect, attempts to that broker back off exponentially (``reconnect_backoff_ms`` up
to ``reconnect_backoff_max_ms``, with jitter, as Kafka's ClusterConnectionStates does); during the
backoff ``send`` fails at once with BrokerChannelError, so callers apply their own retry policy
instead of queueing behind a dead peer. A connection that was up and then dropped may reconnect at
once. Ordinary connection failures are logged on one line without a traceback: peers restart.

There is no write-side flow control: every caller bounds its own in-flight requests (one Fetch per
fetcher, a bounded queue per controller-to-broker sender).

Loop affinity: a client belongs to the event loop of its first ``send``; every method must be
called from that loop (``disconnect`` is synchronous but touches loop-bound transports).
"""
from __future__ import annotations

import asyncio
import logging
import random
import socket
import ssl
import struct
from collections import deque
from typing import Any, Deque, NamedTuple, Optional, Tuple

from broker.protocol.api import ApiKey, decode_response_with_header, encode_request
from broker.protocol.exceptions import FrameTooLargeError, InvalidFrameError
from broker.protocol.framing import RequestFramer
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock

__all__ = ["NetworkClient", "MAX_RESPONSE_BYTES"]

log = logging.getLogger(__name__)

#: Sanity limit on one response frame: a bigger size prefix means a corrupt or hostile stream.
MAX_RESPONSE_BYTES = 100 * 1024 * 1024

_I32 = struct.Struct(">i")


class _InFlight(NamedTuple):
    """A request written to a connection and waiting for its response."""

    correlation_id: int
    api_key: int
    api_version: int
    future: "asyncio.Future[Any]"


class _Backoff:
    """Reconnect backoff state of one broker id (only kept after failed connects)."""

    __slots__ = ("failures", "until", "last_error")

    def __init__(self) -> None:
        self.failures = 0
        self.until = 0.0  # the clock's mono_ms() before which no new attempt is made
        self.last_error = ""


class _Connection(asyncio.Protocol):
    """One TCP connection to one broker: writes request frames, matches responses in FIFO order."""

    def __init__(self, client: "NetworkClient", node: BrokerNode, loop: asyncio.AbstractEventLoop,
                 max_response_bytes: int) -> None:
        self.client = client
        self.node = node
        self.transport: Optional[asyncio.Transport] = None
        self.pending: Deque[_InFlight] = deque()
        self.framer = RequestFramer(max_response_bytes)
        self.closed = False
        self.reason = ""
        #: Done when the connect attempt is over (either way); its result is unused.
        self.ready: "asyncio.Future[None]" = loop.create_future()
        #: Done when the socket is gone (connection_lost, or closed before it ever connected).
        self.lost: "asyncio.Future[None]" = loop.create_future()
        self.connect_task: Optional["asyncio.Task[None]"] = None
        #: loop time after which a SASL session should be renewed (None: no session lifetime)
        self.session_deadline: Optional[float] = None

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and self.ready.done()

    def describe(self) -> str:
        return f"broker {self.node.broker_id} ({self.node.host}:{self.node.port})"

    # asyncio callbacks -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.closed:  # closed while create_connection was finishing
            transport.abort()  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self.framer.feed(data)
        except FrameTooLargeError as exc:
            self.fail(f"response frame of {exc.size} bytes from {self.describe()} exceeds the "
                      f"{exc.max_bytes}-byte limit; connection closed", logging.WARNING)
            return
        except InvalidFrameError as exc:
            self.fail(f"invalid response frame from {self.describe()}: {exc}; connection closed", logging.WARNING)
            return
        for frame in frames:
            if not self._complete(frame):
                return

    def _complete(self, frame: memoryview) -> bool:
        """Hand one response frame to the head of the FIFO; False if the connection had to be closed."""
        if not self.pending:
            self.fail(f"unsolicited response from {self.describe()}; connection closed", logging.WARNING)
            return False
        req = self.pending[0]
        if len(frame) < 4:
            self.fail(f"response of {len(frame)} bytes from {self.describe()} holds no header; "
                      "connection closed", logging.WARNING)
            return False
        cid = _I32.unpack_from(frame, 0)[0]
        if cid != req.correlation_id:
            self.fail(f"correlation id mismatch from {self.describe()}: got {cid}, "
                      f"expected {req.correlation_id}; connection closed", logging.WARNING)
            return False
        if req.future.done():  # the sender was cancelled (or timed out): drop the answer
            self.pending.popleft()
            return True
        try:
            _cid, message = decode_response_with_header(req.api_key, req.api_version, frame, has_size_prefix=False)
        except Exception as exc:  # any decode failure: the stream cannot be trusted any more
            self.fail(f"malformed response to api_key {req.api_key} v{req.api_version} from "
                      f"{self.describe()}: {exc!r}; connection closed", logging.WARNING)
            return False
        self.pending.popleft()
        req.future.set_result(message)
        return True

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if not self.closed:
            detail = f": {exc}" if exc is not None else ""
            level = logging.INFO if self.pending else logging.DEBUG
            self.fail(f"connection to {self.describe()} lost{detail}", level)
        if not self.lost.done():
            self.lost.set_result(None)

    # closing ---------------------------------------------------------------------------
    def fail(self, reason: str, level: int = logging.DEBUG) -> None:
        """Close the connection and fail every pending request with BrokerChannelError(reason)."""
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        log.log(level, "[%s] %s", self.client.client_id, reason)
        self.client._forget(self)
        pending, self.pending = self.pending, deque()
        for req in pending:
            if not req.future.done():
                req.future.set_exception(BrokerChannelError(reason))
        if not self.ready.done():
            self.ready.set_result(None)
        task = self.connect_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        if self.transport is not None:
            self.transport.abort()  # connection_lost follows and completes ``lost``
        elif task is not None and not task.done() and task is not asyncio.current_task():
            # create_connection, being cancelled, closes its own socket (connection_made may still run).
            task.add_done_callback(self._connect_task_done)
        elif not self.lost.done():
            self.lost.set_result(None)

    def _connect_task_done(self, _task: "asyncio.Task[None]") -> None:
        if self.transport is None and not self.lost.done():
            self.lost.set_result(None)


class NetworkClient:
    """Sends Kafka requests to other brokers over one lazily opened, pipelined TCP connection each.

    ``send``'s ``timeout_ms`` bounds the whole call, connect included; the connect attempt itself
    is also bounded by ``connect_timeout_ms``. ``request_timeout_ms`` is the default used when a
    caller passes ``timeout_ms=None``. The reconnect backoff is on ``clock.mono_ms()`` (a ManualClock in tests).
    """

    def __init__(self, client_id: str, request_timeout_ms: int = 30000, connect_timeout_ms: int = 10000,
                 reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1000,
                 reconnect_backoff_jitter: float = 0.2, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 clock: Clock = SYSTEM_CLOCK, ssl_context: Optional[ssl.SSLContext] = None,
                 sasl: Optional[Tuple[str, str, str]] = None) -> None:
        self.client_id = client_id
        #: TLS towards the peers' inter-broker listener (None: plaintext)
        self.ssl_context = ssl_context
        #: (mechanism, username, password) of this broker's own SASL login, or None
        self.sasl = sasl
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = max(reconnect_backoff_max_ms, reconnect_backoff_ms)
        self.reconnect_backoff_jitter = reconnect_backoff_jitter
        self.max_response_bytes = max_response_bytes
        self._mono_ms = clock.mono_ms
        self._conns: dict[int, _Connection] = {}
        self._backoff: dict[int, _Backoff] = {}
        self._next_correlation_id = 0
        self._closed = False
        self._closing: list[_Connection] = []  # closed connections whose sockets are not gone yet

    # BrokerChannel ---------------------------------------------------------------------
    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any,
                   timeout_ms: Optional[int] = None) -> Any:
        """Send ``body`` (dict or Message) as ``api_key`` v``api_version`` to ``node``; return the response.

        Raises BrokerChannelError if the broker cannot be reached (or is in reconnect backoff) or
        the connection breaks before the response; asyncio.TimeoutError after ``timeout_ms``,
        in which case the connection is closed if the request had been written.
        Encoding errors of ``body`` (a caller bug) propagate unchanged.
        """
        if self._closed:
            raise BrokerChannelError(f"client {self.client_id} is closed")
        loop = asyncio.get_running_loop()
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000.0
        deadline = loop.time() + timeout
        cid = self._next_correlation_id
        self._next_correlation_id = (cid + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, api_version, cid, self.client_id, body)

        conn = self._connection_for(node, loop)
        if not conn.ready.done():
            # asyncio.wait neither cancels the shared attempt on timeout nor when this task is cancelled.
            await asyncio.wait((conn.ready,), timeout=max(0.0, deadline - loop.time()))
            if not conn.ready.done():
                raise asyncio.TimeoutError(f"no connection to {conn.describe()} within {timeout * 1000:.0f} ms")
        if not conn.usable:
            raise BrokerChannelError(conn.reason or f"no connection to {conn.describe()}")
        if loop.time() >= deadline:  # the connect used the whole budget: do not write a doomed request
            raise asyncio.TimeoutError(f"no connection to {conn.describe()} within {timeout * 1000:.0f} ms")
        transport = conn.transport
        assert transport is not None

        fut: asyncio.Future[Any] = loop.create_future()
        req = _InFlight(cid, api_key, api_version, fut)
        conn.pending.append(req)  # append and write with no await between: FIFO order == wire order
        transport.write(frame)
        timer = loop.call_at(deadline, self._expire, conn, req, timeout)
        try:
            return await fut
        finally:
            timer.cancel()

    def disconnect(self, broker_id: int) -> None:
        """Close the connection to ``broker_id``; its pending sends fail with BrokerChannelError."""
        conn = self._conns.get(broker_id)
        if conn is not None:
            conn.fail(f"connection to {conn.describe()} closed by client {self.client_id}")

    async def close(self) -> None:
        """Close every connection (pending sends fail with BrokerChannelError); later sends fail too."""
        self._closed = True
        for conn in list(self._conns.values()):
            conn.fail(f"client {self.client_id} closed")
        waiting = [c.lost for c in self._closing if not c.lost.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=1.0)
        self._closing.clear()

    # extras ----------------------------------------------------------------------------
    def connection_delay_ms(self, broker_id: int) -> float:
        """Milliseconds until a new connection to ``broker_id`` may be attempted (0: now, or connected)."""
        if broker_id in self._conns:
            return 0.0
        b = self._backoff.get(broker_id)
        if b is None:
            return 0.0
        return max(0.0, b.until - self._mono_ms())

    def is_connected(self, broker_id: int) -> bool:
        """Whether an established connection to ``broker_id`` is open."""
        conn = self._conns.get(broker_id)
        return conn is not None and conn.usable

    # internals -------------------------------------------------------------------------
    def _connection_for(self, node: BrokerNode, loop: asyncio.AbstractEventLoop) -> _Connection:
        conn = self._conns.get(node.broker_id)
        if conn is not None and conn.session_deadline is not None and loop.time() >= conn.session_deadline \
                and not conn.pending and conn.usable:
            # our SASL session is about to end (connections.max.reauth.ms): log in again on a new connection
            conn.fail(f"SASL session to {conn.describe()} ends; reconnecting to log in again")
            conn = None
        if conn is not None:
            if conn.node.host == node.host and conn.node.port == node.port:
                return conn
            log.info("Broker %d moved from %s:%d to %s:%d; reconnecting", node.broker_id,
                     conn.node.host, conn.node.port, node.host, node.port)
            conn.fail(f"{conn.describe()} moved to {node.host}:{node.port}")
            self._backoff.pop(node.broker_id, None)
        b = self._backoff.get(node.broker_id)
        if b is not None:
            now = self._mono_ms()
            if now < b.until:
                raise BrokerChannelError(
                    f"broker {node.broker_id} ({node.host}:{node.port}) is in reconnect backoff for "
                    f"{b.until - now:.0f} ms after {b.failures} failed connect(s): {b.last_error}")
        conn = _Connection(self, node, loop, self.max_response_bytes)
        self._conns[node.broker_id] = conn
        conn.connect_task = loop.create_task(self._open(conn), name=f"connect-{self.client_id}-{node.broker_id}")
        return conn

    async def _open(self, conn: _Connection) -> None:
        """Connect ``conn``; on failure close it and start (or lengthen) the broker's backoff."""
        node = conn.node
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_ms / 1000.0):
                if self.ssl_context is None:
                    transport, _ = await loop.create_connection(lambda: conn, node.host, node.port)
                else:
                    transport, _ = await loop.create_connection(lambda: conn, node.host, node.port,
                                                                ssl=self.ssl_context, server_hostname=node.host)
                if self.sasl is not None:
                    await self._sasl_login(conn)
        except asyncio.CancelledError:
            if not conn.closed:  # cancelled from outside (e.g. loop shutdown), not by conn.fail
                conn.fail(f"connection attempt to {conn.describe()} cancelled")
            raise
        except Exception as exc:  # refused, unreachable, DNS, timeout: all are "cannot connect"
            if isinstance(exc, TimeoutError):
                exc_text = f"connect timed out after {self.connect_timeout_ms} ms"
            else:
                exc_text = str(exc) or type(exc).__name__
            b = self._backoff.setdefault(node.broker_id, _Backoff())
            b.failures += 1
            b.last_error = exc_text
            delay_ms = self._backoff_ms(b.failures)
            b.until = self._mono_ms() + delay_ms
            level = logging.INFO if b.failures == 1 else logging.DEBUG
            conn.fail(f"cannot connect to {conn.describe()}: {exc_text} (next attempt in {delay_ms:.0f} ms)", level)
            return
        if conn.closed:  # closed between connection_made and here
            transport.abort()
            return
        self._backoff.pop(node.broker_id, None)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        log.debug("Client %s connected to %s", self.client_id, conn.describe())
        if not conn.ready.done():
            conn.ready.set_result(None)

    async def _exchange(self, conn: _Connection, api_key: int, api_version: int, body: Any) -> Any:
        """One request on a connection that is not ready yet (the SASL login)."""
        loop = asyncio.get_running_loop()
        cid = self._next_correlation_id
        self._next_correlation_id = (cid + 1) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = loop.create_future()
        conn.pending.append(_InFlight(cid, api_key, api_version, fut))
        assert conn.transport is not None
        conn.transport.write(encode_request(api_key, api_version, cid, self.client_id, body))
        return await fut

    async def _sasl_login(self, conn: _Connection) -> None:
        """SaslHandshake v1 + SaslAuthenticate v2 with this broker's own credentials (PLAIN or SCRAM)."""
        from broker.security.plain import plain_client_message
        from broker.security.scram import ScramClient
        assert self.sasl is not None
        mechanism, username, password = self.sasl
        hs = await self._exchange(conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if hs.error_code:
            raise BrokerChannelError(f"SASL handshake with {conn.describe()} failed: error {hs.error_code} "
                                     f"(enabled there: {', '.join(hs.mechanisms)})")

        async def step(token: bytes) -> bytes:
            r = await self._exchange(conn, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if r.error_code:
                raise BrokerChannelError(f"SASL authentication with {conn.describe()} failed: {r.error_message}")
            if r.session_lifetime_ms:
                conn.session_deadline = asyncio.get_running_loop().time() + r.session_lifetime_ms * 0.85 / 1000
            return bytes(r.auth_bytes or b"")
        if mechanism == "PLAIN":
            await step(plain_client_message(username, password))
            return
        client = ScramClient(mechanism, username, password)
        server_first = await step(client.first_message())
        server_final = await step(client.final_message(server_first))
        try:
            client.verify_server_final(server_final)
        except Exception as exc:
            raise BrokerChannelError(f"SASL authentication with {conn.describe()} failed: {exc}") from None

    def _backoff_ms(self, failures: int) -> float:
        """Kafka's ExponentialBackoff: base * 2^(failures-1), times a random jitter factor, capped at the max."""
        term = self.reconnect_backoff_ms * (2.0 ** min(failures - 1, 30))
        if self.reconnect_backoff_jitter:
            term *= random.uniform(1.0 - self.reconnect_backoff_jitter, 1.0 + self.reconnect_backoff_jitter)
        return min(term, float(self.reconnect_backoff_max_ms))

    def _expire(self, conn: _Connection, req: _InFlight, timeout: float) -> None:
        """Request timeout: fail it and close its connection, failing everything else pending on it."""
        if req.future.done():
            return
        req.future.set_exception(asyncio.TimeoutError(
            f"no response to api_key {req.api_key} v{req.api_version} (correlation id {req.correlation_id}) "
            f"from {conn.describe()} within {timeout * 1000:.0f} ms"))
        conn.fail(f"request {req.correlation_id} to {conn.describe()} timed out; connection closed", logging.INFO)

    def _forget(self, conn: _Connection) -> None:
        """Called by a connection as it closes."""
        if self._conns.get(conn.node.broker_id) is conn:
            del self._conns[conn.node.broker_id]
        self._closing = [c for c in self._closing if not c.lost.done()]
        self._closing.append(conn)
