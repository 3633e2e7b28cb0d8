"""One owner per partition log (broker/storage/log_owner.py): every change to a Log runs on its partition's I/O
worker, including the storage scheduler's and the cleaner's, and the Log refuses a command from any other thread
(BROKER_CHECK_LOG_OWNER, set by tests/conftest.py)."""
from __future__ import annotations

import os
import threading
from typing import Iterator

import pytest

from broker.replica.io_workers import IoWorkers
from broker.storage import log_owner
from broker.storage.cleaner import Cleaner
from broker.storage.cleaner_pass import LogCleaningAbortedError
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.storage.log_manager import LogManager
from broker.storage.log_owner import LogCommandCancelled, NotLogOwnerError
from broker.storage.scheduler import Scheduler
from broker.storage.segment import LogSegment

from .cleaner_helpers import append, compact_config, read_records
from broker.util.clock import ManualClock

from .conftest import batch

TP = ("t", 0)


@pytest.fixture
def workers() -> Iterator[IoWorkers]:
    w = IoWorkers(3)
    yield w
    w.shutdown()


def worker_name(w: IoWorkers, key: tuple[str, int]) -> str:
    return w.call(key, lambda: threading.current_thread().name)


def test_the_owner_check_is_on_in_the_tests() -> None:
    assert log_owner.CHECK_OWNER, "tests/conftest.py sets BROKER_CHECK_LOG_OWNER: the assertions below need it"


def test_call_runs_on_the_key_s_worker_and_inline_on_the_worker_itself(workers: IoWorkers) -> None:
    name = worker_name(workers, TP)
    assert name.startswith("io-") and name == worker_name(workers, TP)
    assert workers.call(TP, lambda: workers.call(TP, lambda: threading.current_thread().name)) == name
    assert not workers.is_owner(TP)
    assert workers.call(TP, lambda: workers.is_owner(TP))


def test_call_raises_the_command_s_exception_in_the_caller(workers: IoWorkers) -> None:
    def boom() -> None:
        raise ValueError("bad")
    with pytest.raises(ValueError, match="bad"):
        workers.call(TP, boom)


def test_call_each_runs_each_key_on_its_owner_and_keeps_order_and_failures(workers: IoWorkers) -> None:
    keys = [("t", i) for i in range(40)]
    owners = {k: worker_name(workers, k) for k in keys}

    def fn(key: tuple[str, int]) -> str:
        if key[1] == 7:
            raise KeyError(key)
        return threading.current_thread().name

    out = workers.call_each(keys, fn, chunk_size=4)
    assert [r for r, _ in out] == [None if k[1] == 7 else owners[k] for k in keys]
    assert isinstance(out[7][1], KeyError) and all(e is None for i, (_, e) in enumerate(out) if i != 7)


def test_after_shutdown_the_caller_runs_commands_itself() -> None:
    w = IoWorkers(2)
    w.shutdown()
    assert w.is_owner(TP)
    assert w.call(TP, lambda: threading.current_thread().name) == threading.current_thread().name
    assert w.call_each([TP], lambda k: k) == [(TP, None)]


def test_a_command_withdrawn_before_its_owner_takes_it_never_runs(workers: IoWorkers) -> None:
    busy, release = threading.Event(), threading.Event()
    blocker = threading.Thread(target=lambda: workers.call(TP, lambda: (busy.set(), release.wait(10))))
    blocker.start()
    assert busy.wait(10)
    ran: list[int] = []
    with pytest.raises(LogCommandCancelled):
        workers.call(TP, lambda: ran.append(1), cancelled=lambda: True)
    release.set()
    blocker.join(10)
    assert workers.call(TP, lambda: len(ran)) == 0


def test_a_log_refuses_commands_from_a_thread_that_is_not_its_owner(tmp_path: "os.PathLike[str]",
                                                                    workers: IoWorkers) -> None:
    log = Log.open(os.path.join(str(tmp_path), "t-0"), LogConfig(), clock=ManualClock())
    log.owners = workers
    with pytest.raises(NotLogOwnerError, match="append_as_leader of t-0 ran on thread MainThread"):
        log.append_as_leader(batch(2), 0)
    info = workers.call(TP, lambda: log.append_as_leader(batch(2), 0))
    assert info.last_offset == 1 and log.log_end_offset == 2
    assert log.read(0, 10_000).records is not None  # reads are not commands: any thread, no lock
    with pytest.raises(NotLogOwnerError):
        log.truncate_to(0)
    workers.call(TP, log.close)


def segments_of(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def test_the_log_manager_s_periodic_tasks_run_on_the_owners(tmp_path: "os.PathLike[str]", workers: IoWorkers,
                                                            clock: ManualClock) -> None:
    """Retention, producer expiry, the metadata-file sync and a flush after a roll are commands to the partition's
    worker; the flush's fsyncs stay on the scheduler thread."""
    sched = Scheduler()
    lm = LogManager([str(tmp_path)], LogConfig(segment_bytes=300, retention_ms=60_000, file_delete_delay_ms=0),
                    broker_id=1, cluster_id="c", scheduler=sched, clock=clock)
    lm.attach_owners(workers)
    fsync_threads: list[str] = []
    real_flush = LogSegment.flush

    def flush(seg: LogSegment) -> None:
        fsync_threads.append(threading.current_thread().name)
        real_flush(seg)

    try:
        def fill() -> Log:
            log = lm.get_or_create_log(*TP)
            for _ in range(8):
                log.append_as_leader(batch(3, ts=clock.wall_ms()), 0)
            log.update_high_watermark(log.log_end_offset)
            return log
        log = workers.call(TP, fill)
        assert len(log.segments) > 2
        with pytest.raises(NotLogOwnerError):
            log.delete_old_segments()
        recovery_before = log.recovery_point
        LogSegment.flush = flush  # type: ignore[method-assign]
        lm._flush(TP, log, None)  # what the flusher and a roll's flush do, here on the test's thread
        assert log.recovery_point == log.log_end_offset > recovery_before
        # here and on the scheduler thread (the rolls' own flushes), never on the owner
        assert threading.current_thread().name in fsync_threads
        assert not [n for n in fsync_threads if n.startswith("io-")]
        clock.advance(120_000)
        inactive = len(log.segments) - 1
        assert lm.cleanup_logs() == inactive > 0
        assert len(log.segments) == 1 and log.log_start_offset == log.segments[0].base_offset
        lm.remove_expired_producers()
        lm.sync_metadata_files()
    finally:
        LogSegment.flush = real_flush  # type: ignore[method-assign]
        lm.shutdown()
        sched.shutdown()
    assert os.path.exists(os.path.join(str(tmp_path), ".kafka_cleanshutdown"))


def test_an_aborted_clean_does_not_wait_for_an_owner_that_waits_for_the_abort(tmp_path: "os.PathLike[str]",
                                                                            workers: IoWorkers) -> None:
    """The deadlock the cleaner's command must avoid: the owner runs a job (a partition deletion, a truncation) that
    waits for the clean of its partition to stop, while the cleaner waits for the owner to run its swap. The swap is
    withdrawn, the clean ends aborted, its cleaned files are discarded and the log is as it was."""
    log = Log.open(os.path.join(str(tmp_path), "t-0"), compact_config(), clock=ManualClock())
    log.owners = workers

    def fill() -> None:
        for i in range(60):
            append(log, [(b"k%d" % (i % 5), b"v%d" % i)])
        log.roll()
        append(log, [(b"k0", b"last")])
    workers.call(TP, fill)
    before = workers.call(TP, lambda: (segments_of(log), read_records(log)))
    aborting = threading.Event()
    cleaner_done = threading.Event()
    outcome: list[BaseException] = []

    def check_abort() -> None:
        if aborting.is_set():
            raise LogCleaningAbortedError("aborted")
        if owner_busy.is_set():
            last_check_passed.set()  # the cleaner goes on to queue its swap behind the owner's job

    class StallBeforeSwap(Cleaner):
        def _run(self, plan, check):  # type: ignore[no-untyped-def]
            result = super()._run(plan, check)
            owner_waits.set()  # the owner now waits for this clean to stop ...
            assert owner_busy.wait(10)  # ... and is busy, so the swap queues behind it
            return result

    owner_waits, owner_busy, last_check_passed = threading.Event(), threading.Event(), threading.Event()

    def owner_job() -> None:  # as abort_and_pause_cleaning on the partition's worker
        assert owner_waits.wait(10)
        owner_busy.set()
        assert last_check_passed.wait(10)
        aborting.set()
        assert cleaner_done.wait(10), "the cleaner waited for the owner: deadlock"

    def clean() -> None:
        try:
            StallBeforeSwap().clean(log, 0, check_abort=check_abort)
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome.append(exc)
        finally:
            cleaner_done.set()

    t = threading.Thread(target=clean)
    t.start()
    workers.call(TP, owner_job)
    t.join(10)
    assert not t.is_alive() and len(outcome) == 1 and isinstance(outcome[0], LogCleaningAbortedError)
    assert workers.call(TP, lambda: (segments_of(log), read_records(log))) == before
    assert not [f for f in os.listdir(log.dir) if f.endswith((".cleaned", ".swap"))]
    workers.call(TP, log.close)
