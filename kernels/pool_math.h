/* Pooling windows, written once for the CPU loops (cpu_norm_pool.c) and the
 * CUDA kernels (cuda/pool.cu): one output element from one input plane. */
#pragma once

#include "common/host_device.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 2-D pooling window over NCHW [n, c, h, w] -> [n, c, oh, ow]. */
typedef struct stk_pool2d_desc {
    int64_t n, c, h, w, oh, ow;
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
    bool count_include_pad; /* average pooling: divide by the full window */
} stk_pool2d_desc;

/* Max of output (oy, ox) over plane `in`; *where = its index in the plane
 * (-1 for an empty window). NaN propagates, as in PyTorch. */
static inline STK_HD float stk_max_pool_at(const stk_pool2d_desc *d, const float *in, int64_t oy,
                                           int64_t ox, int32_t *where)
{
    int64_t y0 = oy * d->stride_h - d->pad_h, x0 = ox * d->stride_w - d->pad_w;
    float best = -INFINITY;
    *where = -1;
    for (int64_t ky = 0; ky < d->kh; ky++) {
        int64_t iy = y0 + ky;
        if (iy < 0 || iy >= d->h) continue;
        for (int64_t kx = 0; kx < d->kw; kx++) {
            int64_t ix = x0 + kx;
            if (ix < 0 || ix >= d->w) continue;
            float v = in[iy * d->w + ix];
            if (v > best || *where < 0 || isnan(v)) {
                best = v;
                *where = (int32_t)(iy * d->w + ix);
                if (isnan(v)) return best;
            }
        }
    }
    return best;
}

/* torch.nn.functional.avg_pool2d's window [y0, y1) x [x0, x1) of output
 * (oy, ox) and its 1/divisor (ceil_mode off). */
static inline STK_HD float stk_avg_window(const stk_pool2d_desc *d, int64_t oy, int64_t ox,
                                          int64_t *y0, int64_t *y1, int64_t *x0, int64_t *x1)
{
    int64_t hs = oy * d->stride_h - d->pad_h, ws = ox * d->stride_w - d->pad_w;
    int64_t he = hs + d->kh < d->h + d->pad_h ? hs + d->kh : d->h + d->pad_h;
    int64_t we = ws + d->kw < d->w + d->pad_w ? ws + d->kw : d->w + d->pad_w;
    int64_t full = (he - hs) * (we - ws);
    *y0 = hs < 0 ? 0 : hs;
    *x0 = ws < 0 ? 0 : ws;
    *y1 = he < d->h ? he : d->h;
    *x1 = we < d->w ? we : d->w;
    int64_t count = d->count_include_pad ? full : (*y1 - *y0) * (*x1 - *x0);
    return count > 0 ? 1.f / (float)count : 0.f;
}

/* The range of outputs [o0, o1) along one axis whose windows (size k,
 * stride s, padding p) cover input position i: the CUDA backward kernels
 * gather instead of scattering, so they need no atomics and are
 * deterministic. */
static inline STK_HD void stk_pool_outputs_covering(int64_t i, int k, int s, int p, int64_t out,
                                                    int64_t *o0, int64_t *o1)
{
    int64_t lo = i + p - k + 1; /* first window start that still covers i */
    *o0 = lo <= 0 ? 0 : (lo + s - 1) / s;
    int64_t hi = (i + p) / s + 1;
    *o1 = hi < out ? hi : out;
}

#ifdef __cplusplus
}
#endif
