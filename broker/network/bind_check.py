"""Probe every listener's address before start-up does any work, so a port in use ends start-up at once.

Kafka binds its ports after it has loaded every log (minutes on a big broker) and only then fails; the broker
tries a bind first, with the options the socket server will use (SO_REUSEADDR, IPv6-only sockets beside IPv4
ones, every address a host name resolves to), and closes the sockets again. Blocking (name resolution): call it
off the event loop.
"""
from __future__ import annotations

import socket
from typing import Iterable, Optional, Tuple

#: SO_REUSEADDR on the listening sockets: the socket server passes it to asyncio (``reuse_address``) and the probe
#: here sets it, so a port held only by TIME-WAIT connections of a process that just stopped counts as free for
#: both (and for ``bin/kafka-cluster.sh``'s port check, which calls :func:`bind_error`)
REUSE_ADDRESS = True


def bind_error(host: str, port: int) -> Optional[str]:
    """None if ``host:port`` can be bound now, else Kafka's message for it. Port 0 (any free port) always can."""
    if port == 0:
        return None
    shown = f"[{host}]:{port}" if ":" in host else f"{host or '0.0.0.0'}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"Socket server failed to bind to {shown}: {exc.strerror or exc}."
    for family, kind, proto, _, address in dict.fromkeys(infos):
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1 if REUSE_ADDRESS else 0)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(address)
            except OSError as exc:
                return f"Socket server failed to bind to {shown}: {exc.strerror or exc}."
    return None


def first_bind_error(listeners: Iterable[Tuple[str, str, int]]) -> Optional[str]:
    """The message for the first of ``(listener name, host, port)`` that cannot be bound, naming the listener."""
    for name, host, port in listeners:
        message = bind_error(host, port)
        if message is not None:
            return f"{message} (listener {name})"
    return None


__all__ = ["REUSE_ADDRESS", "bind_error", "first_bind_error"]
