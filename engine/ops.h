/* Differentiable ops. Each takes f32 tensors (unless said), checks shapes,
 * dtypes and devices (errors name the op and the shapes), computes on the
 * backend of its inputs' device and records a node when an input requires
 * grad. Results follow tensor.h's ownership rule (the step scope owns them
 * when one is active).
 *
 *     stk_tensor *h, *a, *logits, *loss;
 *     STK_TRY(stk_linear(x, w1, b1, &h));          // x [N, 784], w1 [256, 784], b1 [256]
 *     STK_TRY(stk_relu(h, &a));
 *     STK_TRY(stk_linear(a, w2, b2, &logits));
 *     STK_TRY(stk_cross_entropy(logits, labels, 0.1f, &loss));   // labels: i32 [N]
 *     STK_TRY(stk_backward(loss, NULL, false));
 */
#pragma once

#include "engine/tensor.h"
#include "kernels/batch_mix_math.h"
#include "kernels/scalar_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element-wise with broadcasting (NumPy/PyTorch rules). */
stk_status stk_add(stk_tensor *a, stk_tensor *b, stk_tensor **out);
stk_status stk_sub(stk_tensor *a, stk_tensor *b, stk_tensor **out);
stk_status stk_mul(stk_tensor *a, stk_tensor *b, stk_tensor **out);
stk_status stk_div(stk_tensor *a, stk_tensor *b, stk_tensor **out);
stk_status stk_neg(stk_tensor *x, stk_tensor **out);
stk_status stk_add_scalar(stk_tensor *x, float s, stk_tensor **out);
stk_status stk_mul_scalar(stk_tensor *x, float s, stk_tensor **out);

/* Activations. */
stk_status stk_relu(stk_tensor *x, stk_tensor **out);
stk_status stk_relu6(stk_tensor *x, stk_tensor **out); /* torch.nn.ReLU6: min(max(x, 0), 6) */
stk_status stk_gelu(stk_tensor *x, stk_tensor **out);  /* exact (erf) form */
stk_status stk_sigmoid(stk_tensor *x, stk_tensor **out);
stk_status stk_tanh(stk_tensor *x, stk_tensor **out);
stk_status stk_silu(stk_tensor *x, stk_tensor **out);        /* x * sigmoid(x) */
stk_status stk_hardsigmoid(stk_tensor *x, stk_tensor **out); /* relu6(x + 3) / 6 */
stk_status stk_hardswish(stk_tensor *x, stk_tensor **out);   /* x * relu6(x + 3) / 6 */
/* The activations by kind (the modules' stk_module_activation,
 * squeeze-excitation's two, a residual's after the sum). */
typedef enum stk_activation {
    STK_ACT_NONE, /* the identity (a copy) */
    STK_ACT_RELU,
    STK_ACT_RELU6,
    STK_ACT_SILU,
    STK_ACT_GELU,
    STK_ACT_SIGMOID,
    STK_ACT_HARDSIGMOID,
    STK_ACT_HARDSWISH,
    STK_ACT_TANH,
} stk_activation;
/* x through `act`. Errors: INVALID_ARG (an unknown kind), as the op's. */
stk_status stk_activate(stk_tensor *x, stk_activation act, stk_tensor **out);
/* Dropout with probability p when `training` (identity otherwise). The mask
 * is drawn from Philox(seed, stream): the same arguments, the same mask. */
stk_status stk_dropout(stk_tensor *x, float p, bool training, uint64_t seed, uint64_t stream,
                       stk_tensor **out);

/* Reductions over `ndims` dims (keepdim keeps them as size 1); ndims = 0 means all. */
stk_status stk_sum(stk_tensor *x, int ndims, const int *dims, bool keepdim, stk_tensor **out);
stk_status stk_mean(stk_tensor *x, int ndims, const int *dims, bool keepdim, stk_tensor **out);

/* torch.matmul: 1-D/2-D/batched with broadcast batch dims. */
stk_status stk_matmul(stk_tensor *a, stk_tensor *b, stk_tensor **out);
/* y = x w^T + b; x [..., in], w [out, in], b [out] or NULL. */
stk_status stk_linear(stk_tensor *x, stk_tensor *w, stk_tensor *b, stk_tensor **out);

/* Convolution: x [N, C, H, W], w [K, C/groups, R, S], b [K] or NULL. */
typedef struct stk_conv2d_params {
    int stride[2], padding[2], dilation[2], groups;
} stk_conv2d_params;
/* stride 1, no padding, dilation 1, one group */
#define STK_CONV2D_DEFAULT ((stk_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 1})
stk_status stk_conv2d(stk_tensor *x, stk_tensor *w, stk_tensor *b, const stk_conv2d_params *p,
                      stk_tensor **out);

/* Batch norm over NCHW (or [N, C]). gamma/beta may be NULL (no affine).
 * Training: batch statistics, running_mean/var (may be NULL) updated with
 * `momentum` (PyTorch's convention: new = (1-m) old + m batch). Eval: the
 * running statistics. */
stk_status stk_batch_norm(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                          stk_tensor *running_mean, stk_tensor *running_var, bool training,
                          float momentum, float eps, stk_tensor **out);

/* stk_batch_norm followed by act (ReLU or ReLU6; STK_BN_ACT_NONE: batch norm
 * alone), the same values as the two ops. In training mode on a backend
 * with the fused kernels (the CPU) one op: the activation's passes over
 * memory and its saved output are gone (its gradient mask is recomputed
 * from x). Otherwise the two ops. */
stk_status stk_batch_norm_act(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                              stk_tensor *running_mean, stk_tensor *running_var, bool training,
                              float momentum, float eps, stk_bn_act act, stk_tensor **out);

/* A sum over the processes of a data-parallel job, in place on n host
 * floats. The engine knows no communicator: distributed/ supplies this (ddp.h). */
typedef struct stk_allreduce {
    stk_status (*sum)(void *ctx, float *buf, size_t n);
    void *ctx;
} stk_allreduce;

/* Training-mode batch norm whose statistics are those of the batch of every
 * rank together (PyTorch's SyncBatchNorm): forward all-reduces the count and
 * per-channel sums (mean, then the centred sum of squares: two passes, for
 * accuracy), backward the per-channel sums of dy and dy * x_hat. The gamma
 * and beta gradients are this rank's, to be averaged with the others'
 * gradients as usual. Every rank must call it with the same shapes, in the
 * same order. Running statistics: the global mean and unbiased variance. */
stk_status stk_batch_norm_sync(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                               stk_tensor *running_mean, stk_tensor *running_var, float momentum,
                               float eps, const stk_allreduce *ar, stk_tensor **out);

/* Layer normalisation over the last dimension (torch.nn.LayerNorm(C) on
 * [..., C]; the biased variance), gamma and beta [C] or NULL.
 * stk_layer_norm2d: over the channels of [N, C, H, W] (torchvision's
 * LayerNorm2d, ConvNeXt's downsampling layers). Errors: INVALID_ARG
 * (shapes, eps <= 0). */
stk_status stk_layer_norm(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, float eps,
                          stk_tensor **out);
stk_status stk_layer_norm2d(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, float eps,
                            stk_tensor **out);
/* Stochastic depth (torchvision.ops.stochastic_depth, mode "row"): each
 * sample (dim 0) zeroed with probability p, the others scaled by 1/(1-p),
 * when `training`; the identity otherwise. The mask is Philox(seed, stream)
 * as stk_dropout's. Errors: INVALID_ARG (p outside [0, 1)). */
stk_status stk_drop_path(stk_tensor *x, float p, bool training, uint64_t seed, uint64_t stream,
                         stk_tensor **out);

/* Pooling over NCHW (ceil_mode off). stride 0 means stride = kernel. */
stk_status stk_max_pool2d(stk_tensor *x, int kernel, int stride, int padding, stk_tensor **out);
stk_status stk_avg_pool2d(stk_tensor *x, int kernel, int stride, int padding,
                          bool count_include_pad, stk_tensor **out);
/* Adaptive average pooling to [oh, ow]; H and W must be multiples of them. */
stk_status stk_adaptive_avg_pool2d(stk_tensor *x, int oh, int ow, stk_tensor **out);
/* [N, C, H, W] -> [N, C] mean over H and W. */
stk_status stk_global_avg_pool2d(stk_tensor *x, stk_tensor **out);

/* Softmax / log-softmax along `dim`. */
stk_status stk_softmax(stk_tensor *x, int dim, stk_tensor **out);
stk_status stk_log_softmax(stk_tensor *x, int dim, stk_tensor **out);
/* Multi-head self-attention of q, k, v packed side by side in [N, S, 3 D]
 * (torch.nn.MultiheadAttention's in_proj output, each D = heads x d):
 * softmax(q k^T / sqrt(d)) v per head, the heads side by side in [N, S, D]
 * (torch's scaled_dot_product_attention without mask or dropout). One node,
 * whose backward writes the packed gradient. Errors: INVALID_ARG (not
 * [N, S, 3 D] with D a positive multiple of heads). */
stk_status stk_attention_packed(stk_tensor *qkv, int heads, stk_tensor **out);
/* Mean cross-entropy of logits [N, C] against i32 labels [N], with label
 * smoothing s in [0, 1) as torch.nn.functional.cross_entropy. */
stk_status stk_cross_entropy(stk_tensor *logits, stk_tensor *labels, float smoothing,
                             stk_tensor **out);
/* Mean squared error (mean over every element). */
stk_status stk_mse_loss(stk_tensor *a, stk_tensor *b, stk_tensor **out);

/* Concatenate along dim (all other sizes equal). */
stk_status stk_cat(int n, stk_tensor *const *xs, int dim, stk_tensor **out);

/* The input op: u8 NHWC [N, H, W, C] pixels -> f32 NCHW, (x/255 - mean[c]) / std[c].
 * Not differentiable (pixels are data). C <= 16. */
stk_status stk_input_u8_nhwc(stk_tensor *x, const float *mean, const float *std, stk_tensor **out);

/* The batch transforms' op (train/batch_mix.h): f32 [N, C, H, W] -> the
 * same with each sample's rectangle replaced by a * x[n] + b * x[partner]
 * (kernels/batch_mix_math.h; regions: N entries in host memory). Not
 * differentiable (pixels are data). Errors: INVALID_ARG (a region outside
 * the batch, a partner outside 0..N-1). */
stk_status stk_batch_regions(stk_tensor *x, const stk_batch_region *regions, stk_tensor **out);

/* In place and untracked: multiply each of the n tensors (f32, contiguous,
 * all on one device; NULL entries skipped) by `factor`, and tell whether
 * every value was finite (*finite; a factor of 1 is an exact identity, so
 * this is also the check alone). One kernel pass per tensor and one flag read
 * back from the device (waits for the queued work). The loss scaler unscales
 * gradients with it. Errors: INVALID_ARG (dtype, layout, devices differ). */
stk_status stk_scale_check_finite(int n, stk_tensor *const *ts, float factor, bool *finite);

/* Gradient clipping's ops (engine/ops_inplace.c), in place and untracked, over
 * n tensors as stk_scale_check_finite takes them. stk_global_norm: the L2
 * norm of all their elements together (torch.nn.utils.clip_grad_norm_'s
 * total norm; inf or NaN when an element is), the same on every run and
 * every thread count (kernels/scalar_math.h: STK_NORM_LANES); reads one
 * float back. stk_clamp_inplace: each element into [lo, hi] (NaN stays).
 * Errors: INVALID_ARG (dtype, layout, devices differ; lo > hi), NOMEM. */
stk_status stk_global_norm(int n, stk_tensor *const *ts, float *norm);
stk_status stk_clamp_inplace(int n, stk_tensor *const *ts, float lo, float hi);

/* torch.nn.utils.clip_grad_norm_ and clip_grad_value_ on n gradients (NULL
 * entries skipped): scale all of them by max_norm / (norm + 1e-6) when that
 * is below 1 (*total_norm: the norm before, may be NULL); or clamp each
 * element to [-clip_value, clip_value]. Errors: INVALID_ARG (a bound that
 * is not a positive number), as stk_global_norm. */
stk_status stk_clip_grad_norm(int n, stk_tensor *const *grads, float max_norm, float *total_norm);
stk_status stk_clip_grad_value(int n, stk_tensor *const *grads, float clip_value);

/* y = a * x + b * y in place, untracked (x and y f32, contiguous, same shape
 * and device): an exponential moving average's update, y = decay * y +
 * (1 - decay) * x, is stk_axpby_inplace(1 - decay, x, decay, y). Errors:
 * INVALID_ARG (dtype, layout, shapes or devices differ). */
stk_status stk_axpby_inplace(float a, const stk_tensor *x, float b, stk_tensor *y);

#ifdef __cplusplus
}
#endif
