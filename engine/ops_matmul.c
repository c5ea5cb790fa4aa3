/* matmul (torch.matmul semantics) and linear. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <string.h>

static int64_t batch_numel(const stk_tensor *t) { return eng_shape_numel(t->ndim - 2, t->shape); }

/* a [A..., r, c] and b [B..., r', c'], both contiguous, with batch shapes
 * equal or one of them 2-D (broadcast with stride 0). */
stk_status eng_matmul_raw(stk_tensor *a, bool ta, stk_tensor *b, bool tb, stk_tensor **out)
{
    int64_t ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1];
    int64_t br = b->shape[b->ndim - 2], bc = b->shape[b->ndim - 1];
    int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
    int64_t ba = batch_numel(a), bb = batch_numel(b), batch = ba > bb ? ba : bb;
    const stk_tensor *big = a->ndim >= b->ndim ? a : b;
    int64_t shape[STK_MAX_DIMS];
    for (int d = 0; d < big->ndim - 2; d++) shape[d] = big->shape[d];
    shape[big->ndim - 2] = m;
    shape[big->ndim - 1] = n;
    const stk_backend *be;
    stk_status st = eng_backend_of(a, &be);
    if (st != STK_OK) return st;
    if ((st = eng_tensor_new(a->storage->device, STK_F32, big->ndim, shape, false, out)) != STK_OK)
        return st;
    if (eng_autocast_f16(be)) { /* --amp: f16 operands, f32 result and accumulation */
        stk_tensor *a16 = NULL, *b16 = NULL;
        if ((st = eng_half_copy(be, a, &a16)) == STK_OK &&
            (st = eng_half_copy(be, b, &b16)) == STK_OK)
            be->gemm_batched_f16(batch, ta, tb, m, n, k, 1.f, tensor_ptr(a16), ac,
                                 ba > 1 ? ar * ac : 0, tensor_ptr(b16), bc, bb > 1 ? br * bc : 0,
                                 0.f, tensor_f32(*out), n, m * n);
        stk_tensor_release(a16);
        stk_tensor_release(b16);
        if (st != STK_OK) {
            stk_tensor_release(*out);
            *out = NULL;
        }
        return st;
    }
    if (eng_autocast_bf16(be)) { /* --amp on the CPU: bf16 operands, f32 result */
        st = be->gemm_batched_bf16(batch, ta, tb, m, n, k, tensor_f32(a), ac, ba > 1 ? ar * ac : 0,
                                   tensor_f32(b), bc, bb > 1 ? br * bc : 0, tensor_f32(*out), n,
                                   m * n);
        if (st != STK_OK) {
            stk_tensor_release(*out);
            *out = NULL;
        }
        return st;
    }
    be->gemm_batched(batch, ta, tb, m, n, k, 1.f, tensor_f32(a), ac, ba > 1 ? ar * ac : 0,
                     tensor_f32(b), bc, bb > 1 ? br * bc : 0, 0.f, tensor_f32(*out), n, m * n);
    return STK_OK;
}

/* [B..., m, k] -> [prod(B) * m, k] view of a contiguous tensor. */
static stk_status rows_view(stk_tensor *t, stk_tensor **out)
{
    int64_t shape[2] = {stk_tensor_numel(t) / t->shape[t->ndim - 1], t->shape[t->ndim - 1]};
    return eng_reshape_raw(t, 2, shape, out);
}

static stk_status bmm_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *a = n->saved[0], *b = n->saved[1];
    stk_status st = STK_OK;
    if (eng_node_needs_grad(n, 0)) { /* ga = g b^T, summed over a's broadcast batch */
        stk_tensor *full;
        if ((st = eng_matmul_raw(g, false, b, true, &full)) != STK_OK) return st;
        st = eng_sum_to_like(full, a, &gin[0]);
        stk_tensor_release(full);
        if (st != STK_OK) return st;
    }
    if (eng_node_needs_grad(n, 1)) { /* gb = a^T g */
        if (b->ndim == 2 && a->ndim > 2) {
            /* b shared by every batch: one GEMM over all rows */
            stk_tensor *a2 = NULL, *g2 = NULL;
            if ((st = rows_view(a, &a2)) == STK_OK && (st = rows_view(g, &g2)) == STK_OK)
                st = eng_matmul_raw(a2, true, g2, false, &gin[1]);
            stk_tensor_release(a2);
            stk_tensor_release(g2);
            return st;
        }
        stk_tensor *full;
        if ((st = eng_matmul_raw(a, true, g, false, &full)) != STK_OK) return st;
        st = eng_sum_to_like(full, b, &gin[1]);
        stk_tensor_release(full);
    }
    return st;
}

/* The recorded core: a, b contiguous, rank >= 2, batch shapes equal or one 2-D. */
static stk_status bmm(stk_tensor *a, stk_tensor *b, stk_tensor **out)
{
    stk_tensor *y;
    stk_status st = eng_matmul_raw(a, false, b, false, &y);
    if (st != STK_OK) return st;
    stk_tensor *in[2] = {a, b};
    stk_node *n;
    if ((st = eng_node_attach(y, "matmul", bmm_backward, 2, in, &n)) != STK_OK) {
        stk_tensor_release(y);
        return st;
    }
    if (n) {
        eng_node_save(n, 0, a);
        eng_node_save(n, 1, b);
    }
    *out = eng_tensor_track(y);
    return STK_OK;
}

#define TRY_GOTO(call)                                                                             \
    do {                                                                                           \
        if ((st = (call)) != STK_OK) goto fail;                                                    \
    } while (0)

stk_status stk_matmul(stk_tensor *a_in, stk_tensor *b_in, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("matmul", a_in, "the first operand")) != STK_OK) return st;
    if ((st = eng_check_f32("matmul", b_in, "the second operand")) != STK_OK) return st;
    if ((st = eng_check_same_device("matmul", a_in, b_in)) != STK_OK) return st;
    if (a_in->ndim == 0 || b_in->ndim == 0)
        return stk_error(STK_ERR_INVALID_ARG, "matmul: both operands need at least one dim");
    int64_t ka = a_in->shape[a_in->ndim - 1];
    int64_t kb = b_in->shape[b_in->ndim >= 2 ? b_in->ndim - 2 : 0];
    if (ka != kb) {
        char s[128];
        snprintf(s, sizeof s, "%s", stk_tensor_shape_str(a_in));
        return stk_error(STK_ERR_INVALID_ARG, "matmul: %s and %s do not match (%lld vs %lld)", s,
                         stk_tensor_shape_str(b_in), (long long)ka, (long long)kb);
    }
    /* Built from public ops (views and expands are differentiable); a scope
     * of its own owns the intermediates, the graph keeps what it needs. */
    stk_scope *scope;
    if ((st = stk_scope_begin(&scope)) != STK_OK) return st;
    stk_tensor *a = a_in, *b = b_in, *y = NULL;
    bool a_vec = a->ndim == 1, b_vec = b->ndim == 1;
    if (a_vec) TRY_GOTO(stk_unsqueeze(a, 0, &a));
    if (b_vec) TRY_GOTO(stk_unsqueeze(b, 1, &b));
    /* Broadcast batch dims: equal batch shapes or one side 2-D go straight to
     * the GEMM; anything else is expanded to the common batch shape. */
    int bnd = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    bool same = a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)bnd);
    if (!same && a->ndim > 2 && b->ndim > 2) {
        int64_t bs[STK_MAX_DIMS];
        for (int d = 0; d < bnd; d++) {
            int da = d - (bnd - (a->ndim - 2)), db = d - (bnd - (b->ndim - 2));
            int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
            if (sa != sb && sa != 1 && sb != 1) {
                st = stk_error(STK_ERR_INVALID_ARG, "matmul: batch dims cannot be broadcast");
                goto fail;
            }
            bs[d] = sa == 1 ? sb : sa;
        }
        int64_t sh[STK_MAX_DIMS];
        memcpy(sh, bs, sizeof(int64_t) * (size_t)bnd);
        sh[bnd] = a->shape[a->ndim - 2];
        sh[bnd + 1] = a->shape[a->ndim - 1];
        TRY_GOTO(stk_expand(a, bnd + 2, sh, &a));
        sh[bnd] = b->shape[b->ndim - 2];
        sh[bnd + 1] = b->shape[b->ndim - 1];
        TRY_GOTO(stk_expand(b, bnd + 2, sh, &b));
    }
    TRY_GOTO(stk_contiguous(a, &a));
    TRY_GOTO(stk_contiguous(b, &b));
    TRY_GOTO(bmm(a, b, &y));
    if (a_vec) TRY_GOTO(stk_squeeze(y, -2, &y));
    if (b_vec) TRY_GOTO(stk_squeeze(y, -1, &y));
    /* Keep y past the temporary scope, then hand it to the caller's. */
    stk_tensor_retain(y);
    stk_scope_end(scope);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_scope_end(scope);
    return st;
}

/* ---- linear ------------------------------------------------------------ */

static stk_status linear_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    stk_tensor *x = n->saved[0], *w = n->saved[1];
    stk_tensor *x2 = NULL, *g2 = NULL;
    stk_status st;
    if ((st = rows_view(x, &x2)) != STK_OK) return st;
    if ((st = rows_view(g, &g2)) != STK_OK) goto out;
    if (eng_node_needs_grad(n, 0)) { /* gx = g w */
        stk_tensor *gx2;
        if ((st = eng_matmul_raw(g2, false, w, false, &gx2)) != STK_OK) goto out;
        st = eng_reshape_raw(gx2, x->ndim, x->shape, &gin[0]);
        stk_tensor_release(gx2);
        if (st != STK_OK) goto out;
    }
    if (eng_node_needs_grad(n, 1) && (st = eng_matmul_raw(g2, true, x2, false, &gin[1])) != STK_OK)
        goto out;
    if (n->n_inputs > 2 && eng_node_needs_grad(n, 2))
        st = eng_sum_to_like(g2, n->inputs[2], &gin[2]);
out:
    stk_tensor_release(x2);
    stk_tensor_release(g2);
    return st;
}

stk_status stk_linear(stk_tensor *x, stk_tensor *w, stk_tensor *b, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("linear", x, "the input")) != STK_OK) return st;
    if ((st = eng_check_f32("linear", w, "the weight")) != STK_OK) return st;
    if ((st = eng_check_same_device("linear", x, w)) != STK_OK) return st;
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
        char s[128];
        snprintf(s, sizeof s, "%s", stk_tensor_shape_str(x));
        return stk_error(STK_ERR_INVALID_ARG, "linear: input %s does not match weight %s", s,
                         stk_tensor_shape_str(w));
    }
    if (b) {
        if ((st = eng_check_f32("linear", b, "the bias")) != STK_OK) return st;
        if ((st = eng_check_same_device("linear", x, b)) != STK_OK) return st;
        if (b->ndim != 1 || b->shape[0] != w->shape[0])
            return stk_error(STK_ERR_INVALID_ARG,
                             "linear: bias %s does not match weight's %lld outputs",
                             stk_tensor_shape_str(b), (long long)w->shape[0]);
    }
    const stk_backend *be;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *wc = NULL, *x2 = NULL, *y2 = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) goto fail;
    if ((st = eng_tensor_contiguous_raw(w, &wc)) != STK_OK) goto fail;
    if (x->ndim == 1) {
        int64_t s[2] = {1, x->shape[0]};
        if ((st = eng_reshape_raw(xc, 2, s, &x2)) != STK_OK) goto fail;
    } else if ((st = rows_view(xc, &x2)) != STK_OK)
        goto fail;
    if ((st = eng_matmul_raw(x2, false, wc, true, &y2)) != STK_OK) goto fail;
    if (b) {
        int64_t rs[2] = {y2->shape[1], 1}, bs[2] = {0, b->strides[0]};
        be->binary(STK_BINARY_ADD, 2, y2->shape, tensor_f32(y2), tensor_f32(y2), rs, tensor_f32(b),
                   bs);
    }
    int64_t shape[STK_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    if ((st = eng_reshape_raw(y2, x->ndim, shape, &y)) != STK_OK) goto fail;
    stk_tensor *in[3] = {x, w, b};
    stk_node *n;
    if ((st = eng_node_attach(y, "linear", linear_backward, b ? 3 : 2, in, &n)) != STK_OK)
        goto fail;
    if (n) {
        eng_node_save(n, 0, xc);
        eng_node_save(n, 1, wc);
    }
    stk_tensor_release(xc);
    stk_tensor_release(wc);
    stk_tensor_release(x2);
    stk_tensor_release(y2);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(wc);
    stk_tensor_release(x2);
    stk_tensor_release(y2);
    stk_tensor_release(y);
    return st;
}
