/* AVX-512 VBMI kernels of the colour ops: interleaved RGB <-> floats, 64
 * pixels (192 bytes, three registers) per step, and 256-entry byte tables,
 * all with byte permutes (vpermb, vpermt2b). A table maps a byte in four
 * instructions per 64 bytes, so the ops that send every byte through the
 * same function (brightness, contrast, invert, posterize, solarize) cost
 * almost nothing on the way into or out of a pass (augment/pixel_color.c).
 * Measured: bench/README.md, "Pixel ops". */
#include "augment/pixel_ops_impl.h"

#include <stdatomic.h>

static atomic_bool forbidden;

void stk_pixel_vbmi_allow(bool on) { atomic_store_explicit(&forbidden, !on, memory_order_relaxed); }

#if defined(__x86_64__)
#include <immintrin.h>

bool stk_pixel_vbmi(void)
{
    return !atomic_load_explicit(&forbidden, memory_order_relaxed) &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
}

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

typedef struct table {
    __m512i part[4]; /* entries 0..63, 64..127, 128..191, 192..255 */
} table;

VBMI static inline table table_load(const uint8_t t[256])
{
    return (table){{_mm512_loadu_si512(t), _mm512_loadu_si512(t + 64), _mm512_loadu_si512(t + 128),
                    _mm512_loadu_si512(t + 192)}};
}

/* t[v] for 64 bytes: two 128-entry lookups, picked by each byte's top bit. */
VBMI static inline __m512i table_map(__m512i v, const table *t)
{
    __m512i lo = _mm512_permutex2var_epi8(t->part[0], v, t->part[1]);
    __m512i hi = _mm512_permutex2var_epi8(t->part[2], v, t->part[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
}

VBMI void stk_pixel_vbmi_table_bytes(uint8_t *p, size_t n, const uint8_t t[256])
{
    table tab = table_load(t);
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        _mm512_storeu_si512(p + i, table_map(_mm512_loadu_si512(p + i), &tab));
    for (; i < n; i++) p[i] = t[p[i]];
}

VBMI void stk_pixel_vbmi_load64(const uint8_t *p, const uint8_t *t, float *r, float *g, float *b)
{
    __m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64),
            z2 = _mm512_loadu_si512(p + 128);
    if (t) {
        table tab = table_load(t);
        z0 = table_map(z0, &tab), z1 = table_map(z1, &tab), z2 = table_map(z2, &tab);
    }
    /* 3 * j for byte j: channel c of pixel j is byte c + 3j of the 192 */
    const __m512i three_j = _mm512_set_epi8(
        (char)189, (char)186, (char)183, (char)180, (char)177, (char)174, (char)171, (char)168,
        (char)165, (char)162, (char)159, (char)156, (char)153, (char)150, (char)147, (char)144,
        (char)141, (char)138, (char)135, (char)132, (char)129, 126, 123, 120, 117, 114, 111, 108,
        105, 102, 99, 96, 93, 90, 87, 84, 81, 78, 75, 72, 69, 66, 63, 60, 57, 54, 51, 48, 45, 42,
        39, 36, 33, 30, 27, 24, 21, 18, 15, 12, 9, 6, 3, 0);
    float *out[3] = {r, g, b};
    for (int c = 0; c < 3; c++) {
        __m512i idx = _mm512_add_epi8(three_j, _mm512_set1_epi8((char)c));
        /* bytes 0..127 from z0:z1 (bit 6 of the index picks z1); 128.. from z2 */
        __m512i v = _mm512_permutex2var_epi8(z0, idx, z1);
        v = _mm512_mask_permutexvar_epi8(v, _mm512_movepi8_mask(idx), idx, z2);
#define WIDEN(q)                                                                                   \
    _mm512_storeu_ps(out[c] + 16 * q,                                                              \
                     _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, q))))
        WIDEN(0), WIDEN(1), WIDEN(2), WIDEN(3);
#undef WIDEN
    }
}

/* STORE_IDX[q][i]: output byte 64q + i is channel (64q + i) % 3 of pixel
 * (64q + i) / 3; the index picks the pixel in R (0..63) or G (64..127),
 * and STORE_FROM_B[q] marks the bytes taken from B instead. */
static const uint8_t STORE_IDX[3][64] = {
    {0,  64, 0,  1,  65, 1,  2,  66, 2,  3,  67, 3,  4,  68, 4,  5,  69, 5,  6,  70, 6,  7,
     71, 7,  8,  72, 8,  9,  73, 9,  10, 74, 10, 11, 75, 11, 12, 76, 12, 13, 77, 13, 14, 78,
     14, 15, 79, 15, 16, 80, 16, 17, 81, 17, 18, 82, 18, 19, 83, 19, 20, 84, 20, 21},
    {85, 21,  22, 86, 22,  23, 87, 23,  24, 88, 24,  25, 89, 25,  26, 90, 26,  27, 91, 27, 28, 92,
     28, 29,  93, 29, 30,  94, 30, 31,  95, 31, 32,  96, 32, 33,  97, 33, 34,  98, 34, 35, 99, 35,
     36, 100, 36, 37, 101, 37, 38, 102, 38, 39, 103, 39, 40, 104, 40, 41, 105, 41, 42, 106},
    {42,  43,  107, 43,  44,  108, 44,  45,  109, 45,  46,  110, 46,  47,  111, 47,
     48,  112, 48,  49,  113, 49,  50,  114, 50,  51,  115, 51,  52,  116, 52,  53,
     117, 53,  54,  118, 54,  55,  119, 55,  56,  120, 56,  57,  121, 57,  58,  122,
     58,  59,  123, 59,  60,  124, 60,  61,  125, 61,  62,  126, 62,  63,  127, 63},
};
static const uint64_t STORE_FROM_B[3] = {0x4924924924924924u, 0x2492492492492492u,
                                         0x9249249249249249u};

/* 64 floats holding 0..255 -> 64 bytes (truncated). */
VBMI static inline __m512i bytes64(const float *f)
{
#define NARROW(q) _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_loadu_ps(f + 16 * q)))
    __m512i v = _mm512_castsi128_si512(NARROW(0));
    v = _mm512_inserti32x4(v, NARROW(1), 1);
    v = _mm512_inserti32x4(v, NARROW(2), 2);
    return _mm512_inserti32x4(v, NARROW(3), 3);
#undef NARROW
}

VBMI void stk_pixel_vbmi_store64(const float *r, const float *g, const float *b, const uint8_t *t,
                                 uint8_t *p)
{
    __m512i R = bytes64(r), G = bytes64(g), B = bytes64(b);
    table tab;
    if (t) tab = table_load(t);
    for (int q = 0; q < 3; q++) {
        __m512i idx = _mm512_loadu_si512(STORE_IDX[q]);
        __m512i v = _mm512_permutex2var_epi8(R, idx, G);
        v = _mm512_mask_permutexvar_epi8(v, STORE_FROM_B[q], idx, B);
        _mm512_storeu_si512(p + 64 * q, t ? table_map(v, &tab) : v);
    }
}

#else /* other CPUs: stk_pixel_vbmi() is false, so only the table loop runs */

bool stk_pixel_vbmi(void) { return false; }
void stk_pixel_vbmi_table_bytes(uint8_t *p, size_t n, const uint8_t t[256])
{
    for (size_t i = 0; i < n; i++) p[i] = t[p[i]];
}
void stk_pixel_vbmi_load64(const uint8_t *p, const uint8_t *t, float *r, float *g, float *b)
{
    for (int i = 0; i < 64; i++) {
        const uint8_t *q = p + 3 * i;
        r[i] = t ? t[q[0]] : q[0], g[i] = t ? t[q[1]] : q[1], b[i] = t ? t[q[2]] : q[2];
    }
}
void stk_pixel_vbmi_store64(const float *r, const float *g, const float *b, const uint8_t *t,
                            uint8_t *p)
{
    for (int i = 0; i < 64; i++) {
        uint8_t v[3] = {(uint8_t)(int)r[i], (uint8_t)(int)g[i], (uint8_t)(int)b[i]};
        for (int c = 0; c < 3; c++) p[3 * i + c] = t ? t[v[c]] : v[c];
    }
}

#endif
