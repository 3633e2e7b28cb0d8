"""Log.read without the Log's lock (issue 20): a read completes while another thread holds the lock (an append
blocked inside its segment write), never returns a batch being written, is made again when a truncation, a
retention deletion or a cleaner swap overtook it, and under appends, rolls, truncations, deletions, compaction and
file-cache evictions on another thread returns only whole, CRC-valid batches at the offsets asked for."""
from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Optional

import pytest

from broker.accel import record_batch
from broker.protocol.records.builder import build_batch
from broker.storage.cleaner import Cleaner
from broker.storage.config import LogConfig
from broker.storage.errors import LogBusyError, OffsetOutOfRangeError
from broker.storage.file_cache import SEGMENT_FILES
from broker.storage.log import FetchDataInfo, Log
from broker.storage.segment import LogSegment
from broker.storage.cleaner_batch import iter_stored_records

from .cleaner_helpers import T0
from .lock_helpers import lock_held_elsewhere

WAIT_S = 10.0


def values_batch(first_offset: int, n: int, gen: int, pad: int = 0, keyed: bool = False) -> bytearray:
    """``n`` records whose values name the offset they will get and the generation that wrote them."""
    return bytearray(build_batch([(b"k%d" % ((first_offset + i) % 7) if keyed else None,
                                   b"%d:%d:" % (first_offset + i, gen) + b"x" * pad, [], T0 + first_offset + i)
                                  for i in range(n)]))


def batches_of(data: bytes) -> list[tuple[Any, list[Any]]]:
    """Every batch of ``data`` with its records; asserts that ``data`` is whole, CRC-valid batches."""
    infos, end = record_batch.scan_batches(bytearray(data), 0, -1, True)
    assert end == len(data), "a partial or corrupt batch at byte %d of %d" % (end, len(data))
    return [(info, iter_stored_records(bytes(data[info.position:info.position + info.size]))) for info in infos]


def record_values(info: FetchDataInfo) -> list[tuple[int, bytes]]:
    assert info.records is not None
    return [(r.offset, r.value) for _, recs in batches_of(info.records.read()) for r in recs]


def fill(log: Log, batches: int, per_batch: int = 2, gen: int = 0, pad: int = 40) -> None:
    for _ in range(batches):
        log.append_as_leader(values_batch(log.log_end_offset, per_batch, gen, pad), 0)


def test_a_read_completes_while_an_append_is_blocked_inside_its_write(open_log: Callable[..., Log],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The append stops twice, holding the Log's lock: with half its batch in the file (the segment's size not
    moved), then with the whole batch written and the size moved but nothing published. Reads at both points
    return the published batches only, at once."""
    log = open_log(LogConfig(segment_bytes=1 << 20))
    fill(log, 5)  # 0-9
    pauses = [(threading.Event(), threading.Event()) for _ in range(2)]
    real_append = LogSegment.append

    def pause(n: int) -> None:
        reached, resume = pauses[n]
        reached.set()
        resume.wait(WAIT_S)

    def blocked_append(seg: LogSegment, buf: Any, batches: Any) -> None:
        import os
        handle = seg.log_file
        os.pwrite(handle.fd, bytes(buf[:len(buf) // 2]), seg.size)
        pause(0)
        real_append(seg, buf, batches)
        pause(1)

    monkeypatch.setattr(LogSegment, "append", blocked_append)
    appender = threading.Thread(target=log.append_as_leader, args=(values_batch(10, 3, 0, 200), 0))
    appender.start()
    try:
        for reached, resume in pauses:
            assert reached.wait(WAIT_S)
            assert [o for o, _ in record_values(log.read(0, 1 << 20))] == list(range(10))  # none past the LEO
            assert [o for o, _ in record_values(log.read(6, 1 << 20, wait=False))] == list(range(6, 10))
            assert log.read(10, 1 << 20).records is None
            assert appender.is_alive() and not resume.is_set(), "the read waited for the append"
            resume.set()
    finally:
        for _, resume in pauses:
            resume.set()
        appender.join(WAIT_S)
    assert [o for o, _ in record_values(log.read(8, 1 << 20))] == list(range(8, 13))


def test_reads_do_not_wait_for_the_lock(open_log: Callable[..., Log]) -> None:
    log = open_log(LogConfig(segment_bytes=600, index_interval_bytes=64))
    fill(log, 20)
    assert len(log.segments) > 2
    with lock_held_elsewhere(log) as still_held:
        for start in (0, 7, 39, 40):
            info = log.read(start, 1 << 20, 35, include_aborted_txns=True)
            got = record_values(info) if info.records is not None else []
            assert [o for o, _ in got] == list(range(start - start % 2, 35 if start < 35 else start - start % 2))[
                :len(got)] and all(o < 35 for o, _ in got)
        assert log.end_offset_for_epoch(0) == (0, 40)
        assert still_held(), "a read waited for the Log's lock"


def overtake_on_first_read(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> list[int]:
    """Run ``change`` (on this thread) just after the first segment read of the next Log.read, as if another
    thread's change had overtaken it; returns the list that counts segment reads."""
    real_read = LogSegment.read
    calls: list[int] = []

    def read(seg: LogSegment, *args: Any, **kw: Any) -> Any:
        res = real_read(seg, *args, **kw)
        calls.append(1)
        if len(calls) == 1:
            change()
        return res

    monkeypatch.setattr(LogSegment, "read", read)
    return calls


def test_a_read_overtaken_by_a_truncation_is_made_again(open_log: Callable[..., Log],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(LogConfig(segment_bytes=1 << 20))
    fill(log, 5)  # 0-9, generation 0

    def truncate_and_rewrite() -> None:  # a follower truncating: the same offsets, other bytes, other sizes
        log.truncate_to(4)
        log.append_as_leader(values_batch(4, 1, 1, 500), 0)
        log.append_as_leader(values_batch(5, 4, 1, 3), 0)

    calls = overtake_on_first_read(monkeypatch, truncate_and_rewrite)
    got = record_values(log.read(4, 1 << 20))
    assert len(calls) == 2
    assert got == [(o, b"%d:1:" % o + b"x" * (500 if o == 4 else 3)) for o in range(4, 9)]


def test_a_read_overtaken_by_retention_gets_offset_out_of_range(open_log: Callable[..., Log],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(LogConfig(segment_bytes=300, file_delete_delay_ms=0))
    fill(log, 12)
    assert len(log.segments) > 3

    def delete_old_segments() -> None:
        log.update_high_watermark(log.log_end_offset)
        log.delete_records_before(log.segments[2].base_offset)
        assert log.delete_old_segments() == 2

    overtake_on_first_read(monkeypatch, delete_old_segments)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)


def test_a_read_overtaken_by_a_cleaner_swap_is_made_again(open_log: Callable[..., Log],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(LogConfig(cleanup_policy=("compact",), segment_bytes=600, index_interval_bytes=64,
                             file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.01))
    for _ in range(30):
        log.append_as_leader(values_batch(log.log_end_offset, 1, 0, 20, keyed=True), 0)
    log.update_high_watermark(log.log_end_offset)
    calls = overtake_on_first_read(monkeypatch, lambda: Cleaner().clean(log, 0, now_ms=T0 + 10_000))
    got = record_values(log.read(0, 1 << 20))
    assert len(calls) >= 2
    assert got and got[0][0] > 0  # offset 0's key was written again later: the cleaned segments were read
    assert got == record_values(log.read(0, 1 << 20))
    assert all(v.startswith(b"%d:0:" % o) for o, v in got)


def test_while_a_change_is_under_way_the_loop_is_told_and_a_worker_reads_under_the_lock(
        open_log: Callable[..., Log]) -> None:
    log = open_log()
    fill(log, 3)
    with log._lock:
        log._begin_layout_change()  # begun, its view not yet published
        with pytest.raises(LogBusyError):
            log.read(0, 1 << 20, wait=False)
        assert [o for o, _ in record_values(log.read(0, 1 << 20))] == list(range(6))
        log._publish()
    assert log.read(0, 1 << 20, wait=False).records is not None


@pytest.mark.parametrize("compact", [False, True], ids=["delete", "compact"])
def test_reads_racing_every_change_return_whole_batches_at_their_offsets(open_log: Callable[..., Log],
                                                                         compact: bool) -> None:
    """A model of what was written (each record's value names its offset and the generation that wrote it; a
    truncation starts a new generation) checked against every read made on two threads while a third appends,
    rolls, truncates, deletes by retention, compacts and flushes, with a file cache of two descriptors. A read is
    checked strictly when no truncation, deletion or swap began between its start and the copy of its bytes (after
    that, a slice handed out earlier may legitimately cover rewritten bytes, as it would at sendfile)."""
    rng = random.Random(20)
    log = open_log(LogConfig(segment_bytes=2500, index_interval_bytes=128, file_delete_delay_ms=0,
                             cleanup_policy=("compact",) if compact else ("delete",), min_cleanable_dirty_ratio=0.01))
    written: dict[int, set[int]] = {}
    done = threading.Event()
    failures: list[BaseException] = []
    checked = [0, 0]
    old_capacity = SEGMENT_FILES.capacity
    SEGMENT_FILES.set_capacity(2)

    def write() -> None:
        gen = 0
        deadline = time.monotonic() + 2.0
        try:
            for _ in range(2500):
                if time.monotonic() > deadline:
                    break
                op = rng.random()
                leo = log.log_end_offset
                if op < 0.75 or leo < 10:
                    n = rng.randint(1, 5)
                    for off in range(leo, leo + n):
                        written.setdefault(off, set()).add(gen)
                    log.append_as_leader(values_batch(leo, n, gen, rng.randint(0, 300), keyed=compact), 0)
                elif op < 0.83 and not compact:
                    gen += 1
                    log.truncate_to(rng.randint(max(log.log_start_offset, leo - 30), leo))
                elif op < 0.91:
                    log.update_high_watermark(leo)
                    log.delete_records_before(rng.randint(log.log_start_offset, max(log.log_start_offset, leo - 40)))
                    log.delete_old_segments()
                elif op < 0.95 and compact:
                    log.update_high_watermark(leo)
                    Cleaner().clean(log, log.log_start_offset, now_ms=T0 + 10_000_000)
                elif op < 0.97:
                    log.roll()
                else:
                    log.flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            done.set()

    def read(seed: int) -> None:
        r = random.Random(seed)
        try:
            while not done.is_set():
                view = log.view
                lo, hi = view.offsets.log_start_offset, view.offsets.log_end_offset
                start = r.randint(lo, hi)
                bound: Optional[int] = r.choice([None, start + r.randint(0, 30)])
                layout = log._layout
                try:
                    info = log.read(start, r.choice([1, 100, 3000, 1 << 20]), bound, r.random() < 0.7,
                                    include_aborted_txns=r.random() < 0.3, wait=r.random() < 0.5)
                except (OffsetOutOfRangeError, LogBusyError):
                    continue
                data = info.records.read() if info.records is not None else b""
                if log._layout != layout:
                    continue  # a truncation, deletion or swap began since: the bytes may be rewritten by now
                checked[0] += 1
                prev = None
                for n, (batch, recs) in enumerate(batches_of(data)):
                    checked[1] += 1
                    if n == 0 and not compact:
                        assert batch.base_offset <= start <= batch.base_offset + batch.last_offset_delta, (start,
                                                                                                           batch)
                    assert batch.base_offset + batch.last_offset_delta >= start
                    if bound is not None:
                        assert batch.base_offset + batch.last_offset_delta < bound
                    assert prev is None or batch.base_offset > prev
                    prev = batch.base_offset + batch.last_offset_delta
                    for rec in recs:
                        off, gen, _ = rec.value.split(b":", 2)
                        assert int(off) == rec.offset, "record %d holds offset %s's bytes" % (rec.offset, off)
                        assert int(gen) in written[rec.offset]
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    threads = [threading.Thread(target=read, args=(seed,)) for seed in (1, 2)]
    writer = threading.Thread(target=write)
    try:
        for t in threads:
            t.start()
        writer.start()
        writer.join(60)
        for t in threads:
            t.join(60)
    finally:
        done.set()
        SEGMENT_FILES.set_capacity(old_capacity)
    if failures:
        raise failures[0]
    assert checked[0] > 0 and checked[1] > 0, "no read was checked"
