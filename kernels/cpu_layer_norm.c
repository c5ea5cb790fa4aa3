/* Layer normalisation on the CPU: rows across the OpenMP threads, the
 * parameter gradients' columns likewise (kernels/norm_math.h's math). */
#include "kernels/cpu_kernels.h"
#include "kernels/norm_math.h"

void cpu_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                            const float *beta, float eps, float *y, float *mean, float *rstd)
{
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        stk_layer_norm_row(cols, x + r * cols, gamma, beta, eps, y + r * cols, mean + r, rstd + r);
}

void cpu_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                             const float *mean, const float *rstd, const float *gy, float *gx,
                             float *ggamma, float *gbeta)
{
    if (gx) {
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
        for (int64_t r = 0; r < rows; r++)
            stk_layer_norm_backward_row(cols, x + r * cols, gamma, mean[r], rstd[r], gy + r * cols,
                                        gx + r * cols);
    }
    if (ggamma || gbeta) {
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
        for (int64_t j = 0; j < cols; j++)
            stk_layer_norm_param_grad_col(rows, cols, j, x, mean, rstd, gy, ggamma, gbeta);
    }
}
