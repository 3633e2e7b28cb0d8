/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for pyx/crc32c.pyx and pyx/record_batch.pyx.
 * Software: slicing-by-8 tables. Hardware: SSE4.2 crc32 instruction, chosen at run time with
 * __builtin_cpu_supports so the module still loads on CPUs without it.
 * crc32c_update(crc, p, n) continues a finished CRC value (like zlib.crc32): pass 0 to start. */
#ifndef BROKER_CRC32C_IMPL_H
#define BROKER_CRC32C_IMPL_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

static uint32_t broker_crc32c_table[8][256];
static int broker_crc32c_hw = 0;
static int broker_crc32c_ready = 0;

static void broker_crc32c_init(void) {
    uint32_t i, j, c;
    if (broker_crc32c_ready) return;
    for (i = 0; i < 256; i++) {
        c = i;
        for (j = 0; j < 8; j++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        broker_crc32c_table[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = broker_crc32c_table[0][i];
        for (j = 1; j < 8; j++) {
            c = broker_crc32c_table[0][c & 0xFF] ^ (c >> 8);
            broker_crc32c_table[j][i] = c;
        }
    }
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    broker_crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    broker_crc32c_ready = 1;
}

static uint32_t broker_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = broker_crc32c_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8); n--; }
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
        uint32_t hi = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) | ((uint32_t)p[7] << 24);
        c = broker_crc32c_table[7][lo & 0xFF] ^ broker_crc32c_table[6][(lo >> 8) & 0xFF] ^
            broker_crc32c_table[5][(lo >> 16) & 0xFF] ^ broker_crc32c_table[4][lo >> 24] ^
            broker_crc32c_table[3][hi & 0xFF] ^ broker_crc32c_table[2][(hi >> 8) & 0xFF] ^
            broker_crc32c_table[1][(hi >> 16) & 0xFF] ^ broker_crc32c_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n--) c = broker_crc32c_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
__attribute__((target("sse4.2")))
static uint32_t broker_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = (uint32_t)~crc;
    uint64_t w;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 8) { memcpy(&w, p, 8); c = _mm_crc32_u64(c, w); p += 8; n -= 8; }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#define BROKER_CRC32C_HAVE_SSE42 1
#else
#define BROKER_CRC32C_HAVE_SSE42 0
static uint32_t broker_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n) { return broker_crc32c_sw(crc, p, n); }
#endif

static uint32_t broker_crc32c_update(uint32_t crc, const uint8_t *p, size_t n) {
    if (broker_crc32c_hw) return broker_crc32c_sse42(crc, p, n);
    return broker_crc32c_sw(crc, p, n);
}

#endif
