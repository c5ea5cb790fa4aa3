/* layer_norm (over the last dimension, and over the channels of NCHW as
 * ConvNeXt's LayerNorm2d), drop path (stochastic depth) and layer scale. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

static stk_status layer_norm_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *x = n->saved[0], *gamma = n->saved[3];
    int64_t cols = x->shape[x->ndim - 1], rows = cols ? stk_tensor_numel(x) / cols : 0;
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    for (int i = 0; i < 3; i++)
        if (eng_node_needs_grad(n, i) && (st = eng_node_grad_like(n, i, false, &gin[i])) != STK_OK)
            return st;
    be->layer_norm_backward(rows, cols, tensor_f32(x), gamma ? tensor_f32(gamma) : NULL,
                            tensor_f32(n->saved[1]), tensor_f32(n->saved[2]), tensor_f32(g),
                            gin[0] ? tensor_f32(gin[0]) : NULL, gin[1] ? tensor_f32(gin[1]) : NULL,
                            gin[2] ? tensor_f32(gin[2]) : NULL);
    return STK_OK;
}

static stk_status check_affine(const char *what, const stk_tensor *t, const stk_tensor *x,
                               int64_t cols)
{
    if (!t) return STK_OK;
    if (t->dtype != STK_F32 || t->ndim != 1 || t->shape[0] != cols ||
        !stk_tensor_is_contiguous(t) || t->storage->device != x->storage->device)
        return stk_error(STK_ERR_INVALID_ARG,
                         "layer_norm: %s %s must be a contiguous f32 vector of %lld on the "
                         "input's device",
                         what, stk_tensor_shape_str(t), (long long)cols);
    return STK_OK;
}

stk_status stk_layer_norm(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, float eps,
                          stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("layer_norm", x, "the input")) != STK_OK) return st;
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return stk_error(STK_ERR_INVALID_ARG,
                         "layer_norm: input %s has no last dimension to "
                         "normalise",
                         stk_tensor_shape_str(x));
    if (!(eps > 0.f))
        return stk_error(STK_ERR_INVALID_ARG, "layer_norm: eps %g must be positive", (double)eps);
    int64_t cols = x->shape[x->ndim - 1], rows = stk_tensor_numel(x) / cols;
    if ((st = check_affine("weight", gamma, x, cols)) != STK_OK ||
        (st = check_affine("bias", beta, x, cols)) != STK_OK)
        return st;
    const stk_backend *be;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK ||
        (st = eng_tensor_new_like(x, false, &y)) != STK_OK ||
        (st = eng_tensor_new(x->storage->device, STK_F32, 1, &rows, false, &mean)) != STK_OK ||
        (st = eng_tensor_new(x->storage->device, STK_F32, 1, &rows, false, &rstd)) != STK_OK)
        goto fail;
    be->layer_norm_forward(rows, cols, tensor_f32(xc), gamma ? tensor_f32(gamma) : NULL,
                           beta ? tensor_f32(beta) : NULL, eps, tensor_f32(y), tensor_f32(mean),
                           tensor_f32(rstd));
    stk_tensor *in[3] = {x, gamma, beta};
    stk_node *n;
    if ((st = eng_node_attach(y, "layer_norm", layer_norm_backward, 3, in, &n)) != STK_OK)
        goto fail;
    if (n) {
        eng_node_save(n, 0, xc);
        eng_node_save(n, 1, mean);
        eng_node_save(n, 2, rstd);
        if (gamma) eng_node_save(n, 3, gamma); /* its values: n->inputs holds shapes only */
    }
    stk_tensor_release(xc);
    stk_tensor_release(mean);
    stk_tensor_release(rstd);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(y);
    stk_tensor_release(mean);
    stk_tensor_release(rstd);
    return st;
}

/* NCHW -> NHWC view, the rows' layer norm (a copy to contiguous inside),
 * back to NCHW: torchvision's LayerNorm2d is the same permute pair. */
stk_status stk_layer_norm2d(stk_tensor *x, stk_tensor *gamma, stk_tensor *beta, float eps,
                            stk_tensor **out)
{
    if (x->ndim != 4)
        return stk_error(STK_ERR_INVALID_ARG, "layer_norm2d: input %s must be [N, C, H, W]",
                         stk_tensor_shape_str(x));
    static const int to_last[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *t = NULL, *y = NULL, *r = NULL;
    stk_status st;
    if ((st = stk_permute(x, to_last, &t)) == STK_OK &&
        (st = stk_layer_norm(t, gamma, beta, eps, &y)) == STK_OK)
        st = stk_permute(y, back, &r);
    return eng_compose_end(s, st, r, out);
}

/* x * mask[n] / (1 - p): the mask is dropout's (Philox(seed, stream)) drawn
 * over a [N, 1, ..., 1] tensor of ones, so each sample's whole residual
 * branch is kept or dropped, as torchvision.ops.stochastic_depth(mode="row"). */
stk_status stk_drop_path(stk_tensor *x, float p, bool training, uint64_t seed, uint64_t stream,
                         stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("drop_path", x, "the input")) != STK_OK) return st;
    if (!(p >= 0.f && p < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "drop_path: p = %g is outside [0, 1)", (double)p);
    if (!training || p == 0.f || x->ndim < 1) return stk_mul_scalar(x, 1.f, out); /* as dropout */
    int64_t shape[STK_MAX_DIMS];
    shape[0] = x->shape[0];
    for (int d = 1; d < x->ndim; d++) shape[d] = 1;
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *ones = NULL, *mask = NULL, *y = NULL;
    if ((st = eng_tensor_new(x->storage->device, STK_F32, x->ndim, shape, false, &ones)) ==
            STK_OK &&
        (st = stk_tensor_fill(ones, 1.0)) == STK_OK &&
        (st = stk_dropout(eng_tensor_track(ones), p, true, seed, stream, &mask)) == STK_OK)
        st = stk_mul(x, mask, &y);
    return eng_compose_end(s, st, y, out);
}
