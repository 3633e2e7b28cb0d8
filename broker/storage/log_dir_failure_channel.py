"""LogDirFailureChannel: where an I/O error on a log dir is reported, once per dir (Kafka's LogDirFailureChannel).

Any storage thread that catches an ``OSError`` while touching a log dir calls :meth:`maybe_add_offline_log_dir`
and raises KafkaStorageError: the dir is recorded offline (every Log of it then refuses I/O without touching the
disk, see ``Log._check_open``) and queued once. The ReplicaManager takes queued dirs on the event loop (it sets a
thread-safe wake-up with :meth:`set_wakeup` and drains :meth:`poll_offline_log_dir`) and stops serving their
replicas (KIP-112).

Thread-safety: every method may be called from any thread. ``has_offline_log_dir`` reads an immutable frozenset
without the lock, so the checks on I/O paths cost one set lookup.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable, Optional

logger = logging.getLogger(__name__)


def describe_cause(exc: Optional[BaseException]) -> str:
    """``[Errno 28] No space left on device`` for an OSError, else the exception's text (one line, no traceback)."""
    if exc is None:
        return ""
    if isinstance(exc, OSError) and exc.errno is not None:
        return "[Errno %d] %s" % (exc.errno, exc.strerror or exc)
    return "%s: %s" % (type(exc).__name__, exc)


class LogDirFailureChannel:
    """Offline log dirs of this broker and the queue of those not yet handled by the ReplicaManager."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: frozenset[str] = frozenset()
        self._queue: deque[str] = deque()
        self._wakeup: Optional[Callable[[], None]] = None
        #: called (on the reporting thread, once per dir) as soon as a dir goes offline: the LogManager marks the
        #: dir's logs so no other thread writes to them meanwhile
        self._on_offline: list[Callable[[str], None]] = []

    def has_offline_log_dir(self, log_dir: str) -> bool:
        """Whether ``log_dir`` (absolute) had an I/O error."""
        return log_dir in self._offline

    @property
    def offline_log_dirs(self) -> frozenset[str]:
        return self._offline

    def add_offline_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(dir)`` runs on the reporting thread when a dir first goes offline (must be quick, no I/O)."""
        self._on_offline.append(fn)

    def maybe_add_offline_log_dir(self, log_dir: str, msg: str, exc: Optional[BaseException] = None) -> None:
        """Record ``log_dir`` offline and queue it, the first time only; log ``msg`` (with the cause) as ERROR then.
        Later reports for the same dir log at DEBUG: the dir is already being taken offline."""
        with self._lock:
            first = log_dir not in self._offline
            if first:
                self._offline = self._offline | {log_dir}
                self._queue.append(log_dir)
            wakeup = self._wakeup
        cause = describe_cause(exc)
        line = msg if not cause or cause in msg else "%s: %s" % (msg, cause)
        if not first:
            logger.debug("%s (log dir %s is already offline)", line, log_dir)
            return
        logger.error("%s", line)
        for fn in list(self._on_offline):
            try:
                fn(log_dir)
            except Exception:  # noqa: BLE001 - a listener must not stop the report
                logger.exception("Offline log dir listener failed for %s", log_dir)
        if wakeup is not None:
            wakeup()

    def set_wakeup(self, fn: Optional[Callable[[], None]]) -> None:
        """``fn()`` is called (from the reporting thread) whenever a dir is queued; it must be thread-safe, e.g.
        ``loop.call_soon_threadsafe(...)``. Dirs queued before it was set wait in the queue."""
        with self._lock:
            self._wakeup = fn

    def poll_offline_log_dir(self) -> Optional[str]:
        """The next queued offline dir, or None (Kafka's takeNextOfflineLogDir, without blocking)."""
        with self._lock:
            return self._queue.popleft() if self._queue else None


__all__ = ["LogDirFailureChannel", "describe_cause"]
