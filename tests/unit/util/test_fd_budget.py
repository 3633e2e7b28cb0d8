"""The descriptor budget: the start-up estimate and the admission of accepted sockets (fake limit, count, clock)."""
from __future__ import annotations

import logging
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from broker.util import fd_budget
from broker.util.clock import ManualClock
from broker.util.fd_budget import (
    DescriptorBudget, NofileLimit, count_open_descriptors, count_partition_dirs, default_reserve, effective_reserve,
    estimate_descriptors,
)


class Fake:
    """What the budget reads from the OS, set by the test."""

    def __init__(self, limit: int, open_now: int) -> None:
        self.limit = limit
        self.open = open_now
        self.clock = ManualClock(100_000)
        self.counts = 0

    def count(self) -> int:
        self.counts += 1
        return self.open


def budget(fake: Fake, reserve: int = 100) -> DescriptorBudget:
    return DescriptorBudget(lambda: reserve, limit=lambda: fake.limit, count=fake.count, clock=fake.clock,
                            logger=logging.getLogger("test.fd_budget"))


def test_default_reserve_is_five_percent_at_least_256_at_most_half() -> None:
    assert default_reserve(20000) == 1000
    assert default_reserve(4096) == 256
    assert default_reserve(300) == 150
    assert effective_reserve(-1, 20000) == 1000 and effective_reserve(64, 20000) == 64
    assert effective_reserve(50000, 20000) == 20000


def test_clients_are_admitted_until_only_the_reserve_is_left() -> None:
    f = Fake(limit=1000, open_now=800)
    b = budget(f)
    admitted = 0
    for fd in range(800, 1000):
        f.open += 1  # the accepted socket itself
        if not b.admit(fd, "PLAINTEXT"):
            f.open -= 1
            break
        admitted += 1
    assert admitted == 100  # 800 open + 100 admitted leaves the reserve of 100
    assert b.refused_total == 1


def test_the_inter_broker_listener_may_use_half_the_reserve() -> None:
    f = Fake(limit=1000, open_now=900)  # exactly the reserve left
    b = budget(f)
    assert not b.admit(900, "PLAINTEXT")
    assert b.admit(900, "INTERNAL", inter_broker=True)
    b.open = 949
    assert b.admit(949, "INTERNAL", inter_broker=True)  # 950 open: 50 left, half the reserve
    assert not b.admit(950, "INTERNAL", inter_broker=True)


def test_the_socket_number_is_a_free_lower_bound_between_counts() -> None:
    f = Fake(limit=1000, open_now=100)
    b = budget(f)
    f.clock.advance(10)  # no recount yet: the budget believes 100 are open...
    assert not b.admit(950, "PLAINTEXT")  # ...but descriptor 950 proves 951 are
    assert f.counts == 1  # refused on the proof alone, within the confirmation interval: no count


def test_a_refusal_is_confirmed_by_a_fresh_count() -> None:
    f = Fake(limit=1000, open_now=950)
    b = budget(f)
    f.open = 500  # others closed descriptors meanwhile
    f.clock.advance((fd_budget.CONFIRM_INTERVAL_S + 0.01) * 1000)
    assert b.admit(400, "PLAINTEXT")
    assert f.counts == 2 and b.open == 500


def test_counts_follow_admissions_and_closes_and_are_refreshed_each_second() -> None:
    f = Fake(limit=10000, open_now=50)
    b = budget(f)
    for fd in range(50, 60):
        assert b.admit(fd, "PLAINTEXT")
    assert b.open == 60 and f.counts == 1
    b.connection_closed()
    assert b.open == 59
    f.open = 70
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert b.admit(20, "PLAINTEXT")
    assert b.open == 70 and f.counts == 2


def test_a_changed_limit_or_reserve_applies_at_the_next_count() -> None:
    f = Fake(limit=10000, open_now=600)
    reserve = [100]
    b = DescriptorBudget(lambda: reserve[0], limit=lambda: f.limit, count=f.count, clock=f.clock)
    assert b.admit(600, "PLAINTEXT")
    f.limit = 700  # prlimit on the running process
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert not b.admit(600, "PLAINTEXT") and b.limit == 700
    reserve[0] = 50
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert b.admit(600, "PLAINTEXT") and b.reserve == 50


def test_refusals_are_logged_once_per_interval_with_a_count_and_recovery_once(caplog: pytest.LogCaptureFixture) -> None:
    f = Fake(limit=1000, open_now=950)
    b = budget(f)
    caplog.set_level(logging.INFO, logger="test.fd_budget")
    for _ in range(50):
        f.clock.advance(100)
        assert not b.admit(950, "PLAINTEXT")
    lines: List[str] = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("Refusing new connections on listener PLAINTEXT: 951 of 1000")
    f.clock.advance(fd_budget.REFUSAL_LOG_INTERVAL_S * 1000)
    assert not b.admit(950, "PLAINTEXT")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "50 refused since the last message" in lines[1]
    f.open = 500
    f.clock.advance(1000)
    assert b.admit(500, "PLAINTEXT") and b.admit(501, "PLAINTEXT")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and lines[2].startswith("Accepting new connections again")
    assert b.refused_total == 51


def test_count_partition_dirs_counts_topic_partition_and_future_dirs_only(tmp_path: Path) -> None:
    for name in ("t-0", "t-1", "my.topic-12", "__consumer_offsets-49", "t-2.0f3a9c-future", "t-3.0f3a9c-delete",
                 "cleaner-offset-checkpoint-dir", "lost+found"):
        (tmp_path / name).mkdir()
    (tmp_path / "x-0").write_text("a file, not a partition")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    other = tmp_path / "second"
    other.mkdir()
    (other / "u-0").mkdir()
    assert count_partition_dirs([str(tmp_path), str(other), str(tmp_path / "missing")]) == 6


def test_count_open_descriptors_sees_a_new_one() -> None:
    before = count_open_descriptors()
    r, w = os.pipe()
    try:
        assert count_open_descriptors() == before + 2
    finally:
        os.close(r)
        os.close(w)


def test_estimate_line(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"t-{i}").mkdir()
    e = estimate_descriptors(NofileLimit(1024, 20000, 20000), [str(tmp_path)], 1024, 1000)
    assert e.partitions == 3 and e.needed == 3 + 1024 + e.open_now + 1000
    assert e.describe().startswith(f"File descriptors: limit 20000 (raised from 1024); partitions on disk 3 need "
                                   f"about {e.needed} with the segment file cache of 1024")
    assert e.describe().endswith(f"{20000 - e.needed} left for connections") and not e.close_to_limit
    assert estimate_descriptors(NofileLimit(1500, 1500, 1500), [str(tmp_path)], 1024, 256).close_to_limit


def test_raise_nofile_limit_raises_the_soft_limit_to_the_hard_one() -> None:
    _, hard_now = resource.getrlimit(resource.RLIMIT_NOFILE)
    # the child gets a finite hard limit of its own (lowering it needs no privilege), so this runs everywhere
    hard = 4096 if hard_now == resource.RLIM_INFINITY else min(hard_now, 4096)
    low = hard // 2
    code = ("from broker.util.fd_budget import raise_nofile_limit, current_nofile_limit; "
            "l = raise_nofile_limit(); print(l.before, l.soft, l.hard, current_nofile_limit())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))).stdout.split()
    assert [int(x) for x in out] == [low, hard, hard, hard]


def test_an_inter_broker_admission_is_not_taken_for_the_end_of_client_refusals(
        caplog: pytest.LogCaptureFixture) -> None:
    f = Fake(limit=1000, open_now=920)
    b = budget(f)
    caplog.set_level(logging.INFO, logger="test.fd_budget")
    assert not b.admit(920, "EXTERNAL")
    assert b.admit(920, "INTERNAL", inter_broker=True)
    assert [r.getMessage()[:25] for r in caplog.records] == ["Refusing new connections "]


def test_a_failed_count_keeps_the_running_count() -> None:
    f = Fake(limit=1000, open_now=500)
    b = budget(f)
    f.open = -1  # listing /proc/self/fd failed (no descriptor for it)
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert b.admit(20, "PLAINTEXT") and b.open == 501


def test_a_refusing_listener_admits_again_only_with_a_margin_above_the_reserve(
        caplog: pytest.LogCaptureFixture) -> None:
    """At the threshold the exact count moves by one or two (a checkpoint's temporary file): no flapping."""
    f = Fake(limit=1000, open_now=900)  # reserve 100: nothing free
    b = budget(f)
    caplog.set_level(logging.INFO, logger="test.fd_budget")
    assert not b.admit(900, "PLAINTEXT")
    margin = fd_budget.resume_margin(100)
    assert margin == 12
    for freed in range(1, margin + 1):  # a descriptor closes elsewhere between fresh counts
        f.open = 900 - freed
        f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
        assert not b.admit(f.open, "PLAINTEXT"), f"admitted with {freed} free, margin {margin}"
    f.open = 900 - margin - 1
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert b.admit(f.open, "PLAINTEXT")
    # not refusing any more: down to the reserve again without a margin
    f.clock.advance(fd_budget.RECOUNT_INTERVAL_S * 1000)
    assert all(b.admit(f.open + i, "PLAINTEXT") for i in range(1, margin + 1))
    lines = [r.getMessage() for r in caplog.records]
    assert sum(line.startswith("Accepting new connections again") for line in lines) == 1, lines
    assert fd_budget.resume_margin(0) == 1 and fd_budget.resume_margin(64) == 8 and fd_budget.resume_margin(5000) == 64
