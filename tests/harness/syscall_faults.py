"""SyscallErrors: real I/O errors (EIO, EROFS, ...) on some files of a *running* process, injected by strace.

This machine has no device-mapper (dm-error, dm-flakey) and no FUSE, and Linux refuses a read-only remount while a
broker has files open for writing; but a root tracer can make chosen syscalls fail. ``strace -f -p PID`` attaches
to every thread of the process (and follows new ones); ``-P PATH`` (one per file) restricts tracing, and so the
injection, to syscalls whose path argument or descriptor (resolved through /proc/PID/fd at each call, so
descriptors opened later count too) names one of the files; ``-e inject=...:error=EIO`` makes those calls return
the error without reaching the kernel. Detaching (SIGINT to strace) leaves the process running unharmed.

What is covered: the write side of the files given, i.e. every syscall a broker (ours or Kafka's JVM) uses to
change a log segment, an index or a checkpoint: write, pwrite64, writev, pwritev, pwritev2, fsync, fdatasync,
sync_file_range, ftruncate, truncate, fallocate, and rename/renameat/renameat2 onto or from a given path (the
atomic replacement of a checkpoint: pass its ``.tmp`` too, :func:`log_dir_paths` does). Reads keep working, as on a
disk whose writes fail. Not covered: stores into a memory mapping (Kafka maps its index files: those writes
reach the file only at msync or writeback, which strace cannot tie to a path; on tmpfs they never fail) and
files created after the injection started (a new segment after a roll; the active one fails first).

Needs root and /usr/bin/strace; without either the context manager raises at once with one clear message.
"""
from __future__ import annotations

import errno as errno_mod
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Iterable, List, Optional, Sequence, Type, Union

#: the syscalls that change a file's contents, size or name (see the module docstring)
WRITE_SYSCALLS: tuple = ("write", "pwrite64", "writev", "pwritev", "pwritev2", "fsync", "fdatasync",
                         "sync_file_range", "ftruncate", "truncate", "fallocate", "rename", "renameat", "renameat2")


class SyscallFaultError(RuntimeError):
    """strace is missing, could not attach, or exited early."""


#: a log dir's own checkpoint files (Kafka's names), covered even before they first exist
DIR_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                   "cleaner-offset-checkpoint", "meta.properties")


def log_dir_paths(dirs: Iterable[Union[str, Path]], skip: Sequence[str] = (".nemesis-filler",)) -> List[str]:
    """Every file now under ``dirs`` (segments, indexes, snapshots, checkpoints), the directories themselves (their
    fsync after a rename), and ``<file>.tmp`` for each file that is not a segment file (where a checkpoint is
    rewritten before its rename: Kafka's and ours), plus each dir's checkpoints (and their ``.tmp``) not written
    yet. Files named in ``skip`` are left out."""
    out: List[str] = []
    for d in dirs:
        d = os.path.abspath(d)
        for name in DIR_CHECKPOINTS:
            out += [os.path.join(d, name), os.path.join(d, name + ".tmp")]
        for root, subdirs, files in os.walk(d):
            out.append(root)
            for name in files:
                if name in skip or name.endswith(".tmp"):
                    continue
                path = os.path.join(root, name)
                out.append(path)
                if not name.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot")):
                    out.append(path + ".tmp")
    return sorted(set(out))


def tracer_of(tid_status: str) -> int:
    """TracerPid of one /proc/PID[/task/TID]/status file (0: not traced, or gone)."""
    try:
        with open(tid_status) as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class SyscallErrors:
    """``with SyscallErrors([pid], paths, "EIO"):`` the processes' write-side syscalls on ``paths`` fail with
    ``errno_name`` until the block ends. :attr:`injected` counts the calls that failed so far."""

    def __init__(self, pids: Sequence[int], paths: Iterable[Union[str, Path]], errno_name: str = "EIO",
                 syscalls: Sequence[str] = WRITE_SYSCALLS, attach_timeout_s: float = 20.0) -> None:
        if not hasattr(errno_mod, errno_name):
            raise ValueError(f"unknown errno {errno_name!r}")
        self.pids = [int(p) for p in pids]
        self.paths = [os.path.abspath(p) for p in paths]
        self.errno_name = errno_name
        self.syscalls = list(syscalls)
        self.attach_timeout_s = attach_timeout_s
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self._tmp = Path(tempfile.mkdtemp(prefix="syscall-faults-"))
        self.trace_path = self._tmp / "trace"
        self.stderr_path = self._tmp / "stderr"
        if not self.pids:
            raise ValueError("no process to inject into")
        if not self.paths:
            raise ValueError("no path to inject on")

    def command(self, strace: str) -> List[str]:
        calls = ",".join(self.syscalls)
        cmd = [strace, "-qq", "-f", "-e", f"trace={calls}", "-e", f"inject={calls}:error={self.errno_name}",
               "-o", str(self.trace_path)]
        for p in self.paths:
            cmd += ["-P", p]
        for pid in self.pids:
            cmd += ["-p", str(pid)]
        return cmd

    def _stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace").strip()[-500:]
        except OSError:
            return ""

    def _untraced(self) -> List[int]:
        """Threads of the target processes not (yet) traced by our strace."""
        assert self.proc is not None
        left = []
        for pid in self.pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue  # exited: nothing to trace
            for tid in tids:
                if tracer_of(f"/proc/{pid}/task/{tid}/status") != self.proc.pid and os.path.exists(
                        f"/proc/{pid}/task/{tid}"):
                    left.append(int(tid))
        return left

    def __enter__(self) -> "SyscallErrors":
        strace = shutil.which("strace")
        if strace is None:
            raise SyscallFaultError("injecting I/O errors needs strace (apt-get install strace); it is not on PATH")
        if os.geteuid() != 0:
            raise SyscallFaultError("injecting I/O errors into another process with strace needs root")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.command(strace), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, start_new_session=True)
        deadline = time.monotonic() + self.attach_timeout_s
        while True:
            if self.proc.poll() is not None:
                if self.proc.returncode == 0 and not any(alive(p) for p in self.pids):
                    return self  # attached, and the processes exited at once (a broker halting on the first error)
                raise SyscallFaultError(f"strace exited with {self.proc.returncode} before attaching to "
                                        f"{self.pids}: {self._stderr() or 'no message'}")
            left = self._untraced()
            if not left:
                return self
            if time.monotonic() > deadline:
                self._detach()
                raise SyscallFaultError(f"strace did not attach to threads {left[:10]} of {self.pids} within "
                                        f"{self.attach_timeout_s:.0f}s: {self._stderr() or 'no message'}")
            time.sleep(0.02)

    @property
    def injected(self) -> int:
        """How many syscalls failed with the injected error so far (strace's ``(INJECTED)`` lines)."""
        try:
            return self.trace_path.read_text(errors="replace").count("(INJECTED)")
        except OSError:
            return 0

    def trace(self) -> str:
        """strace's lines for the matched syscalls (what failed, on which file)."""
        try:
            return self.trace_path.read_text(errors="replace")
        except OSError:
            return ""

    def _detach(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:  # strace stuck: SIGKILL; the kernel detaches its tracees then
            self.proc.kill()
            self.proc.wait(5)

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._detach()
        # the process is no longer traced once strace has gone (waited for: bounded)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
                tracer_of(f"/proc/{pid}/status") == (self.proc.pid if self.proc else -1) for pid in self.pids):
            time.sleep(0.02)

    def cleanup(self) -> None:
        """Remove the trace files (after reading :meth:`trace` if wanted)."""
        shutil.rmtree(self._tmp, ignore_errors=True)


__all__ = ["DIR_CHECKPOINTS", "SyscallErrors", "SyscallFaultError", "WRITE_SYSCALLS", "log_dir_paths"]
