/* Interleaved RGB bytes <-> three float arrays: the colour ops' way in and
 * out of the HWC tile. 64 pixels at a time with byte permutes where the CPU
 * has AVX-512 VBMI (augment/pixel_vbmi.c), else 16 at a time with byte
 * shuffles (AVX2 + SSSE3); the compiler's own stride-3 loops did it at ~40
 * us per 224x224 image (bench/README.md, "Pixel ops"). A byte table, when
 * given, maps each byte on the way in or out (VBMI only: the others take
 * the scalar loop). */
#include "augment/pixel_ops_impl.h"

/* The pixels from i on, one by one (the SIMD loops' remainder, or all of
 * them on other CPUs). */
static void load_tail(const uint8_t *p, int i, int n, const uint8_t *table, float *r, float *g,
                      float *b)
{
    if (table)
        for (; i < n; i++)
            r[i] = table[p[3 * i]], g[i] = table[p[3 * i + 1]], b[i] = table[p[3 * i + 2]];
    else
        for (; i < n; i++) r[i] = p[3 * i], g[i] = p[3 * i + 1], b[i] = p[3 * i + 2];
}

static void store_tail(const float *r, const float *g, const float *b, int i, int n,
                       const uint8_t *table, uint8_t *p)
{
    if (table)
        for (; i < n; i++)
            p[3 * i] = table[(int)r[i]], p[3 * i + 1] = table[(int)g[i]],
                  p[3 * i + 2] = table[(int)b[i]];
    else
        for (; i < n; i++)
            p[3 * i] = (uint8_t)(int)r[i], p[3 * i + 1] = (uint8_t)(int)g[i],
                  p[3 * i + 2] = (uint8_t)(int)b[i];
}

#if defined(__x86_64__)
#include <immintrin.h>

/* pshufb masks: LOAD_MASK[3 * ch + part] picks channel ch's bytes out of
 * the part-th 16 bytes; STORE_MASK[3 * part + ch] places channel ch's bytes
 * into the part-th 16 bytes of the output (-1: zero). */
static const int8_t LOAD_MASK[9][16] = {
    {0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13},
    {1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14},
    {2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
    {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15},
};
static const int8_t STORE_MASK[9][16] = {
    {0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, 5},
    {-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1},
    {-1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1},
    {-1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10, -1},
    {5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10},
    {-1, 5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1},
    {-1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1, -1},
    {-1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1},
    {10, -1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15},
};

__attribute__((target("avx2"))) static inline __m128i mask(const int8_t m[16])
{
    return _mm_loadu_si128((const __m128i *)m);
}

/* From pixel i, 16 at a time; returns where it stopped. */
__attribute__((target("avx2"))) static int load_avx2(const uint8_t *p, int i, int n, float *r,
                                                     float *g, float *b)
{
    float *out[3] = {r, g, b};
    for (; i + 16 <= n; i += 16) {
        const uint8_t *q = p + 3 * (size_t)i;
        __m128i part[3] = {_mm_loadu_si128((const __m128i *)q),
                           _mm_loadu_si128((const __m128i *)(q + 16)),
                           _mm_loadu_si128((const __m128i *)(q + 32))};
        for (int ch = 0; ch < 3; ch++) {
            __m128i v =
                _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(part[0], mask(LOAD_MASK[3 * ch])),
                                          _mm_shuffle_epi8(part[1], mask(LOAD_MASK[3 * ch + 1]))),
                             _mm_shuffle_epi8(part[2], mask(LOAD_MASK[3 * ch + 2])));
            _mm256_storeu_ps(out[ch] + i, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)));
            _mm256_storeu_ps(out[ch] + i + 8,
                             _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))));
        }
    }
    return i;
}

/* 16 floats holding 0..255 -> 16 bytes. */
__attribute__((target("avx2"))) static inline __m128i to_bytes(const float *f)
{
    __m256i lo = _mm256_cvttps_epi32(_mm256_loadu_ps(f));
    __m256i hi = _mm256_cvttps_epi32(_mm256_loadu_ps(f + 8));
    __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

__attribute__((target("avx2"))) static int store_avx2(const float *r, const float *g,
                                                      const float *b, int i, int n, uint8_t *p)
{
    for (; i + 16 <= n; i += 16) {
        __m128i ch[3] = {to_bytes(r + i), to_bytes(g + i), to_bytes(b + i)};
        uint8_t *q = p + 3 * (size_t)i;
        for (int part = 0; part < 3; part++) {
            __m128i v =
                _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(ch[0], mask(STORE_MASK[3 * part])),
                                          _mm_shuffle_epi8(ch[1], mask(STORE_MASK[3 * part + 1]))),
                             _mm_shuffle_epi8(ch[2], mask(STORE_MASK[3 * part + 2])));
            _mm_storeu_si128((__m128i *)(q + 16 * part), v);
        }
    }
    return i;
}
#endif

void stk_pixel_rgb_load(const uint8_t *p, int n, const uint8_t *table, float *r, float *g, float *b)
{
    int i = 0;
#if defined(__x86_64__)
    if (stk_pixel_vbmi())
        for (; i + 64 <= n; i += 64)
            stk_pixel_vbmi_load64(p + 3 * (size_t)i, table, r + i, g + i, b + i);
    if (!table && __builtin_cpu_supports("avx2")) i = load_avx2(p, i, n, r, g, b);
#endif
    load_tail(p, i, n, table, r, g, b);
}

void stk_pixel_rgb_store(const float *r, const float *g, const float *b, int n,
                         const uint8_t *table, uint8_t *p)
{
    int i = 0;
#if defined(__x86_64__)
    if (stk_pixel_vbmi())
        for (; i + 64 <= n; i += 64)
            stk_pixel_vbmi_store64(r + i, g + i, b + i, table, p + 3 * (size_t)i);
    if (!table && __builtin_cpu_supports("avx2")) i = store_avx2(r, g, b, i, n, p);
#endif
    store_tail(r, g, b, i, n, table, p);
}
