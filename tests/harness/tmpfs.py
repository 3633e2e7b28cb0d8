"""A small tmpfs mounted for a test (a log dir that can fill up), and a broker's whole log text. Needs root: a test
that cannot mount fails with one line saying so, it never skips."""
from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block; unmounted at the end (lazily if still busy)."""
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.fail(f"this test needs to mount a tmpfs (run it as root): mount -t tmpfs -o size={size} tmpfs {path} "
                    f"failed: {p.stderr.strip() or p.returncode}", pytrace=False)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def all_logs(b: Any) -> str:
    """The broker's stdout and every log file of its LOG_DIR (controller.log, state-change.log, ...)."""
    texts = [b.output()]
    logs_dir = getattr(b, "logs_dir", None)
    if logs_dir is not None and logs_dir.exists():
        texts += [f.read_text(errors="replace") for f in sorted(logs_dir.glob("*.log*"))]
    return "\n".join(texts)
