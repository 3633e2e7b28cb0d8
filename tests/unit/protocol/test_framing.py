from __future__ import annotations

import struct

import pytest

from broker.protocol.exceptions import FrameTooLargeError, InvalidFrameError
from broker.protocol.framing import RequestFramer


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_byte_by_byte():
    data = _frame(b"hello") + _frame(b"") + _frame(b"world!")
    framer = RequestFramer(100)
    out = []
    for i in range(len(data)):
        out += [bytes(f) for f in framer.feed(data[i:i + 1])]
    assert out == [b"hello", b"", b"world!"]
    assert framer.buffered_bytes == 0


def test_many_frames_in_one_chunk_and_a_partial_tail():
    framer = RequestFramer(100)
    data = _frame(b"a") + _frame(b"bb") + _frame(b"ccc")[:5]
    assert [bytes(f) for f in framer.feed(data)] == [b"a", b"bb"]
    assert framer.buffered_bytes == 5
    assert [bytes(f) for f in framer.feed(b"cc" + _frame(b"d"))] == [b"ccc", b"d"]


def test_frames_survive_later_feeds():
    framer = RequestFramer(100)
    first = framer.feed(_frame(b"abc") + b"\x00")
    rest = framer.feed(b"\x00\x00\x01z")
    assert bytes(first[0]) == b"abc" and bytes(rest[0]) == b"z"


def test_max_size_is_inclusive():
    assert [bytes(f) for f in RequestFramer(3).feed(_frame(b"abc"))] == [b"abc"]


def test_oversize_frame():
    framer = RequestFramer(10)
    with pytest.raises(FrameTooLargeError) as info:
        framer.feed(struct.pack(">i", 11))
    assert info.value.size == 11 and info.value.max_bytes == 10
    with pytest.raises(InvalidFrameError):
        framer.feed(b"x")


def test_negative_size():
    with pytest.raises(InvalidFrameError):
        RequestFramer(10).feed(struct.pack(">i", -1) + b"abc")
