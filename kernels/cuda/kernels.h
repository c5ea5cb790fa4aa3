/* Launchers of the CUDA backend's own kernels: elementwise.cu (element-wise,
 * input and optimizer kernels), memory.cu (strided copies, conversions,
 * fills, broadcasting binary ops), reduce.cu (sum_to), loss.cu (softmax,
 * cross-entropy, dropout) and pool.cu (pooling, eval-mode batch-norm
 * backward). Pointers are device memory (host memory in the tests' host
 * emulation); `s` is the stream the kernel is queued on; every launcher is
 * asynchronous. The input op takes per-channel scale = 1/(255 std) and
 * shift = -mean/std, in device memory. Signatures mirror the CPU backend's
 * (kernels/backend.h). */
#pragma once

#include "kernels/batch_mix_math.h"
#include "kernels/dtype.h"
#include "kernels/pool_math.h"
#include "kernels/scalar_math.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#include <cuda_runtime.h>
typedef cudaStream_t stk_stream_t;
#else
typedef void *stk_stream_t; /* cudaStream_t is a pointer too */
#endif

#ifdef __cplusplus
extern "C" {
#endif

void stk_cuda_unary(stk_unary_op op, int64_t n, const float *x, float *y, float alpha,
                    stk_stream_t s);
void stk_cuda_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *y,
                             const float *gy, float *gx, float alpha, stk_stream_t s);
/* out = a (op) b, same shape. */
void stk_cuda_binary_same(stk_binary_op op, int64_t n, const float *a, const float *b, float *out,
                          stk_stream_t s);
/* out[r][c] = a[r][c] (op) b[c]. */
void stk_cuda_binary_rowvec(stk_binary_op op, int64_t rows, int64_t cols, const float *a,
                            const float *b, float *out, stk_stream_t s);
void stk_cuda_axpby(int64_t n, float a, const float *x, float b, float *y, stk_stream_t s);
/* regions: device memory (n entries). */
void stk_cuda_batch_regions(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                            const stk_batch_region *regions, float *y, stk_stream_t s);
void stk_cuda_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                            const float *mean, const float *std, float *y, stk_stream_t s);
void stk_cuda_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first, stk_stream_t s);
void stk_cuda_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                        float beta1, float beta2, float eps, float wd, bool decoupled, float bc1,
                        float bc2, stk_stream_t s);

void stk_cuda_amp_unscale(int64_t n, float *g, float inv_scale, int32_t *found_inf, stk_stream_t s);
void stk_cuda_sum_squares(int64_t n, const float *x, float *lanes, stk_stream_t s);
void stk_cuda_clamp(int64_t n, float *x, float lo, float hi, stk_stream_t s);

/* memory.cu. Shapes and strides have at most STK_CUDA_MAX_DIMS dimensions. */
#define STK_CUDA_MAX_DIMS 8
void stk_cuda_copy_strided(size_t elem_size, int ndim, const int64_t *shape, void *dst,
                           const int64_t *dst_strides, const void *src, const int64_t *src_strides,
                           stk_stream_t s);
void stk_cuda_convert(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n,
                      stk_stream_t s);
void stk_cuda_fill(stk_dtype dt, void *dst, int64_t n, double value, stk_stream_t s);
void stk_cuda_binary(stk_binary_op op, int ndim, const int64_t *shape, float *out, const float *a,
                     const int64_t *a_strides, const float *b, const int64_t *b_strides,
                     stk_stream_t s);

/* reduce.cu: y (overwritten) = sum of x over the dimensions where y_strides
 * is 0, deterministically (fixed chunks, fixed order). `scratch` holds
 * stk_cuda_sum_to_scratch(...) floats. */
size_t stk_cuda_sum_to_scratch(int ndim, const int64_t *shape, const int64_t *y_strides);
void stk_cuda_sum_to(int ndim, const int64_t *shape, const float *x, const int64_t *y_strides,
                     float *y, float *scratch, stk_stream_t s);

/* loss.cu. Cross-entropy forward writes the loss and, in *bad_row, the
 * first row whose label is outside [0, cols) (or rows when all are valid);
 * `row_loss` is scratch for `rows` floats. */
void stk_cuda_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y, bool log,
                              stk_stream_t s);
void stk_cuda_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy,
                               float *gx, bool log, stk_stream_t s);
void stk_cuda_cross_entropy_forward(int64_t rows, int64_t cols, const float *logits,
                                    const int32_t *labels, float smoothing, float *logp,
                                    float *row_loss, float *loss, int64_t *bad_row, stk_stream_t s);
void stk_cuda_cross_entropy_backward(int64_t rows, int64_t cols, const float *logp,
                                     const int32_t *labels, float smoothing, const float *gloss,
                                     float *gx, stk_stream_t s);
void stk_cuda_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                              float *y, uint8_t *mask, stk_stream_t s);
void stk_cuda_dropout_backward(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx,
                               stk_stream_t s);

/* norm.cu: layer normalisation (kernels/norm_math.h). */
void stk_cuda_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                 const float *beta, float eps, float *y, float *mean, float *rstd,
                                 stk_stream_t s);
void stk_cuda_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *mean, const float *rstd, const float *gy, float *gx,
                                  float *ggamma, float *gbeta, stk_stream_t s);

/* pool.cu. The backward passes gather (each input element sums the outputs
 * whose window covers it): no atomics, deterministic. */
void stk_cuda_max_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y,
                                 int32_t *argmax, stk_stream_t s);
void stk_cuda_max_pool2d_backward(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                                  float *gx, stk_stream_t s);
void stk_cuda_avg_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y,
                                 stk_stream_t s);
void stk_cuda_avg_pool2d_backward(const stk_pool2d_desc *d, const float *gy, float *gx,
                                  stk_stream_t s);
void stk_cuda_batch_norm_eval_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                       const float *gamma, const float *gy,
                                       const float *running_mean, const float *running_var,
                                       float eps, float *gx, float *ggamma, float *gbeta,
                                       stk_stream_t s);

#ifdef __cplusplus
}
#endif
