"""The nemesis schedule (tests/harness/nemesis/schedule.py) and the read-ledger check (audit.check_reads): pure
functions, so a seed always gives the same faults and the audit flags what it must."""
from __future__ import annotations

import random

import pytest

from tests.harness.nemesis.audit import Audit, check_reads
from tests.harness.nemesis.ledger import Read, ReadLedger
from tests.harness.nemesis.schedule import DURATIONS, make_schedule


def test_same_seed_same_schedule_required_kinds_first() -> None:
    a = make_schedule(random.Random(5), 30, ["kill9", "disk_full"])
    b = make_schedule(random.Random(5), 30, ["kill9", "disk_full"])
    assert a == b
    assert [f.kind for f in a[:2]] == ["kill9", "disk_full"]
    assert len(a) == 32
    assert all(x.kind != y.kind for x, y in zip(a[1:], a[2:]))
    for f in a:
        lo, hi = DURATIONS[f.kind]
        assert lo <= f.duration <= hi
    assert make_schedule(random.Random(6), 30) != make_schedule(random.Random(5), 30)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        make_schedule(random.Random(1), 0, ["netem_delay"])


def _ledger(reads: list) -> ReadLedger:
    led = ReadLedger()
    for p, off, val, gen in reads:
        led.reads[p].append(Read(p, off, val, 0.0, gen))
    return led


def test_check_reads_accepts_rereads_after_a_new_assignment() -> None:
    log = {0: {0: b"0:0", 1: b"0:1", 2: b"0:2"}}
    a = Audit()
    check_reads(_ledger([(0, 0, b"0:0", 1), (0, 1, b"0:1", 1), (0, 1, b"0:1", 2), (0, 2, b"0:2", 2)]), log,
                {0: {b"0:0", b"0:1", b"0:2"}}, a)
    assert a.passed, a.problems
    assert a.counts.reread == 1


def test_check_reads_flags_unread_out_of_order_and_mismatch() -> None:
    log = {0: {0: b"0:0", 1: b"0:1", 2: b"0:2"}}
    a = Audit()
    check_reads(_ledger([(0, 1, b"0:1", 1), (0, 0, b"0:0", 1), (0, 2, b"0:9", 1)]), log,
                {0: {b"0:0", b"0:1", b"0:2"}}, a)
    assert (a.counts.unread, a.counts.read_out_of_order, a.counts.read_mismatch) == (1, 1, 1)
    assert not a.passed
