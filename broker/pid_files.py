"""Pid files of running brokers, so ``kafka-server-stop`` stops the brokers that were started here and no others.

Each broker process writes ``<LOG_DIR>/kafkaServer-<pid>.pid`` when it starts and removes it when it exits
(``kafkaServer`` is the daemon name Kafka's scripts give the broker: ``kafkaServer.out``). A file left by a
killed process is recognised as stale: its pid is no longer a broker process (Kafka's own stop script instead
signals every ``kafka.Kafka`` process of the machine; :func:`all_broker_processes` is that, for ``--all``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

PID_FILE_PREFIX = "kafkaServer-"
PID_FILE_SUFFIX = ".pid"
#: the console-script name of the broker (pyproject.toml) and the module run by bin/ and -daemon
ENTRY_POINT = "kafka-server-start"
MODULE = "broker"


def pid_file_path(directory: Path, pid: int) -> Path:
    return Path(directory) / f"{PID_FILE_PREFIX}{pid}{PID_FILE_SUFFIX}"


def write_pid_file(directory: Path, pid: Optional[int] = None) -> Path:
    """Record this (or the given) process as a broker started from ``directory``'s LOG_DIR."""
    pid = os.getpid() if pid is None else pid
    path = pid_file_path(directory, pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, path)
    return path


def remove_pid_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _cmdline(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return False


def is_broker_command(argv: List[str]) -> bool:
    """``python [-P ...] -m broker ...`` (bin/, -daemon) or ``python .../kafka-server-start ...`` (the console
    script)."""
    if len(argv) < 2 or not os.path.basename(argv[0]).startswith("python"):
        return False
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":  # interpreter flags such as -P
        i += 1
    if i + 1 < len(argv) and argv[i] == "-m":
        return argv[i + 1] == MODULE
    return i < len(argv) and os.path.basename(argv[i]) == ENTRY_POINT


def is_broker_process(pid: int) -> bool:
    """Whether ``pid`` is a live broker process (not a zombie, not a reused pid)."""
    return pid > 0 and is_broker_command(_cmdline(pid)) and not _is_zombie(pid)


def recorded_brokers(directory: Path, remove_stale: bool = True) -> List[int]:
    """Pids of the live brokers that recorded themselves in ``directory``; stale files are removed."""
    pids: List[int] = []
    for path in sorted(Path(directory).glob(f"{PID_FILE_PREFIX}*{PID_FILE_SUFFIX}")):
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            pid = -1
        if is_broker_process(pid):
            pids.append(pid)
        elif remove_stale:
            remove_pid_file(path)
    return pids


def all_broker_processes() -> List[int]:
    """Every broker process of this machine (Kafka's kafka-server-stop.sh behaviour), this process excluded."""
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me and is_broker_process(int(entry)):
            pids.append(int(entry))
    return sorted(pids)


__all__ = ["pid_file_path", "write_pid_file", "remove_pid_file", "is_broker_command", "is_broker_process",
           "recorded_brokers", "all_broker_processes"]
