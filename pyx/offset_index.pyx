# cython: language_level=3
"""Binary search over offset index (8-byte entries: relative offset int32, position int32) and time index
(12-byte entries: timestamp int64, relative offset int32) buffers, big-endian, sorted by the first field;
native twin of ``broker/_pure/offset_index.py``. Reads the buffer in place (mmap works, nothing is copied);
a search is a few dozen loads, so the GIL is kept (releasing it would cost more than the search)."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int64_t, uint8_t

from buffers cimport read_i32, read_i64


def index_lookup(buf, Py_ssize_t entries, int64_t target):
    """Slot of the largest entry whose relative offset is <= ``target``, or -1."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t lo = 0, hi = entries - 1, mid, found = -1
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if entries < 0 or entries * 8 > view.len:
            raise ValueError("index buffer holds fewer than %d entries" % entries)
        p = <const uint8_t*>view.buf
        while lo <= hi:
            mid = (lo + hi) >> 1
            if read_i32(p + mid * 8) <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
    finally:
        PyBuffer_Release(&view)
    return found


def time_index_lookup(buf, Py_ssize_t entries, int64_t target_ts):
    """Slot of the largest entry whose timestamp is <= ``target_ts``, or -1."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t lo = 0, hi = entries - 1, mid, found = -1
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if entries < 0 or entries * 12 > view.len:
            raise ValueError("index buffer holds fewer than %d entries" % entries)
        p = <const uint8_t*>view.buf
        while lo <= hi:
            mid = (lo + hi) >> 1
            if read_i64(p + mid * 12) <= target_ts:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
    finally:
        PyBuffer_Release(&view)
    return found
