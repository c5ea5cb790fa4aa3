/* The CUDA backend's table (kernels/backend.h): the engine's kernels queued
 * on the context's compute stream. Element-wise, reduction, loss, pooling
 * and optimizer kernels are Stoke's own (the .cu files of kernels/cuda); GEMMs go to
 * cuBLAS (cuda/blas_cuda.c) and convolutions and batch norm to cuDNN
 * (cuda/dnn_cuda.c). Everything is asynchronous: errors of void kernels are
 * kept for stk_cuda_sync (context.h). */
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda_impl.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/kernels.h"

/* The compute stream; the context exists (stk_backend_get created it). */
static cudaStream_t S(void)
{
    stk_cuda_ctx *cx;
    stk_cuda_context(&cx);
    return cx->compute;
}

/* A launch error (bad configuration, no kernel image for this GPU) shows at
 * once; faults inside kernels show at the next sync. */
static void launched(void) { stk_cuda_note(stk_cuda_check(cudaGetLastError(), "kernel launch")); }

static void cu_copy_strided(size_t elem_size, int ndim, const int64_t *shape, void *dst,
                            const int64_t *dst_strides, const void *src, const int64_t *src_strides)
{
    stk_cuda_copy_strided(elem_size, ndim, shape, dst, dst_strides, src, src_strides, S());
    launched();
}

static void cu_convert(stk_dtype dst_dt, void *dst, stk_dtype src_dt, const void *src, int64_t n)
{
    if (dst_dt == src_dt)
        stk_cuda_note(stk_cuda_check(cudaMemcpyAsync(dst, src, (size_t)n * stk_dtype_size(dst_dt),
                                                     cudaMemcpyDeviceToDevice, S()),
                                     "convert"));
    else
        stk_cuda_convert(dst_dt, dst, src_dt, src, n, S());
    launched();
}

static void cu_fill(stk_dtype dt, void *dst, int64_t n, double value)
{
    if (value == 0.0)
        stk_cuda_note(
            stk_cuda_check(cudaMemsetAsync(dst, 0, (size_t)n * stk_dtype_size(dt), S()), "fill"));
    else
        stk_cuda_fill(dt, dst, n, value, S());
    launched();
}

static void cu_binary(stk_binary_op op, int ndim, const int64_t *shape, float *out, const float *a,
                      const int64_t *a_strides, const float *b, const int64_t *b_strides)
{
    stk_cuda_binary(op, ndim, shape, out, a, a_strides, b, b_strides, S());
    launched();
}

static void cu_unary(stk_unary_op op, int64_t n, const float *x, float *y, float alpha)
{
    stk_cuda_unary(op, n, x, y, alpha, S());
    launched();
}

static void cu_unary_backward(stk_unary_op op, int64_t n, const float *x, const float *y,
                              const float *gy, float *gx, float alpha)
{
    stk_cuda_unary_backward(op, n, x, y, gy, gx, alpha, S());
    launched();
}

static void cu_axpby(int64_t n, float a, const float *x, float b, float *y)
{
    stk_cuda_axpby(n, a, x, b, y, S());
    launched();
}

static void cu_sum_to(int ndim, const int64_t *shape, const float *x, const int64_t *y_strides,
                      float *y, int64_t y_numel)
{
    (void)y_numel;
    size_t n = stk_cuda_sum_to_scratch(ndim, shape, y_strides);
    float *scratch;
    stk_status st = stk_device_alloc(STK_DEVICE_CUDA, n * sizeof(float), (void **)&scratch);
    if (st != STK_OK) {
        stk_cuda_note(st);
        return;
    }
    stk_cuda_sum_to(ndim, shape, x, y_strides, y, scratch, S());
    launched();
    /* freed now, reused by later work on the same stream: stream order keeps it safe */
    stk_device_free(STK_DEVICE_CUDA, scratch, n * sizeof(float));
}

static void cu_max_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y,
                                  int32_t *argmax)
{
    stk_cuda_max_pool2d_forward(d, x, y, argmax, S());
    launched();
}

static void cu_max_pool2d_backward(const stk_pool2d_desc *d, const float *gy, const int32_t *argmax,
                                   float *gx)
{
    stk_cuda_max_pool2d_backward(d, gy, argmax, gx, S());
    launched();
}

static void cu_avg_pool2d_forward(const stk_pool2d_desc *d, const float *x, float *y)
{
    stk_cuda_avg_pool2d_forward(d, x, y, S());
    launched();
}

static void cu_avg_pool2d_backward(const stk_pool2d_desc *d, const float *gy, float *gx)
{
    stk_cuda_avg_pool2d_backward(d, gy, gx, S());
    launched();
}

static void cu_layer_norm_forward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                  const float *beta, float eps, float *y, float *mean, float *rstd)
{
    stk_cuda_layer_norm_forward(rows, cols, x, gamma, beta, eps, y, mean, rstd, S());
    launched();
}

static void cu_layer_norm_backward(int64_t rows, int64_t cols, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, const float *gy, float *gx,
                                   float *ggamma, float *gbeta)
{
    stk_cuda_layer_norm_backward(rows, cols, x, gamma, mean, rstd, gy, gx, ggamma, gbeta, S());
    launched();
}

static void cu_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y, bool log)
{
    stk_cuda_softmax_forward(rows, cols, x, y, log, S());
    launched();
}

static void cu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy,
                                float *gx, bool log)
{
    stk_cuda_softmax_backward(rows, cols, y, gy, gx, log, S());
    launched();
}

/* Labels live on the GPU, so a bad one is found there; the first bad row is
 * copied back (one small synchronous copy per loss, which the training loop
 * pays anyway when it reads the loss) and reported like the CPU does. */
static stk_status cu_cross_entropy_forward(int64_t rows, int64_t cols, const float *logits,
                                           const int32_t *labels, float smoothing, float *logp,
                                           float *loss)
{
    size_t scratch_bytes = (size_t)rows * (sizeof(float) + sizeof(int64_t));
    char *scratch;
    stk_status st = stk_device_alloc(STK_DEVICE_CUDA, scratch_bytes, (void **)&scratch);
    if (st != STK_OK) return st;
    int64_t *bad = (int64_t *)scratch;
    float *row_loss = (float *)(scratch + (size_t)rows * sizeof(int64_t));
    stk_cuda_cross_entropy_forward(rows, cols, logits, labels, smoothing, logp, row_loss, loss, bad,
                                   S());
    launched();
    int64_t first_bad = rows;
    st = stk_cuda_to_host(&first_bad, bad, sizeof first_bad);
    stk_device_free(STK_DEVICE_CUDA, scratch, scratch_bytes);
    if (st != STK_OK) return st;
    if (first_bad < rows) {
        int32_t label = 0;
        if ((st = stk_cuda_to_host(&label, labels + first_bad, sizeof label)) != STK_OK) return st;
        return stk_error(STK_ERR_INVALID_ARG,
                         "cross_entropy: label %d of row %lld is outside [0, %lld)", label,
                         (long long)first_bad, (long long)cols);
    }
    return STK_OK;
}

static void cu_cross_entropy_backward(int64_t rows, int64_t cols, const float *logp,
                                      const int32_t *labels, float smoothing, const float *gloss,
                                      float *gx)
{
    stk_cuda_cross_entropy_backward(rows, cols, logp, labels, smoothing, gloss, gx, S());
    launched();
}

static void cu_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                               float *y, uint8_t *mask)
{
    stk_cuda_dropout_forward(n, p, seed, stream, x, y, mask, S());
    launched();
}

static void cu_dropout_backward(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx)
{
    stk_cuda_dropout_backward(n, p, mask, gy, gx, S());
    launched();
}

static void cu_input_u8_nhwc(int64_t n, int64_t h, int64_t w, int64_t c, const uint8_t *x,
                             const float *mean, const float *std, float *y)
{
    stk_cuda_input_u8_nhwc(n, h, w, c, x, mean, std, y, S());
    launched();
}

/* The regions to the device (a small synchronous copy per batch), then the
 * kernel; the scratch is freed after it (the allocator orders frees after
 * the stream's work). */
static stk_status cu_batch_regions(int64_t n, int64_t c, int64_t h, int64_t w, const float *x,
                                   const stk_batch_region *regions, float *y)
{
    size_t bytes = (size_t)n * sizeof *regions;
    stk_batch_region *dev;
    stk_status st = stk_device_alloc(STK_DEVICE_CUDA, bytes ? bytes : 1, (void **)&dev);
    if (st != STK_OK) return st;
    if ((st = stk_cuda_from_host(dev, regions, bytes)) == STK_OK) {
        stk_cuda_batch_regions(n, c, h, w, x, dev, y, S());
        launched();
    }
    stk_device_free(STK_DEVICE_CUDA, dev, bytes ? bytes : 1);
    return st;
}

static void cu_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                        float dampening, float wd, bool nesterov, bool first)
{
    stk_cuda_sgd_step(n, p, g, buf, lr, momentum, dampening, wd, nesterov, first, S());
    launched();
}

static void cu_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                         float beta1, float beta2, float eps, float wd, bool decoupled, float bc1,
                         float bc2)
{
    stk_cuda_adam_step(n, p, g, m, v, lr, beta1, beta2, eps, wd, decoupled, bc1, bc2, S());
    launched();
}

static void cu_batch_norm_eval_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                        const float *gamma, const float *gy,
                                        const float *running_mean, const float *running_var,
                                        float eps, float *gx, float *ggamma, float *gbeta)
{
    stk_cuda_batch_norm_eval_backward(n, c, hw, x, gamma, gy, running_mean, running_var, eps, gx,
                                      ggamma, gbeta, S());
    launched();
}

static void cu_sum_squares(int64_t n, const float *x, float *lanes)
{
    stk_cuda_sum_squares(n, x, lanes, S());
}

static void cu_clamp(int64_t n, float *x, float lo, float hi) { stk_cuda_clamp(n, x, lo, hi, S()); }

static void cu_amp_unscale(int64_t n, float *g, float inv_scale, int32_t *found_inf)
{
    stk_cuda_amp_unscale(n, g, inv_scale, found_inf, S());
    launched();
}

static const stk_backend cuda_backend = {
    .device = STK_DEVICE_CUDA,
    .to_host = stk_cuda_to_host,
    .from_host = stk_cuda_from_host,
    .sync = stk_cuda_sync,
    .copy_strided = cu_copy_strided,
    .convert = cu_convert,
    .fill = cu_fill,
    .binary = cu_binary,
    .unary = cu_unary,
    .unary_backward = cu_unary_backward,
    .axpby = cu_axpby,
    .sum_to = cu_sum_to,
    .gemm_batched = stk_cublas_gemm_batched,
    .conv2d_forward = stk_cudnn_conv2d_forward,
    .conv2d_backward_data = stk_cudnn_conv2d_backward_data,
    .conv2d_backward_weight = stk_cudnn_conv2d_backward_weight,
    .batch_norm_train = stk_cudnn_batch_norm_train,
    .batch_norm_eval = stk_cudnn_batch_norm_eval,
    .batch_norm_backward = stk_cudnn_batch_norm_backward,
    .batch_norm_eval_backward = cu_batch_norm_eval_backward,
    .max_pool2d_forward = cu_max_pool2d_forward,
    .max_pool2d_backward = cu_max_pool2d_backward,
    .avg_pool2d_forward = cu_avg_pool2d_forward,
    .avg_pool2d_backward = cu_avg_pool2d_backward,
    .layer_norm_forward = cu_layer_norm_forward,
    .layer_norm_backward = cu_layer_norm_backward,
    .softmax_forward = cu_softmax_forward,
    .softmax_backward = cu_softmax_backward,
    .cross_entropy_forward = cu_cross_entropy_forward,
    .cross_entropy_backward = cu_cross_entropy_backward,
    .dropout_forward = cu_dropout_forward,
    .dropout_backward = cu_dropout_backward,
    .input_u8_nhwc = cu_input_u8_nhwc,
    .batch_regions = cu_batch_regions,
    .gemm_batched_f16 = stk_cublas_gemm_batched_f16,
    .conv2d_forward_f16 = stk_cudnn_conv2d_forward_f16,
    .conv2d_backward_data_f16 = stk_cudnn_conv2d_backward_data_f16,
    .conv2d_backward_weight_f16 = stk_cudnn_conv2d_backward_weight_f16,
    .amp_unscale = cu_amp_unscale,
    .sum_squares = cu_sum_squares,
    .clamp = cu_clamp,
    .sgd_step = cu_sgd_step,
    .adam_step = cu_adam_step,
};

stk_status stk_cuda_backend(const stk_backend **out)
{
    *out = NULL;
    stk_cuda_ctx *cx;
    stk_status st = stk_cuda_context(&cx);
    if (st != STK_OK) return st;
    *out = &cuda_backend;
    return STK_OK;
}
