/* The weight gradient of a depthwise convolution (groups = channels), in
 * plain loops over NCHW planes.
 *
 * Why: Debian's oneDNN (2.6) has no JIT depthwise backward-weights kernel
 * for AVX2 and runs its im2col + GEMM one, which on a 7x7 depthwise layer
 * (ConvNeXt) or a 3x3/5x5 one (EfficientNet, MobileNetV3) took a third of a
 * training step on an AVX2 EPYC: kernels/README.md, "Depthwise weight
 * gradient". Here each thread owns whole channels (no reduction between
 * threads: the same result for any thread count), reads a channel's input
 * and gradient planes once per image with every filter tap's sum in
 * registers, and the rows vectorise. */
#include "kernels/cpu_kernels.h"

#include <stdlib.h>

bool cpu_conv2d_is_depthwise(const stk_conv2d_desc *d)
{
    return d->groups == d->c && d->k == d->c && d->dil_h == 1 && d->dil_w == 1 && d->r <= 15 &&
           d->s <= 15;
}

/* The sum over one image's plane of gy[oy][ox] * x[iy][ix] for the tap
 * (ky, kx): the output rows whose input row exists, the columns likewise. */
static float tap_sum(const stk_conv2d_desc *d, const float *x, const float *gy, int64_t ky,
                     int64_t kx)
{
    int64_t sw = d->stride_w, pw = d->pad_w;
    /* ox with 0 <= ox*sw - pw + kx < w */
    int64_t lo = pw - kx > 0 ? (pw - kx + sw - 1) / sw : 0;
    int64_t hi = (d->w - 1 + pw - kx) / sw + 1;
    if (d->w - 1 + pw - kx < 0) hi = 0;
    if (hi > d->ow) hi = d->ow;
    float acc = 0.f;
    for (int64_t oy = 0; oy < d->oh; oy++) {
        int64_t iy = oy * d->stride_h - d->pad_h + ky;
        if (iy < 0 || iy >= d->h) continue;
        const float *g = gy + oy * d->ow, *xr = x + iy * d->w - pw + kx;
        if (sw == 1) {
#pragma omp simd reduction(+ : acc)
            for (int64_t ox = lo; ox < hi; ox++) acc += g[ox] * xr[ox];
        } else {
            for (int64_t ox = lo; ox < hi; ox++) acc += g[ox] * xr[ox * sw];
        }
    }
    return acc;
}

void cpu_conv2d_dw_backward_weight(const stk_conv2d_desc *d, const float *x, const float *gy,
                                   float *gw)
{
    int64_t taps = d->r * d->s, hw = d->h * d->w, ohw = d->oh * d->ow;
#pragma omp parallel for schedule(static) if (d->c * d->n * ohw * taps > STK_OMP_MIN_WORK)
    for (int64_t c = 0; c < d->c; c++) {
        double sum[15 * 15] = {0}; /* images added in order, in double */
        for (int64_t n = 0; n < d->n; n++) {
            const float *xp = x + (n * d->c + c) * hw, *gp = gy + (n * d->c + c) * ohw;
            for (int64_t ky = 0; ky < d->r; ky++)
                for (int64_t kx = 0; kx < d->s; kx++)
                    sum[ky * d->s + kx] += tap_sum(d, xp, gp, ky, kx);
        }
        for (int64_t t = 0; t < taps; t++) gw[c * taps + t] = (float)sum[t];
    }
}
