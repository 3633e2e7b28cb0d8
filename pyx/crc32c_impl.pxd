from libc.stdint cimport uint8_t, uint32_t

cdef extern from "crc32c_impl.h" nogil:
    int broker_crc32c_hw
    void broker_crc32c_init()
    uint32_t broker_crc32c_sw(uint32_t crc, const uint8_t* p, size_t n)
    uint32_t broker_crc32c_update(uint32_t crc, const uint8_t* p, size_t n)
