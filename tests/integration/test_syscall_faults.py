"""tests/harness/syscall_faults.py on a real child process (strace, root): the injected errno reaches the calls on
the named files only (a write, a truncation, the rename of a checkpoint's .tmp), other files are written, and after
the block the process is no longer traced and writes succeed again. Without root or strace this fails, never
skips."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.syscall_faults import SyscallErrors, log_dir_paths, tracer_of

CHILD = textwrap.dedent("""
    import os, sys
    d = sys.argv[1]
    bad = os.open(os.path.join(d, "part-0", "00000000000000000000.log"), os.O_WRONLY)
    good = os.open(os.path.join(d, "other"), os.O_WRONLY | os.O_CREAT)
    for line in sys.stdin:
        out = []
        for what, call in (("pwrite", lambda: os.pwrite(bad, b"x", 0)), ("other", lambda: os.pwrite(good, b"x", 0)),
                           ("ftruncate", lambda: os.ftruncate(bad, 0)),
                           ("checkpoint", lambda: (open(os.path.join(d, "cp.tmp"), "w").write("1"),
                                                   os.replace(os.path.join(d, "cp.tmp"), os.path.join(d, "cp"))))):
            try:
                call()
                out.append(what + "=ok")
            except OSError as e:
                out.append(what + "=" + str(e.errno))
        print(" ".join(out), flush=True)
""")


@pytest.mark.parametrize("errno_name,code", [("EIO", 5), ("EROFS", 30)])
def test_errors_reach_only_the_named_files_while_attached(tmp_path: Path, errno_name: str, code: int) -> None:
    (tmp_path / "part-0").mkdir()
    (tmp_path / "part-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "cp").write_text("0")
    paths = log_dir_paths([tmp_path])
    assert str(tmp_path / "cp.tmp") in paths and str(tmp_path / "part-0" / "00000000000000000000.log") in paths
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None

    def round_trip() -> str:
        child.stdin.write("go\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return child.stdout.readline().strip()  # type: ignore[union-attr]

    try:
        assert round_trip() == "pwrite=ok other=ok ftruncate=ok checkpoint=ok"
        (tmp_path / "other").unlink()  # "other" is created after log_dir_paths: never matched
        with SyscallErrors([child.pid], paths, errno_name) as faults:
            assert tracer_of(f"/proc/{child.pid}/status") == faults.proc.pid  # type: ignore[union-attr]
            assert round_trip() == f"pwrite={code} other=ok ftruncate={code} checkpoint={code}"
        trace = faults.trace()
        assert faults.injected >= 3 and all(f"{call}(" in trace for call in ("pwrite64", "ftruncate", "rename")), trace
        assert "other" not in trace, trace
        assert tracer_of(f"/proc/{child.pid}/status") == 0
        assert round_trip() == "pwrite=ok other=ok ftruncate=ok checkpoint=ok"
        faults.cleanup()
    finally:
        child.kill()
        child.wait()
