/* SIMD kernels of the u8 resize (x86-64: SSE2 always, SSSE3 and AVX2 when
 * the CPU has them, chosen at run time; other CPUs use the scalar loops).
 * Why they exist, measured: bench/README.md, "Resize: SIMD kernels". */
#include "augment/resize_plan_impl.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* SSSE3: per output, one 16-byte load per group of 5 pixels, three pshufb
 * arranging pixel pairs as i16 [r_a r_b g_a g_b b_a b_b 0 0], three pmaddwd.
 * Pixels are stored as 4 bytes (the 4th is rewritten by the next pixel),
 * except the row's last. */
__attribute__((target("ssse3"))) static void hpass_rgb_ssse3(const uint8_t *in, int origin,
                                                             uint8_t *out, const stk_axis_plan *a)
{
    const __m128i m01 = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m128i m23 = _mm_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const __m128i m4 =
        _mm_setr_epi8(12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, -1, -1, -1, -1);
    const __m128i round = _mm_set1_epi32(1 << (STK_RESIZE_BITS - 1));
    for (int x = 0; x < a->out; x++) {
        const uint8_t *p = in + (size_t)(a->first[x] - origin) * 3;
        __m128i acc = round;
        for (int g = 0; g < a->groups; g++, p += 15) {
            const int16_t *c = a->hc + stk_hc_index(a->groups, x, g, 0);
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            acc = _mm_add_epi32(
                acc, _mm_madd_epi16(_mm_shuffle_epi8(v, m01), _mm_loadu_si128((const __m128i *)c)));
            acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(v, m23),
                                                    _mm_loadu_si128((const __m128i *)(c + 16))));
            acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(v, m4),
                                                    _mm_loadu_si128((const __m128i *)(c + 32))));
        }
        acc = _mm_srai_epi32(acc, STK_RESIZE_BITS);
        int32_t word = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(acc, acc), acc));
        /* little-endian: R G B; fixed-size copies (a variable size became a byte loop) */
        if (x + 1 < a->out)
            memcpy(out + (size_t)x * 3, &word, 4);
        else
            memcpy(out + (size_t)x * 3, &word, 3);
    }
}

/* Shift two outputs' sums (i32 [R G B 0] in each 128-bit half) down to
 * pixels and store them. Pixels are written as 4 bytes (the 4th is
 * rewritten by the next pixel) unless they end the row. Fixed-size copies:
 * a variable size compiled to a byte loop that cost half of the pass. */
__attribute__((target("avx2"))) static inline void store_pair(uint8_t *o, __m256i acc, bool more)
{
    acc = _mm256_srai_epi32(acc, STK_RESIZE_BITS);
    __m256i px = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc);
    int32_t w0 = _mm256_cvtsi256_si32(px), w1 = _mm256_extract_epi32(px, 4);
    memcpy(o, &w0, 4);
    if (more)
        memcpy(o + 3, &w1, 4);
    else
        memcpy(o + 3, &w1, 3);
}

/* The same for four outputs (A|B in ab, C|D in cd) as 12 packed bytes: one
 * pack for all four, one shuffle that drops the 4th bytes, one 16-byte
 * store when the 4 bytes after them are still to be written (`room`). */
__attribute__((target("avx2"))) static inline void store_quad(uint8_t *o, __m256i ab, __m256i cd,
                                                              bool room)
{
    const __m128i squeeze = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    ab = _mm256_srai_epi32(ab, STK_RESIZE_BITS);
    cd = _mm256_srai_epi32(cd, STK_RESIZE_BITS);
    __m256i w = _mm256_packs_epi32(ab, cd); /* halves: [A C] and [B D] as i16 */
    __m256i b = _mm256_packus_epi16(w, w);  /* dwords 0, 1 of each half: A, C and B, D */
    __m128i abcd = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    abcd = _mm_shuffle_epi8(abcd, squeeze);
    if (room) {
        _mm_storeu_si128((__m128i *)o, abcd);
    } else {
        int64_t lo = _mm_cvtsi128_si64(abcd);
        int32_t hi = _mm_extract_epi32(abcd, 2);
        memcpy(o, &lo, 8);
        memcpy(o + 8, &hi, 4);
    }
}

/* Rounded sums of the taps of outputs x and x+1 (one per 128-bit half),
 * reading 16 bytes at p0 and p1 per group of 5 taps. `narrow`: every
 * output has at most 4 taps (any downscale by less than 2: the DCT scale
 * leaves most crops there), so the 5th pixel's shuffle and multiply-add
 * are skipped. */
__attribute__((target("avx2"), always_inline)) static inline __m256i
pair_sums(const uint8_t *p0, const uint8_t *p1, const __m256i *c, int groups, bool narrow)
{
    const __m256i m01 = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                         0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i m23 =
        _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9, -1,
                         7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const __m256i m4 =
        _mm256_setr_epi8(12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, -1, -1, -1, -1, 12, -1, -1,
                         -1, 13, -1, -1, -1, 14, -1, -1, -1, -1, -1, -1, -1);
    __m256i acc = _mm256_set1_epi32(1 << (STK_RESIZE_BITS - 1));
    for (int g = 0; g < groups; g++, c += 3, p0 += 15, p1 += 15) {
        __m256i v =
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                    _mm_loadu_si128((const __m128i *)p1), 1);
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, m01), _mm256_loadu_si256(c)));
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, m23), _mm256_loadu_si256(c + 1)));
        if (!narrow)
            acc = _mm256_add_epi32(
                acc, _mm256_madd_epi16(_mm256_shuffle_epi8(v, m4), _mm256_loadu_si256(c + 2)));
    }
    return acc;
}

/* AVX2: outputs in pairs, one per 128-bit half, stored four at a time.
 * `narrow` is a constant at each call, so each loop is compiled for it. */
__attribute__((target("avx2"), always_inline)) static inline void
hpass_rgb_avx2_loop(const uint8_t *in, int origin, uint8_t *out, const stk_axis_plan *a,
                    bool narrow)
{
    const int n = a->out, groups = narrow ? 1 : a->groups;
    const int *first = a->first;
    const __m256i *c = (const __m256i *)a->hc;
    const size_t per_pair = (size_t)groups * 3; /* vectors of coefficients */
#define TAP(x) (in + (size_t)(first[x] - origin) * 3)
    int x = 0;
    for (; x + 3 < n; x += 4, c += 2 * per_pair) {
        __m256i ab = pair_sums(TAP(x), TAP(x + 1), c, groups, narrow);
        __m256i cd = pair_sums(TAP(x + 2), TAP(x + 3), c + per_pair, groups, narrow);
        store_quad(out + (size_t)x * 3, ab, cd, x + 5 < n);
    }
    for (; x + 1 < n; x += 2, c += per_pair)
        store_pair(out + (size_t)x * 3, pair_sums(TAP(x), TAP(x + 1), c, groups, narrow),
                   x + 2 < n);
    if (x < n) { /* an odd last pixel: its coefficients are the low half; the high half's taps
                  * (repeating its own) are computed and dropped */
        __m256i acc = pair_sums(TAP(x), TAP(x), c, groups, narrow);
        acc = _mm256_srai_epi32(acc, STK_RESIZE_BITS);
        int32_t word = _mm256_cvtsi256_si32(_mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc));
        memcpy(out + (size_t)x * 3, &word, 3);
    }
#undef TAP
}

__attribute__((target("avx2"))) static void hpass_rgb_avx2(const uint8_t *in, int origin,
                                                           uint8_t *out, const stk_axis_plan *a)
{
    if (a->groups == 1 && a->widest <= 4)
        hpass_rgb_avx2_loop(in, origin, out, a, true);
    else
        hpass_rgb_avx2_loop(in, origin, out, a, false);
}

bool stk_hpass_rgb_simd(const uint8_t *in, int origin, uint8_t *out, const stk_axis_plan *a)
{
    if (__builtin_cpu_supports("avx2"))
        hpass_rgb_avx2(in, origin, out, a);
    else if (__builtin_cpu_supports("ssse3"))
        hpass_rgb_ssse3(in, origin, out, a);
    else
        return false;
    return true;
}

/* Vertical pass, AVX2: 32 bytes of a row at a time, rows in pairs
 * interleaved as i16 for pmaddwd. The per-lane unpacks and packs put the
 * bytes back in their order. */
__attribute__((target("avx2"))) static size_t
vpass_avx2(const uint8_t *const *rows, const int16_t *w, int taps, uint8_t *out, size_t n)
{
    size_t x = 0;
    const __m256i zero = _mm256_setzero_si256();
    const __m256i round = _mm256_set1_epi32(1 << (STK_RESIZE_BITS - 1));
    for (; x + 32 <= n; x += 32) {
        __m256i a0 = round, a1 = round, a2 = round, a3 = round;
        for (int k = 0; k < taps; k += 2) {
            __m256i r0 = _mm256_loadu_si256((const __m256i *)(rows[k] + x));
            __m256i r1 =
                k + 1 < taps ? _mm256_loadu_si256((const __m256i *)(rows[k + 1] + x)) : zero;
            uint32_t pair = (uint16_t)w[k] | (uint32_t)(uint16_t)(k + 1 < taps ? w[k + 1] : 0)
                                                 << 16;
            __m256i wk = _mm256_set1_epi32((int32_t)pair);
            __m256i lo0 = _mm256_unpacklo_epi8(r0, zero), hi0 = _mm256_unpackhi_epi8(r0, zero);
            __m256i lo1 = _mm256_unpacklo_epi8(r1, zero), hi1 = _mm256_unpackhi_epi8(r1, zero);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(lo0, lo1), wk));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(lo0, lo1), wk));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi16(hi0, hi1), wk));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi16(hi0, hi1), wk));
        }
        a0 = _mm256_srai_epi32(a0, STK_RESIZE_BITS), a1 = _mm256_srai_epi32(a1, STK_RESIZE_BITS);
        a2 = _mm256_srai_epi32(a2, STK_RESIZE_BITS), a3 = _mm256_srai_epi32(a3, STK_RESIZE_BITS);
        _mm256_storeu_si256((__m256i *)(out + x), _mm256_packus_epi16(_mm256_packs_epi32(a0, a1),
                                                                      _mm256_packs_epi32(a2, a3)));
    }
    return x;
}

/* SSE2 (every x86-64): the same 16 bytes at a time. */
static size_t vpass_sse2(const uint8_t *const *rows, const int16_t *w, int taps, uint8_t *out,
                         size_t n, size_t x)
{
    const __m128i zero = _mm_setzero_si128();
    const __m128i round = _mm_set1_epi32(1 << (STK_RESIZE_BITS - 1));
    for (; x + 16 <= n; x += 16) {
        __m128i a0 = round, a1 = round, a2 = round, a3 = round;
        for (int k = 0; k < taps; k += 2) {
            __m128i r0 = _mm_loadu_si128((const __m128i *)(rows[k] + x));
            __m128i r1 = k + 1 < taps ? _mm_loadu_si128((const __m128i *)(rows[k + 1] + x)) : zero;
            uint32_t pair = (uint16_t)w[k] | (uint32_t)(uint16_t)(k + 1 < taps ? w[k + 1] : 0)
                                                 << 16;
            __m128i wk = _mm_set1_epi32((int32_t)pair);
            __m128i lo0 = _mm_unpacklo_epi8(r0, zero), hi0 = _mm_unpackhi_epi8(r0, zero);
            __m128i lo1 = _mm_unpacklo_epi8(r1, zero), hi1 = _mm_unpackhi_epi8(r1, zero);
            a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi16(lo0, lo1), wk));
            a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi16(lo0, lo1), wk));
            a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi16(hi0, hi1), wk));
            a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi16(hi0, hi1), wk));
        }
        a0 = _mm_srai_epi32(a0, STK_RESIZE_BITS), a1 = _mm_srai_epi32(a1, STK_RESIZE_BITS);
        a2 = _mm_srai_epi32(a2, STK_RESIZE_BITS), a3 = _mm_srai_epi32(a3, STK_RESIZE_BITS);
        _mm_storeu_si128((__m128i *)(out + x),
                         _mm_packus_epi16(_mm_packs_epi32(a0, a1), _mm_packs_epi32(a2, a3)));
    }
    return x;
}
#endif

void stk_vpass_u8_simd(const uint8_t *const *rows, const int16_t *w, int taps, uint8_t *out,
                       size_t n)
{
    size_t x = 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) x = vpass_avx2(rows, w, taps, out, n);
    x = vpass_sse2(rows, w, taps, out, n, x);
#else
    (void)rows;
    (void)w;
#endif
    for (; x < n; x++) { /* the tail, and CPUs without SIMD here */
        int32_t acc = 1 << (STK_RESIZE_BITS - 1);
        for (int k = 0; k < taps; k++) acc += rows[k][x] * w[k];
        out[x] = stk_clip8_fixed(acc);
    }
}

#if !defined(__x86_64__)
bool stk_hpass_rgb_simd(const uint8_t *in, int origin, uint8_t *out, const stk_axis_plan *a)
{
    (void)in, (void)origin, (void)out, (void)a;
    return false;
}
#endif
