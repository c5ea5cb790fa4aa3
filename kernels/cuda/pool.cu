/* Pooling and eval-mode batch-norm backward on the GPU, with the CPU's
 * window math (kernels/pool_math.h). Max pooling records the argmax like
 * the CPU backend (the engine's interface), which cuDNN's pooling cannot
 * give; the backward passes gather per input element, so they need no
 * atomics and are deterministic. */
#include "kernels/cuda/kernels.h"

#include "kernels/cuda/launch.h"

STK_GLOBAL void max_pool_kernel(stk_pool2d_desc d, const float *x, float *y, int32_t *argmax)
{
    int64_t plane = d.oh * d.ow;
    STK_GRID_STRIDE(i, d.n * d.c * plane)
    {
        int64_t pl = i / plane, o = i % plane;
        y[i] = stk_max_pool_at(&d, x + pl * d.h * d.w, o / d.ow, o % d.ow, &argmax[i]);
    }
}

STK_GLOBAL void max_pool_backward_kernel(stk_pool2d_desc d, const float *gy, const int32_t *argmax,
                                         float *gx)
{
    int64_t plane = d.h * d.w;
    STK_GRID_STRIDE(i, d.n * d.c * plane)
    {
        int64_t pl = i / plane, at = i % plane, iy = at / d.w, ix = at % d.w;
        int64_t y0, y1, x0, x1;
        stk_pool_outputs_covering(iy, d.kh, d.stride_h, d.pad_h, d.oh, &y0, &y1);
        stk_pool_outputs_covering(ix, d.kw, d.stride_w, d.pad_w, d.ow, &x0, &x1);
        const float *g = gy + pl * d.oh * d.ow;
        const int32_t *am = argmax + pl * d.oh * d.ow;
        float acc = 0.f;
        for (int64_t oy = y0; oy < y1; oy++)
            for (int64_t ox = x0; ox < x1; ox++)
                if (am[oy * d.ow + ox] == at) acc += g[oy * d.ow + ox];
        gx[i] = acc;
    }
}

STK_GLOBAL void avg_pool_kernel(stk_pool2d_desc d, const float *x, float *y)
{
    int64_t plane = d.oh * d.ow;
    STK_GRID_STRIDE(i, d.n * d.c * plane)
    {
        int64_t pl = i / plane, o = i % plane, y0, y1, x0, x1;
        float inv = stk_avg_window(&d, o / d.ow, o % d.ow, &y0, &y1, &x0, &x1), s = 0.f;
        const float *in = x + pl * d.h * d.w;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) s += in[iy * d.w + ix];
        y[i] = s * inv;
    }
}

STK_GLOBAL void avg_pool_backward_kernel(stk_pool2d_desc d, const float *gy, float *gx)
{
    int64_t plane = d.h * d.w;
    STK_GRID_STRIDE(i, d.n * d.c * plane)
    {
        int64_t pl = i / plane, at = i % plane, iy = at / d.w, ix = at % d.w;
        int64_t oy0, oy1, ox0, ox1;
        stk_pool_outputs_covering(iy, d.kh, d.stride_h, d.pad_h, d.oh, &oy0, &oy1);
        stk_pool_outputs_covering(ix, d.kw, d.stride_w, d.pad_w, d.ow, &ox0, &ox1);
        const float *g = gy + pl * d.oh * d.ow;
        float acc = 0.f;
        for (int64_t oy = oy0; oy < oy1; oy++)
            for (int64_t ox = ox0; ox < ox1; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = stk_avg_window(&d, oy, ox, &y0, &y1, &x0, &x1);
                if (iy >= y0 && iy < y1 && ix >= x0 && ix < x1) acc += g[oy * d.ow + ox] * inv;
            }
        gx[i] = acc;
    }
}

STK_GLOBAL void bn_eval_backward_data_kernel(int64_t n, int64_t c, int64_t hw, const float *gamma,
                                             const float *gy, const float *running_var, float eps,
                                             float *gx)
{
    STK_GRID_STRIDE(i, n * c * hw)
    {
        int64_t ch = (i / hw) % c;
        gx[i] = gy[i] * ((gamma ? gamma[ch] : 1.f) * (1.f / sqrtf(running_var[ch] + eps)));
    }
}

/* One thread per channel (eval-mode backward is fine-tuning with frozen
 * statistics: rare, and c threads are plenty for its sizes). */
STK_GLOBAL void bn_eval_backward_param_kernel(int64_t n, int64_t c, int64_t hw, const float *x,
                                              const float *gy, const float *running_mean,
                                              const float *running_var, float eps, float *ggamma,
                                              float *gbeta)
{
    STK_GRID_STRIDE(ch, c)
    {
        float invstd = 1.f / sqrtf(running_var[ch] + eps), mean = running_mean[ch];
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw, *g = gy + (i * c + ch) * hw;
            for (int64_t j = 0; j < hw; j++) {
                sg += g[j];
                sgx += g[j] * (p[j] - mean) * invstd;
            }
        }
        if (gbeta) gbeta[ch] = (float)sg;
        if (ggamma) ggamma[ch] = (float)sgx;
    }
}

void stk_cuda_max_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y,
                                 int32_t *argmax, stk_stream_t s)
{
    int64_t n = d->n * d->c * d->oh * d->ow;
    if (n > 0) STK_LAUNCH(max_pool_kernel, stk_blocks(n), STK_BLOCK, s, *d, x, y, argmax);
}

void stk_cuda_max_pool2d_backward(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                                  float *gx, stk_stream_t s)
{
    int64_t n = d->n * d->c * d->h * d->w;
    if (n > 0)
        STK_LAUNCH(max_pool_backward_kernel, stk_blocks(n), STK_BLOCK, s, *d, gy, argmax, gx);
}

void stk_cuda_avg_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y, stk_stream_t s)
{
    int64_t n = d->n * d->c * d->oh * d->ow;
    if (n > 0) STK_LAUNCH(avg_pool_kernel, stk_blocks(n), STK_BLOCK, s, *d, x, y);
}

void stk_cuda_avg_pool2d_backward(const stk_pool2d_desc *d, const float *gy, float *gx,
                                  stk_stream_t s)
{
    int64_t n = d->n * d->c * d->h * d->w;
    if (n > 0) STK_LAUNCH(avg_pool_backward_kernel, stk_blocks(n), STK_BLOCK, s, *d, gy, gx);
}

void stk_cuda_batch_norm_eval_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                       const float *gamma, const float *gy,
                                       const float *running_mean, const float *running_var,
                                       float eps, float *gx, float *ggamma, float *gbeta,
                                       stk_stream_t s)
{
    if (gx && n * c * hw > 0)
        STK_LAUNCH(bn_eval_backward_data_kernel, stk_blocks(n * c * hw), STK_BLOCK, s, n, c, hw,
                   gamma, gy, running_var, eps, gx);
    if ((ggamma || gbeta) && c > 0)
        STK_LAUNCH(bn_eval_backward_param_kernel, stk_blocks(c), STK_BLOCK, s, n, c, hw, x, gy,
                   running_mean, running_var, eps, ggamma, gbeta);
}
