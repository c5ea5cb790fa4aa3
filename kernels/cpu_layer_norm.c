/* Layer normalisation on the CPU: oneDNN's primitive where it runs the call
 * (cpu_dnnl_norms.c: measured 3-7x faster), else rows across the OpenMP
 * threads, the parameter gradients' columns likewise (kernels/norm_math.h's
 * math, shared with the CUDA kernels). */
#include "kernels/cpu_kernels_impl.h"
#include "kernels/norm_math.h"

#include <stdlib.h>

void cpu_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                            const float *beta, float eps, float *y, float *mean, float *rstd)
{
    if (cpu_dnnl_layer_norm_forward(rows, cols, x, gamma, beta, eps, y, mean, rstd)) return;
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        stk_layer_norm_row(cols, x + r * cols, gamma, beta, eps, y + r * cols, mean + r, rstd + r);
}

void cpu_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                             const float *mean, const float *rstd, const float *gy, float *gx,
                             float *ggamma, float *gbeta)
{
    if (cpu_dnnl_layer_norm_backward(rows, cols, x, gamma, mean, rstd, gy, gx, ggamma, gbeta))
        return;
    if (gx) {
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
        for (int64_t r = 0; r < rows; r++)
            stk_layer_norm_backward_row(cols, x + r * cols, gamma, mean[r], rstd[r], gy + r * cols,
                                        gx + r * cols);
    }
    if (!ggamma && !gbeta) return;
    /* The parameters' gradients sum over rows: a fixed number of row chunks
     * (not one per thread: the same sums for any thread count), each walking
     * its rows in order into partial sums, then the chunks added in order.
     * A column at a time strode over every row: 4% of a ViT's step. */
    enum { CHUNKS = 16 };
    double *part = calloc((size_t)CHUNKS * 2 * (size_t)cols, sizeof *part);
    if (!part) { /* no memory for the partial sums: a column at a time */
        for (int64_t j = 0; j < cols; j++)
            stk_layer_norm_param_grad_col(rows, cols, j, x, mean, rstd, gy, ggamma, gbeta);
        return;
    }
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int k = 0; k < CHUNKS; k++) {
        double *sg = part + (size_t)k * 2 * (size_t)cols, *sb = sg + cols;
        for (int64_t r = rows * k / CHUNKS; r < rows * (k + 1) / CHUNKS; r++) {
            const float *xr = x + r * cols, *g = gy + r * cols;
            double mu = mean[r], rs = rstd[r];
            for (int64_t j = 0; j < cols; j++) {
                sg[j] += (double)g[j] * (((double)xr[j] - mu) * rs);
                sb[j] += g[j];
            }
        }
    }
    for (int64_t j = 0; j < cols; j++) {
        double tg = 0.0, tb = 0.0;
        for (int k = 0; k < CHUNKS; k++) {
            tg += part[(size_t)k * 2 * (size_t)cols + (size_t)j];
            tb += part[(size_t)k * 2 * (size_t)cols + (size_t)cols + (size_t)j];
        }
        if (ggamma) ggamma[j] = (float)tg;
        if (gbeta) gbeta[j] = (float)tb;
    }
    free(part);
}
