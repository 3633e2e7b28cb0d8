# cython: language_level=3
"""Record batch header view, scan, validation and in-place edits; native twin of ``broker/_pure/record_batch.py``
(which documents the layouts and the error policy and is the specification: same results, same exception
classes). The record-framing walk and CRC run without the GIL."""
import zlib

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from buffers cimport read_i16, read_i32, read_i64, read_u32, read_varint, write_i32, write_i64, write_u16, write_u32
from crc32c_impl cimport broker_crc32c_init, broker_crc32c_update

from broker.protocol.records.batch_info import BatchInfo, Record
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


def validate_batches(buf, check_crc=True):
    """Check that ``buf`` is a sequence of complete, valid magic-2 batches and describe them."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t n, pos = 0, end
    cdef int32_t length, count, lod
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
    from broker.protocol.records.compression import decompress
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef int codec
    infos = validate_batches(batch, True)
    if len(infos) != 1:
        raise CorruptRecordError("expected exactly one batch, found %d" % len(infos))
    info = infos[0]
    codec = info.attributes & 0x07
    if codec:
        data = decompress(codec, memoryview(batch)[RECORD_BATCH_OVERHEAD:info.size])
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
