/* The batch transforms' pixel rule (RandomErasing, mixup, cutmix), written
 * once for the CPU loop (cpu_loss_optim.c) and the CUDA kernel
 * (cuda/elementwise.cu): inside sample n's rectangle, a * x[n] + b *
 * x[partner]; outside it, x[n]. Erasing is a = b = 0 (zeros after
 * normalisation, torchvision's value=0); mixup is the whole image with
 * a = lam, b = 1 - lam and partner N-1-n (timm's x.flip(0)); cutmix is its box
 * with a = 0, b = 1. */
#pragma once

#include "common/host_device.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_batch_region {
    int32_t y0, y1, x0, x1; /* [y0, y1) x [x0, x1); empty when y0 >= y1 */
    int32_t partner;        /* the sample mixed in (0..N-1) */
    float a, b;
} stk_batch_region;

/* Element i of the output, for an NCHW batch of samples of chw = C*H*W
 * values and planes of hw = H*W, rows of w; regions[n] is sample n's. */
static inline STK_HD float stk_batch_region_value(const stk_batch_region *regions, const float *x,
                                                  int64_t chw, int64_t hw, int64_t w, int64_t i)
{
    int64_t n = i / chw, p = i % chw, pix = p % hw, row = pix / w, col = pix % w;
    const stk_batch_region *r = &regions[n];
    if (row < r->y0 || row >= r->y1 || col < r->x0 || col >= r->x1) return x[i];
    float mixed = x[(int64_t)r->partner * chw + p];
#ifdef __CUDA_ARCH__
    /* rounded as the CPU rounds it (nvcc would fuse a multiply-add, which
     * rounds once: 1 ulp apart), so both devices give the same pixels */
    return __fadd_rn(__fmul_rn(r->a, x[i]), __fmul_rn(r->b, mixed));
#else
    return r->a * x[i] + r->b * mixed;
#endif
}

#ifdef __cplusplus
}
#endif
