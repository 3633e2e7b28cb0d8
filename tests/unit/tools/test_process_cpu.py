"""The benchmarks' CPU meter: a child's on-CPU time to well under a clock tick, threads that end inside the window
counted too (in ticks)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tools.bench.process_cpu import CpuMeter, tree_cpu_seconds

_CHILD = textwrap.dedent("""
    import sys, threading, time
    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
    for line in sys.stdin:
        kind, ms = line.split()
        if kind == "main":
            spin(int(ms) / 1000)
        else:
            t = threading.Thread(target=spin, args=(int(ms) / 1000,))
            t.start()
            t.join()
        print("done", flush=True)
""")


def _spin(child: subprocess.Popen, kind: str, ms: int) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"{kind} {ms}\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "done"


def test_meter_reads_a_live_thread_to_the_millisecond_and_an_ended_thread_in_ticks() -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        _spin(child, "main", 20)  # the interpreter is up and warm
        meter = CpuMeter(child.pid)
        _spin(child, "main", 37)
        live = meter.seconds()
        assert 0.037 <= live < 0.043, live  # ticks could only say 0.03 or 0.04
        meter = CpuMeter(child.pid)
        _spin(child, "thread", 60)  # a thread that starts and ends inside the window
        ended = meter.seconds()
        assert 0.045 <= ended < 0.08, ended
        assert CpuMeter(None).seconds() == 0.0 and tree_cpu_seconds(None) == 0.0
    finally:
        child.kill()
        child.wait()
