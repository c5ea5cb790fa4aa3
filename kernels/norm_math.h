/* Layer normalisation, one row (or one column of parameter gradients) at a
 * time: written once for the CPU loops (cpu_layer_norm.c) and the CUDA
 * kernels (cuda/norm.cu). Sums in double, as loss_math.h, so the two agree
 * to the rounding of the last step. */
#pragma once

#include "common/host_device.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) * rstd * gamma + beta over `cols` values (torch.nn.LayerNorm:
 * the biased variance); gamma and beta may be NULL (no affine). The row's
 * mean and 1/sqrt(var + eps) are kept for the backward. */
static inline STK_HD void stk_layer_norm_row(int64_t cols, const float *x, const float *gamma,
                                             const float *beta, float eps, float *y, float *mean,
                                             float *rstd)
{
    double s = 0.0;
    for (int64_t j = 0; j < cols; j++) s += x[j];
    double mu = cols ? s / (double)cols : 0.0, ss = 0.0;
    for (int64_t j = 0; j < cols; j++) ss += ((double)x[j] - mu) * ((double)x[j] - mu);
    double r = 1.0 / sqrt((cols ? ss / (double)cols : 0.0) + (double)eps);
    for (int64_t j = 0; j < cols; j++) {
        float t = (float)(((double)x[j] - mu) * r);
        y[j] = t * (gamma ? gamma[j] : 1.f) + (beta ? beta[j] : 0.f);
    }
    *mean = (float)mu;
    *rstd = (float)r;
}

/* gx of one row: with g = gy * gamma and x_hat the normalised input,
 * gx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)). */
static inline STK_HD void stk_layer_norm_backward_row(int64_t cols, const float *x,
                                                      const float *gamma, float mean, float rstd,
                                                      const float *gy, float *gx)
{
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double g = (double)gy[j] * (gamma ? gamma[j] : 1.f);
        sg += g;
        sgx += g * ((double)x[j] - mean) * rstd;
    }
    double mg = cols ? sg / (double)cols : 0.0, mgx = cols ? sgx / (double)cols : 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double g = (double)gy[j] * (gamma ? gamma[j] : 1.f), xh = ((double)x[j] - mean) * rstd;
        gx[j] = (float)(rstd * (g - mg - xh * mgx));
    }
}

/* Column j's gamma and beta gradients: sums over the rows of gy * x_hat and gy. */
static inline STK_HD void stk_layer_norm_param_grad_col(int64_t rows, int64_t cols, int64_t j,
                                                        const float *x, const float *mean,
                                                        const float *rstd, const float *gy,
                                                        float *ggamma, float *gbeta)
{
    double sgx = 0.0, sg = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double g = gy[r * cols + j];
        sg += g;
        sgx += g * ((double)x[r * cols + j] - mean[r]) * rstd[r];
    }
    if (ggamma) ggamma[j] = (float)sgx;
    if (gbeta) gbeta[j] = (float)sg;
}

#ifdef __cplusplus
}
#endif
