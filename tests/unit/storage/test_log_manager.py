import os

import pytest

from broker.storage.checkpoints import OffsetCheckpointFile, read_partition_metadata
from broker.storage.config import LogConfig
from broker.storage.errors import InconsistentClusterIdError, KafkaStorageError
from broker.storage.log_manager import LogManager, read_meta_properties
from broker.storage.scheduler import Scheduler
from broker.util.clock import ManualClock

from .conftest import batch


@pytest.fixture
def scheduler():
    s = Scheduler(threaded=False)  # no thread: the test runs what is due
    yield s
    s.shutdown()


def _manager(dirs, clock, scheduler, **kw) -> LogManager:
    return LogManager([str(d) for d in dirs], LogConfig(file_delete_delay_ms=0), broker_id=1, cluster_id="c1",
                      scheduler=scheduler, clock=clock, **kw)


def test_meta_properties_written_and_verified(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    props = read_meta_properties(str(tmp_path / "meta.properties"))
    assert props == {"version": "0", "broker.id": "1", "cluster.id": "c1"}
    m.shutdown()
    with pytest.raises(InconsistentClusterIdError):
        LogManager([str(tmp_path)], LogConfig(), broker_id=1, cluster_id="other", scheduler=scheduler)


def test_new_logs_spread_over_dirs_and_partition_metadata(tmp_path, clock, scheduler) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock, scheduler)
    logs = [m.get_or_create_log("t", p, topic_id="AAAAAAAAAAAAAAAAAAAAAQ") for p in range(4)]
    assert m.get_or_create_log("t", 0) is logs[0]
    assert sorted(os.listdir(a)) == [".lock", "meta.properties", "t-0", "t-2"]
    assert sorted(os.listdir(b)) == [".lock", "meta.properties", "t-1", "t-3"]
    assert read_partition_metadata(str(a / "t-0")) == "AAAAAAAAAAAAAAAAAAAAAQ"
    m.shutdown()


def test_shutdown_checkpoints_and_clean_reload(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    log = m.get_or_create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    log.update_high_watermark(4)
    m.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read() == {("t", 0): 6}
    assert OffsetCheckpointFile(str(tmp_path / "replication-offset-checkpoint")).read() == {("t", 0): 4}
    assert (tmp_path / "recovery-point-offset-checkpoint").read_bytes() == b"0\n1\nt 0 6\n"
    m2 = _manager([tmp_path], clock, scheduler)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    log2 = m2.get_log(("t", 0))
    assert (log2.log_end_offset, log2.high_watermark, log2.recovery_point) == (6, 4, 6)
    m2.shutdown()


def test_unclean_reload_recovers(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    log = m.get_or_create_log("t", 0)
    log.append_as_leader(batch(2), 0)
    path = log.active_segment.path
    log.append_as_leader(batch(2), 0)
    m.checkpoint_all()  # recovery point 0: nothing flushed
    # simulate a crash: no shutdown, torn tail
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    m._unlock_dirs()  # the OS drops a dead process's flock
    m2 = _manager([tmp_path], clock, scheduler)
    assert m2.get_log(("t", 0)).log_end_offset == 2
    m2.shutdown()


def test_delete_log(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    m.get_or_create_log("t", 0).append_as_leader(batch(1), 0)
    assert m.delete_log("t", 0)
    assert m.get_log(("t", 0)) is None
    assert [n for n in os.listdir(tmp_path) if n.startswith("t-")] == []
    assert not m.delete_log("t", 0)
    m.shutdown()


def test_leftover_delete_dirs_removed_at_startup(tmp_path, clock, scheduler) -> None:
    os.makedirs(tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete")
    m = _manager([tmp_path], clock, scheduler)
    assert sorted(os.listdir(tmp_path)) == [".lock", "meta.properties"]
    m.shutdown()


def test_update_config_and_retention_task(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    one = len(batch(1))
    log = m.get_or_create_log("t", 0, LogConfig(segment_bytes=one * 2, file_delete_delay_ms=0))
    for _ in range(6):
        log.append_as_leader(batch(1), 0)
    log.update_high_watermark(6)
    assert m.cleanup_logs() == 0
    m.update_config("t", LogConfig(segment_bytes=one * 2, retention_bytes=one * 2, file_delete_delay_ms=0))
    assert log.config.retention_bytes == one * 2
    assert m.cleanup_logs() == 2
    assert log.log_start_offset == 4
    m.shutdown()


def test_scheduler_runs_periodic_and_once() -> None:
    """The scheduler's own thread (the broker's): periodic tasks repeat without anyone driving them."""
    import threading
    scheduler = Scheduler()
    done = threading.Event()
    count = []

    def tick() -> None:
        count.append(1)
        if len(count) == 3:
            done.set()

    try:
        scheduler.schedule("tick", tick, 0.0, 0.01)
        assert done.wait(10)
        ran = []
        scheduler.schedule("later", lambda: ran.append(1), 3600)
        scheduler.run_pending_now()
        assert ran == [1]
    finally:
        scheduler.shutdown()


def test_a_scheduler_without_its_thread_runs_what_its_clock_says_is_due() -> None:
    """Scheduler(threaded=False), as the unit tests use it: tasks run on the caller, when the manual clock says so."""
    import threading
    clock = ManualClock(100_000)
    scheduler = Scheduler(clock=clock, threaded=False)
    before = set(threading.enumerate())
    ran: list = []
    scheduler.schedule("tick", lambda: ran.append(("tick", threading.get_ident())), 1.0, 10.0)
    scheduler.schedule("once", lambda: ran.append(("once", threading.get_ident())), 5.0)
    assert set(threading.enumerate()) == before and scheduler.run_due() == 0 and ran == []
    clock.advance(1_000)  # 101 s
    assert scheduler.run_due() == 1 and ran == [("tick", threading.get_ident())]
    clock.advance(5_000)  # 106 s
    assert scheduler.run_due() == 1 and ran[-1][0] == "once"
    # 1000 s, far behind: the periodic task catches up once, as the thread does, then keeps its period
    clock.advance(894_000)
    assert scheduler.run_due() == 2 and scheduler.run_due() == 0
    clock.advance(10_000)  # 1010 s
    assert scheduler.run_due() == 1
    scheduler.shutdown()
    clock.advance(990_000)  # 2000 s
    assert scheduler.run_due() == 0


def test_log_start_offset_checkpoint_survives_restart(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    log = m.get_or_create_log("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(1), 0)
    log.update_high_watermark(4)
    log.delete_records_before(2)
    m.shutdown()
    assert (tmp_path / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nt 0 2\n"
    m2 = _manager([tmp_path], clock, scheduler)
    assert m2.get_log(("t", 0)).log_start_offset == 2
    m2.shutdown()


def test_second_manager_on_the_same_dir_is_refused_before_touching_a_file(tmp_path, clock, scheduler) -> None:
    m = _manager([tmp_path], clock, scheduler)
    m.get_or_create_log("t", 0).append_as_leader(batch(1), 0)
    before = {p: os.path.getmtime(os.path.join(tmp_path, p)) for p in os.listdir(tmp_path)}
    other = tmp_path.parent / (tmp_path.name + "-other")
    with pytest.raises(KafkaStorageError, match=r"Failed to acquire lock on file \.lock in .*another process"):
        _manager([other, tmp_path], clock, scheduler)
    assert {p: os.path.getmtime(os.path.join(tmp_path, p)) for p in os.listdir(tmp_path)} == before
    assert not os.path.exists(other / "meta.properties")  # the lock of every dir comes before any other file
    m.shutdown()
    _manager([tmp_path], clock, scheduler).shutdown()  # released by a clean shutdown
