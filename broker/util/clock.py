"""The broker's two clocks, as Kafka's ``Time``: wall-clock and monotonic milliseconds.

- :func:`wall_ms` (Kafka's ``time.milliseconds()``): for what is stored or compared with stored times: record and
  batch timestamps, retention against segment timestamps, transaction start/update timestamps in the transaction
  log, commit and group-state timestamps in ``__consumer_offsets``, ZooKeeper registration timestamps.
- :func:`mono_ms` (Kafka's ``hiResClockMs()`` / ``nanoseconds()``): for deadlines and idle times that only this
  process measures: session, join and sync timeouts, delayed operations, throttles, idle connections, fetch
  session eviction, ISR lag. A wall-clock jump (NTP step, manual change) moves neither early nor late.

:func:`mono_ms` is anchored at the wall clock when this module is imported, so its values look like epoch
milliseconds and a default of 0 ("never") stays long ago, whatever the machine's uptime; it never jumps after.
Its values must not be stored or sent.
"""
from __future__ import annotations

import time

#: seconds added to time.monotonic() so that mono_ms() starts at the wall clock of the import
_ANCHOR_S = time.time() - time.monotonic()


def wall_ms() -> int:
    """Wall-clock epoch milliseconds (Kafka's Time.milliseconds())."""
    return int(time.time() * 1000)


def mono_ms() -> int:
    """Monotonic milliseconds (Kafka's Time.hiResClockMs()), starting near the wall clock; never stored or sent."""
    return int((time.monotonic() + _ANCHOR_S) * 1000)
