/* The resize plan: the filter taps of one axis (weights in fixed point and
 * float), shared by resize.c, which builds and caches plans, and
 * resize_simd.c, whose SIMD kernels apply them. Private to augment/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Weights in 16-bit fixed point with 14 fraction bits, so that SIMD can
 * multiply-add u8 pixels (widened to i16) by them in pairs (pmaddwd). PIL
 * uses 22 bits in 32-bit lanes; the difference is far below one grey level
 * (tests compare with PIL and with a float reference). */
#define STK_RESIZE_BITS  14
#define STK_RESIZE_GROUP 5 /* RGB taps per 16-byte load in the horizontal SIMD pass */

/* Taps of one axis: out[i] = sum_k w[i][k] * in[first[i] + k], outputs in
 * the order they are written (a flipped plan lists them right to left). */
typedef struct stk_axis_plan {
    /* key */
    double in0, len;
    int lo, hi, out;
    bool flip;
    bool valid;
    /* taps */
    int max_taps; /* the room per output (the widest window the scale allows) */
    int widest;   /* the most taps any output has */
    int *first, *count;
    int16_t *wi; /* fixed point, out x max_taps */
    float *wf;   /* float, out x max_taps */
    int16_t *hc; /* horizontal RGB SIMD coefficients, see stk_hc_index */
    int groups;  /* ceil(max_taps / STK_RESIZE_GROUP) */
    size_t cap, hc_cap;
    int cap_out;
} stk_axis_plan;

/* Offset (in i16) of coefficient vector j (0..2) of group g of output x:
 * per output and group, three vectors of 8 i16 lanes that match the pixel
 * pairs (0,1), (2,3), (4,-) as the shuffles arrange them,
 * [w0 w1 w0 w1 w0 w1 0 0]; outputs 2p and 2p+1 sit side by side (the two
 * 128-bit halves of one AVX2 vector). */
static inline size_t stk_hc_index(int groups, int x, int g, int j)
{
    return ((((size_t)x / 2) * (size_t)groups + (size_t)g) * 3 + (size_t)j) * 16 +
           (size_t)(x % 2) * 8;
}

static inline uint8_t stk_clip8_fixed(int32_t v)
{
    v >>= STK_RESIZE_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Horizontal pass of one RGB row with the best SIMD the CPU has: output x
 * reads in[(first[x] - origin) * 3 ...]; `in` must stay readable 16 bytes
 * past the last tap (the caller pads its rows). Writes exactly a->out
 * pixels. Returns false when the CPU has no SIMD for it (go scalar). */
bool stk_hpass_rgb_simd(const uint8_t *in, int origin, uint8_t *out, const stk_axis_plan *a);

/* Vertical pass of one output row of n bytes from `taps` input rows. */
void stk_vpass_u8_simd(const uint8_t *const *rows, const int16_t *w, int taps, uint8_t *out,
                       size_t n);

#ifdef __cplusplus
}
#endif
