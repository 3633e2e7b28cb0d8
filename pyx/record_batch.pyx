# cython: language_level=3
"""Record batch header view, scan, validation and in-place edits; native twin of ``broker/_pure/record_batch.py``
(which documents the layouts and the error policy and is the specification: same results, same exception
classes). The record-framing walk and CRC run without the GIL.

LZ4 frames (``lz4_frame_records``, ``lz4_decompress``) are decoded here rather than by ``lz4.frame``: Kafka's
frames hold independent blocks (Java's KafkaLZ4BlockOutputStream, librdkafka), so each block goes through
``LZ4_decompress_safe`` straight into one output buffer reused across calls (``lz4.frame`` does not know the output
size: it grows a fresh buffer per call, page faults included), without the GIL, and the records are walked in that
buffer. Block checksums, the content checksum and the content size are verified when the frame has them (XXH32).
liblz4's headers are not installed, but python-lz4's extensions export ``LZ4_decompress_safe`` and ``XXH32``: their
addresses are looked up at import and kept only if they decode a known frame. Without them, and for any frame whose
header is not version 01 / independent blocks / no dictionary id / reserved bits clear / a known block size / a
non-zero content size if any / a right header checksum, ``compression.decompress`` (``lz4.frame``) decodes, with
its own errors. Bytes after the end mark are ignored, as ``lz4.frame`` ignores them.
"""
import zlib

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from buffers cimport read_i16, read_i32, read_i64, read_u32, read_varint, write_i32, write_i64, write_u16, write_u32
from crc32c_impl cimport broker_crc32c_init, broker_crc32c_update

from broker.protocol.records.batch_info import BatchInfo, Record
from broker.protocol.records.compression import decompress as _decompress
from broker.protocol.records.errors import CorruptRecordError, InvalidRecordError

broker_crc32c_init()

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)

# tuple.__new__ skips the NamedTuple's Python-level __new__ (a large share of a header scan's cost).
_tuple_new = tuple.__new__
# BatchInfo is built in place, as tuple.__new__ would build it but without the argument tuple it copies from
cdef PyTypeObject* _BATCH_INFO = <PyTypeObject*>BatchInfo

cdef enum:
    LOG_OVERHEAD = 12
    RECORD_BATCH_OVERHEAD = 61
    BATCH_LENGTH_MIN = 49
    MAGIC_OFFSET = 16
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    LAST_OFFSET_DELTA_OFFSET = 23
    MAX_TIMESTAMP_OFFSET = 35
    PRODUCER_ID_OFFSET = 43
    PRODUCER_EPOCH_OFFSET = 51
    RECORD_COUNT_OFFSET = 57
    LEGACY_V0_MESSAGE_MIN = 14
    LEGACY_V1_MESSAGE_MIN = 22
    MAX_CODEC = 4
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_FLAG = 0x20

# Outcomes of the record walk (0 = valid)
cdef enum:
    W_OK = 0
    W_FEWER = 1
    W_MORE = 2
    W_OFFSET_DELTA = 3
    W_BAD_VARINT = 10
    W_BAD_LENGTH = 11
    W_NO_ATTRIBUTES = 12
    W_BAD_KEY = 13
    W_BAD_VALUE = 14
    W_BAD_HEADER_COUNT = 15
    W_BAD_HEADER_KEY = 16
    W_BAD_HEADER_VALUE = 17
    W_LENGTH_MISMATCH = 18

cdef dict _WALK_MESSAGES = {
    W_FEWER: "batch holds fewer records than its record count",
    W_MORE: "batch holds more data than its record count",
    W_OFFSET_DELTA: "record offset delta is not its index",
    W_BAD_VARINT: "malformed record: bad varint",
    W_BAD_LENGTH: "malformed record: bad record length",
    W_NO_ATTRIBUTES: "malformed record: missing attributes",
    W_BAD_KEY: "malformed record: bad key length",
    W_BAD_VALUE: "malformed record: bad value length",
    W_BAD_HEADER_COUNT: "malformed record: bad header count",
    W_BAD_HEADER_KEY: "malformed record: bad header key length",
    W_BAD_HEADER_VALUE: "malformed record: bad header value length",
    W_LENGTH_MISMATCH: "malformed record: record length does not match its fields",
}


cdef int _walk(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int64_t count, int64_t* null_keys) noexcept nogil:
    """Framing walk of ``count`` records filling p[pos:end]; returns a W_* code. Counts the records with a null key
    into ``null_keys`` unless it is NULL."""
    cdef int64_t i, length, v, offset_delta, key_len, value_len, header_count, h, hk_len, hv_len
    cdef Py_ssize_t rend
    i = 0
    while i < count:
        if pos >= end:
            return W_FEWER
        if read_varint(p, &pos, end, &length) != 0:
            return W_BAD_VARINT
        if length < 0 or length > end - pos:
            return W_BAD_LENGTH
        rend = pos + <Py_ssize_t>length
        if pos >= rend:
            return W_NO_ATTRIBUTES
        pos += 1
        if read_varint(p, &pos, rend, &v) != 0:
            return W_BAD_VARINT
        if read_varint(p, &pos, rend, &offset_delta) != 0:
            return W_BAD_VARINT
        if read_varint(p, &pos, rend, &key_len) != 0:
            return W_BAD_VARINT
        if key_len < -1 or key_len > rend - pos:
            return W_BAD_KEY
        if key_len > 0:
            pos += <Py_ssize_t>key_len
        elif key_len < 0 and null_keys != NULL:
            null_keys[0] += 1
        if read_varint(p, &pos, rend, &value_len) != 0:
            return W_BAD_VARINT
        if value_len < -1 or value_len > rend - pos:
            return W_BAD_VALUE
        if value_len > 0:
            pos += <Py_ssize_t>value_len
        if read_varint(p, &pos, rend, &header_count) != 0:
            return W_BAD_VARINT
        if header_count < 0 or header_count > rend - pos:
            return W_BAD_HEADER_COUNT
        h = 0
        while h < header_count:
            if read_varint(p, &pos, rend, &hk_len) != 0:
                return W_BAD_VARINT
            if hk_len < 0 or hk_len > rend - pos:
                return W_BAD_HEADER_KEY
            pos += <Py_ssize_t>hk_len
            if read_varint(p, &pos, rend, &hv_len) != 0:
                return W_BAD_VARINT
            if hv_len < -1 or hv_len > rend - pos:
                return W_BAD_HEADER_VALUE
            if hv_len > 0:
                pos += <Py_ssize_t>hv_len
            h += 1
        if pos != rend:
            return W_LENGTH_MISMATCH
        if offset_delta != i:
            return W_OFFSET_DELTA
        i += 1
    if pos != end:
        return W_MORE
    return W_OK


cdef int _raise_walk(int rc, int64_t count) except -1:
    msg = "%s (record count %d)" % (_WALK_MESSAGES[rc], count)
    if rc < W_BAD_VARINT:
        raise InvalidRecordError(msg)
    raise CorruptRecordError(msg)


cdef int _walk_checked(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int64_t count,
                       int64_t* null_keys=NULL) except -1:
    cdef int rc
    if end - pos >= 65536:
        with nogil:
            rc = _walk(p, pos, end, count, null_keys)
    else:
        rc = _walk(p, pos, end, count, null_keys)
    if rc != W_OK:
        _raise_walk(rc, count)
    return 0


cdef uint32_t _crc(const uint8_t* p, Py_ssize_t position, Py_ssize_t end) noexcept nogil:
    return broker_crc32c_update(0, p + position + ATTRIBUTES_OFFSET, <size_t>(end - position - ATTRIBUTES_OFFSET))


cdef uint32_t _crc_maybe_nogil(const uint8_t* p, Py_ssize_t position, Py_ssize_t end):
    cdef uint32_t c
    if end - position >= 65536:
        with nogil:
            c = _crc(p, position, end)
        return c
    return _crc(p, position, end)


cdef inline void _put(object t, Py_ssize_t i, object value):
    Py_INCREF(value)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(t, i, value)


cdef object _info(const uint8_t* p, Py_ssize_t pos, Py_ssize_t reported=-1):
    """The BatchInfo of the magic-2 header at p[pos] (bounds already checked), at ``reported`` if not -1."""
    cdef object t = PyType_GenericAlloc(_BATCH_INFO, 14)
    _put(t, 0, pos if reported < 0 else reported)
    _put(t, 1, <int64_t>read_i32(p + pos + 8) + LOG_OVERHEAD)
    _put(t, 2, read_i64(p + pos))
    _put(t, 3, read_i32(p + pos + 23))
    _put(t, 4, read_i32(p + pos + 12))
    _put(t, 5, p[pos + 16])
    _put(t, 6, read_u32(p + pos + 17))
    _put(t, 7, read_i16(p + pos + 21))
    _put(t, 8, read_i64(p + pos + 27))
    _put(t, 9, read_i64(p + pos + 35))
    _put(t, 10, read_i64(p + pos + 43))
    _put(t, 11, read_i16(p + pos + 51))
    _put(t, 12, read_i32(p + pos + 53))
    _put(t, 13, read_i32(p + pos + 57))
    return t


def validate_records(records_bytes, record_count):
    """Check the framing of decompressed record bytes holding exactly ``record_count`` records."""
    cdef Py_buffer view
    cdef int64_t count = record_count
    if count < 0:
        raise InvalidRecordError("negative record count %d" % count)
    PyObject_GetBuffer(records_bytes, &view, PyBUF_SIMPLE)
    try:
        _walk_checked(<const uint8_t*>view.buf, 0, view.len, count)
    finally:
        PyBuffer_Release(&view)


cdef object _legacy_info(const uint8_t* p, Py_ssize_t pos, Py_ssize_t reported):
    """The one-record BatchInfo of the magic 0/1 entry at p[pos] (its 18 or 26 header bytes known to be there)."""
    cdef uint8_t magic = p[pos + MAGIC_OFFSET]
    cdef int64_t ts = read_i64(p + pos + 18) if magic == 1 else -1
    return _tuple_new(BatchInfo, (reported, <int64_t>read_i32(p + pos + 8) + LOG_OVERHEAD, read_i64(p + pos), 0, -1,
                                  magic, read_u32(p + pos + 12), <int8_t>p[pos + 17], ts, ts, -1, -1, -1, 1))


cdef list _null_key_indexes(const uint8_t* p, Py_ssize_t end, int64_t count):
    """Indexes of the null-key records among ``count`` records in p[0:end] that ``_walk`` accepted."""
    cdef list out = []
    cdef Py_ssize_t pos = 0, rend
    cdef int64_t i, length = 0, v = 0, key_len = 0
    for i in range(count):
        read_varint(p, &pos, end, &length)
        rend = pos + <Py_ssize_t>length
        pos += 1
        read_varint(p, &pos, rend, &v)
        read_varint(p, &pos, rend, &v)
        read_varint(p, &pos, rend, &key_len)
        if key_len < 0:
            out.append(i)
        pos = rend
    return out


def null_key_records(records_bytes, record_count):
    """``validate_records``, also giving the indexes of the records whose key is null (see the pure twin)."""
    cdef Py_buffer view
    cdef int64_t count = record_count, nulls = 0
    if count < 0:
        raise InvalidRecordError("negative record count %d" % count)
    PyObject_GetBuffer(records_bytes, &view, PyBUF_SIMPLE)
    try:
        _walk_checked(<const uint8_t*>view.buf, 0, view.len, count, &nulls)
        if nulls == 0:
            return []
        return _null_key_indexes(<const uint8_t*>view.buf, view.len, count)
    finally:
        PyBuffer_Release(&view)


# ---- LZ4 frames (see the module docstring) -------------------------------------------------------------------

ctypedef int (*lz4_decompress_safe_t)(const char* src, char* dst, int src_size, int dst_capacity) noexcept nogil
ctypedef unsigned int (*xxh32_t)(const void* data, size_t length, unsigned int seed) noexcept nogil

cdef lz4_decompress_safe_t _lz4_block = NULL
cdef xxh32_t _xxh32 = NULL

cdef enum:
    LZ4_MAGIC = 0x184D2204
    LZ4_CODEC = 3
    #: the frame's compressed size from which decoding releases the GIL (below it the release costs more)
    LZ4_NOGIL_MIN = 16384
    #: the shared output buffer is freed after a call that grew it past this
    LZ4_KEEP_MAX = 16 << 20
    # _lz4_frame outcomes
    F_OK = 0
    F_FALLBACK = 1
    F_TRUNCATED = 2
    F_TRUNCATED_BLOCK = 3
    F_BLOCK_SIZE = 4
    F_BAD_BLOCK = 5
    F_BLOCK_CHECKSUM = 6
    F_CONTENT_CHECKSUM = 7
    F_CONTENT_SIZE = 8
    F_NO_MEMORY = 9

cdef dict _FRAME_MESSAGES = {
    F_TRUNCATED: "truncated frame",
    F_TRUNCATED_BLOCK: "truncated block",
    F_BLOCK_SIZE: "block larger than the frame's block size",
    F_BAD_BLOCK: "corrupt block (or larger than the frame's block size)",
    F_BLOCK_CHECKSUM: "block checksum mismatch",
    F_CONTENT_CHECKSUM: "content checksum mismatch",
    F_CONTENT_SIZE: "decompressed size differs from the frame's content size",
}


cdef struct Out:
    char* buf
    size_t cap


# One output buffer shared by the calls (taken and given back with the GIL held); a call that finds it taken (another
# thread is decoding without the GIL) uses a buffer of its own.
cdef Out _shared = Out(NULL, 0)
cdef bint _shared_busy = False


cdef inline uint32_t _le32(const uint8_t* p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef int _reserve(Out* o, size_t need) noexcept nogil:
    cdef size_t cap
    cdef char* b
    if need <= o.cap:
        return 0
    cap = o.cap * 2
    if cap < need:
        cap = need
    b = <char*>realloc(o.buf, cap)
    if b == NULL:
        return -1
    o.buf = b
    o.cap = cap
    return 0


cdef int _lz4_frame(const uint8_t* src, Py_ssize_t n, Out* o, size_t* out_len) noexcept nogil:
    """Decode the LZ4 frame at src[0:n] into o (grown as needed); F_FALLBACK for a header this decoder does not take
    (see the module docstring). Bytes after the end mark are ignored, as lz4.frame does."""
    cdef uint8_t flg, bd
    cdef Py_ssize_t pos, hend, size
    cdef size_t total = 0, block_max
    cdef uint64_t content_size = 0
    cdef uint32_t word
    cdef int r, sum_len
    if n < 7 or _le32(src) != LZ4_MAGIC:
        return F_FALLBACK
    flg = src[4]
    bd = src[5]
    if (flg & 0xE3) != 0x60 or (bd & 0x8F) != 0 or (bd >> 4) < 4:  # version 01, independent, no dict id/reserved
        return F_FALLBACK
    hend = 6
    if flg & 0x08:
        if n < 15:
            return F_FALLBACK
        content_size = <uint64_t>_le32(src + 6) | (<uint64_t>_le32(src + 10) << 32)
        if content_size == 0 or content_size >= (<uint64_t>1 << 63):
            return F_FALLBACK
        hend = 14
    if ((_xxh32(src + 4, <size_t>(hend - 4), 0) >> 8) & 0xFF) != src[hend]:
        return F_FALLBACK
    block_max = (<size_t>1) << (8 + 2 * (bd >> 4))
    sum_len = 4 if flg & 0x10 else 0
    pos = hend + 1
    while True:
        if n - pos < 4:
            return F_TRUNCATED
        word = _le32(src + pos)
        pos += 4
        if word == 0:
            break
        size = <Py_ssize_t>(word & 0x7FFFFFFF)
        if <size_t>size > block_max:
            return F_BLOCK_SIZE
        if n - pos < size + sum_len:
            return F_TRUNCATED_BLOCK
        if sum_len and _xxh32(src + pos, <size_t>size, 0) != _le32(src + pos + size):
            return F_BLOCK_CHECKSUM
        if _reserve(o, total + block_max) != 0:
            return F_NO_MEMORY
        if word >> 31:  # stored uncompressed
            memcpy(o.buf + total, src + pos, <size_t>size)
            total += <size_t>size
        else:
            r = _lz4_block(<const char*>src + pos, o.buf + total, <int>size, <int>block_max)
            if r < 0:
                return F_BAD_BLOCK
            total += <size_t>r
        pos += size + sum_len
    if flg & 0x04:
        if n - pos < 4:
            return F_TRUNCATED
        if _xxh32(o.buf, total, 0) != _le32(src + pos):
            return F_CONTENT_CHECKSUM
    if (flg & 0x08) and total != content_size:
        return F_CONTENT_SIZE
    out_len[0] = total
    return F_OK


cdef int _raise_frame(int rc) except -1:
    if rc == F_NO_MEMORY:
        raise MemoryError("cannot allocate the lz4 output buffer")
    raise CorruptRecordError("cannot decompress lz4 data: %s" % _FRAME_MESSAGES[rc])


cdef inline bint _take_buffer(Out* o):
    """The shared buffer into o (True), or an empty one of o's own when another call holds it (False)."""
    global _shared_busy
    if _shared_busy:
        o.buf = NULL
        o.cap = 0
        return False
    _shared_busy = True
    o[0] = _shared
    return True


cdef inline void _give_buffer(Out* o, bint shared):
    global _shared, _shared_busy
    if not shared:
        free(o.buf)
        return
    if o.cap > LZ4_KEEP_MAX:
        free(o.buf)
        o.buf = NULL
        o.cap = 0
    _shared = o[0]
    _shared_busy = False


cdef int _decode(const uint8_t* src, Py_ssize_t n, Out* o, size_t* out_len, int64_t count, int64_t* nulls,
                 int* walk_rc) noexcept nogil:
    """_lz4_frame, then (count >= 0) the record walk of the output into walk_rc."""
    cdef int rc = _lz4_frame(src, n, o, out_len)
    if rc == F_OK and count >= 0:
        walk_rc[0] = _walk(<const uint8_t*>o.buf, 0, <Py_ssize_t>out_len[0], count, nulls)
    return rc


def lz4_frame_records(data, record_count, keys_required):
    """Decode the LZ4 frame ``data`` (a batch's records) and walk its records as ``null_key_records`` (keys
    required) or ``validate_records`` do, in one native pass; the indexes of the null-key records when keys are
    required, else []. Frames the native decoder does not take go through ``compression.decompress``."""
    cdef Py_buffer view
    cdef int64_t count = record_count, nulls = 0
    cdef int64_t* nulls_p = &nulls if keys_required else NULL
    cdef Out o
    cdef bint shared
    cdef size_t out_len = 0
    cdef int rc = F_FALLBACK, walk_rc = W_OK
    if count < 0:
        raise InvalidRecordError("negative record count %d" % count)
    if _lz4_block != NULL:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        shared = _take_buffer(&o)
        try:
            if view.len >= LZ4_NOGIL_MIN:
                with nogil:
                    rc = _decode(<const uint8_t*>view.buf, view.len, &o, &out_len, count, nulls_p, &walk_rc)
            else:
                rc = _decode(<const uint8_t*>view.buf, view.len, &o, &out_len, count, nulls_p, &walk_rc)
            if rc == F_OK:
                if walk_rc != W_OK:
                    _raise_walk(walk_rc, count)
                if nulls:
                    return _null_key_indexes(<const uint8_t*>o.buf, <Py_ssize_t>out_len, count)
                return []
            if rc != F_FALLBACK:
                _raise_frame(rc)
        finally:
            _give_buffer(&o, shared)
            PyBuffer_Release(&view)
    raw = _decompress(LZ4_CODEC, data)
    if keys_required:
        return null_key_records(raw, count)
    validate_records(raw, count)
    return []


def lz4_decompress(data):
    """The content of the LZ4 frame ``data`` as bytes (``compression.decompress(LZ4, data)``, natively)."""
    cdef Py_buffer view
    cdef Out o
    cdef bint shared
    cdef size_t out_len = 0
    cdef int rc = F_FALLBACK, walk_rc = W_OK
    if _lz4_block != NULL:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        shared = _take_buffer(&o)
        try:
            if view.len >= LZ4_NOGIL_MIN:
                with nogil:
                    rc = _decode(<const uint8_t*>view.buf, view.len, &o, &out_len, -1, NULL, &walk_rc)
            else:
                rc = _decode(<const uint8_t*>view.buf, view.len, &o, &out_len, -1, NULL, &walk_rc)
            if rc == F_OK:
                return PyBytes_FromStringAndSize(o.buf, <Py_ssize_t>out_len)
            if rc != F_FALLBACK:
                _raise_frame(rc)
        finally:
            _give_buffer(&o, shared)
            PyBuffer_Release(&view)
    return _decompress(LZ4_CODEC, data)


def decompress_records(int codec, data):
    """A compressed batch's records section decompressed: ``compression.decompress``, LZ4 natively."""
    if codec == LZ4_CODEC:
        return lz4_decompress(data)
    return _decompress(codec, data)


def _load_lz4():
    """The addresses of python-lz4's LZ4_decompress_safe and XXH32, or (0, 0); checked on a frame of lz4.frame."""
    try:
        import ctypes
        import lz4.block._block
        import lz4.frame
        import lz4.frame._frame
        block = ctypes.cast(ctypes.CDLL(lz4.block._block.__file__).LZ4_decompress_safe, ctypes.c_void_p).value
        xxh = ctypes.cast(ctypes.CDLL(lz4.frame._frame.__file__).XXH32, ctypes.c_void_p).value
        sample = b"lz4 self-test " * 64
        frame = lz4.frame.compress(sample, block_linked=False, block_checksum=True, content_checksum=True,
                                   store_size=True)
        return (block or 0, xxh or 0, sample, frame)
    except Exception:
        return (0, 0, b"", b"")


cdef bint _self_test(bytes frame, bytes sample):
    """Whether the decoder itself (no fallback) turns ``frame`` (every checksum on) into ``sample``."""
    cdef Out o = Out(NULL, 0)
    cdef size_t out_len = 0
    cdef int rc = _lz4_frame(<const uint8_t*><const char*>frame, len(frame), &o, &out_len)
    ok = rc == F_OK and PyBytes_FromStringAndSize(o.buf, <Py_ssize_t>out_len) == sample
    free(o.buf)
    return ok


def _init_lz4():
    """Set the LZ4 function pointers and keep them only if they decode a known frame (never crash on a stranger)."""
    global _lz4_block, _xxh32
    cdef uintptr_t block, xxh
    block_addr, xxh_addr, sample, frame = _load_lz4()
    block = block_addr
    xxh = xxh_addr
    if block == 0 or xxh == 0:
        return
    _lz4_block = <lz4_decompress_safe_t>block
    _xxh32 = <xxh32_t>xxh
    if not _self_test(frame, sample):
        _lz4_block = NULL
        _xxh32 = NULL


_init_lz4()
#: whether LZ4 frames are decoded natively (python-lz4's symbols found and working)
LZ4_NATIVE = _lz4_block != NULL


# ---- the header view (see the pure twin) --------------------------------------------------------------------

def batch_header(buf, Py_ssize_t position=0, Py_ssize_t file_position=-1):
    """The header of the batch (or legacy magic 0/1 entry, as a one-record batch) starting at ``position``."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t avail
    cdef uint8_t magic
    if position < 0:
        raise ValueError("negative position")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        avail = view.len - position
        if avail <= MAGIC_OFFSET:
            raise CorruptRecordError("truncated batch header at %d" % position)
        magic = p[position + MAGIC_OFFSET]
        if magic == 2:
            if avail < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError("truncated batch header at %d" % position)
            return _info(p, position, file_position)
        if magic > 2:
            raise CorruptRecordError("unsupported magic %d" % magic)
        if avail < (LOG_OVERHEAD + 14 if magic == 1 else LOG_OVERHEAD + 6):
            raise CorruptRecordError("truncated legacy entry header at %d" % position)
        return _legacy_info(p, position, position if file_position < 0 else file_position)
    finally:
        PyBuffer_Release(&view)


cdef inline int _check_position(Py_ssize_t position) except -1:
    if position < 0:
        raise ValueError("negative position")
    return 0


def batch_size(buf, Py_ssize_t position=0):
    """Bytes the batch (or legacy entry) at ``position`` takes, its 12-byte prefix included; -1 when ``buf``
    holds fewer than those 12 bytes there."""
    cdef Py_buffer view
    cdef Py_ssize_t size = -1
    _check_position(position)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    if view.len - position >= LOG_OVERHEAD:
        size = <Py_ssize_t>read_i32(<const uint8_t*>view.buf + position + 8) + LOG_OVERHEAD
    PyBuffer_Release(&view)
    return size


def batch_magic(buf, Py_ssize_t position=0):
    """Magic of the batch or entry at ``position``; -1 when ``buf`` ends before it."""
    cdef Py_buffer view
    cdef int magic = -1
    _check_position(position)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    if view.len - position > MAGIC_OFFSET:
        magic = (<const uint8_t*>view.buf)[position + MAGIC_OFFSET]
    PyBuffer_Release(&view)
    return magic


cdef const uint8_t* _v2_header(Py_buffer* view, Py_ssize_t position):
    """The magic-2 header at ``position`` of an acquired buffer, or NULL if there is none whole."""
    cdef const uint8_t* p = <const uint8_t*>view.buf
    if view.len - position >= RECORD_BATCH_OVERHEAD and p[position + MAGIC_OFFSET] == 2:
        return p + position
    return NULL


def is_transactional(buf, Py_ssize_t position=0):
    """The magic-2 batch at ``position`` is transactional (False without a whole magic-2 header there)."""
    cdef Py_buffer view
    cdef const uint8_t* h
    cdef bint result = False
    _check_position(position)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    h = _v2_header(&view, position)
    if h != NULL:
        result = (h[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK) != 0
    PyBuffer_Release(&view)
    return result


def producer_id(buf, Py_ssize_t position=0):
    """producerId of the magic-2 batch at ``position``; -1 (no producer) without a whole magic-2 header there."""
    cdef Py_buffer view
    cdef const uint8_t* h
    cdef int64_t pid = -1
    _check_position(position)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    h = _v2_header(&view, position)
    if h != NULL:
        pid = read_i64(h + PRODUCER_ID_OFFSET)
    PyBuffer_Release(&view)
    return pid


def producer_epoch(buf, Py_ssize_t position=0):
    """producerEpoch of the magic-2 batch at ``position``; -1 without a whole magic-2 header there."""
    cdef Py_buffer view
    cdef const uint8_t* h
    cdef int epoch = -1
    _check_position(position)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    h = _v2_header(&view, position)
    if h != NULL:
        epoch = read_i16(h + PRODUCER_EPOCH_OFFSET)
    PyBuffer_Release(&view)
    return epoch


def validate_batches(buf, check_crc=True, dict null_keys=None):
    """Check that ``buf`` is a sequence of complete, valid magic-2 batches and describe them; ``null_keys``: see the
    pure twin (the null-key records of each uncompressed data batch, found by the one framing walk)."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t n, pos = 0, end
    cdef int32_t length, count, lod
    cdef int64_t nulls
    cdef int codec
    cdef bint crc = check_crc
    cdef list infos = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        n = view.len
        while pos < n:
            if n - pos < LOG_OVERHEAD:
                raise CorruptRecordError("truncated batch header at %d" % pos)
            length = read_i32(p + pos + 8)
            if length < BATCH_LENGTH_MIN:
                raise CorruptRecordError("batch length %d below the minimum %d" % (length, BATCH_LENGTH_MIN))
            end = pos + LOG_OVERHEAD + length
            if end > n:
                raise CorruptRecordError("truncated batch at %d" % pos)
            if p[pos + MAGIC_OFFSET] != 2:
                raise CorruptRecordError("unsupported magic %d" % p[pos + MAGIC_OFFSET])
            if crc and _crc_maybe_nogil(p, pos, end) != read_u32(p + pos + CRC_OFFSET):
                raise CorruptRecordError("batch CRC mismatch at %d" % pos)
            count = read_i32(p + pos + 57)
            if count < 0:
                raise InvalidRecordError("negative record count %d" % count)
            codec = read_i16(p + pos + ATTRIBUTES_OFFSET) & 0x07
            if codec > MAX_CODEC:
                raise CorruptRecordError("unknown compression codec %d" % codec)
            if codec == 0:
                if null_keys is not None and not read_i16(p + pos + ATTRIBUTES_OFFSET) & CONTROL_FLAG:
                    nulls = 0
                    _walk_checked(p, pos + RECORD_BATCH_OVERHEAD, end, count, &nulls)
                    if nulls:
                        null_keys[pos] = _null_key_indexes(p + pos + RECORD_BATCH_OVERHEAD,
                                                           end - pos - RECORD_BATCH_OVERHEAD, count)
                else:
                    _walk_checked(p, pos + RECORD_BATCH_OVERHEAD, end, count)
            lod = read_i32(p + pos + 23)
            if count > 0 and lod != count - 1:
                raise InvalidRecordError("lastOffsetDelta %d does not match record count %d" % (lod, count))
            infos.append(_info(p, pos))
            pos = end
    finally:
        PyBuffer_Release(&view)
    return infos


def scan_batches(buf, Py_ssize_t pos=0, Py_ssize_t end=-1, check_crc=False):
    """Read headers of consecutive batches in buf[pos:end] until the first incomplete or invalid one.

    Returns the infos and the position where the valid prefix ends. Magic 0/1 entries are one-record batches.
    """
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t size
    cdef int32_t length
    cdef uint8_t magic
    cdef bint crc = check_crc
    cdef list infos = []
    if pos < 0:
        raise ValueError("negative position")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const uint8_t*>view.buf
        if end < 0 or end > view.len:
            end = view.len
        while end - pos >= MAGIC_OFFSET + 1:
            length = read_i32(p + pos + 8)
            magic = p[pos + MAGIC_OFFSET]
            if length < 0:
                break
            size = LOG_OVERHEAD + <Py_ssize_t>length
            if size > end - pos:
                break
            if magic == 2:
                if length < BATCH_LENGTH_MIN:
                    break
                if crc and _crc_maybe_nogil(p, pos, pos + size) != read_u32(p + pos + CRC_OFFSET):
                    break
                infos.append(_info(p, pos))
            elif magic < 2:
                if length < (LEGACY_V1_MESSAGE_MIN if magic == 1 else LEGACY_V0_MESSAGE_MIN):
                    break
                if crc and (zlib.crc32(PyBytes_FromStringAndSize(<const char*>p + pos + MAGIC_OFFSET,
                                                                 size - MAGIC_OFFSET))
                            != read_u32(p + pos + 12)):
                    break
                infos.append(_legacy_info(p, pos, pos))
            else:
                break
            pos += size
    finally:
        PyBuffer_Release(&view)
    return infos, pos


cdef Py_ssize_t _check_header(const uint8_t* p, Py_ssize_t n, Py_ssize_t position) except -1:
    cdef Py_ssize_t end
    if position < 0 or position + RECORD_BATCH_OVERHEAD > n:
        raise ValueError("no batch header at position %d" % position)
    if p[position + MAGIC_OFFSET] != 2:
        raise ValueError("not a magic 2 batch at position %d" % position)
    end = position + LOG_OVERHEAD + read_i32(p + position + 8)
    if end < position + RECORD_BATCH_OVERHEAD or end > n:
        raise ValueError("batch at position %d exceeds the buffer" % position)
    return end


cdef int _get_writable(obj, Py_buffer* view) except -1:
    try:
        PyObject_GetBuffer(obj, view, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError("buffer is not writable") from None
    return 0


def stamp_base_offset(buf, Py_ssize_t position, int64_t base_offset):
    """Write baseOffset of the batch at ``position`` (outside the CRC)."""
    cdef Py_buffer view
    _get_writable(buf, &view)
    try:
        _check_header(<const uint8_t*>view.buf, view.len, position)
        write_i64(<uint8_t*>view.buf + position, base_offset)
    finally:
        PyBuffer_Release(&view)


def stamp_partition_leader_epoch(buf, Py_ssize_t position, int32_t epoch):
    """Write partitionLeaderEpoch of the batch at ``position`` (outside the CRC)."""
    cdef Py_buffer view
    _get_writable(buf, &view)
    try:
        _check_header(<const uint8_t*>view.buf, view.len, position)
        write_i32(<uint8_t*>view.buf + position + 12, epoch)
    finally:
        PyBuffer_Release(&view)


def set_log_append_time(buf, Py_ssize_t position, int64_t timestamp_ms):
    """Make the batch LogAppendTime with maxTimestamp = ``timestamp_ms`` and recompute its CRC."""
    cdef Py_buffer view
    cdef Py_ssize_t end
    cdef uint8_t* p
    _get_writable(buf, &view)
    try:
        p = <uint8_t*>view.buf
        end = _check_header(p, view.len, position)
        write_i64(p + position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
        write_u16(p + position + ATTRIBUTES_OFFSET, <uint16_t>(read_i16(p + position + ATTRIBUTES_OFFSET)
                                                               | TIMESTAMP_TYPE_MASK))
        write_u32(p + position + CRC_OFFSET, _crc_maybe_nogil(p, position, end))
    finally:
        PyBuffer_Release(&view)


def assign_offsets(buf, int64_t base_offset, int32_t leader_epoch, stamp_epoch, int64_t log_append_time_ms):
    """Stamp every batch of ``buf`` in one pass (offsets, leader epoch, LogAppendTime); see the pure twin."""
    cdef Py_buffer view
    cdef uint8_t* p
    cdef Py_ssize_t n, pos = 0, end
    cdef int64_t offset = base_offset, last, ts, max_ts = -1, offset_of_max_ts = -1, num_records = 0
    cdef bint epoch = stamp_epoch
    cdef list appended = []
    _get_writable(buf, &view)
    try:
        p = <uint8_t*>view.buf
        n = view.len
        while pos < n:
            end = _check_header(p, n, pos)
            write_i64(p + pos, offset)
            if epoch:
                write_i32(p + pos + 12, leader_epoch)
            last = offset + read_i32(p + pos + LAST_OFFSET_DELTA_OFFSET)
            if log_append_time_ms >= 0:
                write_i64(p + pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
                write_u16(p + pos + ATTRIBUTES_OFFSET, <uint16_t>(read_i16(p + pos + ATTRIBUTES_OFFSET)
                                                                  | TIMESTAMP_TYPE_MASK))
                write_u32(p + pos + CRC_OFFSET, _crc_maybe_nogil(p, pos, end))
                ts = log_append_time_ms
            else:
                ts = read_i64(p + pos + MAX_TIMESTAMP_OFFSET)
            if ts > max_ts:
                max_ts = ts
                offset_of_max_ts = last
            appended.append((last, ts, end - pos))
            num_records += read_i32(p + pos + RECORD_COUNT_OFFSET)
            offset = last + 1
            pos = end
    finally:
        PyBuffer_Release(&view)
    return appended, max_ts, offset_of_max_ts, num_records, pos


cdef object _bytes_or_none(const uint8_t* p, Py_ssize_t pos, int64_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>length)


cdef list _read_records(const uint8_t* p, Py_ssize_t end, int64_t count, info):
    """Decode records already checked by ``_walk`` (so no bounds checks are repeated)."""
    cdef list records = []
    cdef Py_ssize_t pos = 0, rend
    cdef int64_t i, h, length = 0, ts_delta = 0, offset_delta = 0, key_len = 0, value_len = 0
    cdef int64_t header_count = 0, hk_len = 0, hv_len = 0
    cdef int64_t base_offset = info.base_offset, base_ts = info.base_timestamp, max_ts = info.max_timestamp
    cdef int64_t base_sequence = info.base_sequence
    cdef bint log_append = (info.attributes & TIMESTAMP_TYPE_MASK) != 0
    cdef int attributes
    cdef list headers
    for i in range(count):
        read_varint(p, &pos, end, &length)
        rend = pos + <Py_ssize_t>length
        attributes = p[pos]
        pos += 1
        read_varint(p, &pos, rend, &ts_delta)
        read_varint(p, &pos, rend, &offset_delta)
        read_varint(p, &pos, rend, &key_len)
        key = _bytes_or_none(p, pos, key_len)
        if key_len > 0:
            pos += <Py_ssize_t>key_len
        read_varint(p, &pos, rend, &value_len)
        value = _bytes_or_none(p, pos, value_len)
        if value_len > 0:
            pos += <Py_ssize_t>value_len
        read_varint(p, &pos, rend, &header_count)
        headers = []
        for h in range(header_count):
            read_varint(p, &pos, rend, &hk_len)
            try:
                hkey = PyBytes_FromStringAndSize(<const char*>p + pos, <Py_ssize_t>hk_len).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError("malformed record: header key is not UTF-8") from None
            pos += <Py_ssize_t>hk_len
            read_varint(p, &pos, rend, &hv_len)
            hval = _bytes_or_none(p, pos, hv_len)
            if hv_len > 0:
                pos += <Py_ssize_t>hv_len
            headers.append((hkey, hval))
        seq = -1
        if base_sequence >= 0:
            seq = (base_sequence + offset_delta) & 0x7FFFFFFF
        records.append(_tuple_new(Record, (base_offset + offset_delta,
                                           max_ts if log_append else base_ts + ts_delta,
                                           key, value, headers, attributes, seq)))
        pos = rend
    return records


def iter_records(batch):
    """All records of ONE whole magic-2 batch (validated first; decompressed as needed)."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef int codec
    infos = validate_batches(batch, True)
    if len(infos) != 1:
        raise CorruptRecordError("expected exactly one batch, found %d" % len(infos))
    info = infos[0]
    codec = info.attributes & 0x07
    if codec:
        data = decompress_records(codec, memoryview(batch)[RECORD_BATCH_OVERHEAD:info.size])
        validate_records(data, info.record_count)
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            return _read_records(<const uint8_t*>view.buf, view.len, info.record_count, info)
        finally:
            PyBuffer_Release(&view)
    PyObject_GetBuffer(batch, &view, PyBUF_SIMPLE)
    try:
        return _read_records(<const uint8_t*>view.buf + RECORD_BATCH_OVERHEAD, info.size - RECORD_BATCH_OVERHEAD,
                             info.record_count, info)
    finally:
        PyBuffer_Release(&view)


def whole_batches_end(buf, Py_ssize_t pos=0, Py_ssize_t end=-1):
    """How far the whole batches laid one after another from ``pos`` go in buf[pos:end], and the size of the batch
    starting there (-1 when its 12-byte prefix is not in buf[pos:end] or its length is not positive); see the pure
    twin. Length fields only: one load per batch."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef int32_t length
    cdef Py_ssize_t size = -1
    if pos < 0:
        raise ValueError("negative position")
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    p = <const uint8_t*>view.buf
    if end < 0 or end > view.len:
        end = view.len
    while end - pos >= LOG_OVERHEAD:
        length = read_i32(p + pos + 8)
        if length <= 0:
            break
        size = LOG_OVERHEAD + <Py_ssize_t>length
        if size > end - pos:
            break
        pos += size
        size = -1
    PyBuffer_Release(&view)
    return pos, size
