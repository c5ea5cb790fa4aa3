/* Launchers of the CUDA element-wise, input and optimizer kernels
 * (elementwise.cu). Pointers are device memory (host memory in the tests'
 * host emulation); `s` is the stream the kernel is queued on. The input op
 * takes per-channel scale = 1/(255 std) and shift = -mean/std, in device
 * memory. Signatures mirror the CPU backend's (kernels/backend.h). */
#pragma once

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
void stk_cuda_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                            const float *scale, const float *shift, float *y, stk_stream_t s);
void stk_cuda_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first, stk_stream_t s);
void stk_cuda_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                        float beta1, float beta2, float eps, float wd, bool decoupled, float bc1,
                        float bc2, stk_stream_t s);

#ifdef __cplusplus
}
#endif
