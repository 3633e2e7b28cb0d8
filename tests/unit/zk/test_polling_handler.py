"""PollingHandler.select: kazoo's select contract (ready objects out of the lists given) on one poll(2)."""
from __future__ import annotations

import socket

import pytest

from broker.zk.handler import PollingHandler


def test_readable_and_writable_as_select_reports_them() -> None:
    h = PollingHandler()
    a, b = socket.socketpair()
    try:
        assert h.select([a], [], [], 0) == ([], [], [])
        assert h.select([], [a], [], 0) == ([], [a], [])
        b.send(b"x")
        assert h.select([a, b], [], [], 1.0) == ([a], [], [])
        assert h.select([a], [a], [], 0) == ([a], [a], [])
        assert h.select([a.fileno()], [], [], 0) == ([a.fileno()], [], [])
        b.close()
        a.recv(1)
        assert h.select([a], [], [], 0) == ([a], [], [])  # hang-up counts as readable, as with select()
    finally:
        a.close()
        b.close()


def test_a_closed_socket_and_a_negative_timeout_are_refused() -> None:
    h = PollingHandler()
    a, b = socket.socketpair()
    b.close()
    a.close()
    with pytest.raises(ValueError):
        h.select([a], [], [], 0)
    with pytest.raises(ValueError):
        h.select([], [], [], -1)


def test_descriptors_above_1024() -> None:
    """select() cannot watch a descriptor above 1024 (FD_SETSIZE); a broker with thousands of partitions has them."""
    import os
    import resource
    h = PollingHandler()
    a, b = socket.socketpair()
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    high = os.dup2(a.fileno(), min(1500, soft - 1))
    try:
        b.send(b"x")
        assert h.select([high], [], [], 1.0) == ([high], [], [])
    finally:
        os.close(high)
        a.close()
        b.close()
