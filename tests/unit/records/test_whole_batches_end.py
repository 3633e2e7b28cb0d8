"""record_batch.whole_batches_end, the scanner Fetch uses to end its answer on a batch boundary: both twins, and
native == pure on valid, torn and garbage input."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.records.builder import build_batch

RECORDS = [(b"k1", b"v1", [("h", b"x")], 1000), (None, b"v2" * 40, [], 1007)]


def _batches() -> tuple[bytes, bytes, bytes]:
    return build_batch(RECORDS, base_offset=0), build_batch(RECORDS[:1], base_offset=2), \
        build_batch(RECORDS * 3, base_offset=3)


def test_whole_batches_and_the_size_of_the_next(impl) -> None:
    a, b, c = _batches()
    buf = a + b + c
    assert impl.record_batch.whole_batches_end(buf) == (len(buf), -1)
    # the window ends inside c: a and b are whole, c's size is known from its length field
    assert impl.record_batch.whole_batches_end(buf, 0, len(buf) - 1) == (len(a) + len(b), len(c))
    assert impl.record_batch.whole_batches_end(buf[:-1]) == (len(a) + len(b), len(c))
    # from a boundary inside the buffer
    assert impl.record_batch.whole_batches_end(buf, len(a)) == (len(buf), -1)
    assert impl.record_batch.whole_batches_end(buf, len(a), len(a) + len(b)) == (len(a) + len(b), -1)
    # the next batch's 12-byte prefix cut by the window: its size is unknown
    assert impl.record_batch.whole_batches_end(buf, 0, len(a) + 11) == (len(a), -1)
    assert impl.record_batch.whole_batches_end(buf, 0, len(a) + 12) == (len(a), len(b))
    # a window smaller than one batch, an empty one, a position past the end
    assert impl.record_batch.whole_batches_end(a, 0, 20) == (0, len(a))
    assert impl.record_batch.whole_batches_end(b"") == (0, -1)
    assert impl.record_batch.whole_batches_end(a, len(a) + 5) == (len(a) + 5, -1)


def test_stops_at_a_length_that_is_not_one(impl) -> None:
    a, b, _ = _batches()
    for bad in (0, -1, -(2 ** 31)):
        broken = bytearray(a + b)
        struct.pack_into(">i", broken, len(a) + 8, bad)
        assert impl.record_batch.whole_batches_end(broken) == (len(a), -1)


def test_reads_length_fields_only(impl) -> None:
    """No magic or CRC check: the log validated its batches on append, Fetch only needs their extent."""
    a, b, _ = _batches()
    corrupt = bytearray(a + b)
    corrupt[16] = 9  # magic
    corrupt[len(a) + 30] ^= 0xFF  # inside b's CRC-covered part
    assert impl.record_batch.whole_batches_end(corrupt) == (len(a) + len(b), -1)


def test_accepts_any_buffer(impl) -> None:
    a, b, _ = _batches()
    for buf in (a + b, bytearray(a + b), memoryview(a + b)):
        assert impl.record_batch.whole_batches_end(buf) == (len(a) + len(b), -1)


def test_negative_position_is_refused(impl) -> None:
    with pytest.raises(ValueError):
        impl.record_batch.whole_batches_end(b"\x00" * 20, -1)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # same class from both twins
        return ("error", type(e))


@st.composite
def _laid_out(draw):
    """Whole batches, then maybe a torn or overwritten tail, and a window over it."""
    batches = [build_batch([(None, draw(st.binary(max_size=300)), [], 0)] * draw(st.integers(1, 3)),
                           base_offset=i) for i in range(draw(st.integers(0, 4)))]
    buf = bytearray(b"".join(batches))
    if draw(st.booleans()) and buf:
        del buf[draw(st.integers(0, len(buf))):]
    if draw(st.booleans()) and len(buf) >= 12:
        i = draw(st.integers(0, len(buf) - 12))
        buf[i:i + 12] = draw(st.binary(min_size=12, max_size=12))
    pos = draw(st.integers(0, len(buf) + 20))
    end = draw(st.integers(-1, len(buf) + 20))
    return bytes(buf), pos, end


@settings(max_examples=300)
@given(_laid_out())
def test_differential_laid_out(both, case) -> None:
    pure, native = both
    buf, pos, end = case
    assert _outcome(pure.record_batch.whole_batches_end, buf, pos, end) == \
        _outcome(native.record_batch.whole_batches_end, buf, pos, end)


@settings(max_examples=200)
@given(st.binary(max_size=200), st.integers(-2, 210), st.integers(-2, 210))
def test_differential_garbage(both, data, pos, end) -> None:
    pure, native = both
    assert _outcome(pure.record_batch.whole_batches_end, data, pos, end) == \
        _outcome(native.record_batch.whole_batches_end, data, pos, end)
