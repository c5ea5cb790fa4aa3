/* The kernel interface: what a device backend computes for the engine.
 *
 * The engine's ops (engine/ops_*.c) check shapes, dtypes and devices, make
 * their outputs, and then call the backend of their tensors' device:
 *
 *     const stk_backend *be;
 *     if (stk_backend_get(stk_tensor_device(x), &be) != STK_OK) return ...;
 *     be->unary(STK_UNARY_RELU, n, x_data, y_data, 0.f);
 *
 * Kernels take raw device pointers to f32 data that is contiguous unless
 * strides are passed, and trust their arguments (the ops validate them);
 * the few that can still fail (an out-of-range label, no memory for a
 * workspace) return stk_status. The CPU backend (backend_cpu.c) is the
 * reference: every other backend is tested against it.
 *
 * Threading: the CPU kernels parallelise with OpenMP, the same thread pool
 * oneDNN uses, so library calls and Stoke's loops never run 2 + 2 threads on
 * 2 cores (see kernels/README.md). A backend is called from one thread.
 */
#pragma once

#include "common/status.h"
#include "kernels/batch_mix_math.h"
#include "device/device_alloc.h"
#include "kernels/dtype.h"
#include "kernels/pool_math.h"
#include "kernels/scalar_math.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 2-D convolution, NCHW input [n, c, h, w], weight [k, c/groups, r, s],
 * output [n, k, oh, ow]. */
typedef struct stk_conv2d_desc {
    int64_t n, c, h, w;
    int64_t k, r, s;
    int64_t oh, ow;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
} stk_conv2d_desc;

typedef struct stk_backend {
    stk_device device;

    /* Host <-> device copies of contiguous bytes; they wait for the device's
     * queued work first and return its first error (asynchronous backends
     * report errors of earlier kernels here). */
    stk_status (*to_host)(void *dst, const void *src, size_t bytes);
    stk_status (*from_host)(void *dst, const void *src, size_t bytes);
    /* Wait for the queued work; its first error. */
    stk_status (*sync)(void);

    /* Memory: element-wise strided copy (dst and src strides in elements). */
    void (*copy_strided)(size_t elem_size, int ndim, const int64_t *shape, void *dst,
                         const int64_t *dst_strides, const void *src, const int64_t *src_strides);
    /* Convert n contiguous elements between dtypes. */
    void (*convert)(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n);
    void (*fill)(stk_dtype dt, void *dst, int64_t n, double value);

    /* Element-wise. out is contiguous with `shape`; a and b are read through
     * strides (0 along broadcast dimensions). */
    void (*binary)(stk_binary_op op, int ndim, const int64_t *shape, float *out, const float *a,
                   const int64_t *a_strides, const float *b, const int64_t *b_strides);
    void (*unary)(stk_unary_op op, int64_t n, const float *x, float *y, float alpha);
    /* gx = f'(x) * gy (y = f(x) is passed for ops whose derivative uses it). */
    void (*unary_backward)(stk_unary_op op, int64_t n, const float *x, const float *y,
                           const float *gy, float *gx, float alpha);
    /* y = a * x + b * y */
    void (*axpby)(int64_t n, float a, const float *x, float b, float *y);
    /* y (zeroed first) = sum of x over the dimensions where y_strides is 0;
     * x is contiguous with `shape`, y is addressed through y_strides. */
    void (*sum_to)(int ndim, const int64_t *shape, const float *x, const int64_t *y_strides,
                   float *y, int64_t y_numel);

    /* Row-major C = alpha op(A) op(B) + beta C for `batch` matrices at the
     * given element strides (0 repeats a matrix: broadcasting). */
    void (*gemm_batched)(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c);

    /* Convolution (no bias: the op adds it). Errors: STK_ERR_NOMEM (workspace). */
    stk_status (*conv2d_forward)(const stk_conv2d_desc *d, const float *x, const float *w,
                                 float *y);
    stk_status (*conv2d_backward_data)(const stk_conv2d_desc *d, const float *w, const float *gy,
                                       float *gx);
    stk_status (*conv2d_backward_weight)(const stk_conv2d_desc *d, const float *x, const float *gy,
                                         float *gw);

    /* Batch norm over NCHW viewed as [n, c, hw]. Training: batch statistics,
     * saves mean and 1/sqrt(var+eps), updates the running statistics with
     * `momentum` (unbiased variance, as PyTorch). Eval: running statistics. */
    void (*batch_norm_train)(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                             const float *beta, float *y, float *save_mean, float *save_invstd,
                             float *running_mean, float *running_var, float momentum, float eps);
    void (*batch_norm_eval)(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                            const float *beta, const float *running_mean, const float *running_var,
                            float eps, float *y);
    /* Training-mode backward; gx, ggamma, gbeta may each be NULL. */
    void (*batch_norm_backward)(int64_t n, int64_t c, int64_t hw, const float *x,
                                const float *gamma, const float *gy, const float *save_mean,
                                const float *save_invstd, float *gx, float *ggamma, float *gbeta);
    /* Eval-mode backward (statistics are constants). */
    void (*batch_norm_eval_backward)(int64_t n, int64_t c, int64_t hw, const float *x,
                                     const float *gamma, const float *gy, const float *running_mean,
                                     const float *running_var, float eps, float *gx, float *ggamma,
                                     float *gbeta);

    /* Training-mode batch norm followed by the activation act, forward and
     * backward (the backward recomputes the activation's mask from x; beta
     * may be NULL). Optional: NULL where the backend has no fused kernel,
     * and stk_batch_norm_act then runs batch norm and the activation apart. */
    void (*batch_norm_act_train)(int64_t n, int64_t c, int64_t hw, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var,
                                 float momentum, float eps, stk_bn_act act);
    void (*batch_norm_act_backward)(int64_t n, int64_t c, int64_t hw, const float *x,
                                    const float *gamma, const float *beta, const float *gy,
                                    const float *save_mean, const float *save_invstd, float *gx,
                                    float *ggamma, float *gbeta, stk_bn_act act);

    /* Pooling. Max pooling records the argmax (index within the input plane). */
    void (*max_pool2d_forward)(const stk_pool2d_desc *d, const float *x, float *y, int32_t *argmax);
    void (*max_pool2d_backward)(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                                float *gx);
    void (*avg_pool2d_forward)(const stk_pool2d_desc *d, const float *x, float *y);
    void (*avg_pool2d_backward)(const stk_pool2d_desc *d, const float *gy, float *gx);

    /* Layer normalisation over the last dimension of [rows, cols]
     * (kernels/norm_math.h): gamma and beta [cols] or NULL; mean and rstd
     * [rows] kept for the backward. Backward: gx (may be NULL), and the sums
     * over rows into ggamma and gbeta (each may be NULL; overwritten). */
    void (*layer_norm_forward)(int64_t rows, int64_t cols, const float *x, const float *gamma,
                               const float *beta, float eps, float *y, float *mean, float *rstd);
    void (*layer_norm_backward)(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                const float *mean, const float *rstd, const float *gy, float *gx,
                                float *ggamma, float *gbeta);
    /* Softmax / log-softmax over the last dimension of [rows, cols]. */
    void (*softmax_forward)(int64_t rows, int64_t cols, const float *x, float *y, bool log);
    void (*softmax_backward)(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                             bool log);
    /* Cross-entropy with label smoothing: logp = log_softmax(logits) is kept
     * for the backward, loss = mean over rows. Errors: STK_ERR_INVALID_ARG
     * (a label outside [0, cols), naming the row). */
    stk_status (*cross_entropy_forward)(int64_t rows, int64_t cols, const float *logits,
                                        const int32_t *labels, float smoothing, float *logp,
                                        float *loss);
    /* gx = (*gloss / rows) * (softmax - target distribution); gloss is the
     * loss's gradient, a device scalar. */
    void (*cross_entropy_backward)(int64_t rows, int64_t cols, const float *logp,
                                   const int32_t *labels, float smoothing, const float *gloss,
                                   float *gx);

    /* Dropout: mask[i] = keep (from Philox(seed, stream, i)), y = x * mask / (1-p). */
    void (*dropout_forward)(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                            float *y, uint8_t *mask);
    void (*dropout_backward)(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx);

    /* u8 NHWC pixels -> f32 NCHW, (x/255 - mean[c]) / std[c]. */
    void (*input_u8_nhwc)(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                          const float *mean, const float *std, float *y);

    /* The batch transforms (kernels/batch_mix_math.h): y = x with each
     * sample's rectangle replaced, from `regions` (n entries, host memory;
     * x and y distinct). */
    stk_status (*batch_regions)(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                                const stk_batch_region *regions, float *y);

    /* f16 mixed precision (--amp on the GPU): NULL on the CPU.
     * The f16 GEMM reads A and B as IEEE half (uint16_t), writes f32 C and
     * accumulates in f32; the f16 convolutions read and write half tensors
     * with f32 accumulation (cuDNN's "pseudo-half"). */
    void (*gemm_batched_f16)(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const uint16_t *a, int64_t lda,
                             int64_t stride_a, const uint16_t *b, int64_t ldb, int64_t stride_b,
                             float beta, float *c, int64_t ldc, int64_t stride_c);
    stk_status (*conv2d_forward_f16)(const stk_conv2d_desc *d, const uint16_t *x, const uint16_t *w,
                                     uint16_t *y);
    stk_status (*conv2d_backward_data_f16)(const stk_conv2d_desc *d, const uint16_t *w,
                                           const uint16_t *gy, uint16_t *gx);
    stk_status (*conv2d_backward_weight_f16)(const stk_conv2d_desc *d, const uint16_t *x,
                                             const uint16_t *gy, uint16_t *gw);
    /* bf16 autocast (--amp on the CPU): the GEMM and convolution passes
     * above from bf16 roundings of their f32 inputs, with f32 accumulation;
     * the GEMM's result and the weights' gradient exact in f32, the
     * convolutions' outputs and input gradients rounded to bf16 (stored as
     * f32); STK_ERR_UNSUPPORTED where the CPU cannot. NULL on backends
     * without them. */
    stk_status (*gemm_batched_bf16)(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                    int64_t k, const float *a, int64_t lda, int64_t stride_a,
                                    const float *b, int64_t ldb, int64_t stride_b, float *c,
                                    int64_t ldc, int64_t stride_c);
    /* x_keep (or NULL): a buffer of conv2d_bf16_kept_input_bytes(d) bytes
     * (0: none to keep) that receives the input in bf16, in the layout the
     * backward weights pass reads, for the backward's x_kept */
    stk_status (*conv2d_forward_bf16)(const stk_conv2d_desc *d, const float *x, const float *w,
                                      float *y, void *x_keep);
    size_t (*conv2d_bf16_kept_input_bytes)(const stk_conv2d_desc *d);
    /* both backward passes at once (gx or gw NULL: that pass skipped):
     * they share the conversion of gy; x_kept (or NULL) spares converting x */
    stk_status (*conv2d_backward_bf16)(const stk_conv2d_desc *d, const float *x, const void *x_kept,
                                       const float *w, const float *gy, float *gx, float *gw);
    /* Loss scaling: g *= inv_scale over n elements; *found_inf (an int32 in
     * device memory) becomes 1 when any result is not finite. */
    void (*amp_unscale)(int64_t n, float *g, float inv_scale, int32_t *found_inf);

    /* Gradient clipping (scalar_math.h): lanes[i % STK_NORM_LANES] += x[i]^2
     * in order of i (lanes: STK_NORM_LANES floats in device memory); x
     * clamped to [lo, hi] in place. */
    void (*sum_squares)(int64_t n, const float *x, float *lanes);
    void (*clamp)(int64_t n, float *x, float lo, float hi);

    /* Optimizer updates over n elements (scalar_math.h has the formulas). */
    void (*sgd_step)(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                     float dampening, float wd, bool nesterov, bool first);
    void (*adam_step)(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                      float beta1, float beta2, float eps, float wd, bool decoupled, float bc1,
                      float bc2);
} stk_backend;

/* The backend of `dev`. Errors: STK_ERR_UNSUPPORTED (not built in). */
stk_status stk_backend_get(stk_device dev, const stk_backend **out);

/* The CPU backend's thread count (OpenMP, shared with oneDNN); default = cores. */
void stk_cpu_set_threads(int n);
int stk_cpu_threads(void);
/* One line about the CPU backend: cores, oneDNN version and ISA, bf16, threads. */
void stk_cpu_describe(char *buf, size_t n);
/* The ISA oneDNN runs bf16 with, using bf16 instructions: "avx512_core_bf16"
 * (AVX512_BF16) or "avx512_core_amx" (AMX); NULL where the CPU, or the
 * DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA limit, has none (--amp is refused
 * there rather than emulated). */
const char *stk_cpu_bf16_isa(void);
/* Why --amp cannot run on this CPU (the rest of a sentence after "--amp on
 * the CPU "), or NULL when stk_cpu_bf16_isa has an answer. */
const char *stk_cpu_bf16_missing(void);

#ifdef __cplusplus
}
#endif
