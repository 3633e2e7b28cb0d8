"""Future logs (AlterReplicaLogDirs): creating one, swapping it in under the same Log object, and start-up after a
crash at every step of the swap (never two current logs for one partition, nothing lost)."""
from __future__ import annotations

import os

import pytest

from broker.accel import record_batch
from broker.storage import files
from broker.storage.checkpoints import OffsetCheckpointFile, read_partition_metadata
from broker.storage.config import LogConfig
from broker.storage.errors import KafkaStorageError
from broker.storage.log import Log, UnexpectedAppendOffsetError
from broker.storage.log_manager import LogManager, future_dir_name, parse_future_dir
from broker.storage.scheduler import Scheduler

from .conftest import batch

TP = ("t", 0)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.fixture
def scheduler():
    s = Scheduler(threaded=False)  # no thread: the test runs what is due
    yield s
    s.shutdown()


def _manager(dirs, clock, scheduler, delete_delay_ms: int = 0) -> LogManager:
    return LogManager([str(d) for d in dirs], LogConfig(file_delete_delay_ms=delete_delay_ms, segment_bytes=4096),
                      broker_id=1, cluster_id="c1", scheduler=scheduler, clock=clock)


def _copy(cur: Log, fut: Log) -> None:
    """What the mover does: whole batches from the current log, appended with their offsets."""
    while fut.log_end_offset < cur.log_end_offset:
        buf = cur.read(fut.log_end_offset, 1 << 20, None, True).records.read()
        try:
            fut.append_as_follower(buf)
        except UnexpectedAppendOffsetError as e:  # the log start offset is inside the first batch
            fut.truncate_to(e.first_offset)
            fut.append_as_follower(buf)
    fut.update_high_watermark(cur.high_watermark)
    if cur.log_start_offset > fut.log_start_offset:
        fut.delete_records_before(cur.log_start_offset)


def _all_bytes(log: Log) -> bytes:
    """Every batch from the log start on (across segments, whatever their boundaries)."""
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30, None, True).records.read()
        infos, _ = record_batch.scan_batches(data)
        out += data
        offset = infos[-1].base_offset + infos[-1].last_offset_delta + 1
    return out


def _filled(m: LogManager) -> Log:
    log = m.get_or_create_log(*TP, topic_id=TOPIC_ID)
    for i in range(20):
        log.append_as_leader(batch(5, ts=1_700_000_000_000 + i), 0 if i < 10 else 3)
    log.assign_epoch_start_offset(5, log.log_end_offset)  # a new leader epoch, no batch yet
    log.update_high_watermark(90)
    log.delete_records_before(7)
    return log


def _crash(m: LogManager, *logs: Log) -> None:
    """The process dies: files stay as they are, the OS closes descriptors and drops the flocks."""
    for log in logs:
        for seg in log.segments:
            seg.close_handlers()
        log._closed = True
    m._unlock_dirs()


def test_future_dir_names() -> None:
    name = future_dir_name("my.topic-x", 12)
    assert name.startswith("my.topic-x-12.") and name.endswith("-future") and len(name) == len("my.topic-x-12.") + 39
    assert parse_future_dir(name) == ("my.topic-x", 12)
    assert files.parse_topic_partition_dir(name) is None
    for bad in ("t-0", "t-0.abc-future", "t-0." + "g" * 32 + "-future", "t-0." + "a" * 32 + "-delete"):
        assert parse_future_dir(bad) is None


def test_swap_keeps_the_log_object_and_moves_its_files(tmp_path, clock, scheduler) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler, delete_delay_ms=60000)
    cur = _filled(m)
    assert m.log_dir_of(TP) == str(a)
    with pytest.raises(KafkaStorageError):
        m.create_future_log(TP, str(a))  # already there
    fut = m.create_future_log(TP, str(b))
    assert m.create_future_log(TP, str(b)) is fut
    assert m.get_future_log(TP) is fut and m.future_log_dir_of(TP) == str(b)
    assert parse_future_dir(os.path.basename(fut.dir)) == TP and os.path.dirname(fut.dir) == str(b)
    assert fut.log_start_offset == fut.log_end_offset == 7  # starts where the current log starts
    assert read_partition_metadata(fut.dir) == TOPIC_ID
    _copy(cur, fut)
    cur.append_as_leader(batch(3), 5)  # the current log moves on; the future is behind again
    with pytest.raises(KafkaStorageError):
        m.replace_current_with_future(TP)
    assert m.get_future_log(TP) is fut and os.path.isdir(a / "t-0")
    _copy(cur, fut)
    cur.assign_epoch_start_offset(6, cur.log_end_offset)
    held = cur.read(7, 1 << 30, None, True).records  # a read handed out before the swap
    held_bytes = held.read()
    before = _all_bytes(cur)
    state = (cur.log_start_offset, cur.log_end_offset, cur.high_watermark, cur.leader_epoch_cache.entries)
    m.replace_current_with_future(TP)
    assert m.get_log(TP) is cur and m.get_future_log(TP) is None and m.all_future_logs() == {}
    assert cur.dir == str(b / "t-0") and m.log_dir_of(TP) == str(b)
    assert (cur.log_start_offset, cur.log_end_offset, cur.high_watermark, cur.leader_epoch_cache.entries) == state
    assert state[3][-2:] == [(5, 100), (6, 103)]  # epochs starting at the LEO survive the swap
    assert _all_bytes(cur) == before and held.read() == held_bytes
    assert not (a / "t-0").exists() and [n for n in os.listdir(a) if n.endswith("-delete")]
    assert read_partition_metadata(str(b / "t-0")) == TOPIC_ID
    assert TP not in OffsetCheckpointFile(str(a / "recovery-point-offset-checkpoint")).read()
    assert OffsetCheckpointFile(str(b / "replication-offset-checkpoint")).read()[TP] == state[2]
    scheduler.run_pending_now()  # file.delete.delay.ms passed: the old files go
    assert [n for n in os.listdir(a) if n.startswith("t-")] == []
    cur.append_as_leader(batch(2), 6)  # appends land in the new dir
    cur.roll()
    assert all(s.path.startswith(str(b)) for s in cur.segments)
    leo = cur.log_end_offset
    m.shutdown()
    m2 = _manager([a, b], clock, scheduler)
    log = m2.get_log(TP)
    assert m2.log_dir_of(TP) == str(b) and log.log_end_offset == leo and log.log_start_offset == 7
    assert _all_bytes(log)[:len(before)] == before
    m2.shutdown()


def test_removing_the_future_log_cancels_the_move(tmp_path, clock, scheduler) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler)
    cur = _filled(m)
    fut = m.create_future_log(TP, str(b))
    _copy(cur, fut)
    assert m.remove_future_log(TP) and not m.remove_future_log(TP)
    assert [n for n in os.listdir(b) if n.startswith("t-")] == []
    assert m.log_dir_of(TP) == str(a) and cur.log_end_offset == 100
    # deleting a partition deletes its future log too
    m.create_future_log(TP, str(b))
    assert m.delete_log(*TP)
    assert [n for n in os.listdir(a) + os.listdir(b) if n.startswith("t-")] == []
    m.shutdown()


def test_preferred_dir_for_a_replica_not_created_yet(tmp_path, clock, scheduler) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler)
    assert m.is_log_dir(str(b)) and m.is_log_dir(str(b) + "/") and not m.is_log_dir("b")
    assert not m.is_log_dir(str(tmp_path / "c"))
    m.maybe_update_preferred_log_dir(("t", 1), str(b))
    m.get_or_create_log("t", 1)
    assert m.log_dir_of(("t", 1)) == str(b)
    m.get_or_create_log("t", 2)  # used once
    assert m.log_dir_of(("t", 2)) == str(a)
    m.maybe_update_preferred_log_dir(("t", 1), str(b))  # already there: nothing to remember
    assert m._preferred_dirs == {}
    m.shutdown()


def test_a_move_resumes_after_a_restart(tmp_path, clock, scheduler) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler)
    cur = _filled(m)
    fut = m.create_future_log(TP, str(b))
    fut.truncate_fully_and_start_at(5)  # the first batch holds the log start offset 7
    fut.append_as_follower(cur.read(7, 200, None, True).records.read())  # partly copied
    copied = fut.log_end_offset
    m.shutdown()
    m2 = _manager([a, b], clock, scheduler)
    cur2, fut2 = m2.get_log(TP), m2.get_future_log(TP)
    assert m2.log_dir_of(TP) == str(a) and m2.future_log_dir_of(TP) == str(b)
    assert fut2.log_end_offset == copied and (fut2.log_start_offset, cur2.log_end_offset) == (5, 100)
    assert TP in m2.cleaner._paused  # not compacted while moving
    _copy(cur2, fut2)
    m2.replace_current_with_future(TP)
    assert TP not in m2.cleaner._paused and m2.log_dir_of(TP) == str(b)
    m2.shutdown()


CRASH_STEPS = ["future_closed", "current_retired", "future_renamed"]


class _Crash(BaseException):
    pass


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_crash_at_each_swap_step_leaves_exactly_one_log(tmp_path, clock, scheduler, step: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler)
    cur = _filled(m)
    fut = m.create_future_log(TP, str(b))
    _copy(cur, fut)
    before = _all_bytes(cur)
    epochs = cur.leader_epoch_cache.entries
    m.checkpoint_all()  # the periodic checkpoints (log start offsets) of both dirs ran before the crash

    def hook(name: str) -> None:
        if name == step:
            raise _Crash(name)

    with pytest.raises(_Crash):
        m.replace_current_with_future(TP, hook)
    _crash(m, cur, fut)
    m2 = _manager([a, b], clock, scheduler)
    try:
        names = [(d.name, n) for d in (a, b) for n in os.listdir(d) if n.startswith("t-")]
        log = m2.get_log(TP)
        assert _all_bytes(log) == before and log.log_start_offset == 7
        if step == "future_closed":  # not committed: the move resumes
            assert m2.log_dir_of(TP) == str(a) and m2.future_log_dir_of(TP) == str(b)
            assert sorted(n for _, n in names)[0] == "t-0" and len(names) == 2
            assert _all_bytes(m2.get_future_log(TP)) == before
        else:  # committed: the future became the log
            assert m2.log_dir_of(TP) == str(b) and m2.get_future_log(TP) is None
            assert names == [("b", "t-0")]
            assert log.leader_epoch_cache.entries == epochs[:-1]  # (5, 100) starts at the LEO: dropped on load
    finally:
        m2.shutdown()


def test_startup_discards_a_second_future_of_one_partition(tmp_path, clock, scheduler) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    m = _manager([a, b, c], clock, scheduler)
    cur = _filled(m)
    m.create_future_log(TP, str(b))
    m.shutdown()
    # a stray future in the current log's own dir and a second one elsewhere
    os.makedirs(a / future_dir_name(*TP))
    os.makedirs(c / future_dir_name(*TP))
    m2 = _manager([a, b, c], clock, scheduler)
    assert m2.log_dir_of(TP) == str(a) and m2.future_log_dir_of(TP) in (str(b), str(c))
    leftovers = [n for d in (a, b, c) for n in os.listdir(d) if n.endswith("-future")]
    assert len(leftovers) == 1 and m2.get_log(TP).log_end_offset == cur.log_end_offset
    m2.shutdown()


def test_truncation_point_is_tracked_for_the_copy(tmp_path, clock) -> None:
    log = Log.open(str(tmp_path / "t-0"), LogConfig(), clock=clock)
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    assert log.pop_truncation_point() is None
    log.truncate_to(8)
    log.truncate_to(6)
    log.truncate_to(100)  # nothing to do: not a truncation
    assert log.pop_truncation_point() == 6 and log.pop_truncation_point() is None
    log.truncate_fully_and_start_at(20)
    assert log.pop_truncation_point() == 20
    log.close()
