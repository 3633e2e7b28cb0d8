"""CPU a broker process has used: the benchmarks' one reading of it."""
from __future__ import annotations

from typing import Any, Optional

import psutil


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
