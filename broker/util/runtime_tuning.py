"""The interpreter settings a broker with thousands of partitions needs: garbage collection and GIL switching.

Why: a broker with 10,000 partitions holds a few hundred thousand long-lived objects (logs, segments,
partitions, metadata). CPython's full collection walks every tracked object each time the oldest generation
grows by a quarter: measured here, ~300 ms for the storage objects of 10,000 partitions alone, a pause every
connection waits out (Metadata, produce and fetch tails). Those objects live until their partition goes
away, so scanning them for cycles is wasted work.

Young collections are batched too (:data:`THRESHOLDS`). After start-up and after each batch of state changes that created much long-lived state (a LeaderAndIsr
of many partitions), :func:`freeze_long_lived` moves everything alive into the permanent generation
(``gc.freeze``, as Instagram's pre-fork servers do): later collections only walk what was allocated since.
Frozen objects are still freed by reference counting when dropped (a deleted partition's logs); only
reference *cycles* among them would outlive their use, and the broker's long-lived structures do not form
cycles with short-lived garbage.

GIL switching: the event loop is CPU-bound under load while the ZooKeeper client's, the controller's and the disk
workers' threads wait for the GIL to handle each answer; CPython hands it over only every 5 ms by default, so 10,000
pipelined ZooKeeper reads took 9.5 s while requests were served, 2.9 s with a 0.5 ms interval (measured). A switch
costs microseconds, so :data:`SWITCH_INTERVAL_S` trades a little throughput for threads that do not queue
behind the loop.

Loop affinity: call on the event loop (it is a few milliseconds at most: gc.freeze moves list heads).
"""
from __future__ import annotations

import gc
import logging
import sys
import time

log = logging.getLogger(__name__)

#: a state change that created at least this many partitions is worth a freeze
FREEZE_AFTER_PARTITIONS = 500
#: young-generation threshold: CPython's 700 allocations make a collection run every few requests under load
#: (each walking the young objects and, every tenth time, the middle generation); 50,000 batches that work
#: (measured with 1,000 consumer groups: commit p99 from seconds to hundreds of milliseconds)
THRESHOLDS = (50_000, 20, 100)


#: sys.setswitchinterval for the broker process (CPython's default is 0.005)
SWITCH_INTERVAL_S = 0.001


def configure() -> None:
    """The broker's collection thresholds and GIL switch interval (process-wide; called once at start-up)."""
    gc.set_threshold(*THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def freeze_long_lived(reason: str) -> int:
    """Collect once (so garbage is not frozen), then freeze what is left; returns the frozen object count."""
    start = time.monotonic()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("Froze %d long-lived objects out of garbage collection (%s) in %d ms", frozen, reason,
             (time.monotonic() - start) * 1000)
    return frozen
