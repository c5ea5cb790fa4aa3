/* The CUDA backend's element-wise, input and optimizer kernels. The math is
 * kernels/scalar_math.h, shared with the CPU loops; launch.h makes the same
 * source run as host loops in the GPU-less tests. */
#include "kernels/cuda/kernels.h"

#include "kernels/cuda/launch.h"
#include "kernels/scalar_math.h"

STK_GLOBAL void unary_kernel(stk_unary_op op, int64_t n, const float *x, float *y, float alpha)
{
    STK_GRID_STRIDE(i, n) y[i] = stk_unary_f(op, x[i], alpha);
}

STK_GLOBAL void unary_backward_kernel(stk_unary_op op, int64_t n, const float *x, const float *y,
                                      const float *gy, float *gx, float alpha)
{
    STK_GRID_STRIDE(i, n)
    gx[i] = stk_unary_grad(op, x ? x[i] : 0.f, y ? y[i] : 0.f, gy[i], alpha);
}

STK_GLOBAL void binary_same_kernel(stk_binary_op op, int64_t n, const float *a, const float *b,
                                   float *out)
{
    STK_GRID_STRIDE(i, n) out[i] = stk_binary_f(op, a[i], b[i]);
}

/* out[r][c] = a[r][c] (op) b[c]: a bias or per-feature operand broadcast over rows. */
STK_GLOBAL void binary_rowvec_kernel(stk_binary_op op, int64_t rows, int64_t cols, const float *a,
                                     const float *b, float *out)
{
    STK_GRID_STRIDE(i, rows * cols) out[i] = stk_binary_f(op, a[i], b[i % cols]);
}

STK_GLOBAL void axpby_kernel(int64_t n, float a, const float *x, float b, float *y)
{
    STK_GRID_STRIDE(i, n) y[i] = a * x[i] + b * y[i];
}

/* Per-channel affine of the input op, by value (at most 16 channels). */
struct channel_affine {
    float scale[16], shift[16];
};

STK_GLOBAL void input_kernel(int64_t n, int64_t hw, int64_t c, const uint8_t *x, channel_affine a,
                             float *y)
{
    /* i walks the NCHW output: sample, channel, pixel */
    STK_GRID_STRIDE(i, n * c * hw)
    {
        int64_t p = i % hw, ch = (i / hw) % c, s = i / (hw * c);
        y[i] = (float)x[(s * hw + p) * c + ch] * a.scale[ch] + a.shift[ch];
    }
}

STK_GLOBAL void sgd_kernel(int64_t n, float *p, const float *g, float *buf, float lr,
                           float momentum, float dampening, float wd, int nesterov, int first)
{
    STK_GRID_STRIDE(i, n)
    stk_sgd_update(&p[i], g[i], buf ? &buf[i] : 0, lr, momentum, dampening, wd, nesterov, first);
}

STK_GLOBAL void adam_kernel(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                            float beta1, float beta2, float eps, float wd, int decoupled, float bc1,
                            float bc2)
{
    STK_GRID_STRIDE(i, n)
    stk_adam_update(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
}

STK_GLOBAL void amp_unscale_kernel(int64_t n, float *g, float inv_scale, int32_t *found_inf)
{
    /* every writer stores the same 1: no atomics needed */
    STK_GRID_STRIDE(i, n) if (stk_amp_unscale(&g[i], inv_scale)) *found_inf = 1;
}

/* One thread per lane, its elements in order (coalesced across threads). */
STK_GLOBAL void sum_squares_kernel(int64_t n, const float *x, float *lanes)
{
    STK_GRID_STRIDE(j, (n < STK_NORM_LANES ? n : STK_NORM_LANES))
    {
        float acc = lanes[j];
        for (int64_t i = j; i < n; i += STK_NORM_LANES) acc += x[i] * x[i];
        lanes[j] = acc;
    }
}

STK_GLOBAL void clamp_kernel(int64_t n, float *x, float lo, float hi)
{
    STK_GRID_STRIDE(i, n) x[i] = stk_clamp(x[i], lo, hi);
}

void stk_cuda_sum_squares(int64_t n, const float *x, float *lanes, stk_stream_t s)
{
    int64_t lanes_used = n < STK_NORM_LANES ? n : STK_NORM_LANES;
    if (n > 0) STK_LAUNCH(sum_squares_kernel, stk_blocks(lanes_used), STK_BLOCK, s, n, x, lanes);
}

void stk_cuda_clamp(int64_t n, float *x, float lo, float hi, stk_stream_t s)
{
    if (n > 0) STK_LAUNCH(clamp_kernel, stk_blocks(n), STK_BLOCK, s, n, x, lo, hi);
}

void stk_cuda_unary(stk_unary_op op, int64_t n, const float *x, float *y, float alpha,
                    stk_stream_t s)
{
    STK_LAUNCH(unary_kernel, stk_blocks(n), STK_BLOCK, s, op, n, x, y, alpha);
}

void stk_cuda_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *y,
                             const float *gy, float *gx, float alpha, stk_stream_t s)
{
    STK_LAUNCH(unary_backward_kernel, stk_blocks(n), STK_BLOCK, s, op, n, x, y, gy, gx, alpha);
}

void stk_cuda_binary_same(stk_binary_op op, int64_t n, const float *a, const float *b, float *out,
                          stk_stream_t s)
{
    STK_LAUNCH(binary_same_kernel, stk_blocks(n), STK_BLOCK, s, op, n, a, b, out);
}

void stk_cuda_binary_rowvec(stk_binary_op op, int64_t rows, int64_t cols, const float *a,
                            const float *b, float *out, stk_stream_t s)
{
    STK_LAUNCH(binary_rowvec_kernel, stk_blocks(rows * cols), STK_BLOCK, s, op, rows, cols, a, b,
               out);
}

void stk_cuda_axpby(int64_t n, float a, const float *x, float b, float *y, stk_stream_t s)
{
    STK_LAUNCH(axpby_kernel, stk_blocks(n), STK_BLOCK, s, n, a, x, b, y);
}

STK_GLOBAL void batch_regions_kernel(int64_t total, int64_t chw, int64_t hw, int64_t w,
                                     const float *x, const stk_batch_region *regions, float *y)
{
    STK_GRID_STRIDE(i, total) y[i] = stk_batch_region_value(regions, x, chw, hw, w, i);
}

void stk_cuda_batch_regions(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                            const stk_batch_region *regions, float *y, stk_stream_t s)
{
    int64_t total = n * c * h * w;
    if (total > 0)
        STK_LAUNCH(batch_regions_kernel, stk_blocks(total), STK_BLOCK, s, total, c * h * w, h * w,
                   w, x, regions, y);
}

void stk_cuda_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                            const float *mean, const float *std, float *y, stk_stream_t s)
{
    channel_affine a = {};
    for (int64_t ch = 0; ch < c && ch < 16; ch++) { /* as cpu_input_u8_nhwc */
        a.scale[ch] = 1.f / (255.f * std[ch]);
        a.shift[ch] = -mean[ch] / std[ch];
    }
    STK_LAUNCH(input_kernel, stk_blocks(n * c * h * w), STK_BLOCK, s, n, h * w, c, x, a, y);
}

void stk_cuda_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first, stk_stream_t s)
{
    STK_LAUNCH(sgd_kernel, stk_blocks(n), STK_BLOCK, s, n, p, g, buf, lr, momentum, dampening, wd,
               (int)nesterov, (int)first);
}

void stk_cuda_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                        float beta1, float beta2, float eps, float wd, bool decoupled, float bc1,
                        float bc2, stk_stream_t s)
{
    STK_LAUNCH(adam_kernel, stk_blocks(n), STK_BLOCK, s, n, p, g, m, v, lr, beta1, beta2, eps, wd,
               (int)decoupled, bc1, bc2);
}

void stk_cuda_amp_unscale(int64_t n, float *g, float inv_scale, int32_t *found_inf, stk_stream_t s)
{
    if (n > 0)
        STK_LAUNCH(amp_unscale_kernel, stk_blocks(n), STK_BLOCK, s, n, g, inv_scale, found_inf);
}
