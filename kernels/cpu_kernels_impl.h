/* Private to kernels/ (not installed: libstoke.so exports stk_* alone; the
 * tests and benchmarks call these from the static library). The CPU
 * backend's kernels, one file per family (cpu_elementwise.c, cpu_gemm.c,
 * cpu_conv.c, cpu_norm_pool.c, cpu_loss_optim.c); backend_cpu.c puts them
 * in the stk_backend table. Signatures are the table's (kernels/backend.h
 * documents them). */
#pragma once

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table of the functions below (backend_cpu.c). */
const stk_backend *stk_cpu_backend(void);

void cpu_copy_strided(size_t elem_size, int ndim, const int64_t *shape, void *dst,
                      const int64_t *dst_strides, const void *src, const int64_t *src_strides);
void cpu_convert(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n);
void cpu_fill(stk_dtype dt, void *dst, int64_t n, double value);
void cpu_binary(stk_binary_op op, int ndim, const int64_t *shape, float *out, const float *a,
                const int64_t *a_strides, const float *b, const int64_t *b_strides);
void cpu_unary(stk_unary_op op, int64_t n, const float *x, float *y, float alpha);
void cpu_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *y, const float *gy,
                        float *gx, float alpha);
void cpu_axpby(int64_t n, float a, const float *x, float b, float *y);
void cpu_sum_to(int ndim, const int64_t *shape, const float *x, const int64_t *y_strides, float *y,
                int64_t y_numel);

void cpu_gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float *a, int64_t lda, int64_t stride_a, const float *b,
                      int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                      int64_t stride_c);
/* One GEMM on the calling thread only (used inside parallel regions). */
void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc);

stk_status cpu_conv2d_forward(const stk_conv2d_desc *d, const float *x, const float *w, float *y);
/* Depthwise (groups = channels = filters, dilation 1, kernels up to 15) in
 * direct loops (cpu_conv_dw.c); outputs overwritten; STK_ERR_NOMEM when the
 * scratch planes cannot be had. */
bool cpu_conv2d_is_depthwise(const stk_conv2d_desc *d);
stk_status cpu_conv2d_dw_forward(const stk_conv2d_desc *d, const float *x, const float *w,
                                 float *y);
stk_status cpu_conv2d_dw_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                       float *gx);
stk_status cpu_conv2d_dw_backward_weight(const stk_conv2d_desc *d, const float *x, const float *gy,
                                         float *gw);
stk_status cpu_conv2d_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                    float *gx);
stk_status cpu_conv2d_backward_weight(const stk_conv2d_desc *d, const float *x, const float *gy,
                                      float *gw);

/* The same through oneDNN's convolution primitives (cpu_conv_dnnl.c); they
 * fall back to the im2col versions above for shapes oneDNN refuses. */
stk_status cpu_conv2d_forward_dnnl(const stk_conv2d_desc *d, const float *x, const float *w,
                                   float *y);
stk_status cpu_conv2d_backward_data_dnnl(const stk_conv2d_desc *d, const float *w, const float *gy,
                                         float *gx);
stk_status cpu_conv2d_backward_weight_dnnl(const stk_conv2d_desc *d, const float *x,
                                           const float *gy, float *gw);
/* bf16 x bf16 -> f32 batched GEMM, f32 operands rounded to bf16 on the way
 * in (cpu_gemm_bf16.c): the backend's gemm_batched_bf16. */
stk_status cpu_gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const float *a, int64_t lda, int64_t stride_a,
                                 const float *b, int64_t ldb, int64_t stride_b, float *c,
                                 int64_t ldc, int64_t stride_c);
/* The same in bf16 with f32 accumulation (--amp on the CPU): inputs,
 * outputs and input gradients in bf16, the weights' gradient f32 (the
 * backend table's conv2d_*_bf16 entries say more); STK_ERR_UNSUPPORTED
 * where oneDNN has no bf16 primitive for the shape (stk_cpu_bf16_isa says
 * whether this CPU has bf16 instructions at all). */
stk_status cpu_conv2d_forward_bf16(const stk_conv2d_desc *d, const float *x, const float *w,
                                   float *y, void *x_keep);
size_t cpu_conv2d_bf16_kept_input_bytes(const stk_conv2d_desc *d);
stk_status cpu_conv2d_backward_bf16(const stk_conv2d_desc *d, const float *x, const void *x_kept,
                                    const float *w, const float *gy, float *gx, float *gw);

void cpu_batch_norm_train(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                          const float *beta, float *y, float *save_mean, float *save_invstd,
                          float *running_mean, float *running_var, float momentum, float eps);
/* With the activation act applied to the output (and, backward, to the
 * gradient: the mask recomputed from x). beta may be NULL. */
void cpu_batch_norm_act_train(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                              const float *beta, float *y, float *save_mean, float *save_invstd,
                              float *running_mean, float *running_var, float momentum, float eps,
                              stk_bn_act act);
void cpu_batch_norm_act_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                 const float *gamma, const float *beta, const float *gy,
                                 const float *save_mean, const float *save_invstd, float *gx,
                                 float *ggamma, float *gbeta, stk_bn_act act);
void cpu_batch_norm_eval(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                         const float *beta, const float *running_mean, const float *running_var,
                         float eps, float *y);
void cpu_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                             const float *gy, const float *save_mean, const float *save_invstd,
                             float *gx, float *ggamma, float *gbeta);
void cpu_batch_norm_eval_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                  const float *gamma, const float *gy, const float *running_mean,
                                  const float *running_var, float eps, float *gx, float *ggamma,
                                  float *gbeta);
void cpu_max_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y, int32_t *argmax);
void cpu_max_pool2d_backward(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                             float *gx);
void cpu_avg_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y);
void cpu_avg_pool2d_backward(const stk_pool2d_desc *d, const float *gy, float *gx);

void cpu_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                            const float *beta, float eps, float *y, float *mean, float *rstd);
void cpu_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                             const float *mean, const float *rstd, const float *gy, float *gx,
                             float *ggamma, float *gbeta);
void cpu_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y, bool log);
/* oneDNN's layer norm, softmax and GELU/SiLU/sigmoid (cpu_dnnl_norms.c):
 * false when oneDNN cannot run the call (the caller runs its own loop). */
bool cpu_dnnl_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                 const float *beta, float eps, float *y, float *mean, float *rstd);
bool cpu_dnnl_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *mean, const float *rstd, const float *gy, float *gx,
                                  float *ggamma, float *gbeta);
bool cpu_dnnl_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y);
bool cpu_dnnl_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy,
                               float *gx);
bool cpu_dnnl_unary(stk_unary_op op, int64_t n, const float *x, float *y);
bool cpu_dnnl_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *gy,
                             float *gx);
void cpu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                          bool log);
stk_status cpu_cross_entropy_forward(int64_t rows, int64_t cols, const float *logits,
                                     const int32_t *labels, float smoothing, float *logp,
                                     float *loss);
void cpu_cross_entropy_backward(int64_t rows, int64_t cols, const float *logp,
                                const int32_t *labels, float smoothing, const float *gloss,
                                float *gx);
void cpu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                         float *y, uint8_t *mask);
void cpu_dropout_backward(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx);
stk_status cpu_batch_regions(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                             const stk_batch_region *regions, float *y);
void cpu_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                       const float *mean, const float *std, float *y);
void cpu_amp_unscale(int64_t n, float *g, float inv_scale, int32_t *found_inf);
void cpu_sum_squares(int64_t n, const float *x, float *lanes);
void cpu_clamp(int64_t n, float *x, float lo, float hi);
void cpu_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                  float dampening, float wd, bool nesterov, bool first);
void cpu_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                   float beta2, float eps, float wd, bool decoupled, float bc1, float bc2);

/* Parallelise a loop only when it is worth a fork/join (about 32K elements of work). */
#define STK_OMP_MIN_WORK 32768

/* Builds of a loop for each CPU's widest vectors, one chosen when the
 * program loads (GCC's target_clones: an ifunc): the baseline build is
 * SSE2. Not under ThreadSanitizer, whose runtime is not up yet when the
 * loader runs the ifunc resolvers (every TSan program crashed at start). */
#if defined(__SANITIZE_THREAD__)
#define STK_CPU_CLONES
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STK_CPU_CLONES
#endif
#endif
#ifndef STK_CPU_CLONES
#define STK_CPU_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))
#endif

#ifdef __cplusplus
}
#endif
