"""Log dir failure (KIP-112) in storage: the LogDirFailureChannel, a Log whose disk fails, the LogManager taking a
dir offline, placement in live dirs only, Kafka's rule against creating a non-new replica's log while a dir is
offline, and recovery of the failed dir at the next start (no half-written batch)."""
from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any, Callable, List

import pytest

from broker.storage import checkpoints, files
from broker.storage.config import LogConfig
from broker.storage.errors import KafkaStorageError
from broker.storage.log import Log
from broker.storage.log_dir_failure_channel import LogDirFailureChannel
from broker.storage.log_manager import LogManager
from broker.storage.scheduler import Scheduler

from .conftest import batch

ERRNOS = [errno.ENOSPC, errno.EIO, errno.EROFS]


def threadless_scheduler() -> Scheduler:
    """The log manager's scheduler, without its thread (what is due runs when the test says)."""
    return Scheduler(threaded=False)


def failing_pwrite(under: str, code: int, calls: List[int], partial: bool = False) -> Callable[..., int]:
    """os.pwrite that fails with ``code`` for files under ``under`` (after writing half the buffer if ``partial``
    the first time); ``calls`` counts the calls that reached it for such files."""
    real = os.pwrite

    def pwrite(fd: int, data: Any, offset: int) -> int:
        if os.readlink("/proc/self/fd/%d" % fd).startswith(under + os.sep):
            calls.append(fd)
            if partial and len(calls) == 1:
                half = len(data) // 2
                real(fd, bytes(data)[:half], offset)
                return half  # the rest then fails, as a disk that fills mid-write
            raise OSError(code, os.strerror(code))
        return real(fd, data, offset)

    return pwrite


# ---------------------------------------------------------------------------------------------------- channel
def test_channel_records_queues_and_logs_a_dir_once(caplog: pytest.LogCaptureFixture) -> None:
    ch = LogDirFailureChannel()
    woken: List[int] = []
    listened: List[str] = []
    ch.set_wakeup(lambda: woken.append(1))
    ch.add_offline_listener(listened.append)
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    caplog.set_level(logging.DEBUG, logger="broker.storage.log_dir_failure_channel")

    def report() -> None:
        ch.maybe_add_offline_log_dir("/data/a", "Error while appending records to t-0 in dir /data/a", exc)

    threads = [threading.Thread(target=report) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ch.has_offline_log_dir("/data/a") and not ch.has_offline_log_dir("/data/b")
    assert ch.poll_offline_log_dir() == "/data/a" and ch.poll_offline_log_dir() is None
    assert woken == [1] and listened == ["/data/a"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["Error while appending records to t-0 in dir /data/a: [Errno 28] No space left on device"]
    assert not any(r.exc_info for r in caplog.records)  # one line, no traceback


def test_dirs_queued_before_the_wakeup_wait_in_the_queue() -> None:
    ch = LogDirFailureChannel()
    ch.maybe_add_offline_log_dir("/data/a", "boom", OSError(errno.EIO, "I/O error"))
    ch.maybe_add_offline_log_dir("/data/b", "boom", OSError(errno.EIO, "I/O error"))
    assert [ch.poll_offline_log_dir(), ch.poll_offline_log_dir(), ch.poll_offline_log_dir()] == \
        ["/data/a", "/data/b", None]
    assert ch.offline_log_dirs == {"/data/a", "/data/b"}


# ---------------------------------------------------------------------------------------------------- Log
@pytest.mark.parametrize("code", ERRNOS)
def test_a_failed_append_takes_the_dir_offline_and_later_io_never_reaches_the_disk(tmp_path, clock, monkeypatch,
                                                                                   code: int) -> None:
    d = str(tmp_path / "a")
    os.makedirs(d)
    ch = LogDirFailureChannel()
    log = Log.open(os.path.join(d, "t-0"), LogConfig(), clock=clock, log_dir_failure_channel=ch)
    try:
        log.append_as_leader(batch(2), 0)
        calls: List[int] = []
        monkeypatch.setattr("broker.storage.segment.os.pwrite", failing_pwrite(d, code, calls))
        with pytest.raises(KafkaStorageError, match=r"^Error while appending records to t-0 in dir %s: \[Errno %d\]"
                                                     % (d, code)):
            log.append_as_leader(batch(1), 0)
        assert ch.has_offline_log_dir(d) and ch.poll_offline_log_dir() == d
        assert log.log_end_offset == 2  # the failed append left nothing behind in the log's state
        for attempt in (lambda: log.append_as_leader(batch(1), 0), lambda: log.append_as_follower(batch(1)),
                        lambda: log.read(0, 1 << 20), lambda: log.flush(), lambda: log.truncate_to(1),
                        lambda: log.roll(), lambda: log.delete_old_segments()):
            with pytest.raises(KafkaStorageError,
                               match=r"^The log dir %s is already offline due to a previous IO exception\.$" % d):
                attempt()
        assert len(calls) == 1 and ch.poll_offline_log_dir() is None  # reported once, no disk touched since
    finally:
        monkeypatch.undo()
        log.close_handlers()


def test_a_roll_that_cannot_create_its_segment_reports_the_roll(tmp_path, clock, monkeypatch) -> None:
    d = str(tmp_path / "a")
    os.makedirs(d)
    ch = LogDirFailureChannel()
    one = len(batch(2))
    log = Log.open(os.path.join(d, "t-0"), LogConfig(segment_bytes=one * 2), clock=clock, log_dir_failure_channel=ch)
    try:
        log.append_as_leader(batch(2), 0)
        log.append_as_leader(batch(2), 0)
        from broker.storage import file_cache
        real = file_cache.open_handle

        def full(path, flags, mode=0o644, cache=None):
            if path.endswith(".log") and flags & os.O_CREAT:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(path, flags, mode, cache)

        monkeypatch.setattr("broker.storage.segment.open_handle", full)
        with pytest.raises(KafkaStorageError, match=r"^Error while rolling log segment for t-0 in dir %s" % d):
            log.append_as_leader(batch(2), 0)
        assert ch.has_offline_log_dir(d)
    finally:
        monkeypatch.undo()
        log.close_handlers()


def test_descriptor_exhaustion_is_not_a_disk_failure(tmp_path, clock, monkeypatch) -> None:
    d = str(tmp_path / "a")
    os.makedirs(d)
    ch = LogDirFailureChannel()
    log = Log.open(os.path.join(d, "t-0"), LogConfig(), clock=clock, log_dir_failure_channel=ch)
    try:
        monkeypatch.setattr("broker.storage.segment.os.pwrite", failing_pwrite(d, errno.EMFILE, []))
        with pytest.raises(OSError) as info:
            log.append_as_leader(batch(1), 0)
        assert info.value.errno == errno.EMFILE and not ch.has_offline_log_dir(d)
        monkeypatch.undo()
        assert log.append_as_leader(batch(1), 0).first_offset == 0
    finally:
        log.close()


# ---------------------------------------------------------------------------------------------------- LogManager
@pytest.fixture
def two_dirs(tmp_path) -> Any:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lm = LogManager([a, b], LogConfig(file_delete_delay_ms=0), broker_id=0, cluster_id="c",
                    scheduler=threadless_scheduler())
    yield lm, a, b
    lm.shutdown()


def test_handle_log_dir_failure_forgets_the_dirs_logs_and_new_logs_go_to_live_dirs(two_dirs, monkeypatch) -> None:
    lm, a, b = two_dirs
    logs = {p: lm.get_or_create_log("t", p) for p in range(4)}
    in_a = sorted(tp for tp in lm.all_logs() if lm.log_dir_of(tp) == a)
    in_b = sorted(tp for tp in lm.all_logs() if lm.log_dir_of(tp) == b)
    assert in_a and in_b  # spread over both dirs
    for log in logs.values():
        log.append_as_leader(batch(3), 0)
    calls: List[int] = []
    monkeypatch.setattr("broker.storage.segment.os.pwrite", failing_pwrite(a, errno.ENOSPC, calls))
    with pytest.raises(KafkaStorageError):
        logs[in_a[0][1]].append_as_leader(batch(1), 0)
    # every other log of the failed dir refuses at once, without touching the disk
    for tp in in_a[1:]:
        with pytest.raises(KafkaStorageError, match="already offline"):
            logs[tp[1]].append_as_leader(batch(1), 0)
    assert len(calls) == 1
    assert lm.offline_log_dirs == [a] and lm.live_log_dirs == [b]
    current, future = lm.handle_log_dir_failure(a)
    assert (current, future) == (in_a, [])
    assert sorted(lm.all_logs()) == in_b and all(lm.get_log(tp) is None for tp in in_a)
    # new partitions only in the live dir, and only when new
    for p in range(10, 14):
        lm.get_or_create_log("t", p)
        assert lm.log_dir_of(("t", p)) == b
    with pytest.raises(KafkaStorageError, match=r"^Can not create log for t-20 because log directories %s are "
                                                r"offline$" % a):
        lm.get_or_create_log("t", 20, is_new=False)
    assert lm.get_log(("t", 20)) is None
    # periodic work leaves the failed dir alone
    written: List[str] = []
    real_write = checkpoints.OffsetCheckpointFile.write
    monkeypatch.setattr(checkpoints.OffsetCheckpointFile, "write",
                        lambda self, offsets: written.append(self.path) or real_write(self, offsets))
    lm.checkpoint_all()
    lm.checkpoint_high_watermarks()
    lm.checkpoint_log_start_offsets()
    assert written and all(p.startswith(b + os.sep) for p in written)
    monkeypatch.undo()


def test_a_checkpoint_that_cannot_be_written_takes_its_dir_offline(two_dirs, monkeypatch, caplog) -> None:
    lm, a, b = two_dirs
    lm.get_or_create_log("t", 0)
    lm.get_or_create_log("t", 1)
    real_write = checkpoints.OffsetCheckpointFile.write

    def write(self, offsets):
        if self.path.startswith(a + os.sep):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, offsets)

    monkeypatch.setattr(checkpoints.OffsetCheckpointFile, "write", write)
    caplog.set_level(logging.ERROR)
    lm.checkpoint_high_watermarks()  # no exception: the dir goes offline
    assert lm.offline_log_dirs == [a]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "Error while writing to highwatermark file in directory %s: [Errno 28] No space left on device" % a]
    lm.checkpoint_all()  # the offline dir is skipped, nothing more logged
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


def test_with_every_dir_offline_no_log_can_be_created(tmp_path) -> None:
    a = str(tmp_path / "a")
    lm = LogManager([a], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=threadless_scheduler())
    try:
        lm.failure_channel.maybe_add_offline_log_dir(a, "boom", OSError(errno.EIO, "I/O error"))
        with pytest.raises(KafkaStorageError, match="No log directories available"):
            lm.get_or_create_log("t", 0)
    finally:
        lm.shutdown()


def test_the_failed_dir_is_recovered_at_the_next_start_without_the_half_written_batch(tmp_path, monkeypatch) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lm = LogManager([a, b], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=threadless_scheduler())
    log_a, log_b = lm.get_or_create_log("t", 0), lm.get_or_create_log("t", 1)
    assert (lm.log_dir_of(("t", 0)), lm.log_dir_of(("t", 1))) == (a, b)
    for _ in range(5):
        log_a.append_as_leader(batch(2), 0)
        log_b.append_as_leader(batch(2), 0)
    calls: List[int] = []
    monkeypatch.setattr("broker.storage.segment.os.pwrite", failing_pwrite(a, errno.ENOSPC, calls, partial=True))
    with pytest.raises(KafkaStorageError):
        log_a.append_as_leader(batch(2), 0)
    monkeypatch.undo()
    size_on_disk = os.path.getsize(os.path.join(log_a.dir, files.filename_prefix(0) + files.LOG_SUFFIX))
    assert size_on_disk > log_a.active_segment.size  # half a batch is in the file
    lm.handle_log_dir_failure(a)
    lm.shutdown()
    assert not os.path.exists(os.path.join(a, files.CLEAN_SHUTDOWN_FILE))
    assert os.path.exists(os.path.join(b, files.CLEAN_SHUTDOWN_FILE))
    lm = LogManager([a, b], LogConfig(), broker_id=0, cluster_id="c",
                    scheduler=threadless_scheduler())  # space is back
    try:
        again = lm.get_log(("t", 0))
        assert again is not None and again.log_end_offset == 10  # every acknowledged record, not the half batch
        assert lm.get_log(("t", 1)).log_end_offset == 10
        info = again.read(0, 1 << 20)
        assert info.records is not None and info.records.length == 5 * len(batch(2))
        assert again.append_as_leader(batch(2), 0).first_offset == 10
    finally:
        lm.shutdown()


def test_unusable_dirs_at_start_up_start_offline_and_only_all_of_them_end_start_up(tmp_path) -> None:
    from broker.storage.log_dir_check import LogDirsError, unusable_log_dirs
    good, bad = str(tmp_path / "good"), str(tmp_path / "bad")
    with open(bad, "w") as f:
        f.write("a file\n")
    failures = unusable_log_dirs([good, bad])
    assert failures == [(bad, "it is not a readable log directory (not a directory)")]
    with pytest.raises(LogDirsError, match="Failed to create or validate data directory"):
        unusable_log_dirs([bad])
    lm = LogManager([good, bad], LogConfig(), broker_id=0, cluster_id="c", initial_offline_dirs=dict(failures),
                    scheduler=threadless_scheduler())
    try:
        assert lm.live_log_dirs == [good] and lm.offline_log_dirs == [bad]
        assert lm.failure_channel.poll_offline_log_dir() == bad  # the ReplicaManager tells the controller
        lm.get_or_create_log("t", 0)
        assert lm.log_dir_of(("t", 0)) == good
    finally:
        lm.shutdown()
    assert not os.path.exists(os.path.join(good, "..", "bad", files.CLEAN_SHUTDOWN_FILE))
