/* Layer normalisation on the GPU: one thread per row (the rows of a
 * transformer's tokens or a ConvNeXt's pixels are many, the columns a few
 * hundred) and one per column for the parameter gradients, with
 * kernels/norm_math.h, the CPU's own row functions. */
#include "kernels/cuda/kernels.h"

#include "kernels/cuda/launch.h"
#include "kernels/norm_math.h"

STK_GLOBAL void layer_norm_kernel(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *beta, float eps, float *y, float *mean, float *rstd)
{
    STK_GRID_STRIDE(r, rows)
    stk_layer_norm_row(cols, x + r * cols, gamma, beta, eps, y + r * cols, mean + r, rstd + r);
}

STK_GLOBAL void layer_norm_backward_kernel(int64_t rows, int64_t cols, const float *x,
                                           const float *gamma, const float *mean, const float *rstd,
                                           const float *gy, float *gx)
{
    STK_GRID_STRIDE(r, rows)
    stk_layer_norm_backward_row(cols, x + r * cols, gamma, mean[r], rstd[r], gy + r * cols,
                                gx + r * cols);
}

STK_GLOBAL void layer_norm_param_grad_kernel(int64_t rows, int64_t cols, const float *x,
                                             const float *mean, const float *rstd, const float *gy,
                                             float *ggamma, float *gbeta)
{
    STK_GRID_STRIDE(j, cols)
    stk_layer_norm_param_grad_col(rows, cols, j, x, mean, rstd, gy, ggamma, gbeta);
}

void stk_cuda_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                 const float *beta, float eps, float *y, float *mean, float *rstd,
                                 stk_stream_t s)
{
    if (rows > 0)
        STK_LAUNCH(layer_norm_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, x, gamma, beta,
                   eps, y, mean, rstd);
}

void stk_cuda_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *mean, const float *rstd, const float *gy, float *gx,
                                  float *ggamma, float *gbeta, stk_stream_t s)
{
    if (rows > 0 && gx)
        STK_LAUNCH(layer_norm_backward_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, x, gamma,
                   mean, rstd, gy, gx);
    if (cols > 0 && (ggamma || gbeta))
        STK_LAUNCH(layer_norm_param_grad_kernel, stk_blocks(cols), STK_BLOCK, s, rows, cols, x,
                   mean, rstd, gy, ggamma, gbeta);
}
