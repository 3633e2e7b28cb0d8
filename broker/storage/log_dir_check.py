"""Start-up checks of ``log.dirs``, reported in Kafka's words (LogManager.createAndValidateLogDirs, lockLogDirs,
MetaPropertiesEnsemble.Loader).

Kafka 3.9 logs one ERROR line per unusable log dir, ``Failed to create or validate data directory <dir>``, takes
that dir offline and, when no dir is left, logs ``Shutdown broker because none of the specified log dirs from
<dirs> can be created or validated`` and halts with status 1. So does this broker: the start-up
(:func:`unusable_log_dirs`) ends, with those lines, before ZooKeeper is contacted or any log is loaded when no dir
is usable; otherwise the unusable dirs start offline (the LogManager reports each, naming ``log.dirs`` and what is
wrong, and the controller is told once the broker is registered). :func:`check_log_dirs` refuses any unusable dir. The check creates a missing dir (as Kafka does), then requires a
readable directory (Kafka's ``is not a readable log directory``), a ``.lock`` file it can open for writing (root
passes permission checks, so opening the file is the only reliable test; the lock itself is LogManager's), and a
readable ``meta.properties`` if there is one.
"""
from __future__ import annotations

import os
from typing import Iterable, List, Optional, Sequence, Tuple

from . import files
from .errors import KafkaStorageError

#: the key every message names (``log.dir`` is its single-dir synonym)
KEY = "log.dirs"


class LogDirsError(KafkaStorageError):
    """Log dirs of ``log.dirs`` that cannot be used. ``lines`` are the ERROR lines to print (the last one is Kafka's
    shutdown line); ``str()`` is the first."""

    def __init__(self, failures: Sequence[Tuple[str, str]], log_dirs: Sequence[str]) -> None:
        self.failures = list(failures)
        self.lines: List[str] = [f"Failed to create or validate data directory {d} ({KEY}): {reason}"
                                 for d, reason in self.failures]
        failed = {d for d, _ in self.failures}
        if failed >= set(log_dirs):
            self.lines.append(f"Shutdown broker because none of the specified log dirs from {', '.join(log_dirs)} "
                              f"can be created or validated")
        else:
            self.lines.append(f"Shutdown broker because {', '.join(sorted(failed))} of {KEY} cannot be created or "
                              f"validated (this broker does not start with a log dir offline)")
        super().__init__(self.lines[0])


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def read_problem(log_dir: str) -> Optional[str]:
    """Why ``meta.properties`` of ``log_dir`` cannot be read (None if it is absent or readable)."""
    path = os.path.join(log_dir, files.META_PROPERTIES)
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"Error while reading meta.properties file {path}: {_reason(exc)}"
    return None


def log_dir_problem(log_dir: str) -> Optional[str]:
    """Why ``log_dir`` cannot be used as a log dir, in Kafka's words; None if it can (a missing dir is created)."""
    if not os.path.isdir(log_dir):
        if os.path.lexists(log_dir):
            return "it is not a readable log directory (not a directory)"
        try:
            os.makedirs(log_dir, exist_ok=True)
        except OSError as exc:
            return f"cannot create it: {_reason(exc)}"
    try:
        with os.scandir(log_dir) as it:
            next(it, None)
    except OSError as exc:
        return f"it is not a readable log directory ({_reason(exc)})"
    lock = os.path.join(log_dir, files.LOCK_FILE)
    try:
        os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        return f"cannot create or open {files.LOCK_FILE} in it: {_reason(exc)}"
    return read_problem(log_dir)


def _problems(log_dirs: Iterable[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
    given = list(log_dirs)
    dirs = [os.path.abspath(d) for d in given]
    canonical = [os.path.realpath(d) for d in dirs]
    if len(set(canonical)) != len(canonical):
        raise KafkaStorageError(f"Duplicate log directory found: {', '.join(given)} ({KEY})")
    return dirs, [(d, reason) for d in dirs for reason in [log_dir_problem(d)] if reason is not None]


def check_log_dirs(log_dirs: Iterable[str]) -> None:
    """Raise :class:`LogDirsError` unless every dir of ``log.dirs`` is usable (duplicates are refused as by Kafka)."""
    dirs, failures = _problems(log_dirs)
    if failures:
        raise LogDirsError(failures, dirs)


def unusable_log_dirs(log_dirs: Iterable[str]) -> List[Tuple[str, str]]:
    """(dir, why) of each unusable dir of ``log.dirs``, which then starts offline; :class:`LogDirsError` (Kafka's
    shutdown) when none is usable, KafkaStorageError for duplicates."""
    dirs, failures = _problems(log_dirs)
    if len(failures) == len(dirs):
        raise LogDirsError(failures, dirs)
    return failures


__all__ = ["KEY", "LogDirsError", "check_log_dirs", "log_dir_problem", "read_problem", "unusable_log_dirs"]
