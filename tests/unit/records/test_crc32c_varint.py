from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.accel import load


# CRC-32C check values: RFC 3720 B.4 and the common "123456789" catalogue value.
@pytest.mark.parametrize("data,expected", [
    (b"", 0),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
])
def test_crc32c_known_vectors(impl, data, expected):
    assert impl.crc32c.crc32c(data) == expected
    assert impl.crc32c.crc32c(bytearray(data)) == expected
    assert impl.crc32c.crc32c(memoryview(data)) == expected


def test_crc32c_continuation(impl):
    data = bytes(range(256)) * 300
    whole = impl.crc32c.crc32c(data)
    assert impl.crc32c.crc32c(data[1000:], impl.crc32c.crc32c(data[:1000])) == whole
    with pytest.raises(ValueError):
        impl.crc32c.crc32c(b"x", -1)


@settings(max_examples=60)
@given(st.binary(max_size=300), st.integers(0, 15))
def test_crc32c_native_matches_pure_and_software(data, skip):
    pure, native = load("crc32c", "pure"), load("crc32c", "native")
    view = memoryview(data)[skip:]  # unaligned starts
    assert native.crc32c(view) == pure.crc32c(view) == native._crc32c_software(view)


def test_crc32c_large_buffer_releases_gil_path(impl):
    data = bytes(range(256)) * 4096  # 1 MiB, above the no-GIL threshold
    assert impl.crc32c.crc32c(data) == load("crc32c", "pure").crc32c(data)


@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"), (-(2**63), b"\xff" * 9 + b"\x01"),
])
def test_varint_known(impl, value, encoded):
    assert impl.varint.encode_varint(value) == encoded
    assert impl.varint.decode_varint(b"\xaa" + encoded, 1) == (value, 1 + len(encoded))


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_varint_out_of_range(impl, value):
    with pytest.raises(ValueError):
        impl.varint.encode_varint(value)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_uvarint_out_of_range(impl, value):
    with pytest.raises(ValueError):
        impl.varint.encode_uvarint(value)


@pytest.mark.parametrize("buf,pos", [
    (b"", 0), (b"\x80", 0), (b"\x80\x80", 0), (b"\x01", 1), (b"\x01", -1),
    (b"\xff" * 10 + b"\x01", 0),  # 11 bytes: too long
    (b"\xff" * 9 + b"\x02", 0),  # overflows 64 bits
])
def test_varint_malformed(impl, buf, pos):
    with pytest.raises(ValueError):
        impl.varint.decode_uvarint(buf, pos)
    with pytest.raises(ValueError):
        impl.varint.decode_varint(buf, pos)


@settings(max_examples=150)
@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1))
def test_varint_round_trip_and_parity(s, u):
    pure, native = load("varint", "pure"), load("varint", "native")
    assert native.encode_varint(s) == pure.encode_varint(s)
    assert native.encode_uvarint(u) == pure.encode_uvarint(u)
    enc = pure.encode_varint(s)
    assert native.decode_varint(enc, 0) == pure.decode_varint(enc, 0) == (s, len(enc))
    enc = pure.encode_uvarint(u)
    assert native.decode_uvarint(enc, 0) == pure.decode_uvarint(enc, 0) == (u, len(enc))


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # compare exception classes between twins
        return type(e)


@settings(max_examples=150)
@given(st.binary(max_size=12), st.integers(-1, 13))
def test_varint_decode_parity_on_garbage(buf, pos):
    pure, native = load("varint", "pure"), load("varint", "native")
    assert _outcome(pure.decode_varint, buf, pos) == _outcome(native.decode_varint, buf, pos)
    assert _outcome(pure.decode_uvarint, buf, pos) == _outcome(native.decode_uvarint, buf, pos)
