# cython: language_level=3
"""Kafka varints (zigzag ``varint`` for v2 records, unsigned ``uvarint`` for flexible versions);
native twin of ``broker/_pure/varint.py``: same results and the same ValueError on malformed input."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint64_t

from buffers cimport read_uvarint


cdef bytes _encode(uint64_t v):
    cdef uint8_t out[10]
    cdef int n = 0
    while v >= 0x80:
        out[n] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    out[n] = <uint8_t>v
    return PyBytes_FromStringAndSize(<char*>out, n + 1)


def encode_uvarint(v):
    """Unsigned varint of ``v`` (0 <= v < 2**64)."""
    cdef uint64_t u
    if v < 0:
        raise ValueError("uvarint out of range: %r" % (v,))
    try:
        u = v
    except OverflowError:
        raise ValueError("uvarint out of range: %r" % (v,)) from None
    return _encode(u)


def encode_varint(v):
    """Zigzag varint of ``v`` (int64 range)."""
    cdef int64_t s
    try:
        s = v
    except OverflowError:
        raise ValueError("varint out of range: %r" % (v,)) from None
    return _encode((<uint64_t>s << 1) ^ <uint64_t>(s >> 63))


cdef tuple _decode(buf, Py_ssize_t pos, bint signed):
    cdef Py_buffer view
    cdef uint64_t u
    cdef int rc
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or pos >= view.len:
            raise ValueError("truncated varint")
        rc = read_uvarint(<const uint8_t*>view.buf, &pos, view.len, &u)
    finally:
        PyBuffer_Release(&view)
    if rc == -1:
        raise ValueError("truncated varint")
    if rc != 0:
        raise ValueError("varint too long")
    if signed:
        return (<int64_t>(u >> 1) ^ -<int64_t>(u & 1)), pos
    return u, pos


def decode_uvarint(buf, pos):
    """Decode an unsigned varint at ``pos``; return (value, position after it)."""
    return _decode(buf, pos, False)


def decode_varint(buf, pos):
    """Decode a zigzag varint at ``pos``; return (value, position after it)."""
    return _decode(buf, pos, True)
