/* Where each output pixel of a sample comes from: the crop window, the
 * resize, the flip, decided per sample from the counter-based RNG.
 *
 *     stk_sample_plan p;
 *     stk_plan_sample(&transform, width, height, seed, epoch, index, &p);
 *     // p.x0, p.y0, p.w, p.h: the source window mapped onto p.out_w x p.out_h
 *
 * Semantics follow torchvision (transforms v1, PIL backend):
 *  - RandomResizedCrop: 10 attempts of (area fraction ~ U(scale), log aspect
 *    ~ U(log ratio)), w = round(sqrt(area * aspect)), h = round(sqrt(area /
 *    aspect)), accepted when it fits; then a centre crop of the largest
 *    window with an aspect inside `ratio`. Top/left uniform over the valid
 *    integer positions. The crop is cut first, then resized: the filter reads
 *    only pixels inside the crop (bounds = window).
 *  - Resize(N) + CenterCrop(M): the shorter side becomes N, the longer
 *    int(N * long / short); the centre crop's offset is round((size - M) / 2)
 *    with Python's round-half-even. Computed as one resize of the source
 *    window that lands on the crop, with the filter free to read outside it
 *    (bounds = the whole image), exactly as resizing everything and cropping.
 *  - RandomCrop(C, padding=P) and CenterCrop(M) alone: a copy, zeros where
 *    the window leaves the image.
 *  - RandomHorizontalFlip(p): flipped when U(0,1) < p.
 * Differences from torchvision: the random numbers (Philox, not torch's
 * generator), so the same seed gives other crops than torch would.
 */
#pragma once

#include "augment/transform_spec.h"
#include "common/rng.h"
#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_sample_plan {
    double x0, y0, w, h;    /* source window (source pixels; may be fractional) */
    int bx0, by0, bx1, by1; /* pixels the filter may read: [bx0, bx1) x [by0, by1) */
    int out_w, out_h;
    bool resize; /* false: a copy of the integer window, zero-filled outside the image */
    bool flip;
} stk_sample_plan;

/* The RNG a sample's random choices come from: (seed, epoch, index) only. */
void stk_rng_for_sample(stk_rng *r, uint64_t seed, uint64_t epoch, uint64_t index);

/* The RNG the sample's pixel ops draw from (augment/pixel_ops.h): the
 * second half of the sample's counter blocks, so that adding pixel ops
 * leaves the crops of a spec without them unchanged. */
void stk_rng_for_sample_ops(stk_rng *r, uint64_t seed, uint64_t epoch, uint64_t index);

/* Plan one sample of a width x height image. Errors: STK_ERR_INVALID_ARG
 * when the image cannot give the output (crop larger than the padded image). */
stk_status stk_plan_sample(const stk_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                           uint64_t epoch, uint64_t index, stk_sample_plan *p);

#ifdef __cplusplus
}
#endif
