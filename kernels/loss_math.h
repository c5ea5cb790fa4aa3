/* Softmax and cross-entropy, one row at a time: written once for the CPU
 * loops (cpu_loss_optim.c) and the CUDA kernels (cuda/loss.cu). Sums are
 * accumulated in double, so the two agree to rounding of the last step. */
#pragma once

#include "common/host_device.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* q = softmax(p) or log_softmax(p) over `cols` values. */
static inline STK_HD void stk_softmax_row(int64_t cols, const float *p, float *q, int log)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j < cols; j++) mx = p[j] > mx ? p[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; j++) sum += expf(p[j] - mx);
    if (log) {
        float lse = mx + logf((float)sum);
        for (int64_t j = 0; j < cols; j++) q[j] = p[j] - lse;
    } else {
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < cols; j++) q[j] = expf(p[j] - mx) * inv;
    }
}

/* Gradient of a softmax row: gx = y * (gy - sum(gy * y)); of a log-softmax
 * row (y = log p): gx = gy - p * sum(gy). */
static inline STK_HD void stk_softmax_backward_row(int64_t cols, const float *y, const float *g,
                                                   float *q, int log)
{
    double s = 0.0;
    if (log) {
        for (int64_t j = 0; j < cols; j++) s += g[j];
        for (int64_t j = 0; j < cols; j++) q[j] = g[j] - expf(y[j]) * (float)s;
    } else {
        for (int64_t j = 0; j < cols; j++) s += g[j] * y[j];
        for (int64_t j = 0; j < cols; j++) q[j] = y[j] * (g[j] - (float)s);
    }
}

/* The smoothed negative log-likelihood of one row of log-probabilities. */
static inline STK_HD double stk_ce_row_loss(int64_t cols, const float *logp, int32_t label,
                                            float smoothing)
{
    double nll = -logp[label];
    if (smoothing != 0.f) {
        double all = 0.0;
        for (int64_t j = 0; j < cols; j++) all -= logp[j];
        nll = (1.0 - smoothing) * nll + smoothing * all / (double)cols;
    }
    return nll;
}

/* q = scale * (softmax - target distribution) for one row. */
static inline STK_HD void stk_ce_backward_row(int64_t cols, const float *logp, int32_t label,
                                              float smoothing, float scale, float *q)
{
    float off = smoothing / (float)cols, on = 1.f - smoothing + off;
    for (int64_t j = 0; j < cols; j++) q[j] = scale * (expf(logp[j]) - off);
    q[label] -= scale * (on - off);
}

#ifdef __cplusplus
}
#endif
