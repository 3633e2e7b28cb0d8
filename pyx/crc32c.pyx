# cython: language_level=3
"""CRC-32C (Castagnoli) of record batches; native twin of ``broker/_pure/crc32c.py``.

SSE4.2 crc32 instruction when the CPU has it (checked at run time), slicing-by-8 tables otherwise.
The GIL is released for buffers of 64 KiB and more.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint8_t, uint32_t

from crc32c_impl cimport broker_crc32c_hw, broker_crc32c_init, broker_crc32c_sw, broker_crc32c_update

broker_crc32c_init()

cdef Py_ssize_t _NOGIL_THRESHOLD = 64 * 1024

HARDWARE = bool(broker_crc32c_hw)


def crc32c(data, value=0):
    """CRC-32C of ``data``, continuing from ``value`` (0 for a fresh checksum)."""
    cdef Py_buffer view
    cdef uint32_t crc
    cdef const uint8_t* p
    cdef size_t n
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError("crc32c value out of range")
    crc = <uint32_t>value
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        n = <size_t>view.len
        if view.len >= _NOGIL_THRESHOLD:
            with nogil:
                crc = broker_crc32c_update(crc, p, n)
        else:
            crc = broker_crc32c_update(crc, p, n)
    finally:
        PyBuffer_Release(&view)
    return crc


def _crc32c_software(data, value=0):
    """Table-driven CRC-32C regardless of the CPU (for tests comparing the two paths)."""
    cdef Py_buffer view
    cdef uint32_t crc = <uint32_t>value
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = broker_crc32c_sw(crc, <const uint8_t*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc
