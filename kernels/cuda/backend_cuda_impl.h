/* The CUDA backend's parts, private to kernels/: the table (backend_cuda.c),
 * cuBLAS GEMMs (blas_cuda.c), cuDNN convolutions and batch norm
 * (dnn_cuda.c). All queue work on the compute stream. */
#pragma once

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table; creates the CUDA context. Errors: STK_ERR_CUDA (why no GPU). */
stk_status stk_cuda_backend(const stk_backend **out);

void stk_cublas_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const float *a, int64_t lda, int64_t stride_a,
                             const float *b, int64_t ldb, int64_t stride_b, float beta, float *c,
                             int64_t ldc, int64_t stride_c);

void stk_cublas_gemm_batched_f16(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, float alpha, const uint16_t *a, int64_t lda,
                                 int64_t stride_a, const uint16_t *b, int64_t ldb, int64_t stride_b,
                                 float beta, float *c, int64_t ldc, int64_t stride_c);

stk_status stk_cudnn_conv2d_forward(const stk_conv2d_desc *d, const float *x, const float *w,
                                    float *y);
stk_status stk_cudnn_conv2d_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                          float *gx);
stk_status stk_cudnn_conv2d_backward_weight(const stk_conv2d_desc *d, const float *x,
                                            const float *gy, float *gw);
stk_status stk_cudnn_conv2d_forward_f16(const stk_conv2d_desc *d, const uint16_t *x,
                                        const uint16_t *w, uint16_t *y);
stk_status stk_cudnn_conv2d_backward_data_f16(const stk_conv2d_desc *d, const uint16_t *w,
                                              const uint16_t *gy, uint16_t *gx);
stk_status stk_cudnn_conv2d_backward_weight_f16(const stk_conv2d_desc *d, const uint16_t *x,
                                                const uint16_t *gy, uint16_t *gw);
void stk_cudnn_batch_norm_train(int64_t n, int64_t c, int64_t hw, const float *x,
                                const float *gamma, const float *beta, float *y, float *save_mean,
                                float *save_invstd, float *running_mean, float *running_var,
                                float momentum, float eps);
void stk_cudnn_batch_norm_eval(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                               const float *beta, const float *running_mean,
                               const float *running_var, float eps, float *y);
void stk_cudnn_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                   const float *gamma, const float *gy, const float *save_mean,
                                   const float *save_invstd, float *gx, float *ggamma,
                                   float *gbeta);

#ifdef __cplusplus
}
#endif
