#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u /* Castagnoli, reflected */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        table[0][i] = c;
    }
    /* Slicing-by-8: table[k][i] is the CRC of byte i followed by k zero bytes. */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
}

uint32_t stk_crc32c_table(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_table);
    const unsigned char *p = data;
    crc = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc; /* little-endian: the CRC lines up with the first four bytes */
        crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
              table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
              table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data,
                                                               size_t len)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

int stk_crc32c_hw(void) { return __builtin_cpu_supports("sse4.2"); }

uint32_t stk_crc32c(uint32_t crc, const void *data, size_t len)
{
    static int hw = -1; /* a benign race: every thread computes the same value */
    int h = __atomic_load_n(&hw, __ATOMIC_RELAXED);
    if (h < 0) {
        h = stk_crc32c_hw();
        __atomic_store_n(&hw, h, __ATOMIC_RELAXED);
    }
    return h ? crc32c_sse42(crc, data, len) : stk_crc32c_table(crc, data, len);
}
#else
int stk_crc32c_hw(void) { return 0; }

uint32_t stk_crc32c(uint32_t crc, const void *data, size_t len)
{
    return stk_crc32c_table(crc, data, len);
}
#endif

uint64_t stk_fnv1a64(uint64_t h, const void *data, size_t len)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
