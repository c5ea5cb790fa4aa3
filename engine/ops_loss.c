/* softmax, log_softmax, cross_entropy, mse_loss. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

static stk_status softmax_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    stk_tensor *y = n->saved[0];
    int64_t cols = y->ndim ? y->shape[y->ndim - 1] : 1;
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) != STK_OK) return st;
    be->softmax_backward(stk_tensor_numel(y) / (cols ? cols : 1), cols, tensor_f32(y),
                         tensor_f32(g), tensor_f32(gin[0]), n->iv[0]);
    return STK_OK;
}

/* Softmax over the last dim of a tensor (any strides). */
static stk_status softmax_last(stk_tensor *x, bool log, stk_tensor **out)
{
    const stk_backend *be;
    stk_status st = eng_backend_of(x, &be);
    if (st != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) return st;
    if ((st = eng_tensor_new_like(x, false, &y)) != STK_OK) goto fail;
    int64_t cols = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (cols)
        be->softmax_forward(stk_tensor_numel(x) / cols, cols, tensor_f32(xc), tensor_f32(y), log);
    stk_node *n;
    if ((st = eng_node_attach(y, log ? "log_softmax" : "softmax", softmax_backward, 1, &x, &n)) !=
        STK_OK)
        goto fail;
    if (n) {
        if ((st = eng_node_save_output(n, 0, y)) != STK_OK) goto fail;
        n->iv[0] = log;
    }
    stk_tensor_release(xc);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(y);
    return st;
}

static stk_status softmax_dim(stk_tensor *x, int dim, bool log, stk_tensor **out)
{
    const char *name = log ? "log_softmax" : "softmax";
    stk_status st = eng_check_f32(name, x, "the input");
    if (st != STK_OK) return st;
    int d = eng_dim_index(dim, x->ndim ? x->ndim : 1);
    if (d < 0)
        return stk_error(STK_ERR_INVALID_ARG, "%s: dim %d is invalid for %s", name, dim,
                         stk_tensor_shape_str(x));
    if (x->ndim == 0 || d == x->ndim - 1) return softmax_last(x, log, out);
    /* Move dim last, compute, move it back (all differentiable views). */
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *t = NULL, *y = NULL, *r = NULL;
    if ((st = stk_transpose(x, d, -1, &t)) == STK_OK && (st = softmax_last(t, log, &y)) == STK_OK)
        st = stk_transpose(y, d, -1, &r);
    return eng_compose_end(s, st, r, out);
}

stk_status stk_softmax(stk_tensor *x, int dim, stk_tensor **out)
{
    return softmax_dim(x, dim, false, out);
}

stk_status stk_log_softmax(stk_tensor *x, int dim, stk_tensor **out)
{
    return softmax_dim(x, dim, true, out);
}

/* ---- cross-entropy ----------------------------------------------------- */

static stk_status ce_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    const stk_backend *be;
    stk_status st = eng_backend_of(g, &be);
    if (st != STK_OK) return st;
    stk_tensor *logp = n->saved[0], *labels = n->saved[1];
    int64_t rows = logp->shape[0], cols = logp->shape[1];
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) != STK_OK) return st;
    be->cross_entropy_backward(rows, cols, tensor_f32(logp), (const int32_t *)tensor_ptr(labels),
                               (float)n->fv[0], tensor_f32(g), tensor_f32(gin[0]));
    return STK_OK;
}

stk_status stk_cross_entropy(stk_tensor *logits, stk_tensor *labels, float smoothing,
                             stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("cross_entropy", logits, "the logits")) != STK_OK) return st;
    if ((st = eng_check_same_device("cross_entropy", logits, labels)) != STK_OK) return st;
    if (logits->ndim != 2 || labels->ndim != 1 || labels->dtype != STK_I32 ||
        labels->shape[0] != logits->shape[0]) {
        char s[128];
        snprintf(s, sizeof s, "%s", stk_tensor_shape_str(logits));
        return stk_error(STK_ERR_INVALID_ARG,
                         "cross_entropy: logits %s must be [N, C] and labels %s i32 [N] (got %s)",
                         s, stk_tensor_shape_str(labels), stk_dtype_name(labels->dtype));
    }
    if (!(smoothing >= 0.f && smoothing < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "cross_entropy: label smoothing %g is outside [0, 1)",
                         (double)smoothing);
    if (logits->shape[0] == 0)
        return stk_error(STK_ERR_INVALID_ARG, "cross_entropy: the batch is empty");
    const stk_backend *be;
    if ((st = eng_backend_of(logits, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *lc = NULL, *logp = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(logits, &xc)) != STK_OK) goto fail;
    if ((st = eng_tensor_contiguous_raw(labels, &lc)) != STK_OK) goto fail;
    if ((st = eng_tensor_new_like(logits, false, &logp)) != STK_OK) goto fail;
    if ((st = eng_tensor_new(logits->storage->device, STK_F32, 0, NULL, false, &y)) != STK_OK)
        goto fail;
    if ((st = be->cross_entropy_forward(logits->shape[0], logits->shape[1], tensor_f32(xc),
                                        (const int32_t *)tensor_ptr(lc), smoothing,
                                        tensor_f32(logp), tensor_f32(y))) != STK_OK)
        goto fail;
    stk_node *n;
    if ((st = eng_node_attach(y, "cross_entropy", ce_backward, 1, &logits, &n)) != STK_OK)
        goto fail;
    if (n) {
        eng_node_save(n, 0, logp);
        eng_node_save(n, 1, lc);
        n->fv[0] = smoothing;
    }
    stk_tensor_release(xc);
    stk_tensor_release(lc);
    stk_tensor_release(logp);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(lc);
    stk_tensor_release(logp);
    stk_tensor_release(y);
    return st;
}

stk_status stk_mse_loss(stk_tensor *a, stk_tensor *b, stk_tensor **out)
{
    if (!eng_shape_equal(a, b)) {
        char s[128];
        snprintf(s, sizeof s, "%s", stk_tensor_shape_str(a));
        return stk_error(STK_ERR_INVALID_ARG, "mse_loss: shapes %s and %s differ", s,
                         stk_tensor_shape_str(b));
    }
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *d = NULL, *sq = NULL, *m = NULL;
    stk_status st;
    if ((st = stk_sub(a, b, &d)) == STK_OK && (st = stk_mul(d, d, &sq)) == STK_OK)
        st = stk_mean(sq, 0, NULL, false, &m);
    return eng_compose_end(s, st, m, out);
}
