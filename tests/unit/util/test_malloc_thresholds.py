"""runtime_tuning.configure_malloc: a buffer of a MiB freed and needed again costs no fresh page faults (glibc kept
it), where before it cost one per 4 KiB page; an operator's own MALLOC_*_THRESHOLD_ environment is left alone.
Each case runs in a process of its own: malloc's settings are process-wide."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Allocate and free ~1 MiB buffers of growing sizes (sizes vary, as inflated batches do), touching every page;
# print the minor page faults of the last 50.
PROBE = """
import resource, sys
sys.path.insert(0, %r)
from broker.util import runtime_tuning
applied = runtime_tuning.configure_malloc() if sys.argv[1] == "tuned" else None
def churn(n, base):
    for i in range(n):
        b = bytearray(base + i * 4096)
        b[::4096] = b"x" * len(b[::4096])
        del b
churn(50, 1 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn(50, (1 << 20) + 50 * 4096)
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""" % str(ROOT)


def probe(mode: str, env: dict) -> tuple:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                         env=env, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc's malloc thresholds: Linux with glibc only")
def test_large_buffers_are_reused_without_fresh_page_faults() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    _, untuned = probe("default", env)
    applied, tuned = probe("tuned", env)
    assert applied == "True"
    assert untuned > 50 * 200, untuned  # ~256 faults per MiB buffer without the thresholds
    assert tuned < 500, tuned           # kept: a few faults for the growth only


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="glibc's malloc thresholds: Linux with glibc only")
def test_an_operators_malloc_environment_is_left_alone() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)  # the operator wants every large block mapped
    env["MALLOC_TRIM_THRESHOLD_"] = str(128 * 1024)
    applied, faults = probe("tuned", env)
    assert applied == "True" and faults > 50 * 200, faults
