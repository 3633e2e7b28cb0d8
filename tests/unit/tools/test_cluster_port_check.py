"""bin/kafka-cluster.sh's port check binds as the broker's listener does (issue 17 point 6): a port held only by
TIME-WAIT sockets of a broker that just stopped is free for the broker, so it is free for the check too."""
from __future__ import annotations

import errno
import inspect
import socket
import time
from typing import Optional

from broker.network import bind_check, socket_server
from tools.cluster import port_is_free


def _time_wait_port() -> int:
    """A port whose only socket is in TIME-WAIT: the listening side closes its connection first (an active close,
    as a broker does when it stops), then the listener goes away."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # server side closes first: its end (127.0.0.1:port) goes to TIME-WAIT
    client.recv(1)  # the FIN arrives
    client_port = client.getsockname()[1]
    client.close()
    listener.close()
    # the server's end moves FIN-WAIT-2 -> TIME-WAIT when the client's FIN arrives
    deadline = time.monotonic() + 10
    while _tcp_state(port, client_port) != _TCP_TIME_WAIT:
        assert time.monotonic() < deadline, _tcp_state(port, client_port)
        time.sleep(0.001)
    return port


#: the state column of /proc/net/tcp (include/net/tcp_states.h)
_TCP_TIME_WAIT = 0x06


def _tcp_state(local_port: int, remote_port: int) -> Optional[int]:
    """The state of this host's IPv4 TCP socket from ``local_port`` to ``remote_port`` (None: there is none)."""
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)) == (local_port,
                                                                                                 remote_port):
                return int(fields[3], 16)
    return None


def _plain_bind_fails(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def test_time_wait_port_is_free_for_the_check_as_for_the_broker() -> None:
    port = _time_wait_port()
    assert _plain_bind_fails(port), "expected the TIME-WAIT socket to block a bind without SO_REUSEADDR"
    assert port_is_free(port)  # what the old check (a bind without SO_REUSEADDR) got wrong
    assert bind_check.bind_error("127.0.0.1", port) is None  # the broker's own start-up probe agrees


def test_a_listening_port_is_in_use() -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        assert not port_is_free(s.getsockname()[1])


def test_check_and_listener_share_their_socket_options() -> None:
    """One constant: the probe sets SO_REUSEADDR from it and the socket server passes it to asyncio."""
    assert bind_check.REUSE_ADDRESS is True
    assert "reuse_address=REUSE_ADDRESS" in inspect.getsource(socket_server.SocketServer.start)
    assert socket_server.REUSE_ADDRESS is bind_check.REUSE_ADDRESS
    assert "bind_error(" in inspect.getsource(port_is_free)
