"""CPU a broker process has used: the benchmarks' one reading of it.

:func:`tree_cpu_seconds` reads utime + stime, which Linux reports in clock ticks (10 ms here): a run that costs a
broker 0.05 s reads 0.04 to 0.06. :class:`CpuMeter` measures a window to the nanosecond: the on-CPU time of every
thread alive at both ends (``/proc/<pid>/task/<tid>/schedstat``, the scheduler's own sum), plus, in ticks, what
threads that started or ended inside the window used (the process's ticks minus those threads' ticks).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import psutil

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

#: per process: (its utime + stime in ticks, exited threads included; {thread id: (on-CPU ns, its ticks)})
_Sample = Dict[int, Tuple[int, Dict[int, Tuple[int, int]]]]


def tree_cpu_seconds(pid: Optional[int]) -> float:
    """User + system CPU seconds of process ``pid`` and its live children (our broker starts from a shell script);
    0.0 when there is no such process."""
    if pid is None:
        return 0.0
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def broker_cpu_seconds(broker: Any) -> float:
    """:func:`tree_cpu_seconds` of a started broker object (``.proc``: a Popen), 0.0 once it has exited."""
    proc = getattr(broker, "proc", None)
    return 0.0 if proc is None or proc.poll() is not None else tree_cpu_seconds(proc.pid)


def _ticks(stat_path: str) -> int:
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _sample(pid: int) -> _Sample:
    out: _Sample = {}
    try:
        pids = [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in pids:
        try:
            total = _ticks(f"/proc/{p}/stat")
            tasks: Dict[int, Tuple[int, int]] = {}
            for tid in os.listdir(f"/proc/{p}/task"):
                try:
                    with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                        ns = int(f.read().split()[0])
                    tasks[int(tid)] = (ns, _ticks(f"/proc/{p}/task/{tid}/stat"))
                except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile: the ticks count it
                    continue
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[p] = (total, tasks)
    return out


class CpuMeter:
    """CPU seconds process ``pid`` and its live children use from construction to :meth:`seconds`, to the
    nanosecond for threads alive throughout (see the module docstring); processes gone by the end are not
    counted, as with :func:`tree_cpu_seconds`."""

    def __init__(self, pid: Optional[int]) -> None:
        self.pid = pid
        self._start: _Sample = _sample(pid) if pid is not None else {}

    def seconds(self) -> float:
        if self.pid is None:
            return 0.0
        end = _sample(self.pid)
        total = 0.0
        for p, (ticks1, tasks1) in end.items():
            ticks0, tasks0 = self._start.get(p, (0, {}))
            precise_ns = known_ticks = 0
            for tid, (ns1, t1) in tasks1.items():
                ns0, t0 = tasks0.get(tid, (0, 0))
                precise_ns += ns1 - ns0
                known_ticks += t1 - t0
            # threads that ended inside the window (or before the process's first sample): only ticks say what
            # they used; rounding can make the difference slightly negative
            total += precise_ns / 1e9 + max(0, (ticks1 - ticks0) - known_ticks) * _TICK_S
        return total
