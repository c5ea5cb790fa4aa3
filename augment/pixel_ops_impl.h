/* The pixel ops' families, behind stk_pixel_op_apply (augment/pixel_ops.h). */
#pragma once

#include "augment/pixel_ops.h"

/* nearbyintf (round half to even, as grid_sample's nearest) for |x| < 2^22,
 * in a form that vectorises: adding and subtracting 1.5 * 2^23 rounds to an
 * integer in the default rounding mode (this file is not built with
 * -fassociative-math, which would fold it away). Far-off coordinates are
 * clamped first: they stay outside the image. */
static inline float stk_rint_even(float x)
{
    const float magic = 12582912.0f;
    float big = x < -4194304.0f ? -4194304.0f : x > 4194304.0f ? 4194304.0f : x;
    return (big + magic) - magic;
}

/* Colour and tone: brightness, contrast, saturation, hue, grayscale, invert,
 * autocontrast, equalize, posterize, solarize (augment/pixel_color.c). Runs
 * the leading run of pointwise ops of ops[0..n) in one pass, or the one
 * autocontrast / equalize at ops[0]; *ran: how many ops it ran. Errors:
 * STK_ERR_NOMEM. */
stk_status stk_pixel_color(const stk_pixel_op *ops, int n, uint8_t *img, size_t stride, int w,
                           int h, int c, stk_pixel_scratch *s, int *ran);

/* autocontrast or equalize (augment/pixel_histogram.c). */
void stk_pixel_histogram_op(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                            int c);

/* Filters: blur, sharpness (augment/pixel_filter.c). */
stk_status stk_pixel_filter(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                            int c, stk_pixel_scratch *s);

/* Geometry: rotate, affine, shear, translate (augment/pixel_warp.c). */
stk_status stk_pixel_warp(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h, int c,
                          stk_pixel_scratch *s);

/* Interleaved RGB bytes <-> float arrays (augment/pixel_rgb_simd.c): byte
 * permutes or shuffles where the CPU has them. `table` (256 bytes, or NULL)
 * maps each byte on the way in or out. */
void stk_pixel_rgb_load(const uint8_t *p, int n, const uint8_t *table, float *r, float *g,
                        float *b);
void stk_pixel_rgb_store(const float *r, const float *g, const float *b, int n,
                         const uint8_t *table, uint8_t *p);

/* AVX-512 VBMI byte permutes (augment/pixel_vbmi.c): whether the CPU has
 * them (and they are allowed); 64 pixels of RGB in or out through an
 * optional byte table; n bytes through a table in place. */
bool stk_pixel_vbmi(void);
void stk_pixel_vbmi_load64(const uint8_t *p, const uint8_t *table, float *r, float *g, float *b);
void stk_pixel_vbmi_store64(const float *r, const float *g, const float *b, const uint8_t *table,
                            uint8_t *p);
void stk_pixel_vbmi_table_bytes(uint8_t *p, size_t n, const uint8_t table[256]);
/* Tests: false makes every CPU take the paths of CPUs without VBMI, so one
 * machine checks both (call it with no pixel op running). */
void stk_pixel_vbmi_allow(bool on);

/* Grow s->copy / s->plane / s->index to hold bytes / floats / offsets.
 * Errors: STK_ERR_NOMEM. */
stk_status stk_pixel_scratch_copy(stk_pixel_scratch *s, size_t bytes);
stk_status stk_pixel_scratch_plane(stk_pixel_scratch *s, size_t floats);
stk_status stk_pixel_scratch_index(stk_pixel_scratch *s, size_t offsets);
