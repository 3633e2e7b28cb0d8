"""Listeners: one asyncio server per entry of ``listeners`` (Kafka's SocketServer role)."""
from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Set

from broker.network.connection import KafkaConnection

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestDispatcher

log = logging.getLogger(__name__)


@dataclass
class ListenerSpec:
    """A parsed ``listeners`` entry, e.g. ``PLAINTEXT://localhost:9092``."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


class SocketServer:
    """Accepts connections on every listener and hands them to :class:`KafkaConnection`."""

    def __init__(self, dispatcher: "RequestDispatcher", listeners: List[ListenerSpec], max_request_bytes: int,
                 send_buffer_bytes: int = 102400, receive_buffer_bytes: int = 102400) -> None:
        self._dispatcher = dispatcher
        self._listeners = listeners
        self._max_request_bytes = max_request_bytes
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._servers: List[asyncio.base_events.Server] = []
        self._connections: Set[KafkaConnection] = set()
        #: listener name -> actually bound port (differs from the config when it asks for port 0)
        self.bound_ports: dict[str, int] = {}

    async def start(self, serve: bool = True) -> None:
        """Bind every listener; with ``serve=False`` connections wait in the backlog until
        :meth:`enable_request_processing` (Kafka binds its ports first, so the registration can advertise them,
        and processes requests only once the broker is registered)."""
        loop = asyncio.get_running_loop()
        for spec in self._listeners:
            if spec.security_protocol not in ("PLAINTEXT",):
                raise ValueError(f"Listener {spec.name} uses {spec.security_protocol}, which this broker does not "
                                 f"support yet (only PLAINTEXT)")
            host = spec.host or None  # '' means all interfaces, as in Kafka

            def factory(spec: ListenerSpec = spec) -> KafkaConnection:
                conn = KafkaConnection(self._dispatcher, spec.name, self._max_request_bytes,
                                       on_close=self._connections.discard)
                self._connections.add(conn)
                return conn

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
            log.info("Listening on %s://%s:%d", spec.name, spec.host or "0.0.0.0", port)

    async def enable_request_processing(self) -> None:
        for server in self._servers:
            await server.start_serving()

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self._connections):
            conn.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
