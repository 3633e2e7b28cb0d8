"""The offsets a Log publishes (``Log.offsets``) and its lock-free HW: what the event loop reads and sets never
waits for the Log's lock (held by a worker across disk writes), the LSO moves as soon as the HW passes a marker
(the producer state catching up later), and a HW raised on the loop never ends above the LEO when a truncation
runs at the same time."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from broker.protocol.records.builder import build_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.storage.log_offsets import NO_TXN, LogOffsets

from .conftest import batch
from .lock_helpers import lock_held_elsewhere, raw_high_watermark
from .txn_helpers import plain_batch, txn_batch, write_marker

PID = 77


def test_offsets_are_published_by_every_change(open_log: Callable[..., Log]) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    assert log.offsets == LogOffsets(0, 0, 0)
    for _ in range(6):
        log.append_as_leader(batch(2), 0)
    assert len(log.segments) > 1
    assert log.offsets == LogOffsets(0, 0, 12) and log.log_end_offset == 12
    log.update_high_watermark(12)
    assert log.delete_records_before(log.segments[1].base_offset) == log.offsets.log_start_offset > 0
    log.truncate_to(8)
    assert (log.offsets.log_end_offset, log.high_watermark) == (8, 8)
    log.append_as_follower(batch_at(8, 3))
    assert log.offsets.log_end_offset == 11 and log.high_watermark == 8
    log.truncate_fully_and_start_at(40)
    assert log.offsets == LogOffsets(40, 40, 40) and log.high_watermark == 40


def batch_at(offset: int, n: int) -> bytearray:
    """A batch already stamped with its offsets (as a follower receives it)."""
    return bytearray(build_batch([(b"k", b"v", [], 1_700_000_000_000 + i) for i in range(n)], base_offset=offset))


def test_loop_side_reads_and_hw_do_not_take_the_lock(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(PID, 0, 2), 0)                 # 0-1, open
    log.append_as_leader(plain_batch(1), 0)                       # 2
    with lock_held_elsewhere(log) as still_held:
        assert log.maybe_increment_high_watermark(2)
        assert (log.high_watermark, log.last_stable_offset, log.log_end_offset) == (2, 0, 3)
        assert not log.maybe_increment_high_watermark(1)
        assert log.offsets.first_open_txn_offset == 0 and log.size_bytes > 0 and log.log_start_offset == 0
        log.update_config(LogConfig(retention_ms=5))
        assert log.read(2, 1 << 20).records is not None  # reads take no lock either
        assert still_held(), "a loop-side call waited for the Log's lock"
    assert log.config.retention_ms == 5


def test_the_lso_moves_when_the_hw_passes_the_marker_with_the_lock_held(open_log: Callable[..., Log]) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(PID, 0, 2), 0)                 # 0-1
    write_marker(log, PID, committed=True)                        # 2: the COMMIT marker
    assert log.producer_state.unreplicated_txns and log.offsets.unreplicated_txns == ((0, 2),)
    assert log.offsets.first_open_txn_offset == NO_TXN
    with lock_held_elsewhere(log) as still_held:
        assert log.maybe_increment_high_watermark(2) and log.last_stable_offset == 0  # the marker is at the HW
        assert log.maybe_increment_high_watermark(None) and log.high_watermark == 3
        assert log.last_stable_offset == 3  # the marker is below the HW: stable, without the producer state
        assert still_held()
    assert log.producer_state.unreplicated_txns  # the owner has not looked yet
    log.append_as_leader(plain_batch(1), 0)                       # its next change drops the transaction
    assert not log.producer_state.unreplicated_txns and log.offsets.unreplicated_txns == ()
    assert log.last_stable_offset == log._last_stable_offset_locked() == 3


def test_lock_free_lso_matches_the_producer_states(open_log: Callable[..., Log]) -> None:
    """Several producers, transactions overlapping, the HW moving one offset at a time: the LSO from the published
    offsets is the LSO the producer state gives under the lock."""
    log = open_log()
    steps: list[Any] = [txn_batch(1, 0), txn_batch(2, 0), plain_batch(), txn_batch(1, 1), (2, False), txn_batch(3, 0),
                        (1, True), plain_batch(2), (3, True), txn_batch(2, 1), (2, True)]
    for step in steps:
        if isinstance(step, tuple):
            write_marker(log, step[0], step[1])
        else:
            log.append_as_leader(step, 0)
        for hw in range(log.high_watermark, log.log_end_offset + 1):
            log.maybe_increment_high_watermark(hw)
            expected = Log._last_stable_offset_locked(log)
            assert log.last_stable_offset == expected, (hw, log.offsets)


def test_a_truncation_racing_the_loop_hw_write_wins(open_log: Callable[..., Log]) -> None:
    """The interleaving that matters, made to happen: the loop reads the LEO, a truncation runs, the loop writes a
    HW from the LEO it read. That write does not count, and the loop raises the HW from the truncated log."""
    log = open_log()
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    real = log.offsets

    class TruncatedMeanwhile:
        """``log.offsets`` whose LEO, once read, lets a truncation run before the loop goes on."""

        def __getattr__(self, name: str) -> Any:
            log.offsets = real
            value = getattr(real, name)
            log.truncate_to(4)
            return value

    log.offsets = TruncatedMeanwhile()  # type: ignore[assignment]
    assert log.maybe_increment_high_watermark(None)
    assert (log.high_watermark, raw_high_watermark(log), log.log_end_offset) == (4, 4, 4)
    log.append_as_leader(batch(3), 0)  # the LEO grows past 10 again: the stale 10 must not count as the HW
    assert log.high_watermark == 4 and raw_high_watermark(log) == 4


def test_hw_never_exceeds_leo_across_concurrent_truncations(open_log: Callable[..., Log]) -> None:
    """A worker appends and truncates while the loop raises the HW to the LEO as fast as it can: after each
    truncation (the worker's view, under no lock of the loop's) the stored HW is at most the LEO, and at the end."""
    log = open_log()
    stop = threading.Event()
    failures: list[str] = []

    def worker() -> None:
        try:
            for i in range(300):
                log.append_as_leader(batch(3), 0)
                leo = log.log_end_offset
                log.truncate_to(max(0, leo - 1 - i % 3))
                with log._lock:
                    if raw_high_watermark(log) > log._leo:
                        failures.append("HW %d above LEO %d" % (raw_high_watermark(log), log._leo))
        finally:
            stop.set()

    t = threading.Thread(target=worker)
    t.start()
    raised = 0
    while not stop.is_set():
        raised += log.maybe_increment_high_watermark(None)
        time.sleep(0)  # let the worker have the GIL back at once
    t.join(30)
    assert not failures, failures[:5]
    assert raised > 0
    assert raw_high_watermark(log) <= log.log_end_offset
