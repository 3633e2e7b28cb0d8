"""Run the broker as a real separate process from ``bin/kafka-server-start.sh`` for tests.

The process runner is ``tools/cluster.py``'s (the same one ``bin/kafka-cluster.sh`` uses); this module
adds the test-only wrapper that insists on a clean exit.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tools.cluster import ROOT, BrokerProcess, free_port

__all__ = ["ROOT", "BrokerProcess", "free_port", "running_broker"]


@contextmanager
def running_broker(workdir: Path, zk_connect: str, **kwargs: Any) -> Iterator[BrokerProcess]:
    """A started broker that must, at the end, stop cleanly (exit 0) with no traceback in its log."""
    b = BrokerProcess(workdir, zk_connect, **kwargs)
    try:
        b.start()
    except BaseException:
        b.kill()
        raise
    try:
        yield b
    finally:
        rc = b.stop()
        out = b.output()
        assert "Traceback" not in out, f"broker logged a traceback:\n{out[-6000:]}"
        assert rc == 0, f"broker exited with {rc}"
