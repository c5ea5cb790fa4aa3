/* Plain per-element math, written once and shared by the CPU loops and the
 * CUDA kernels (STK_HD marks the functions as host+device under nvcc), so
 * the CPU tests check the math the GPU runs. */
#pragma once

#include "common/host_device.h"
#include "common/philox.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_unary_op {
    STK_UNARY_NEG,
    STK_UNARY_RELU,
    STK_UNARY_RELU6, /* min(max(x, 0), 6) (NaN stays NaN, as torch's hardtanh) */
    STK_UNARY_GELU,  /* the erf form, torch.nn.GELU()'s default (erf: stk_erff) */
    STK_UNARY_SIGMOID,
    STK_UNARY_TANH,
    STK_UNARY_ADD_SCALAR,  /* x + alpha */
    STK_UNARY_MUL_SCALAR,  /* x * alpha */
    STK_UNARY_SILU,        /* x * sigmoid(x) (torch.nn.SiLU, "swish") */
    STK_UNARY_HARDSIGMOID, /* relu6(x + 3) / 6 (torch.nn.Hardsigmoid) */
    STK_UNARY_HARDSWISH,   /* x * relu6(x + 3) / 6 (torch.nn.Hardswish) */
} stk_unary_op;

typedef enum stk_binary_op {
    STK_BINARY_ADD,
    STK_BINARY_SUB,
    STK_BINARY_MUL,
    STK_BINARY_DIV,
} stk_binary_op;

/* e^x without a libm call, so that the loops around it vectorise (glibc's
 * expf has a vector form only under -ffast-math): Cephes' expf (x = n ln 2
 * + r, |r| <= ln 2 / 2, a degree-6 polynomial for e^r, 2^n put in the
 * exponent bits), within 2 ulp of expf over [-87.3, 88.7]; 0 below, inf
 * above, NaN stays NaN. */
static inline STK_HD float stk_expf(float x)
{
    float c = x < -87.3365f ? -87.3365f : x > 88.7228f ? 88.7228f : x;
    c = c == c ? c : 0.f; /* NaN: any finite value; put back at the end */
    float t = c * 1.44269504088896341f;
    /* rounded to the nearest integer by adding and taking off 1.5 * 2^23
     * (branch-free: a select here kept GCC's AVX2 loops scalar) */
    float fn = (t + 12582912.f) - 12582912.f;
    int n = (int)fn;
    float r = c - fn * 0.693359375f + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.f;
    /* 2^n as 2^(n/2) 2^(n - n/2): n runs from -126 to 128, beyond one float's exponent */
    int h = n / 2;
    union {
        int32_t i;
        float f;
    } s1, s2;
    s1.i = (h + 127) * (1 << 23);
    s2.i = (n - h + 127) * (1 << 23);
    float y = e * s1.f * s2.f;
    y = x > 88.7228f ? INFINITY : x < -87.3365f ? 0.f : y; /* (subnormals flushed) */
    return x == x ? y : x;
}

/* erf(x) as Abramowitz and Stegun 7.1.26 (|error| <= 1.5e-7; 6e-7 in
 * float arithmetic, test_ops), the form
 * PyTorch's vectorised CPU kernels use for GELU; vectorisable (stk_expf). */
static inline STK_HD float stk_erff(float x)
{
    float a = x < 0.f ? -x : x;
    float t = 1.f / (1.f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    float y = 1.f - p * t * stk_expf(-a * a);
    return x < 0.f ? -y : y;
}

static inline STK_HD float stk_unary_f(stk_unary_op op, float x, float alpha)
{
    switch (op) {
    case STK_UNARY_NEG: return -x;
    case STK_UNARY_RELU: return x > 0.f ? x : 0.f;
    case STK_UNARY_RELU6: return x < 0.f ? 0.f : x > 6.f ? 6.f : x;
    case STK_UNARY_GELU: return 0.5f * x * (1.f + stk_erff(x * 0.70710678118654752f));
    case STK_UNARY_SIGMOID: return 1.f / (1.f + stk_expf(-x));
    case STK_UNARY_TANH: return tanhf(x);
    case STK_UNARY_ADD_SCALAR: return x + alpha;
    case STK_UNARY_MUL_SCALAR: return x * alpha;
    case STK_UNARY_SILU: return x / (1.f + stk_expf(-x));
    case STK_UNARY_HARDSIGMOID: return x <= -3.f ? 0.f : x >= 3.f ? 1.f : x / 6.f + 0.5f;
    case STK_UNARY_HARDSWISH: return x <= -3.f ? 0.f : x >= 3.f ? x : x * (x + 3.f) / 6.f;
    }
    return 0.f;
}

/* d(out)/d(in) * gy, given the input x and the output y of the forward. */
static inline STK_HD float stk_unary_grad(stk_unary_op op, float x, float y, float gy, float alpha)
{
    switch (op) {
    case STK_UNARY_NEG: return -gy;
    case STK_UNARY_RELU:
        return y > 0.f ? gy : 0.f; /* the output: y > 0 exactly when x > 0 */
    /* torch's hardtanh_backward: the gradient where min < x < max (so 0 at 0
     * and at 6); from the output, which is inside (0, 6) exactly when x is */
    case STK_UNARY_RELU6: return y > 0.f && y < 6.f ? gy : 0.f;
    case STK_UNARY_GELU: {
        float cdf = 0.5f * (1.f + stk_erff(x * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * stk_expf(-0.5f * x * x);
        return gy * (cdf + x * pdf);
    }
    case STK_UNARY_SIGMOID: return gy * y * (1.f - y);
    case STK_UNARY_TANH: return gy * (1.f - y * y);
    case STK_UNARY_ADD_SCALAR: return gy;
    case STK_UNARY_MUL_SCALAR: return gy * alpha;
    case STK_UNARY_SILU: {
        float sg = 1.f / (1.f + stk_expf(-x));
        return gy * sg * (1.f + x * (1.f - sg));
    }
    /* torch's hardsigmoid_backward: 1/6 strictly inside (-3, 3), 0 at and
     * beyond the kinks; hardswish_backward: 0 below -3, x/3 + 1/2 on
     * [-3, 3] (both ends included), 1 above */
    case STK_UNARY_HARDSIGMOID: return x > -3.f && x < 3.f ? gy / 6.f : 0.f;
    case STK_UNARY_HARDSWISH: return x < -3.f ? 0.f : x <= 3.f ? gy * (x / 3.f + 0.5f) : gy;
    }
    return 0.f;
}

static inline STK_HD float stk_binary_f(stk_binary_op op, float a, float b)
{
    switch (op) {
    case STK_BINARY_ADD: return a + b;
    case STK_BINARY_SUB: return a - b;
    case STK_BINARY_MUL: return a * b;
    case STK_BINARY_DIV: return a / b;
    }
    return 0.f;
}

/* The activation fused into batch norm (stk_batch_norm_act): nn.c runs a
 * BatchNorm2d followed by ReLU or ReLU6 as one op, which saves the
 * activation's own passes over memory. */
typedef enum stk_bn_act {
    STK_BN_ACT_NONE,
    STK_BN_ACT_RELU,
    STK_BN_ACT_RELU6,
} stk_bn_act;

/* The activation of the normalised value t: the unfused ops' math. */
static inline STK_HD float stk_bn_act_f(stk_bn_act act, float t)
{
    switch (act) {
    case STK_BN_ACT_NONE: return t;
    case STK_BN_ACT_RELU: return stk_unary_f(STK_UNARY_RELU, t, 0.f);
    case STK_BN_ACT_RELU6: return stk_unary_f(STK_UNARY_RELU6, t, 0.f);
    }
    return t;
}

/* The gradient that reaches batch norm through the activation, from the
 * normalised value t recomputed by the backward: the value the unfused
 * activation's backward gives from its output. */
static inline STK_HD float stk_bn_act_grad(stk_bn_act act, float t, float gy)
{
    switch (act) {
    case STK_BN_ACT_NONE: return gy;
    case STK_BN_ACT_RELU:
        return stk_unary_grad(STK_UNARY_RELU, t, stk_unary_f(STK_UNARY_RELU, t, 0.f), gy, 0.f);
    case STK_BN_ACT_RELU6:
        return stk_unary_grad(STK_UNARY_RELU6, t, stk_unary_f(STK_UNARY_RELU6, t, 0.f), gy, 0.f);
    }
    return gy;
}

/* SGD with momentum, dampening, Nesterov and (L2) weight decay, as
 * torch.optim.SGD: one parameter element. `first` marks the first step
 * (the momentum buffer starts as the gradient). */
static inline STK_HD void stk_sgd_update(float *p, float g, float *buf, float lr, float momentum,
                                         float dampening, float wd, int nesterov, int first)
{
    if (wd != 0.f) g += wd * *p;
    if (momentum != 0.f) {
        float b = first ? g : momentum * *buf + (1.f - dampening) * g;
        *buf = b;
        g = nesterov ? g + momentum * b : b;
    }
    *p -= lr * g;
}

/* Adam / AdamW (decoupled = 1), as torch.optim.Adam(W): one element.
 * bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. */
static inline STK_HD void stk_adam_update(float *p, float g, float *m, float *v, float lr,
                                          float beta1, float beta2, float eps, float wd,
                                          int decoupled, float bc1, float bc2)
{
    if (wd != 0.f) {
        if (decoupled)
            *p *= 1.f - lr * wd;
        else
            g += wd * *p;
    }
    *m = beta1 * *m + (1.f - beta1) * g;
    *v = beta2 * *v + (1.f - beta2) * g * g;
    float denom = sqrtf(*v) / sqrtf(bc2) + eps;
    *p -= lr / bc1 * *m / denom;
}

/* Dropout of elements 4b .. 4b+3 (of n): one Philox block per 4 elements
 * with counter (b, stream) and key seed; an element is kept when its 32-bit
 * draw is >= cut = p * 2^32 and then scaled by 1/(1-p). The mask depends on
 * neither threads nor device. */
static inline STK_HD void stk_dropout_block(uint64_t seed, uint64_t stream, int64_t b, int64_t n,
                                            uint64_t cut, float scale, const float *x, float *y,
                                            uint8_t *mask)
{
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)((uint64_t)b >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t r[4];
    stk_philox_block(ctr, key, r);
    for (int k = 0; k < 4 && b * 4 + k < n; k++) {
        int64_t i = b * 4 + k;
        mask[i] = (uint64_t)r[k] >= cut;
        y[i] = mask[i] ? x[i] * scale : 0.f;
    }
}

/* Loss scaling (--amp): one gradient element unscaled; returns 1 when the
 * result is not finite (the step is then skipped and the scale lowered). */
static inline STK_HD int stk_amp_unscale(float *g, float inv_scale)
{
    *g *= inv_scale;
    return !isfinite(*g);
}

/* Gradient clipping. A global norm's sum of squares in STK_NORM_LANES
 * lanes: element i adds its square to lane i % STK_NORM_LANES, lanes in
 * order of i, so the sum depends neither on threads nor on the device (the
 * CPU walks i in order; a GPU thread per lane walks its lane's elements in
 * order). Then the lanes are summed. */
#define STK_NORM_LANES 16384

static inline STK_HD float stk_clamp(float x, float lo, float hi)
{
    return x < lo ? lo : x > hi ? hi : x; /* NaN stays NaN, as torch.clamp */
}

#ifdef __cplusplus
}
#endif
