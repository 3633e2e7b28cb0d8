"""RLMQuotaManager for the copy quota (remote.log.manager.copy.max.bytes.per.second over
remote.log.manager.copy.quota.window.num samples of remote.log.manager.copy.quota.window.size.seconds): the copy
task asks before each segment and, over the quota, leaves the rest for a later run instead of blocking (Kafka's
copy thread waits on the quota; a sweep here just stops, and the next sweep goes on where it stopped)."""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Deque, List

LONG_MAX = (1 << 63) - 1


class RLMQuotaManager:
    """A rate of bytes over the last ``num_windows`` windows of ``window_ms``, as Kafka's Rate(SampledStat).
    Thread-safe: the copier pool's threads (copy quota) or the remote reader pool's (fetch quota) share one."""

    def __init__(self, bytes_per_second: int, now_ms: Callable[[], int], num_windows: int = 11,
                 window_ms: int = 1000) -> None:
        self.bytes_per_second = bytes_per_second
        self._now_ms = now_ms
        self.num_windows = num_windows
        self.window_ms = window_ms
        #: [window start ms, bytes] samples, oldest first
        self._samples: Deque[List[int]] = deque()
        self._lock = threading.Lock()

    def _expire(self, now: int) -> None:
        while self._samples and self._samples[0][0] <= now - self.num_windows * self.window_ms:
            self._samples.popleft()

    def record(self, nbytes: int) -> None:
        now = self._now_ms()
        start = now - now % self.window_ms
        with self._lock:
            self._expire(now)
            if self._samples and self._samples[-1][0] == start:
                self._samples[-1][1] += nbytes
            else:
                self._samples.append([start, nbytes])

    def rate(self) -> float:
        """Bytes per second over the samples kept; the elapsed time counts at least num_windows - 1 whole windows
        plus the current one so far, as Kafka's Rate.windowSize."""
        now = self._now_ms()
        with self._lock:
            self._expire(now)
            if not self._samples:
                return 0.0
            total = sum(b for _, b in self._samples)
            first = self._samples[0][0]
        elapsed = now - first + 1
        floor = (self.num_windows - 1) * self.window_ms
        return total * 1000.0 / max(elapsed, floor)

    def is_quota_exceeded(self) -> bool:
        return self.bytes_per_second < LONG_MAX and self.rate() > self.bytes_per_second


__all__ = ["RLMQuotaManager", "LONG_MAX"]
