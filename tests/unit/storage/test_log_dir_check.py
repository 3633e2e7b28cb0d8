"""Start-up checks of log.dirs (broker/storage/log_dir_check.py) and LogManager's own failures on a log dir: every
unusable dir is reported in Kafka's words (``Failed to create or validate data directory <dir>``), naming log.dirs,
with what is wrong, then Kafka's shutdown line; never a raw OSError.

The tests run as root in CI, where permission bits stop nothing: they make dirs unusable in ways root cannot get
around (a regular file where the dir or its parent should be, a directory where .lock or meta.properties should be,
the immutable attribute when chattr works here); chmod is used only when not root.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterator

import pytest

from broker.storage.config import LogConfig
from broker.storage.errors import KafkaStorageError
from broker.storage.log_dir_check import LogDirsError, check_log_dirs, log_dir_problem
from broker.storage.log_manager import InconsistentBrokerIdError, LogManager
from broker.storage.scheduler import Scheduler


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler(threaded=False)  # no thread: the test runs what is due
    yield s
    s.shutdown()


def _failure(dirs: list) -> LogDirsError:
    with pytest.raises(LogDirsError) as e:
        check_log_dirs([str(d) for d in dirs])
    return e.value


def test_a_usable_dir_passes_and_a_missing_one_is_created(tmp_path: Path) -> None:
    check_log_dirs([str(tmp_path / "a"), str(tmp_path / "b" / "c")])
    assert (tmp_path / "a").is_dir() and (tmp_path / "b" / "c").is_dir()


def test_a_dir_whose_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    d = tmp_path / "file" / "logs"
    err = _failure([d])
    assert err.lines == [f"Failed to create or validate data directory {d} (log.dirs): cannot create it: "
                         f"Not a directory",
                         f"Shutdown broker because none of the specified log dirs from {d} can be created or validated"]
    assert str(err) == err.lines[0]


def test_a_file_where_the_dir_should_be(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert _failure([f]).lines[0] == (f"Failed to create or validate data directory {f} (log.dirs): it is not a "
                                      f"readable log directory (not a directory)")


def test_lock_file_that_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / ".lock").mkdir()
    assert _failure([tmp_path]).lines[0] == (f"Failed to create or validate data directory {tmp_path} (log.dirs): "
                                             f"cannot create or open .lock in it: Is a directory")


def test_unreadable_meta_properties(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").mkdir()
    assert _failure([tmp_path]).lines[0] == (
        f"Failed to create or validate data directory {tmp_path} (log.dirs): Error while reading meta.properties file "
        f"{tmp_path / 'meta.properties'}: Is a directory")


def test_one_bad_dir_of_several_names_only_that_dir(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.mkdir()
    (bad / ".lock").mkdir()
    err = _failure([good, bad])
    assert len(err.lines) == 2 and str(bad) in err.lines[0] and str(good) not in err.lines[0]
    assert err.lines[1] == (f"Shutdown broker because {bad} of log.dirs cannot be created or validated (this broker "
                            f"does not start with a log dir offline)")


def test_duplicate_dirs(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match=r"^Duplicate log directory found: .*/a, .*/a/ \(log\.dirs\)$"):
        check_log_dirs([str(tmp_path / "a"), str(tmp_path / "a") + "/"])


def _refuse(monkeypatch: pytest.MonkeyPatch, fn: str, path: Path, errno_: int) -> None:
    """Make ``os.<fn>`` fail on ``path`` as the kernel would for an unprivileged user or an immutable dir (root in
    CI ignores permission bits, and ``chattr +i`` needs a filesystem that supports it)."""
    real = getattr(os, fn)

    def refusing(target, *args, **kwargs):  # type: ignore[no-untyped-def]
        if os.fspath(target).startswith(str(path)):
            raise OSError(errno_, os.strerror(errno_), os.fspath(target))
        return real(target, *args, **kwargs)
    monkeypatch.setattr(os, fn, refusing)


def test_immutable_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the issue saw: an existing dir the broker may not write (EPERM on .lock, as under chattr +i)."""
    d = tmp_path / "ro"
    d.mkdir()
    _refuse(monkeypatch, "open", d / ".lock", errno.EPERM)
    assert log_dir_problem(str(d)) == "cannot create or open .lock in it: Operation not permitted"


def test_dir_without_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "closed"
    d.mkdir()
    with monkeypatch.context() as m:
        _refuse(m, "scandir", d, errno.EACCES)
        assert log_dir_problem(str(d)) == "it is not a readable log directory (Permission denied)"
    _refuse(monkeypatch, "open", d / ".lock", errno.EACCES)
    assert log_dir_problem(str(d)) == "cannot create or open .lock in it: Permission denied"


# ---- LogManager's own failures (a dir that became unusable after the start-up check)

def _manager(dirs: list, scheduler: Scheduler, broker_id: int = 1) -> LogManager:
    return LogManager([str(d) for d in dirs], LogConfig(), broker_id=broker_id, cluster_id="c1", scheduler=scheduler)


def test_log_manager_reports_an_unopenable_lock_file(tmp_path: Path, scheduler: Scheduler) -> None:
    (tmp_path / ".lock").mkdir()
    with pytest.raises(LogDirsError) as e:
        _manager([tmp_path], scheduler)
    assert e.value.lines[0] == (f"Failed to create or validate data directory {tmp_path} (log.dirs): cannot create or "
                                f"open .lock in it: Is a directory")


def test_log_manager_reports_unreadable_and_unwritable_meta_properties(tmp_path: Path, scheduler: Scheduler) -> None:
    (tmp_path / "meta.properties").write_bytes(b"broker.id=\xff\xfe\n")
    with pytest.raises(LogDirsError, match=r"Error while reading meta.properties file .*meta.properties"):
        _manager([tmp_path], scheduler)
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=one\n")
    with pytest.raises(LogDirsError, match=r"Error while reading meta.properties file .*: invalid broker.id 'one'"):
        _manager([tmp_path], scheduler)
    (tmp_path / "meta.properties").unlink()
    (tmp_path / "meta.properties.tmp").mkdir()  # where the atomic write goes first
    with pytest.raises(LogDirsError, match=rf"Error while writing meta.properties to {tmp_path}: "):
        _manager([tmp_path], scheduler)


def test_log_manager_meta_properties_mismatch_in_kafka_39_words(tmp_path: Path, scheduler: Scheduler) -> None:
    _manager([tmp_path], scheduler, broker_id=0).shutdown()
    with pytest.raises(InconsistentBrokerIdError) as e:
        _manager([tmp_path], scheduler, broker_id=1)
    assert str(e.value) == (f"Stored node id 0 doesn't match previous node id 1 in {tmp_path / 'meta.properties'}. If "
                            f"you moved your data, make sure your configured node id matches. If you intend to create "
                            f"a new node, you should remove all data in your data directories. (broker.id=1)")
