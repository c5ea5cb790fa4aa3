/* Convolutions and batch norm through cuDNN's descriptor API.
 *
 * Convolution plans are cached per shape and precision (f32, or f16 tensors
 * with f32 accumulation for --amp): the tensor,
 * filter and convolution descriptors and, per pass, the algorithm cuDNN's
 * heuristics rank first among those that fit the workspace limit (chosen
 * once, on first use). Workspaces come from the caching allocator and go
 * back to it right after the call is queued: the next user is later on the
 * same stream. Math mode for f32 is cuDNN's default, which lets Ampere and
 * later GPUs use TF32 tensor cores for FP32 convolutions, as PyTorch does by
 * default (torch.backends.cudnn.allow_tf32); for f16 it is tensor-op math,
 * as PyTorch sets it: with the default, cuDNN ran f16 convolutions without
 * tensor cores on an H100, --amp resnet18 at 0.23x f32's images/s.
 *
 * cuDNN 9 marks this descriptor API deprecated in favour of its graph API;
 * it remains supported throughout 9.x and is what the tests' host
 * implementation of cuDNN (tests/cuda_host) provides. */
#include "kernels/cuda/backend_cuda_impl.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/kernels.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLANS       256
#define WORKSPACE_LIMIT ((size_t)1 << 30)

typedef struct conv_key {
    stk_conv2d_desc d;
    bool half; /* f16 tensors with f32 accumulation (--amp) */
} conv_key;

typedef struct conv_plan {
    conv_key key;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    bool have_fwd, have_bwd_data, have_bwd_filter;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_bwd_data, ws_bwd_filter;
} conv_plan;

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_plan *plans[MAX_PLANS];
static int n_plans;

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

static stk_status make_plan(const conv_key *key, conv_plan **out)
{
    const stk_conv2d_desc *d = &key->d;
    cudnnDataType_t dt = key->half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    if (!fits_int(d->n) || !fits_int(d->c) || !fits_int(d->h) || !fits_int(d->w) ||
        !fits_int(d->k) || !fits_int(d->oh) || !fits_int(d->ow))
        return stk_error(STK_ERR_UNSUPPORTED, "conv2d: a dimension is beyond cuDNN's 32-bit API");
    conv_plan *p = calloc(1, sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "conv2d: no memory for a cuDNN plan");
    p->key = *key;
    stk_status st;
    if ((st = stk_cudnn_check(cudnnCreateTensorDescriptor(&p->x), "conv2d")) != STK_OK ||
        (st = stk_cudnn_check(cudnnCreateTensorDescriptor(&p->y), "conv2d")) != STK_OK ||
        (st = stk_cudnn_check(cudnnCreateFilterDescriptor(&p->w), "conv2d")) != STK_OK ||
        (st = stk_cudnn_check(cudnnCreateConvolutionDescriptor(&p->conv), "conv2d")) != STK_OK)
        goto fail;
    if ((st = stk_cudnn_check(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, dt, (int)d->n,
                                                         (int)d->c, (int)d->h, (int)d->w),
                              "conv2d input descriptor")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, dt, (int)d->n,
                                                         (int)d->k, (int)d->oh, (int)d->ow),
                              "conv2d output descriptor")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetFilter4dDescriptor(p->w, dt, CUDNN_TENSOR_NCHW, (int)d->k,
                                                         (int)(d->c / d->groups), (int)d->r,
                                                         (int)d->s),
                              "conv2d filter descriptor")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetConvolution2dDescriptor(
                                  p->conv, d->pad_h, d->pad_w, d->stride_h, d->stride_w, d->dil_h,
                                  d->dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                              "conv2d descriptor")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetConvolutionGroupCount(p->conv, d->groups),
                              "conv2d groups")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetConvolutionMathType(p->conv, key->half ? CUDNN_TENSOR_OP_MATH
                                                                             : CUDNN_DEFAULT_MATH),
                              "conv2d math type")) != STK_OK)
        goto fail;
    *out = p;
    return STK_OK;
fail:
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->y) cudnnDestroyTensorDescriptor(p->y);
    if (p->w) cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) cudnnDestroyConvolutionDescriptor(p->conv);
    free(p);
    return st;
}

/* The cached plan of `d` in f32 or f16 (created on first use). */
static stk_status plan_of(const stk_conv2d_desc *d, bool half, conv_plan **out)
{
    conv_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are compared with memcmp */
    key.d = *d;
    key.half = half;
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < n_plans; i++)
        if (!memcmp(&plans[i]->key, &key, sizeof key)) {
            *out = plans[i];
            pthread_mutex_unlock(&plans_lock);
            return STK_OK;
        }
    stk_status st = make_plan(&key, out);
    if (st == STK_OK) {
        if (n_plans == MAX_PLANS) { /* a model with this many shapes: forget the oldest */
            conv_plan *old = plans[0];
            cudnnDestroyTensorDescriptor(old->x);
            cudnnDestroyTensorDescriptor(old->y);
            cudnnDestroyFilterDescriptor(old->w);
            cudnnDestroyConvolutionDescriptor(old->conv);
            free(old);
            memmove(plans, plans + 1, (MAX_PLANS - 1) * sizeof *plans);
            n_plans--;
        }
        plans[n_plans++] = *out;
    }
    pthread_mutex_unlock(&plans_lock);
    return st;
}

/* The best-ranked algorithm that succeeded and fits the workspace limit. */
#define PICK(results, count, algo_out, ws_out, found)                                              \
    do {                                                                                           \
        for (int i_ = 0; i_ < (count) && !(found); i_++)                                           \
            if ((results)[i_].status == CUDNN_STATUS_SUCCESS &&                                    \
                (results)[i_].memory <= WORKSPACE_LIMIT) {                                         \
                *(algo_out) = (results)[i_].algo;                                                  \
                *(ws_out) = (results)[i_].memory;                                                  \
                (found) = true;                                                                    \
            }                                                                                      \
    } while (0)

static stk_status no_algorithm(const char *pass, const stk_conv2d_desc *d)
{
    return stk_error(STK_ERR_CUDA,
                     "conv2d %s: cuDNN offers no algorithm for input [%lld, %lld, %lld, %lld], "
                     "kernel %lldx%lld within a %zu MiB workspace",
                     pass, (long long)d->n, (long long)d->c, (long long)d->h, (long long)d->w,
                     (long long)d->r, (long long)d->s, WORKSPACE_LIMIT >> 20);
}

/* A workspace from the caching allocator (NULL for 0 bytes). */
static stk_status workspace(size_t bytes, void **out)
{
    *out = NULL;
    return bytes ? stk_device_alloc(STK_DEVICE_CUDA, bytes, out) : STK_OK;
}

static stk_status conv_forward(const stk_conv2d_desc *d, bool half, const void *x, const void *w,
                               void *y)
{
    stk_cuda_ctx *cx;
    conv_plan *p;
    stk_status st;
    if ((st = stk_cuda_context(&cx)) != STK_OK || (st = plan_of(d, half, &p)) != STK_OK) return st;
    if (!p->have_fwd) {
        cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int count = 0;
        if ((st = stk_cudnn_check(cudnnGetConvolutionForwardAlgorithm_v7(
                                      cx->dnn, p->x, p->w, p->conv, p->y,
                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, r),
                                  "conv2d forward algorithm")) != STK_OK)
            return st;
        PICK(r, count, &p->fwd, &p->ws_fwd, p->have_fwd);
        if (!p->have_fwd) return no_algorithm("forward", d);
    }
    void *ws;
    if ((st = workspace(p->ws_fwd, &ws)) != STK_OK) return st;
    const float one = 1.f, zero = 0.f;
    st = stk_cudnn_check(cudnnConvolutionForward(cx->dnn, &one, p->x, x, p->w, w, p->conv, p->fwd,
                                                 ws, p->ws_fwd, &zero, p->y, y),
                         "conv2d forward");
    stk_device_free(STK_DEVICE_CUDA, ws, p->ws_fwd);
    return st;
}

static stk_status conv_backward_data(const stk_conv2d_desc *d, bool half, const void *w,
                                     const void *gy, void *gx)
{
    stk_cuda_ctx *cx;
    conv_plan *p;
    stk_status st;
    if ((st = stk_cuda_context(&cx)) != STK_OK || (st = plan_of(d, half, &p)) != STK_OK) return st;
    if (!p->have_bwd_data) {
        cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int count = 0;
        if ((st = stk_cudnn_check(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                      cx->dnn, p->w, p->y, p->conv, p->x,
                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, r),
                                  "conv2d backward-data algorithm")) != STK_OK)
            return st;
        PICK(r, count, &p->bwd_data, &p->ws_bwd_data, p->have_bwd_data);
        if (!p->have_bwd_data) return no_algorithm("backward data", d);
    }
    void *ws;
    if ((st = workspace(p->ws_bwd_data, &ws)) != STK_OK) return st;
    const float one = 1.f, zero = 0.f;
    st = stk_cudnn_check(cudnnConvolutionBackwardData(cx->dnn, &one, p->w, w, p->y, gy, p->conv,
                                                      p->bwd_data, ws, p->ws_bwd_data, &zero, p->x,
                                                      gx),
                         "conv2d backward data");
    stk_device_free(STK_DEVICE_CUDA, ws, p->ws_bwd_data);
    return st;
}

static stk_status conv_backward_weight(const stk_conv2d_desc *d, bool half, const void *x,
                                       const void *gy, void *gw)
{
    stk_cuda_ctx *cx;
    conv_plan *p;
    stk_status st;
    if ((st = stk_cuda_context(&cx)) != STK_OK || (st = plan_of(d, half, &p)) != STK_OK) return st;
    if (!p->have_bwd_filter) {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        if ((st = stk_cudnn_check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                      cx->dnn, p->x, p->y, p->conv, p->w,
                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, r),
                                  "conv2d backward-filter algorithm")) != STK_OK)
            return st;
        PICK(r, count, &p->bwd_filter, &p->ws_bwd_filter, p->have_bwd_filter);
        if (!p->have_bwd_filter) return no_algorithm("backward filter", d);
    }
    void *ws;
    if ((st = workspace(p->ws_bwd_filter, &ws)) != STK_OK) return st;
    const float one = 1.f, zero = 0.f;
    st = stk_cudnn_check(cudnnConvolutionBackwardFilter(cx->dnn, &one, p->x, x, p->y, gy, p->conv,
                                                        p->bwd_filter, ws, p->ws_bwd_filter, &zero,
                                                        p->w, gw),
                         "conv2d backward filter");
    stk_device_free(STK_DEVICE_CUDA, ws, p->ws_bwd_filter);
    return st;
}

stk_status stk_cudnn_conv2d_forward(const stk_conv2d_desc *d, const float *x, const float *w,
                                    float *y)
{
    return conv_forward(d, false, x, w, y);
}

stk_status stk_cudnn_conv2d_backward_data(const stk_conv2d_desc *d, const float *w, const float *gy,
                                          float *gx)
{
    return conv_backward_data(d, false, w, gy, gx);
}

stk_status stk_cudnn_conv2d_backward_weight(const stk_conv2d_desc *d, const float *x,
                                            const float *gy, float *gw)
{
    return conv_backward_weight(d, false, x, gy, gw);
}

stk_status stk_cudnn_conv2d_forward_f16(const stk_conv2d_desc *d, const uint16_t *x,
                                        const uint16_t *w, uint16_t *y)
{
    return conv_forward(d, true, x, w, y);
}

stk_status stk_cudnn_conv2d_backward_data_f16(const stk_conv2d_desc *d, const uint16_t *w,
                                              const uint16_t *gy, uint16_t *gx)
{
    return conv_backward_data(d, true, w, gy, gx);
}

stk_status stk_cudnn_conv2d_backward_weight_f16(const stk_conv2d_desc *d, const uint16_t *x,
                                                const uint16_t *gy, uint16_t *gw)
{
    return conv_backward_weight(d, true, x, gy, gw);
}

/* ---- batch norm ---------------------------------------------------------- */

/* Descriptors of one batch-norm call: x as [n, c, hw, 1], parameters [1, c, 1, 1],
 * and device scratch standing in for the optional (NULL) arguments. */
typedef struct bn_call {
    stk_cuda_ctx *cx;
    cudnnTensorDescriptor_t x, param;
    /* ones[c], zeros[c] for absent gamma/beta; then sinks cuDNN writes to when the
     * caller asked for no ggamma [c], gbeta [c] or gx [n c hw] */
    float *scratch;
    size_t scratch_bytes;
} bn_call;

static stk_status bn_begin(bn_call *b, int64_t n, int64_t c, int64_t hw, bool need_dx)
{
    memset(b, 0, sizeof *b);
    stk_status st;
    if ((st = stk_cuda_context(&b->cx)) != STK_OK) return st;
    if (!fits_int(n) || !fits_int(c) || !fits_int(hw))
        return stk_error(STK_ERR_UNSUPPORTED, "batch_norm: a dimension is beyond cuDNN's API");
    if ((st = stk_cudnn_check(cudnnCreateTensorDescriptor(&b->x), "batch_norm")) != STK_OK ||
        (st = stk_cudnn_check(cudnnCreateTensorDescriptor(&b->param), "batch_norm")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetTensor4dDescriptor(b->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                         (int)n, (int)c, (int)hw, 1),
                              "batch_norm input descriptor")) != STK_OK ||
        (st = stk_cudnn_check(cudnnSetTensor4dDescriptor(b->param, CUDNN_TENSOR_NCHW,
                                                         CUDNN_DATA_FLOAT, 1, (int)c, 1, 1),
                              "batch_norm parameter descriptor")) != STK_OK)
        return st;
    b->scratch_bytes = (size_t)(4 * c + (need_dx ? n * c * hw : 0)) * sizeof(float);
    if ((st = stk_device_alloc(STK_DEVICE_CUDA, b->scratch_bytes, (void **)&b->scratch)) != STK_OK)
        return st;
    stk_cuda_fill(STK_F32, b->scratch, c, 1.0, b->cx->compute);
    stk_cuda_fill(STK_F32, b->scratch + c, c, 0.0, b->cx->compute);
    return STK_OK;
}

static void bn_end(bn_call *b)
{
    if (b->x) cudnnDestroyTensorDescriptor(b->x);
    if (b->param) cudnnDestroyTensorDescriptor(b->param);
    stk_device_free(STK_DEVICE_CUDA, b->scratch, b->scratch_bytes);
}

void stk_cudnn_batch_norm_train(int64_t n, int64_t c, int64_t hw, const float *x,
                                const float *gamma, const float *beta, float *y, float *save_mean,
                                float *save_invstd, float *running_mean, float *running_var,
                                float momentum, float eps)
{
    bn_call b;
    stk_status st = bn_begin(&b, n, c, hw, false);
    if (st == STK_OK) {
        const float one = 1.f, zero = 0.f;
        bool running = running_mean && running_var;
        /* cuDNN: running = factor * batch + (1 - factor) * running, with the
         * unbiased batch variance, which is PyTorch's momentum rule */
        st = stk_cudnn_check(cudnnBatchNormalizationForwardTraining(
                                 b.cx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b.x, x, b.x, y,
                                 b.param, gamma ? gamma : b.scratch, beta ? beta : b.scratch + c,
                                 (double)momentum, running ? running_mean : NULL,
                                 running ? running_var : NULL, (double)eps, save_mean, save_invstd),
                             "batch_norm forward (training)");
    }
    bn_end(&b);
    stk_cuda_note(st);
}

void stk_cudnn_batch_norm_eval(int64_t n, int64_t c, int64_t hw, const float *x, const float *gamma,
                               const float *beta, const float *running_mean,
                               const float *running_var, float eps, float *y)
{
    bn_call b;
    stk_status st = bn_begin(&b, n, c, hw, false);
    if (st == STK_OK) {
        const float one = 1.f, zero = 0.f;
        st = stk_cudnn_check(cudnnBatchNormalizationForwardInference(
                                 b.cx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b.x, x, b.x, y,
                                 b.param, gamma ? gamma : b.scratch, beta ? beta : b.scratch + c,
                                 running_mean, running_var, (double)eps),
                             "batch_norm forward (eval)");
    }
    bn_end(&b);
    stk_cuda_note(st);
}

void stk_cudnn_batch_norm_backward(int64_t n, int64_t c, int64_t hw, const float *x,
                                   const float *gamma, const float *gy, const float *save_mean,
                                   const float *save_invstd, float *gx, float *ggamma, float *gbeta)
{
    bn_call b;
    stk_status st = bn_begin(&b, n, c, hw, gx == NULL);
    if (st == STK_OK) {
        const float one = 1.f, zero = 0.f;
        float *sink = b.scratch + 2 * c; /* cuDNN writes every gradient: unwanted ones land here */
        /* epsilon is unused when the saved mean and 1/std are passed */
        st = stk_cudnn_check(cudnnBatchNormalizationBackward(
                                 b.cx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, b.x,
                                 x, b.x, gy, b.x, gx ? gx : b.scratch + 4 * c, b.param,
                                 gamma ? gamma : b.scratch, ggamma ? ggamma : sink,
                                 gbeta ? gbeta : sink + c, 1e-5, save_mean, save_invstd),
                             "batch_norm backward");
    }
    bn_end(&b);
    stk_cuda_note(st);
}
