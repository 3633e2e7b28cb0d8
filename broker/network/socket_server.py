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

Then the socket is handed to :class:`KafkaConnection` (with a SASL authenticator on SASL listeners).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set

from broker.network.connection import KafkaConnection

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestDispatcher

log = logging.getLogger(__name__)
auth_log = logging.getLogger("broker.security.authentication")

TLS_HANDSHAKE_TIMEOUT_S = 10.0


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
                 limits: Optional[ConnectionLimits] = None) -> None:
        self._dispatcher = dispatcher
        self._listeners = listeners
        self._max_request_bytes = max_request_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._limits = limits or ConnectionLimits()
        self._servers: List[asyncio.base_events.Server] = []
        self._connections: Set[KafkaConnection] = set()
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
                acceptor = _Acceptor(self, spec)
                self._acceptors.add(acceptor)
                return acceptor

            server = await loop.create_server(factory, host=host, port=spec.port, reuse_address=True,
                                              backlog=512, start_serving=serve)
            for sock in server.sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
                if self._receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
            if not serve:
                for sock in server.sockets:  # listen now, so connections wait in the backlog (as Kafka's do)
                    with sock.dup() as listening:
                        listening.listen(512)
            port = server.sockets[0].getsockname()[1]
            self.bound_ports[spec.name] = port
            self._servers.append(server)
            log.info("Listening on %s://%s:%d (%s)", spec.name, spec.host or "0.0.0.0", port, spec.security_protocol)

    async def enable_request_processing(self) -> None:
        for server in self._servers:
            await server.start_serving()

    async def stop(self) -> None:
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
        return self._gates[spec.name].delay_s(self._limits.max_creation_rate(), asyncio.get_running_loop().time())

    def _make_connection(self, spec: ListenerSpec, release: Callable[[], None]) -> KafkaConnection:
        def on_close(conn: KafkaConnection) -> None:
            self._connections.discard(conn)
            release()
        conn = KafkaConnection(self._dispatcher, spec.name, self._max_request_bytes, on_close=on_close,
                               security_protocol=spec.security_protocol,
                               authenticator_factory=spec.authenticator_factory)
        self._connections.add(conn)
        return conn


class _Acceptor(asyncio.Protocol):
    """A new socket before it is a Kafka connection: admission, creation-rate delay, TLS handshake."""

    def __init__(self, server: SocketServer, spec: ListenerSpec) -> None:
        self.server = server
        self.spec = spec
        self.transport: Optional[asyncio.Transport] = None
        self.ip = "?"
        self.task: Optional["asyncio.Task[None]"] = None
        self._counted = False
        self._released = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.ip = str(peer[0])
        transport.pause_reading()  # type: ignore[attr-defined]
        refused = self.server._admit(self.spec, self.ip)
        if refused is not None:
            log.info(refused)
            transport.close()
            self.server._acceptors.discard(self)
            return
        self._counted = True
        self.task = asyncio.get_running_loop().create_task(self._establish())

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def _release(self) -> None:
        if self._counted and not self._released:
            self._released = True
            self.server._release(self.spec, self.ip)

    def abort(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
        self._release()

    async def _establish(self) -> None:
        transport = self.transport
        assert transport is not None
        try:
            delay = self.server._creation_delay_s(self.spec)
            if delay > 0:  # max.connection.creation.rate: nothing of this connection is read until then
                await asyncio.sleep(delay)
            ip_delay_ms = self.server._limits.ip_creation_delay_ms(self.ip)
            if ip_delay_ms > 0:
                log.info("Closing connection from %s after %d ms: its IP exceeded its connection_creation_rate "
                         "quota", self.ip, ip_delay_ms)
                await asyncio.sleep(ip_delay_ms / 1000.0)
                transport.close()
                self._release()
                return
            conn = self.server._make_connection(self.spec, self._release)
            if self.spec.ssl_context is None:
                transport.set_protocol(conn)
                conn.connection_made(transport)
                transport.resume_reading()  # type: ignore[attr-defined]
                return
            loop = asyncio.get_running_loop()
            try:
                tls = await loop.start_tls(transport, conn, self.spec.ssl_context, server_side=True,
                                           ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
            except (ssl.SSLError, OSError, asyncio.TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
                auth_log.info("Failed authentication with %s (SSL handshake failed: %s) on listener %s", self.ip,
                              reason, self.spec.name)
                transport.close()
                self.server._connections.discard(conn)
                self._release()
                return
            if tls is None:  # the peer went away during the handshake
                self.server._connections.discard(conn)
                self._release()
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
            raise
        finally:
            self.server._acceptors.discard(self)
