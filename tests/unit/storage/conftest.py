"""Helpers for the storage tests: a manual clock and batch builders."""
from __future__ import annotations

import os
from typing import Callable

import pytest

from broker.protocol.records.builder import build_batch
from broker.storage.config import LogConfig
from broker.storage.log import Log
from broker.util.clock import ManualClock


def batch(n: int = 1, *, ts: int = 1_700_000_000_000, key: bytes | None = b"k", value: bytes = b"v" * 20,
          **kw: object) -> bytearray:
    """One batch of ``n`` records with timestamps ts, ts+1, ..."""
    return bytearray(build_batch([(key, value, [], ts + i) for i in range(n)], **kw))  # type: ignore[arg-type]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_log(tmp_path: "os.PathLike[str]", clock: ManualClock) -> Callable[..., Log]:
    opened: list[Log] = []

    def _open(config: LogConfig | None = None, name: str = "topic-0", **kw: object) -> Log:
        log = Log.open(os.path.join(str(tmp_path), name), config or LogConfig(), clock=clock, **kw)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield _open  # type: ignore[misc]
    for log in opened:
        log.close()
