/* Batch norm and pooling on the CPU: one channel (batch norm) or one plane
 * (pooling) per loop iteration, split across OpenMP threads. Statistics are
 * summed per plane in f32 with `omp simd` (which allows the reassociation
 * that vectorises a reduction) and across planes in double, so that large
 * batches keep f32 accuracy. */
#include "kernels/cpu_kernels_impl.h"

#include <math.h>
#include <string.h>

/* One channel's mean and sum of squared deviations (m2) over its n planes of
 * hw values (planes `stride` floats apart): the mean, then the squares of
 * the deviations from it (two passes, for accuracy). A one-pass merge of
 * per-plane statistics measured no faster here, and it changed the
 * results' rounding. */
static void channel_stats(const float *x, int64_t n, int64_t stride, int64_t hw, double *mean,
                          double *m2)
{
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *p = x + i * stride;
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < hw; j++) s += p[j];
        sum += s;
    }
    *mean = sum / (double)(n * hw);
    float mf = (float)*mean;
    for (int64_t i = 0; i < n; i++) {
        const float *p = x + i * stride;
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < hw; j++) s += (p[j] - mf) * (p[j] - mf);
        sq += s;
    }
    *m2 = sq;
}

/* Channel ch's affine map y = x * scale + shift from its mean and
 * 1/sqrt(var + eps): one expression for the training and eval forwards and
 * for the backward, whose recomputed activation mask must see the floats
 * the forward saw. gamma, beta may be NULL. */
static inline void bn_affine(const float *gamma, const float *beta, int64_t ch, float mean,
                             float invstd, float *scale, float *shift)
{
    *scale = gamma ? gamma[ch] * invstd : invstd;
    *shift = (beta ? beta[ch] : 0.f) - mean * *scale;
}

/* y = act(x * scale + shift) over one channel's planes; act a constant at
 * each call (the switch below), so each loop vectorises on its own. */
static inline void normalize_planes(stk_bn_act act, const float *x, float *y, int64_t n,
                                    int64_t stride, int64_t hw, float scale, float shift)
{
    for (int64_t i = 0; i < n; i++) {
        const float *p = x + i * stride;
        float *q = y + i * stride;
        for (int64_t j = 0; j < hw; j++) q[j] = stk_bn_act_f(act, p[j] * scale + shift);
    }
}

void cpu_batch_norm_act_train(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                              const float *beta, float *y, float *save_mean, float *save_invstd,
                              float *running_mean, float *running_var, float momentum, float eps,
                              stk_bn_act act)
{
    int64_t m = n * hw;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        double mean, sq;
        channel_stats(x + ch * hw, n, c * hw, hw, &mean, &sq);
        double var = sq / (double)m;
        float invstd = (float)(1.0 / sqrt(var + eps));
        float scale, shift;
        bn_affine(gamma, beta, ch, (float)mean, invstd, &scale, &shift);
        const float *p = x + ch * hw;
        float *q = y + ch * hw;
        switch (act) {
        case STK_BN_ACT_NONE:
            normalize_planes(STK_BN_ACT_NONE, p, q, n, c * hw, hw, scale, shift);
            break;
        case STK_BN_ACT_RELU:
            normalize_planes(STK_BN_ACT_RELU, p, q, n, c * hw, hw, scale, shift);
            break;
        case STK_BN_ACT_RELU6:
            normalize_planes(STK_BN_ACT_RELU6, p, q, n, c * hw, hw, scale, shift);
            break;
        }
        save_mean[ch] = (float)mean;
        save_invstd[ch] = invstd;
        if (running_mean) {
            double unbiased = m > 1 ? sq / (double)(m - 1) : var;
            running_mean[ch] = (1.f - momentum) * running_mean[ch] + momentum * (float)mean;
            running_var[ch] = (1.f - momentum) * running_var[ch] + momentum * (float)unbiased;
        }
    }
}

void cpu_batch_norm_train(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                          const float *beta, float *y, float *save_mean, float *save_invstd,
                          float *running_mean, float *running_var, float momentum, float eps)
{
    cpu_batch_norm_act_train(n, c, hw, x, gamma, beta, y, save_mean, save_invstd, running_mean,
                             running_var, momentum, eps, STK_BN_ACT_NONE);
}

void cpu_batch_norm_eval(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                         const float *beta, const float *running_mean, const float *running_var,
                         float eps, float *y)
{
#pragma omp parallel for schedule(static) if (n * c * hw > STK_OMP_MIN_WORK)
    for (int64_t i = 0; i < n * c; i++) {
        int64_t ch = i % c;
        float invstd = 1.f / sqrtf(running_var[ch] + eps);
        float scale, shift;
        bn_affine(gamma, beta, ch, running_mean[ch], invstd, &scale, &shift);
        const float *p = x + i * hw;
        float *q = y + i * hw;
        for (int64_t j = 0; j < hw; j++) q[j] = p[j] * scale + shift;
    }
}

/* One channel's backward. With an activation, its gradient mask comes from
 * the normalised value recomputed by the forward's expression (x * scale +
 * shift, the same floats), so neither the activation's output nor a mask is
 * kept, and the activation's own backward pass is gone. */
static inline void channel_backward(stk_bn_act act, const float *x, const float *gy, float *gx,
                                    int64_t n, int64_t stride, int64_t hw, float mean, float invstd,
                                    float scale, float shift, double *sg_out, double *sgx_out)
{
    double sg = 0.0, sgx = 0.0; /* sum gy, sum gy * (x - mean) */
    for (int64_t i = 0; i < n; i++) {
        const float *p = x + i * stride, *g = gy + i * stride;
        float a = 0.f, b = 0.f;
#pragma omp simd reduction(+ : a, b)
        for (int64_t j = 0; j < hw; j++) {
            float ge = stk_bn_act_grad(act, p[j] * scale + shift, g[j]);
            a += ge;
            b += ge * (p[j] - mean);
        }
        sg += a;
        sgx += b;
    }
    sgx *= invstd;
    *sg_out = sg;
    *sgx_out = sgx;
    if (!gx) return;
    /* gx = gamma * invstd * (gy - mean(gy) - xhat * mean(gy * xhat)); gamma * invstd is scale */
    int64_t m = n * hw;
    float k = scale, mg = (float)(sg / (double)m), mgx = (float)(sgx / (double)m);
    for (int64_t i = 0; i < n; i++) {
        const float *p = x + i * stride, *g = gy + i * stride;
        float *q = gx + i * stride;
        for (int64_t j = 0; j < hw; j++) {
            float ge = stk_bn_act_grad(act, p[j] * scale + shift, g[j]);
            q[j] = k * (ge - mg - (p[j] - mean) * invstd * mgx);
        }
    }
}

void cpu_batch_norm_act_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                 const float *gamma, const float *beta, const float *gy,
                                 const float *save_mean, const float *save_invstd, float *gx,
                                 float *ggamma, float *gbeta, stk_bn_act act)
{
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        float scale, shift;
        bn_affine(gamma, beta, ch, save_mean[ch], save_invstd[ch], &scale, &shift);
        const float *p = x + ch * hw, *g = gy + ch * hw;
        float *q = gx ? gx + ch * hw : NULL;
        double sg = 0.0, sgx = 0.0;
        switch (act) {
        case STK_BN_ACT_NONE:
            channel_backward(STK_BN_ACT_NONE, p, g, q, n, c * hw, hw, save_mean[ch],
                             save_invstd[ch], scale, shift, &sg, &sgx);
            break;
        case STK_BN_ACT_RELU:
            channel_backward(STK_BN_ACT_RELU, p, g, q, n, c * hw, hw, save_mean[ch],
                             save_invstd[ch], scale, shift, &sg, &sgx);
            break;
        case STK_BN_ACT_RELU6:
            channel_backward(STK_BN_ACT_RELU6, p, g, q, n, c * hw, hw, save_mean[ch],
                             save_invstd[ch], scale, shift, &sg, &sgx);
            break;
        }
        if (gbeta) gbeta[ch] = (float)sg;
        if (ggamma) ggamma[ch] = (float)sgx;
    }
}

void cpu_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                             const float *gy, const float *save_mean, const float *save_invstd,
                             float *gx, float *ggamma, float *gbeta)
{
    cpu_batch_norm_act_backward(n, c, hw, x, gamma, NULL, gy, save_mean, save_invstd, gx, ggamma,
                                gbeta, STK_BN_ACT_NONE);
}

void cpu_batch_norm_eval_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                  const float *gamma, const float *gy, const float *running_mean,
                                  const float *running_var, float eps, float *gx, float *ggamma,
                                  float *gbeta)
{
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ch++) {
        float invstd = 1.f / sqrtf(running_var[ch] + eps), mean = running_mean[ch];
        float k = (gamma ? gamma[ch] : 1.f) * invstd;
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + (i * c + ch) * hw, *g = gy + (i * c + ch) * hw;
            float *q = gx ? gx + (i * c + ch) * hw : NULL;
            for (int64_t j = 0; j < hw; j++) {
                sg += g[j];
                sgx += g[j] * (p[j] - mean) * invstd;
                if (q) q[j] = g[j] * k;
            }
        }
        if (gbeta) gbeta[ch] = (float)sg;
        if (ggamma) ggamma[ch] = (float)sgx;
    }
}

/* One output row of 2x2 windows at stride 2 without padding (the CNNs'
 * pooling), from input rows r0 = 2 oy and r0 + 1: stk_max_pool_at's result
 * (the first maximum in window order; the first NaN wins), branch-free so
 * that it vectorises. The generic loop spent 16% of a cnn step here. */
static void max_pool_2x2_row(const float *in, int64_t w, int64_t oy, int64_t ow, float *out,
                             int32_t *am)
{
    const float *r0 = in + 2 * oy * w, *r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox++) {
        float v1 = r0[2 * ox + 1], v2 = r1[2 * ox], v3 = r1[2 * ox + 1];
        float best = r0[2 * ox];
        int32_t k = 0;
        bool take = best == best && (v1 > best || v1 != v1);
        best = take ? v1 : best;
        k = take ? 1 : k;
        take = best == best && (v2 > best || v2 != v2);
        best = take ? v2 : best;
        k = take ? 2 : k;
        take = best == best && (v3 > best || v3 != v3);
        best = take ? v3 : best;
        k = take ? 3 : k;
        out[ox] = best;
        am[ox] = (int32_t)((2 * oy + (k >> 1)) * w + 2 * ox + (k & 1));
    }
}

void cpu_max_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y, int32_t *argmax)
{
    bool two_by_two = d->kh == 2 && d->kw == 2 && d->stride_h == 2 && d->stride_w == 2 &&
                      d->pad_h == 0 && d->pad_w == 0 && 2 * d->oh <= d->h && 2 * d->ow <= d->w;
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < d->n * d->c; pl++) {
        const float *in = x + pl * d->h * d->w;
        float *out = y + pl * d->oh * d->ow;
        int32_t *am = argmax + pl * d->oh * d->ow;
        if (two_by_two) {
            for (int64_t oy = 0; oy < d->oh; oy++)
                max_pool_2x2_row(in, d->w, oy, d->ow, out + oy * d->ow, am + oy * d->ow);
            continue;
        }
        for (int64_t oy = 0; oy < d->oh; oy++)
            for (int64_t ox = 0; ox < d->ow; ox++)
                out[oy * d->ow + ox] = stk_max_pool_at(d, in, oy, ox, &am[oy * d->ow + ox]);
    }
}

void cpu_max_pool2d_backward(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                             float *gx)
{
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < d->n * d->c; pl++) {
        float *out = gx + pl * d->h * d->w;
        const float *g = gy + pl * d->oh * d->ow;
        const int32_t *am = argmax + pl * d->oh * d->ow;
        memset(out, 0, (size_t)(d->h * d->w) * sizeof *out);
        for (int64_t i = 0; i < d->oh * d->ow; i++)
            if (am[i] >= 0) out[am[i]] += g[i];
    }
}

void cpu_avg_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y)
{
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < d->n * d->c; pl++) {
        const float *in = x + pl * d->h * d->w;
        float *out = y + pl * d->oh * d->ow;
        for (int64_t oy = 0; oy < d->oh; oy++)
            for (int64_t ox = 0; ox < d->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = stk_avg_window(d, oy, ox, &y0, &y1, &x0, &x1), s = 0.f;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) s += in[iy * d->w + ix];
                out[oy * d->ow + ox] = s * inv;
            }
    }
}

void cpu_avg_pool2d_backward(const stk_pool2d_desc *d, const float *gy, float *gx)
{
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < d->n * d->c; pl++) {
        float *out = gx + pl * d->h * d->w;
        const float *g = gy + pl * d->oh * d->ow;
        memset(out, 0, (size_t)(d->h * d->w) * sizeof *out);
        for (int64_t oy = 0; oy < d->oh; oy++)
            for (int64_t ox = 0; ox < d->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float v = g[oy * d->ow + ox] * stk_avg_window(d, oy, ox, &y0, &y1, &x0, &x1);
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) out[iy * d->w + ix] += v;
            }
    }
}
