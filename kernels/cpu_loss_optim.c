/* Softmax, cross-entropy, dropout, the input op and optimizer updates on the CPU. */
#include "kernels/cpu_kernels_impl.h"

#include "kernels/batch_mix_math.h"
#include "kernels/loss_math.h"

#include <math.h>

/* Softmax through oneDNN where it runs (cpu_dnnl_norms.c: 8x the loop's
 * speed on attention's rows); log-softmax (the losses) in the loops. */
void cpu_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y, bool log)
{
    if (!log && cpu_dnnl_softmax_forward(rows, cols, x, y)) return;
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int64_t r = 0; r < rows; r++) stk_softmax_row(cols, x + r * cols, y + r * cols, log);
}

void cpu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                          bool log)
{
    if (!log && cpu_dnnl_softmax_backward(rows, cols, y, gy, gx)) return;
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        stk_softmax_backward_row(cols, y + r * cols, gy + r * cols, gx + r * cols, log);
}

stk_status cpu_cross_entropy_forward(int64_t rows, int64_t cols, const float *logits,
                                     const int32_t *labels, float smoothing, float *logp,
                                     float *loss)
{
    for (int64_t r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= cols)
            return stk_error(STK_ERR_INVALID_ARG,
                             "cross_entropy: label %d of row %lld is outside [0, %lld)", labels[r],
                             (long long)r, (long long)cols);
    cpu_softmax_forward(rows, cols, logits, logp, true);
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++)
        total += stk_ce_row_loss(cols, logp + r * cols, labels[r], smoothing);
    *loss = rows ? (float)(total / (double)rows) : 0.f;
    return STK_OK;
}

void cpu_cross_entropy_backward(int64_t rows, int64_t cols, const float *logp,
                                const int32_t *labels, float smoothing, const float *gloss,
                                float *gx)
{
    float scale = rows ? *gloss / (float)rows : 0.f;
#pragma omp parallel for schedule(static) if (rows * cols > STK_OMP_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        stk_ce_backward_row(cols, logp + r * cols, labels[r], smoothing, scale, gx + r * cols);
}

void cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                         float *y, uint8_t *mask)
{
    /* scalar_math.h's stk_dropout_block: the same mask as the CUDA kernel */
    uint64_t cut = (uint64_t)((double)p * 4294967296.0);
    float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
#pragma omp parallel for schedule(static) if (n > STK_OMP_MIN_WORK)
    for (int64_t b = 0; b < (n + 3) / 4; b++)
        stk_dropout_block(seed, stream, b, n, cut, scale, x, y, mask);
}

void cpu_dropout_backward(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx)
{
    float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
#pragma omp parallel for schedule(static) if (n > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++) gx[i] = mask[i] ? gy[i] * scale : 0.f;
}

void cpu_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                       const float *mean, const float *std, float *y)
{
    float scale[16], shift[16];
    for (int64_t ch = 0; ch < c && ch < 16; ch++) {
        scale[ch] = 1.f / (255.f * std[ch]);
        shift[ch] = -mean[ch] / std[ch];
    }
    int64_t hw = h * w;
#pragma omp parallel for schedule(static) if (n * hw * c > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *in = x + i * hw * c;
        float *out = y + i * c * hw;
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++)
                out[ch * hw + j] = (float)in[j * c + ch] * scale[ch] + shift[ch];
    }
}

stk_status cpu_batch_regions(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                             const stk_batch_region *regions, float *y)
{
    int64_t chw = c * h * w, total = n * chw;
#pragma omp parallel for schedule(static) if (total > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < total; i++) y[i] = stk_batch_region_value(regions, x, chw, h * w, w, i);
    return STK_OK;
}

void cpu_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                  float dampening, float wd, bool nesterov, bool first)
{
#pragma omp parallel for schedule(static) if (n > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        stk_sgd_update(&p[i], g[i], buf ? &buf[i] : NULL, lr, momentum, dampening, wd, nesterov,
                       first);
}

void cpu_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                   float beta2, float eps, float wd, bool decoupled, float bc1, float bc2)
{
#pragma omp parallel for schedule(static) if (n > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++)
        stk_adam_update(&p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, decoupled, bc1, bc2);
}

/* One thread, i in order (a block of lanes at a time, which vectorises):
 * the lanes' sums must not depend on the thread count. */
void cpu_sum_squares(int64_t n, const float *x, float *lanes)
{
    for (int64_t base = 0; base < n; base += STK_NORM_LANES) {
        int64_t m = n - base < STK_NORM_LANES ? n - base : STK_NORM_LANES;
        const float *v = x + base;
        for (int64_t j = 0; j < m; j++) lanes[j] += v[j] * v[j];
    }
}

void cpu_clamp(int64_t n, float *x, float lo, float hi)
{
#pragma omp parallel for schedule(static) if (n > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++) x[i] = stk_clamp(x[i], lo, hi);
}

void cpu_amp_unscale(int64_t n, float *g, float inv_scale, int32_t *found_inf)
{
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n; i++) bad |= stk_amp_unscale(&g[i], inv_scale);
    if (bad) *found_inf = 1;
}
