/* batch_norm and the pooling ops. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <stdlib.h>

/* [N, C, H, W] or [N, C] viewed as [n, c, hw]. */
static void bn_dims(const stk_tensor *x, int64_t *n, int64_t *c, int64_t *hw)
{
    *n = x->shape[0];
    *c = x->shape[1];
    *hw = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
}

static stk_status bn_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *x = n->saved[0];
    stk_tensor *gamma = n->saved[3];
    int64_t N, C, HW;
    bn_dims(x, &N, &C, &HW);
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    for (int i = 0; i < 3; i++)
        if (eng_node_needs_grad(n, i) && (st = eng_node_grad_like(n, i, false, &gin[i])) != STK_OK)
            return st;
    float *gx = gin[0] ? tensor_f32(gin[0]) : NULL;
    float *gg = gin[1] ? tensor_f32(gin[1]) : NULL, *gb = gin[2] ? tensor_f32(gin[2]) : NULL;
    const float *gm = gamma ? tensor_f32(gamma) : NULL;
    stk_bn_act act = (stk_bn_act)n->iv[1];
    if (act != STK_BN_ACT_NONE) /* training, fused (batch_norm_op) */
        be->batch_norm_act_backward(
            N, C, HW, tensor_f32(x), gm, n->saved[4] ? tensor_f32(n->saved[4]) : NULL,
            tensor_f32(g), tensor_f32(n->saved[1]), tensor_f32(n->saved[2]), gx, gg, gb, act);
    else if (n->iv[0]) /* training */
        be->batch_norm_backward(N, C, HW, tensor_f32(x), gm, tensor_f32(g), tensor_f32(n->saved[1]),
                                tensor_f32(n->saved[2]), gx, gg, gb);
    else
        be->batch_norm_eval_backward(N, C, HW, tensor_f32(x), gm, tensor_f32(g),
                                     tensor_f32(n->saved[1]), tensor_f32(n->saved[2]),
                                     (float)n->fv[0], gx, gg, gb);
    return STK_OK;
}

stk_status eng_bn_check_channel_vec(const char *what, const stk_tensor *t, int64_t c)
{
    if (!t) return STK_OK;
    if (t->dtype != STK_F32 || t->ndim != 1 || t->shape[0] != c || !stk_tensor_is_contiguous(t))
        return stk_error(STK_ERR_INVALID_ARG,
                         "batch_norm: %s %s must be a contiguous f32 vector of %lld channels", what,
                         stk_tensor_shape_str(t), (long long)c);
    return STK_OK;
}

/* Batch norm, with act fused into the training-mode kernels (the caller has
 * checked that the backend has them). */
static stk_status batch_norm_op(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                                stk_tensor *running_mean, stk_tensor *running_var, bool training,
                                float momentum, float eps, stk_bn_act act, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("batch_norm", x, "the input")) != STK_OK) return st;
    if (x->ndim != 4 && x->ndim != 2)
        return stk_error(STK_ERR_INVALID_ARG, "batch_norm: input %s must be [N, C, H, W] or [N, C]",
                         stk_tensor_shape_str(x));
    int64_t N, C, HW;
    bn_dims(x, &N, &C, &HW);
    if ((st = eng_bn_check_channel_vec("weight", gamma, C)) != STK_OK ||
        (st = eng_bn_check_channel_vec("bias", beta, C)) != STK_OK ||
        (st = eng_bn_check_channel_vec("running_mean", running_mean, C)) != STK_OK ||
        (st = eng_bn_check_channel_vec("running_var", running_var, C)) != STK_OK)
        return st;
    if (!running_mean != !running_var)
        return stk_error(STK_ERR_INVALID_ARG,
                         "batch_norm: give both running statistics or neither");
    if (!training && !running_mean)
        return stk_error(STK_ERR_INVALID_ARG, "batch_norm: eval mode needs the running statistics");
    if (training && N * HW < 2)
        return stk_error(STK_ERR_INVALID_ARG,
                         "batch_norm: training needs more than one value per channel, got input %s",
                         stk_tensor_shape_str(x));
    const stk_backend *be;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL, *mean = NULL, *invstd = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) goto fail;
    if ((st = eng_tensor_new_like(x, false, &y)) != STK_OK) goto fail;
    const float *gm = gamma ? tensor_f32(gamma) : NULL, *bt = beta ? tensor_f32(beta) : NULL;
    if (training) {
        if ((st = eng_tensor_new(x->storage->device, STK_F32, 1, &C, false, &mean)) != STK_OK ||
            (st = eng_tensor_new(x->storage->device, STK_F32, 1, &C, false, &invstd)) != STK_OK)
            goto fail;
        float *rm = running_mean ? tensor_f32(running_mean) : NULL;
        float *rv = running_var ? tensor_f32(running_var) : NULL;
        if (act != STK_BN_ACT_NONE)
            be->batch_norm_act_train(N, C, HW, tensor_f32(xc), gm, bt, tensor_f32(y),
                                     tensor_f32(mean), tensor_f32(invstd), rm, rv, momentum, eps,
                                     act);
        else
            be->batch_norm_train(N, C, HW, tensor_f32(xc), gm, bt, tensor_f32(y), tensor_f32(mean),
                                 tensor_f32(invstd), rm, rv, momentum, eps);
    } else {
        be->batch_norm_eval(N, C, HW, tensor_f32(xc), gm, bt, tensor_f32(running_mean),
                            tensor_f32(running_var), eps, tensor_f32(y));
    }
    stk_tensor *in[3] = {x, gamma, beta};
    stk_node *n;
    const char *name = act == STK_BN_ACT_RELU    ? "batch_norm_relu"
                       : act == STK_BN_ACT_RELU6 ? "batch_norm_relu6"
                                                 : "batch_norm";
    if ((st = eng_node_attach(y, name, bn_backward, 3, in, &n)) != STK_OK) goto fail;
    if (n) {
        n->iv[0] = training;
        n->iv[1] = act;
        if (act != STK_BN_ACT_NONE && beta) eng_node_save(n, 4, beta); /* for the mask */
        n->fv[0] = eps;
        eng_node_save(n, 0, xc);
        if (gamma) eng_node_save(n, 3, gamma); /* its values: n->inputs holds shapes only */
        if (training) {
            eng_node_save(n, 1, mean);
            eng_node_save(n, 2, invstd);
        } else { /* a copy: the running statistics change after this step */
            stk_tensor *rm = NULL, *rv = NULL;
            if ((st = eng_tensor_new_like(running_mean, false, &rm)) != STK_OK ||
                (st = stk_tensor_copy(rm, running_mean)) != STK_OK ||
                (st = eng_tensor_new_like(running_var, false, &rv)) != STK_OK ||
                (st = stk_tensor_copy(rv, running_var)) != STK_OK) {
                stk_tensor_release(rm);
                stk_tensor_release(rv);
                goto fail;
            }
            eng_node_save(n, 1, rm);
            eng_node_save(n, 2, rv);
            stk_tensor_release(rm);
            stk_tensor_release(rv);
        }
    }
    stk_tensor_release(xc);
    stk_tensor_release(mean);
    stk_tensor_release(invstd);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(y);
    stk_tensor_release(mean);
    stk_tensor_release(invstd);
    return st;
}

stk_status stk_batch_norm(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                          stk_tensor *running_mean, stk_tensor *running_var, bool training,
                          float momentum, float eps, stk_tensor **out)
{
    return batch_norm_op(x, gamma, beta, running_mean, running_var, training, momentum, eps,
                         STK_BN_ACT_NONE, out);
}

stk_status stk_batch_norm_act(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta,
                              stk_tensor *running_mean, stk_tensor *running_var, bool training,
                              float momentum, float eps, stk_bn_act act, stk_tensor **out)
{
    if (act != STK_BN_ACT_NONE && act != STK_BN_ACT_RELU && act != STK_BN_ACT_RELU6)
        return stk_error(STK_ERR_INVALID_ARG, "batch_norm_act: unknown activation %d", (int)act);
    const stk_backend *be;
    STK_TRY(eng_backend_of(x, &be));
    if (act == STK_BN_ACT_NONE || (training && be->batch_norm_act_train))
        return batch_norm_op(x, gamma, beta, running_mean, running_var, training, momentum, eps,
                             act, out);
    /* eval mode, or a backend without the fused kernels: the two ops */
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *h = NULL, *y = NULL;
    stk_status st =
        stk_batch_norm(x, gamma, beta, running_mean, running_var, training, momentum, eps, &h);
    if (st == STK_OK) st = act == STK_BN_ACT_RELU ? stk_relu(h, &y) : stk_relu6(h, &y);
    return eng_compose_end(s, st, y, out);
}

/* ---- pooling ----------------------------------------------------------- */

static stk_status pool_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_pool2d_desc *d = n->ext;
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) != STK_OK) return st;
    if (n->iv[0])
        be->max_pool2d_backward(d, tensor_f32(g), (const int32_t *)tensor_ptr(n->saved[0]),
                                tensor_f32(gin[0]));
    else
        be->avg_pool2d_backward(d, tensor_f32(g), tensor_f32(gin[0]));
    return STK_OK;
}

static stk_status pool_op(const char *name, bool is_max, stk_tensor *x, int kernel, int stride,
                          int padding, bool count_include_pad, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32(name, x, "the input")) != STK_OK) return st;
    if (stride == 0) stride = kernel;
    if (x->ndim != 4 || kernel < 1 || stride < 1 || padding < 0 || padding * 2 > kernel)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: needs a 4-D input (got %s), kernel >= 1, stride >= 1 and padding "
                         "at most half the kernel (got %d, %d, %d)",
                         name, stk_tensor_shape_str(x), kernel, stride, padding);
    stk_pool2d_desc *d = calloc(1, sizeof *d);
    if (!d) return stk_error(STK_ERR_NOMEM, "%s: no memory", name);
    *d = (stk_pool2d_desc){.n = x->shape[0],
                           .c = x->shape[1],
                           .h = x->shape[2],
                           .w = x->shape[3],
                           .kh = kernel,
                           .kw = kernel,
                           .stride_h = stride,
                           .stride_w = stride,
                           .pad_h = padding,
                           .pad_w = padding,
                           .count_include_pad = count_include_pad};
    d->oh = (d->h + 2 * padding - kernel) / stride + 1;
    d->ow = (d->w + 2 * padding - kernel) / stride + 1;
    const stk_backend *be;
    stk_tensor *xc = NULL, *y = NULL, *am = NULL;
    if (d->oh < 1 || d->ow < 1) {
        st = stk_error(STK_ERR_INVALID_ARG, "%s: kernel %d is larger than the input %s", name,
                       kernel, stk_tensor_shape_str(x));
        goto fail;
    }
    if ((st = eng_backend_of(x, &be)) != STK_OK) goto fail;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) goto fail;
    int64_t shape[4] = {d->n, d->c, d->oh, d->ow};
    if ((st = eng_tensor_new(x->storage->device, STK_F32, 4, shape, false, &y)) != STK_OK)
        goto fail;
    if (is_max) {
        if ((st = eng_tensor_new(x->storage->device, STK_I32, 4, shape, false, &am)) != STK_OK)
            goto fail;
        be->max_pool2d_forward(d, tensor_f32(xc), tensor_f32(y), (int32_t *)tensor_ptr(am));
    } else {
        be->avg_pool2d_forward(d, tensor_f32(xc), tensor_f32(y));
    }
    stk_node *n;
    if ((st = eng_node_attach(y, name, pool_backward, 1, &x, &n)) != STK_OK) goto fail;
    if (n) {
        n->iv[0] = is_max;
        n->ext = d;
        d = NULL;
        if (am) eng_node_save(n, 0, am);
    }
    free(d);
    stk_tensor_release(xc);
    stk_tensor_release(am);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    free(d);
    stk_tensor_release(xc);
    stk_tensor_release(y);
    stk_tensor_release(am);
    return st;
}

stk_status stk_max_pool2d(stk_tensor *x, int kernel, int stride, int padding, stk_tensor **out)
{
    return pool_op("max_pool2d", true, x, kernel, stride, padding, false, out);
}

stk_status stk_avg_pool2d(stk_tensor *x, int kernel, int stride, int padding,
                          bool count_include_pad, stk_tensor **out)
{
    return pool_op("avg_pool2d", false, x, kernel, stride, padding, count_include_pad, out);
}

stk_status stk_adaptive_avg_pool2d(stk_tensor *x, int oh, int ow, stk_tensor **out)
{
    if (x->ndim != 4 || oh < 1 || ow < 1 || x->shape[2] % oh || x->shape[3] % ow ||
        x->shape[2] / oh != x->shape[3] / ow)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "adaptive_avg_pool2d: input %s to %dx%d: only sizes that divide the "
                         "input into equal square windows are supported",
                         stk_tensor_shape_str(x), oh, ow);
    if (oh == 1 && ow == 1) {
        stk_scope *s;
        STK_TRY(stk_scope_begin(&s));
        stk_tensor *m = NULL;
        int dims[2] = {2, 3};
        stk_status st = stk_mean(x, 2, dims, true, &m);
        return eng_compose_end(s, st, m, out);
    }
    int k = (int)(x->shape[2] / oh);
    return pool_op("adaptive_avg_pool2d", false, x, k, k, 0, true, out);
}

stk_status stk_global_avg_pool2d(stk_tensor *x, stk_tensor **out)
{
    if (x->ndim != 4)
        return stk_error(STK_ERR_INVALID_ARG, "global_avg_pool2d: input %s must be 4-D",
                         stk_tensor_shape_str(x));
    int dims[2] = {2, 3};
    return stk_mean(x, 2, dims, false, out);
}
