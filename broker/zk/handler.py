"""kazoo's threading handler with a cheaper ``select``: one poll(2) call instead of a new epoll selector.

kazoo's connection thread calls ``handler.select`` once per request it sends, once per response it reads and once
before every socket write. The stock handler builds, registers, polls and closes a fresh ``selectors`` object each
time (four system calls and a few Python objects); at the controller's rates (10,000 partition states read or
written in one go) that was about 40 % of the client's CPU. ``poll`` has no descriptor limit either (plain
``select`` fails above 1024, which a broker holding thousands of partitions reaches), so it keeps what kazoo
switched to selectors for. Everything else is kazoo's ``SequentialThreadingHandler``.
"""
from __future__ import annotations

import select
from typing import Any, Sequence

from kazoo.handlers.threading import SequentialThreadingHandler

_READ = select.POLLIN | select.POLLPRI
#: what makes a descriptor count as readable / writable for select(): data, hang-up or error
_READY_READ = _READ | select.POLLHUP | select.POLLERR | select.POLLNVAL
_READY_WRITE = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL


def _fileno(obj: Any) -> int:
    fd = obj if isinstance(obj, int) else obj.fileno()
    if fd < 0:
        raise ValueError("Invalid event mask or fd")  # what kazoo's selector_select raises for a closed socket
    return fd


class PollingHandler(SequentialThreadingHandler):
    """SequentialThreadingHandler whose select() is a single poll(2); same contract (lists of ready objects)."""

    def select(self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        masks: dict[int, int] = {}
        for obj in rlist:
            fd = _fileno(obj)
            masks[fd] = masks.get(fd, 0) | _READ
        for obj in wlist:
            fd = _fileno(obj)
            masks[fd] = masks.get(fd, 0) | select.POLLOUT
        poller = select.poll()
        for fd, mask in masks.items():
            poller.register(fd, mask)
        ready = dict(poller.poll(None if timeout is None else timeout * 1000.0))
        readable = [obj for obj in rlist if ready.get(_fileno(obj), 0) & _READY_READ]
        writable = [obj for obj in wlist if ready.get(_fileno(obj), 0) & _READY_WRITE]
        return readable, writable, []
