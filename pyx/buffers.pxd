# Shared big-endian read/write helpers for the Cython hot paths (the role of asyncpg's pgproto buffers).
# All helpers take a raw pointer: callers own bounds checking (done once per batch/entry, not per field).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef inline uint16_t read_u16(const uint8_t* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline int16_t read_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>read_u16(p)


cdef inline uint32_t read_u32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int32_t read_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>read_u32(p)


cdef inline int64_t read_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>read_u32(p) << 32) | <uint64_t>read_u32(p + 4))


cdef inline void write_u16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


cdef inline void write_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void write_i32(uint8_t* p, int32_t v) noexcept nogil:
    write_u32(p, <uint32_t>v)


cdef inline void write_i64(uint8_t* p, int64_t v) noexcept nogil:
    write_u32(p, <uint32_t>(<uint64_t>v >> 32))
    write_u32(p + 4, <uint32_t>(<uint64_t>v))


# Unsigned varint at p[*pos], not reading at or past `end`. Returns 0 on success, -1 if truncated,
# -2 if longer than 10 bytes or overflowing 64 bits (same rules as broker._pure.varint).
cdef inline int read_uvarint(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end, uint64_t* out) noexcept nogil:
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t result = 0
    cdef uint64_t b
    cdef int shift = 0
    while True:
        if i >= end:
            return -1
        b = p[i]
        i += 1
        if shift == 63:
            if b > 1:
                return -2
            out[0] = result | (b << 63)
            pos[0] = i
            return 0
        result |= (b & 0x7F) << shift
        if b < 0x80:
            out[0] = result
            pos[0] = i
            return 0
        shift += 7


cdef inline int read_varint(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end, int64_t* out) noexcept nogil:
    cdef uint64_t u
    cdef int rc = read_uvarint(p, pos, end, &u)
    if rc == 0:
        out[0] = <int64_t>(u >> 1) ^ -<int64_t>(u & 1)
    return rc
