"""The interpreter settings a broker with thousands of partitions needs: garbage collection, GIL switching, malloc.

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

Large buffers: glibc's malloc gives each allocation over its mmap threshold (128 KiB at first, raised only by the
size of the last mapped block freed) pages of its own, unmapped again on free, and trims freed memory at the top of
a heap above 128 KiB; either way a buffer of a MiB costs 256 fresh page faults the next time one is needed. A
compressed Produce inflates into such a buffer (gzip, through ISA-L, returns a new one each time), a follower's fetch
response is one, so do large requests: measured on 10 KiB gzip records, 257 page faults per request and 15.5 µs of
broker CPU per record; with the thresholds of :data:`MALLOC_MMAP_THRESHOLD` and :data:`MALLOC_TRIM_THRESHOLD`, none
and 10.0 µs. The freed memory stays with the process for the next buffer instead (at most the trim threshold per
malloc arena beyond what is in use).

Loop affinity: call on the event loop (it is a few milliseconds at most: gc.freeze moves list heads).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
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


#: allocations below this come from malloc's heaps, not pages mapped for each (glibc's M_MMAP_THRESHOLD)
MALLOC_MMAP_THRESHOLD = 8 << 20
#: free memory at the top of a malloc heap is given back to the system only above this (glibc's M_TRIM_THRESHOLD)
MALLOC_TRIM_THRESHOLD = 16 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def configure() -> None:
    """The broker's collection thresholds, GIL switch interval and malloc thresholds (process-wide; called once at
    start-up)."""
    gc.set_threshold(*THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    configure_malloc()


def configure_malloc() -> bool:
    """glibc's mmap and trim thresholds (:data:`MALLOC_MMAP_THRESHOLD`, :data:`MALLOC_TRIM_THRESHOLD`); False, and
    nothing changed, where the C library has no ``mallopt`` (musl) or refuses them. Environment settings of the
    same thresholds (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) are left as the operator gave them."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.info("No mallopt in the C library (%s): malloc's thresholds left as they are", name)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = True
    for env, param, value in (("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD),
                              ("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)):
        if env in os.environ:
            continue
        if mallopt(param, value) != 1:
            log.info("mallopt(%d, %d) refused: malloc's threshold left as it is", param, value)
            ok = False
    return ok


def freeze_long_lived(reason: str) -> int:
    """Collect once (so garbage is not frozen), then freeze what is left; returns the frozen object count."""
    start = time.monotonic()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("Froze %d long-lived objects out of garbage collection (%s) in %d ms", frozen, reason,
             (time.monotonic() - start) * 1000)
    return frozen
