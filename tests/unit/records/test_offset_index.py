from __future__ import annotations

import bisect
import mmap
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.accel import load


def _offset_buf(offsets):
    return b"".join(struct.pack(">ii", o, i * 100) for i, o in enumerate(offsets))


def _time_buf(stamps):
    return b"".join(struct.pack(">qi", t, i) for i, t in enumerate(stamps))


def test_offset_lookup_basics(impl):
    buf = _offset_buf([0, 10, 20, 30])
    look = impl.offset_index.index_lookup
    assert look(buf, 4, -1) == -1
    assert look(buf, 4, 0) == 0
    assert look(buf, 4, 15) == 1
    assert look(buf, 4, 30) == 3
    assert look(buf, 4, 10**6) == 3
    assert look(buf, 2, 10**6) == 1  # only the first `entries` count
    assert look(buf, 0, 5) == -1
    with pytest.raises(ValueError):
        look(buf, 5, 0)


def test_time_lookup_basics(impl):
    buf = _time_buf([100, 200, 200, 300])
    look = impl.offset_index.time_index_lookup
    assert look(buf, 4, 99) == -1
    assert look(buf, 4, 200) == 2
    assert look(buf, 4, 250) == 2
    assert look(buf, 4, 2**62) == 3
    with pytest.raises(ValueError):
        look(buf, 5, 0)


def test_lookup_on_mmap(impl, tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(_offset_buf(range(0, 4000, 4)))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        assert impl.offset_index.index_lookup(m, 1000, 2001) == 500


@settings(max_examples=80)
@given(st.lists(st.integers(0, 2**31 - 1), max_size=60), st.integers(-5, 2**31 - 1))
def test_offset_lookup_matches_bisect(offsets, target):
    offsets.sort()
    buf = _offset_buf(offsets)
    expected = bisect.bisect_right(offsets, target) - 1
    for impl in ("pure", "native"):
        assert load("offset_index", impl).index_lookup(buf, len(offsets), target) == expected


@settings(max_examples=80)
@given(st.lists(st.integers(-(2**40), 2**62), max_size=60), st.integers(-(2**41), 2**62))
def test_time_lookup_matches_bisect(stamps, target):
    stamps.sort()
    buf = _time_buf(stamps)
    expected = bisect.bisect_right(stamps, target) - 1
    for impl in ("pure", "native"):
        assert load("offset_index", impl).time_index_lookup(buf, len(stamps), target) == expected
