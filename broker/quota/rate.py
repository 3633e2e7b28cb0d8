"""The two measures Kafka's quotas use: a sampled rate (bandwidth, request time) and a token bucket (mutations).

Both are plain objects driven by the caller's clock (milliseconds), so they are exact in tests
and cheap on the hot path. Their arithmetic follows Kafka's ``Rate``/``SampledStat`` and
``TokenBucket``: the observed rate is the sum of the kept samples divided by the time they span,
where that span is never counted as shorter than ``samples - 1`` full windows (so one burst just
after start-up is not mistaken for a huge rate); a sample older than ``samples * window`` is
forgotten; a new sample starts when the current one is a full window old.
"""
from __future__ import annotations

import math
from typing import List


class SampledRate:
    """Sum of recorded values per second over `samples` windows of `window_ms` (Kafka's Rate, per second)."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self._starts: List[int] = []
        self._values: List[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add `value` to the sample covering `now_ms` (a negative value un-records, as Kafka does for fetches)."""
        self._purge(now_ms)
        if not self._starts:
            self._starts.append(now_ms)
            self._values.append(0.0)
            self._current = 0
        elif now_ms - self._starts[self._current] >= self.window_ms:
            if len(self._starts) < self.samples:
                self._starts.append(now_ms)
                self._values.append(0.0)
                self._current = len(self._starts) - 1
            else:
                self._current = (self._current + 1) % self.samples
                self._starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """The time the kept samples span, at least `samples - 1` full windows."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(1, elapsed)

    def measure(self, now_ms: int) -> float:
        """Observed rate per second."""
        size = self.window_size_ms(now_ms)
        return sum(self._values) * 1000.0 / size


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """Delay that brings `observed` back to `bound` if nothing more is recorded: X = (O - T) / T * W."""
    if bound <= 0:
        return window_ms
    return max(0, int(round((observed - bound) / bound * window_ms)))


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): `rate` tokens per second, at most `rate * samples * window` saved up.

    A strict caller refuses work once the bucket is below zero; a permissive one records anyway.
    The throttle time is how long the bucket needs to climb back to zero.
    """

    __slots__ = ("rate", "burst", "_tokens", "_last_ms")

    def __init__(self, rate: float, samples: int, window_ms: int, now_ms: int) -> None:
        self.rate = rate
        self.burst = rate * samples * window_ms / 1000.0
        self._tokens = self.burst
        self._last_ms = now_ms

    def set_rate(self, rate: float, samples: int, window_ms: int) -> None:
        self.rate = rate
        self.burst = rate * samples * window_ms / 1000.0
        self._tokens = min(self._tokens, self.burst)

    def tokens(self, now_ms: int) -> float:
        elapsed = max(0, now_ms - self._last_ms)
        self._last_ms = max(self._last_ms, now_ms)
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate / 1000.0)
        return self._tokens

    def record(self, value: float, now_ms: int) -> None:
        self.tokens(now_ms)
        self._tokens -= value

    def throttle_time_ms(self, now_ms: int) -> int:
        t = self.tokens(now_ms)
        if t >= 0 or self.rate <= 0:
            return 0
        return int(math.ceil(-t / self.rate * 1000.0))


__all__ = ["SampledRate", "TokenBucket", "throttle_time_ms"]
