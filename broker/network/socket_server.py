"""Listeners: one asyncio server per entry of ``listeners`` (Kafka's SocketServer and ConnectionQuotas roles).

Every accepted socket first meets an :class:`_Acceptor`, which decides whether it may become a
Kafka connection before a byte of it is read:

- connection limits (Kafka's ConnectionQuotas): ``max.connections.per.ip`` (and its overrides)
  refuses a new connection at once, logged; ``max.connections`` does too, except on the
  inter-broker listener; ``max.connection.creation.rate`` per listener delays the connection
  (nothing of it is read) until the rate allows it; an IP over its ``connection_creation_rate``
  quota (``/config/ips``) is closed after the delay it earned (KIP-612);
- TLS listeners run the handshake here, so a failed one (plaintext bytes on a TLS port, an
  untrusted client certificate) is logged on one line and the socket closed; on an SSL listener
  the client certificate's distinguished name, mapped by ``ssl.principal.mapping.rules``,
  becomes the principal.

- descriptors (:class:`~broker.util.fd_budget.DescriptorBudget`): while fewer than ``broker.fd.reserve``
  descriptors are left (half of it on the inter-broker listener) a new connection is closed at once, so
  ZooKeeper, replication, the controller and log rolls always find descriptors; one WARN line per 10 s.

Then the socket is handed to :class:`KafkaConnection` (with a SASL authenticator on SASL listeners): at once,
inside the accept callback, when nothing delays it (no task per connection); otherwise from a task, with any
bytes that arrived meanwhile replayed (uvloop starts reading right after ``connection_made``, so pausing there
does not hold them back as it does on asyncio's loop).

Accepting: the kernel queues up to ``socket.listen.backlog.size`` connections (default 1024 here, Kafka's 50:
Kafka accepts on a thread of its own, this broker between requests on its event loop, so a connection storm
must wait in the kernel's queue rather than have its SYNs dropped), and asyncio's loop accepts at most
``ACCEPTS_PER_PASS`` of them per readiness of a listening socket, so a burst of thousands is taken in slices
between other work instead of stalling the loop. When ``accept()`` itself fails (EMFILE: descriptors ran out
despite the reserve) asyncio stops accepting on that socket for a second and retries, the connections waiting in
the backlog; the broker logs that as one WARN line per 10 s (asyncio's own report is an ERROR per failed accept,
up to a backlog's worth per second). uvloop does not report it: libuv accepts and closes the waiting connections
with a descriptor it keeps for this. ``connections.max.idle.ms``:
connections idle that long are closed, checked every tenth of it (at most every 30 s).

Loop affinity: everything here runs on the broker's event loop.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set

from broker.network.bind_check import REUSE_ADDRESS
from broker.network.connection import KafkaConnection
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.util.fd_budget import REFUSAL_LOG_INTERVAL_S, DescriptorBudget

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestDispatcher

log = logging.getLogger(__name__)

#: most connections accepted per readiness of a listening socket (the rest wait in the kernel's queue)
ACCEPTS_PER_PASS = 128
auth_log = logging.getLogger("broker.security.authentication")

TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: asyncio's message when accept() fails for lack of resources (it then pauses that listener for 1 s)
_ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"


@dataclass
class ListenerSpec:
    """A parsed ``listeners`` entry, e.g. ``PLAINTEXT://localhost:9092``, with how its connections are secured."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    ssl_context: Optional[ssl.SSLContext] = None
    #: builds one connection's SASL authenticator (SASL listeners only)
    authenticator_factory: Optional[Callable[[], Any]] = None
    #: client certificate (DER or None) -> principal, for SSL listeners
    certificate_principal: Optional[Callable[[Optional[bytes]], str]] = None
    #: the inter-broker listener is exempt from max.connections
    inter_broker: bool = False


@dataclass
class ConnectionLimits:
    """Kafka's connection quotas; the callables read the current (dynamic) values."""

    max_connections: Callable[[], int] = lambda: 2**31 - 1
    max_connections_per_ip: Callable[[str], int] = lambda ip: 2**31 - 1
    max_creation_rate: Callable[[], int] = lambda: 2**31 - 1
    #: ip -> delay in ms the new connection earned against its IP's connection_creation_rate (0: fine)
    ip_creation_delay_ms: Callable[[str], int] = lambda ip: 0


@dataclass
class _RateGate:
    """max.connection.creation.rate of one listener: a token bucket of one second's worth."""

    tokens: float = 0.0
    last: float = 0.0
    started: bool = False

    def delay_s(self, rate: int, now: float) -> float:
        if rate >= 2**31 - 1:
            return 0.0
        if not self.started:
            self.started, self.tokens, self.last = True, float(rate), now
        self.tokens = min(float(rate), self.tokens + (now - self.last) * rate)
        self.last = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / max(rate, 1)


class SocketServer:
    """Accepts connections on every listener and hands them to :class:`KafkaConnection`."""

    def __init__(self, dispatcher: "RequestDispatcher", listeners: List[ListenerSpec], max_request_bytes: int,
                 send_buffer_bytes: int = 102400, receive_buffer_bytes: int = 102400,
                 limits: Optional[ConnectionLimits] = None, budget: Optional[DescriptorBudget] = None,
                 listen_backlog: int = 50, connections_max_idle_ms: int = 600000, clock: Clock = SYSTEM_CLOCK) -> None:
        self._dispatcher = dispatcher
        #: idle times (connections.max.idle.ms, on mono_ms as Kafka's Selector on nanoTime), creation-rate and
        #: quota delays, and the connections' throttles
        self.clock = clock
        #: None: no descriptor reserve (tests of other things)
        self.budget = budget
        self._listen_backlog = max(1, listen_backlog)
        self._idle_ms = int(connections_max_idle_ms)
        self._idle_task: Optional["asyncio.Task[None]"] = None
        self._accept_errors = _AcceptErrorLog(self)
        self._listeners = listeners
        self._max_request_bytes = max_request_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._limits = limits or ConnectionLimits()
        self._servers: List[asyncio.base_events.Server] = []
        #: connection -> the listener it counts against (and its client_ip the IP)
        self._connections: Dict[KafkaConnection, ListenerSpec] = {}
        self._on_close = self._connection_closed  # one bound method shared by every connection
        self._acceptors: Set["_Acceptor"] = set()
        self._per_ip: Dict[str, int] = {}
        self._total = 0
        self._gates: Dict[str, _RateGate] = {}
        #: listener name -> actually bound port (differs from the config when it asks for port 0)
        self.bound_ports: dict[str, int] = {}

    async def start(self, serve: bool = True) -> None:
        """Bind every listener; with ``serve=False`` connections wait in the backlog until
        :meth:`enable_request_processing` (Kafka binds its ports first, so the registration can advertise them,
        and processes requests only once the broker is registered)."""
        loop = asyncio.get_running_loop()
        for spec in self._listeners:
            host = spec.host or None  # '' means all interfaces, as in Kafka
            self._gates[spec.name] = _RateGate()

            def factory(spec: ListenerSpec = spec) -> "_Acceptor":
                return _Acceptor(self, spec)  # kept in _acceptors only while it waits (see _Acceptor)

            # asyncio's backlog argument is both the kernel's listen queue and the most accepts per readiness:
            # a slice of at most ACCEPTS_PER_PASS keeps a storm from stalling the loop, and the listen() below
            # gives the kernel queue its configured length (socket.listen.backlog.size)
            server = await loop.create_server(factory, host=host, port=spec.port, reuse_address=REUSE_ADDRESS,
                                              backlog=min(self._listen_backlog, ACCEPTS_PER_PASS),
                                              start_serving=serve)
            for sock in server.sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
                if self._receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            for sock in server.sockets:  # listen now, so connections wait in the backlog (as Kafka's do)
                with sock.dup() as listening:
                    listening.listen(self._listen_backlog)
            port = server.sockets[0].getsockname()[1]
            self.bound_ports[spec.name] = port
            self._servers.append(server)
            log.info("Listening on %s://%s:%d (%s)", spec.name, spec.host or "0.0.0.0", port, spec.security_protocol)
        self._accept_errors.install(loop)
        if self._idle_ms > 0 and self._idle_task is None:
            self._idle_task = loop.create_task(self._close_idle_connections(), name="connections-max-idle")

    async def enable_request_processing(self) -> None:
        for server in self._servers:
            await server.start_serving()

    def listener_of(self, port: int) -> str:
        """The listener name bound to ``port`` (for log lines about a listening socket)."""
        for name, p in self.bound_ports.items():
            if p == port:
                return name
        return str(port)

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms, as Kafka's Selector: a connection with nothing read or written for that long,
        and no request in the broker, is closed."""
        interval_ms = min(30_000.0, max(50.0, self._idle_ms / 10))
        while True:
            await self.clock.sleep_ms(interval_ms)
            cutoff = self.clock.mono_ms() - self._idle_ms
            idle = [c for c in self._connections if c.last_active < cutoff and not c.busy]
            for conn in idle:
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("Closing connection %s: idle for more than %d ms (connections.max.idle.ms)",
                              conn.context.connection_id if conn.context else "?", self._idle_ms)
                conn.close()

    async def stop(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        self._accept_errors.uninstall()
        for server in self._servers:
            server.close()
        for acceptor in list(self._acceptors):
            acceptor.abort()
        for conn in list(self._connections):
            conn.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    # ------------------------------------------------------------------ connection quotas
    def _admit(self, spec: ListenerSpec, ip: str) -> Optional[str]:
        """Count a new connection in, or say (one line) why it is refused."""
        per_ip = self._limits.max_connections_per_ip(ip)
        if self._per_ip.get(ip, 0) >= per_ip:
            return f"Rejected connection from {ip}, address already has the configured maximum of {per_ip} connections."
        if not spec.inter_broker:
            limit = self._limits.max_connections()
            if self._total >= limit:
                return (f"Rejected connection from {ip} on listener {spec.name}: the broker already has the "
                        f"configured maximum of {limit} connections (max.connections).")
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        if not spec.inter_broker:
            self._total += 1
        return None

    def _release(self, spec: ListenerSpec, ip: str) -> None:
        n = self._per_ip.get(ip, 0) - 1
        if n > 0:
            self._per_ip[ip] = n
        else:
            self._per_ip.pop(ip, None)
        if not spec.inter_broker:
            self._total = max(0, self._total - 1)

    def _creation_delay_s(self, spec: ListenerSpec) -> float:
        return self._gates[spec.name].delay_s(self._limits.max_creation_rate(), self.clock.mono_ms() / 1000.0)

    def _make_connection(self, spec: ListenerSpec, ip: str) -> KafkaConnection:
        """A Kafka connection counted in its IP's and the broker's connections (and the descriptor budget) until
        its socket is closed. Where it counts is kept in a dict, not in a closure per connection: a closure is
        four more objects for the garbage collector to walk, ten thousand times over."""
        conn = KafkaConnection(self._dispatcher, spec.name, self._max_request_bytes, on_close=self._on_close,
                               security_protocol=spec.security_protocol,
                               authenticator_factory=spec.authenticator_factory, clock=self.clock)
        conn.client_ip = ip
        self._connections[conn] = spec
        return conn

    def _connection_closed(self, conn: KafkaConnection) -> None:
        """A connection's socket is closed (or it never started: a failed TLS handshake): count it out, once."""
        spec = self._connections.pop(conn, None)
        if spec is not None:
            self._release(spec, conn.client_ip)
            if self.budget is not None:
                self.budget.connection_closed()


def _pass_on(previous: Any, loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
    """To the handler that was there before, except asyncio's accept retry that finds its listener closed."""
    if _is_retry_of_closed_listener(context):
        # asyncio schedules one _start_serving retry per failed accept() of a round, a second later; if the listener
        # was closed meanwhile (a shutdown), the retry finds no socket: nothing is lost, nothing to report
        log.debug("An accept retry after its listener was closed: ignored")
    elif previous is not None:
        previous(loop, context)
    else:
        loop.default_exception_handler(context)


def _is_retry_of_closed_listener(context: Dict[str, Any]) -> bool:
    """True for asyncio's delayed accept retry (``_start_serving``) failing because its listener socket was closed
    after the retry was scheduled: ``ValueError: Invalid file descriptor: -1``."""
    exc = context.get("exception")
    handle = context.get("handle")
    callback = getattr(handle, "_callback", None)
    return (isinstance(exc, ValueError) and getattr(callback, "__name__", "") == "_start_serving"
            and "Invalid file descriptor: -1" in str(exc))


class _AcceptErrorLog:
    """Replaces asyncio's report of a failed accept() (EMFILE, ENFILE, ENOBUFS, ENOMEM: an ERROR with a traceback,
    again at every retry, once a second) by one WARN line per REFUSAL_LOG_INTERVAL_S with the count since the last;
    every other exception context goes to the handler that was there before."""

    def __init__(self, server: SocketServer) -> None:
        self._server = server
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._previous: Any = None
        self._count = 0
        self._failed_ever = False
        self._logged_at = -1e18

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is None:
            self._loop = loop
            self._previous = loop.get_exception_handler()
            loop.set_exception_handler(self._handle)

    def uninstall(self) -> None:
        """Give the loop back its handler; after a failed accept, behind a filter of the retries asyncio scheduled
        for a second later, which find the listener closed (``_pass_on``)."""
        if self._loop is not None and self._loop.get_exception_handler() == self._handle:
            handler = functools.partial(_pass_on, self._previous) if self._failed_ever else self._previous
            self._loop.set_exception_handler(handler)
        self._loop = None

    def _handle(self, loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
        exc = context.get("exception")
        if context.get("message") == _ACCEPT_OUT_OF_RESOURCES:  # (uvloop: libuv accepts and closes them instead)
            self._count += 1
            self._failed_ever = True
            now = self._server.clock.mono_ms() / 1000.0
            if now - self._logged_at >= REFUSAL_LOG_INTERVAL_S:
                port = None
                sock = context.get("socket")
                try:
                    port = sock.getsockname()[1] if sock is not None else None
                except OSError:
                    pass
                listener = self._server.listener_of(port) if port is not None else "?"
                log.warning("Error while accepting connections on listener %s: %s; accepting pauses for a second "
                            "and retries (%d failed accepts since the last message)", listener,
                            getattr(exc, "strerror", None) or exc, self._count)
                self._logged_at = now
                self._count = 0
            return
        _pass_on(self._previous, loop, context)


class _Acceptor(asyncio.Protocol):
    """A new socket before it is a Kafka connection: descriptors, admission, creation-rate delay, TLS handshake.

    Only a connection that must wait (a creation-rate delay, an IP quota delay, a TLS handshake) keeps its
    acceptor, and a task, until it is established; the others become a :class:`KafkaConnection` inside
    ``connection_made``.
    """

    __slots__ = ("server", "spec", "transport", "ip", "task", "_counted", "_released", "_early")

    def __init__(self, server: SocketServer, spec: ListenerSpec) -> None:
        self.server = server
        self.spec = spec
        self.transport: Optional[asyncio.Transport] = None
        self.ip = "?"
        self.task: Optional["asyncio.Task[None]"] = None
        self._counted = False
        self._released = False
        self._early: Optional[bytearray] = None  # bytes read before the connection took over (uvloop)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.server
        budget = server.budget
        if budget is not None:
            sock = transport.get_extra_info("socket")
            fd = sock.fileno() if sock is not None else -1
            if not budget.admit(fd, self.spec.name, self.spec.inter_broker):
                transport.abort()  # type: ignore[attr-defined]  # a socket transport (asyncio.Transport)
                return
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.ip = str(peer[0])
        refused = server._admit(self.spec, self.ip)
        if refused is not None:
            log.info(refused)
            transport.abort()  # type: ignore[attr-defined]  # a socket transport (asyncio.Transport)
            if budget is not None:
                budget.connection_closed()
            return
        self._counted = True
        delay_s = server._creation_delay_s(self.spec)  # both take their token now: computed once per connection
        ip_delay_ms = server._limits.ip_creation_delay_ms(self.ip) if delay_s <= 0 else None
        if self.spec.ssl_context is None and delay_s <= 0 and ip_delay_ms is not None and ip_delay_ms <= 0:
            conn = server._make_connection(self.spec, self.ip)
            self._counted = False  # the connection counts itself out when it closes
            transport.set_protocol(conn)
            conn.connection_made(transport)
            return
        transport.pause_reading()  # type: ignore[attr-defined]
        server._acceptors.add(self)
        self.task = asyncio.get_running_loop().create_task(self._establish(delay_s, ip_delay_ms))

    def data_received(self, data: bytes) -> None:
        """Bytes that came before the connection took over (uvloop reads right after connection_made)."""
        if self._early is None:
            self._early = bytearray()
        self._early += data
        if self.transport is not None:
            self.transport.pause_reading()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        elif self.task is None and self._counted:  # refused or aborted before any task
            self._release()

    def _release(self) -> None:
        if self._counted and not self._released:
            self._released = True
            self.server._release(self.spec, self.ip)
            if self.server.budget is not None:
                self.server.budget.connection_closed()

    def abort(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
        self._release()

    async def _establish(self, delay_s: float, ip_delay_ms: Optional[int]) -> None:
        transport = self.transport
        assert transport is not None
        conn: Optional[KafkaConnection] = None
        try:
            if delay_s > 0:  # max.connection.creation.rate: nothing of this connection is read until then
                await self.server.clock.sleep_ms(delay_s * 1000.0)
            if ip_delay_ms is None:
                ip_delay_ms = self.server._limits.ip_creation_delay_ms(self.ip)
            if ip_delay_ms > 0:
                log.info("Closing connection from %s after %d ms: its IP exceeded its connection_creation_rate "
                         "quota", self.ip, ip_delay_ms)
                await self.server.clock.sleep_ms(ip_delay_ms)
                transport.close()
                self._release()
                return
            if transport.is_closing():
                self._release()
                return
            conn = self.server._make_connection(self.spec, self.ip)
            self._released = True  # from here the connection counts itself out when it closes
            early, self._early = self._early, None
            if self.spec.ssl_context is None:
                conn.start(transport, bytes(early) if early else None)
                return
            loop = asyncio.get_running_loop()
            try:
                handshake = loop.start_tls(transport, conn, self.spec.ssl_context, server_side=True,
                                           ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
                if early:  # the ClientHello, read before start_tls took the transport: hand it to the TLS protocol
                    started = loop.create_task(handshake)
                    await asyncio.sleep(0)  # start_tls has set its protocol and scheduled connection_made, resume
                    loop.call_soon(_feed, transport, bytes(early))
                    tls = await started
                else:
                    tls = await handshake
            except (ssl.SSLError, OSError, asyncio.TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
                auth_log.info("Failed authentication with %s (SSL handshake failed: %s) on listener %s", self.ip,
                              reason, self.spec.name)
                transport.close()
                self.server._connection_closed(conn)
                return
            if tls is None:  # the peer went away during the handshake
                self.server._connection_closed(conn)
                return
            conn.connection_made(tls)
            ssl_object = tls.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            assert conn.context is not None
            conn.context.client_certificate = der
            if self.spec.certificate_principal is not None and self.spec.security_protocol == "SSL":
                try:
                    conn.context.principal = self.spec.certificate_principal(der)
                except ValueError as exc:  # no mapping rule matched: Kafka fails the authentication
                    auth_log.info("Failed authentication with %s (%s)", self.ip, exc)
                    conn.close()
        except asyncio.CancelledError:
            self._release()
            if conn is not None and conn.context is None:  # cancelled during the TLS handshake
                self.server._connection_closed(conn)
            raise
        finally:
            self.server._acceptors.discard(self)


def _feed(transport: asyncio.BaseTransport, data: bytes) -> None:
    """Give ``data`` to the transport's current protocol as if just read (buffered protocols included)."""
    protocol: Any = transport.get_protocol()  # buffered or streaming, told apart below
    if hasattr(protocol, "get_buffer"):  # a buffered protocol (uvloop's SSLProtocol is one without the base class)
        view = memoryview(data)
        while view:
            buf = protocol.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            protocol.buffer_updated(n)
            view = view[n:]
    else:
        protocol.data_received(data)
