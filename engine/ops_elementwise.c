/* Element-wise ops with broadcasting, activations, dropout. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <string.h>

stk_status eng_broadcast_shape(const char *op, const stk_tensor *a, const stk_tensor *b, int *ndim,
                               int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char as[128];
            snprintf(as, sizeof as, "%s", stk_tensor_shape_str(a));
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)", op,
                             as, stk_tensor_shape_str(b), d, (long long)sa, (long long)sb);
        }
        shape[d] = sa == 1 ? sb : sa;
    }
    *ndim = n;
    return STK_OK;
}

/* Strides that read t as if expanded to `shape` (0 along broadcast dims). */
static void broadcast_strides(const stk_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    for (int d = 0; d < ndim; d++) {
        int td = d - (ndim - t->ndim);
        strides[d] = (td < 0 || (t->shape[td] == 1 && shape[d] != 1)) ? 0 : t->strides[td];
    }
}

stk_status eng_binary_raw(stk_binary_op op, stk_tensor *a, stk_tensor *b, stk_tensor **out)
{
    static const char *names[] = {"add", "sub", "mul", "div"};
    const char *name = names[op];
    stk_status st;
    if ((st = eng_check_f32(name, a, "the first operand")) != STK_OK) return st;
    if ((st = eng_check_f32(name, b, "the second operand")) != STK_OK) return st;
    if ((st = eng_check_same_device(name, a, b)) != STK_OK) return st;
    int ndim;
    int64_t shape[STK_MAX_DIMS], sa[STK_MAX_DIMS], sb[STK_MAX_DIMS];
    if ((st = eng_broadcast_shape(name, a, b, &ndim, shape)) != STK_OK) return st;
    broadcast_strides(a, ndim, shape, sa);
    broadcast_strides(b, ndim, shape, sb);
    const stk_backend *be;
    if ((st = eng_backend_of(a, &be)) != STK_OK) return st;
    if ((st = eng_tensor_new(a->storage->device, STK_F32, ndim, shape, false, out)) != STK_OK)
        return st;
    be->binary(op, ndim, shape, tensor_f32(*out), tensor_f32(a), sa, tensor_f32(b), sb);
    return STK_OK;
}

stk_status eng_sum_to_like(stk_tensor *g, const stk_tensor *like, stk_tensor **out)
{
    if (eng_shape_equal(g, like)) {
        stk_tensor_retain(g);
        *out = g;
        return STK_OK;
    }
    stk_status st;
    const stk_backend *be;
    if ((st = eng_backend_of(g, &be)) != STK_OK) return st;
    stk_tensor *gc;
    if ((st = eng_tensor_contiguous_raw(g, &gc)) != STK_OK) return st;
    if ((st = eng_tensor_new(g->storage->device, STK_F32, like->ndim, like->shape, false, out)) !=
        STK_OK) {
        stk_tensor_release(gc);
        return st;
    }
    /* like's shape right-aligned to g's; y strides 0 where like is 1 (or absent). */
    int64_t ys[STK_MAX_DIMS];
    int lead = g->ndim - like->ndim;
    for (int d = 0; d < g->ndim; d++) {
        int ld = d - lead;
        ys[d] = (ld < 0 || like->shape[ld] == 1) ? 0 : (*out)->strides[ld];
    }
    be->sum_to(g->ndim, g->shape, tensor_f32(gc), ys, tensor_f32(*out), stk_tensor_numel(like));
    stk_tensor_release(gc);
    return STK_OK;
}

/* ---- binary ops -------------------------------------------------------- */

/* Gradient of one operand: sum_to(f(gout, ...)) released as we go. */
static stk_status reduce_into(stk_tensor *full, stk_tensor *like, stk_tensor **gin)
{
    stk_status st = eng_sum_to_like(full, like, gin);
    stk_tensor_release(full);
    return st;
}

static stk_status binary_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    stk_binary_op op = (stk_binary_op)n->iv[0];
    stk_tensor *a = n->inputs[0], *b = n->inputs[1];
    stk_tensor *t = NULL;
    stk_status st = STK_OK;
    switch (op) {
    case STK_BINARY_ADD:
    case STK_BINARY_SUB:
        if (eng_node_needs_grad(n, 0) && (st = eng_sum_to_like(gout, a, &gin[0])) != STK_OK)
            return st;
        if (eng_node_needs_grad(n, 1)) {
            if (op == STK_BINARY_ADD) return eng_sum_to_like(gout, b, &gin[1]);
            if ((st = eng_unary_raw(STK_UNARY_NEG, gout, 0.f, &t)) != STK_OK) return st;
            return reduce_into(t, b, &gin[1]);
        }
        return STK_OK;
    case STK_BINARY_MUL:
        if (eng_node_needs_grad(n, 0)) {
            if ((st = eng_binary_raw(STK_BINARY_MUL, gout, n->saved[1], &t)) != STK_OK) return st;
            if ((st = reduce_into(t, a, &gin[0])) != STK_OK) return st;
        }
        if (eng_node_needs_grad(n, 1)) {
            if ((st = eng_binary_raw(STK_BINARY_MUL, gout, n->saved[0], &t)) != STK_OK) return st;
            return reduce_into(t, b, &gin[1]);
        }
        return STK_OK;
    case STK_BINARY_DIV: {
        stk_tensor *q; /* gout / b */
        if ((st = eng_binary_raw(STK_BINARY_DIV, gout, n->saved[1], &q)) != STK_OK) return st;
        if (eng_node_needs_grad(n, 1)) { /* -gout * a / b^2 = -(gout / b) * out */
            stk_tensor *p = NULL;
            if ((st = eng_binary_raw(STK_BINARY_MUL, q, n->saved[2], &p)) == STK_OK &&
                (st = eng_unary_raw(STK_UNARY_NEG, p, 0.f, &t)) == STK_OK)
                st = reduce_into(t, b, &gin[1]);
            stk_tensor_release(p);
        }
        if (st == STK_OK && eng_node_needs_grad(n, 0)) return reduce_into(q, a, &gin[0]);
        stk_tensor_release(q);
        return st;
    }
    }
    return STK_OK;
}

static stk_status binary_op(stk_binary_op op, stk_tensor *a, stk_tensor *b, stk_tensor **out)
{
    static const char *names[] = {"add", "sub", "mul", "div"};
    stk_tensor *y;
    stk_status st = eng_binary_raw(op, a, b, &y);
    if (st != STK_OK) return st;
    stk_tensor *in[2] = {a, b};
    stk_node *n;
    if ((st = eng_node_attach(y, names[op], binary_backward, 2, in, &n)) != STK_OK) {
        stk_tensor_release(y);
        return st;
    }
    if (n) {
        n->iv[0] = op;
        if (op == STK_BINARY_MUL || op == STK_BINARY_DIV) {
            eng_node_save(n, 0, a);
            eng_node_save(n, 1, b);
        }
        if (op == STK_BINARY_DIV && (st = eng_node_save_output(n, 2, y)) != STK_OK) {
            stk_tensor_release(y);
            return st;
        }
    }
    *out = eng_tensor_track(y);
    return STK_OK;
}

stk_status stk_add(stk_tensor *a, stk_tensor *b, stk_tensor **o)
{
    return binary_op(STK_BINARY_ADD, a, b, o);
}
stk_status stk_sub(stk_tensor *a, stk_tensor *b, stk_tensor **o)
{
    return binary_op(STK_BINARY_SUB, a, b, o);
}
stk_status stk_mul(stk_tensor *a, stk_tensor *b, stk_tensor **o)
{
    return binary_op(STK_BINARY_MUL, a, b, o);
}
stk_status stk_div(stk_tensor *a, stk_tensor *b, stk_tensor **o)
{
    return binary_op(STK_BINARY_DIV, a, b, o);
}

/* ---- unary ops --------------------------------------------------------- */

stk_status eng_unary_raw(stk_unary_op op, stk_tensor *x, float alpha, stk_tensor **out)
{
    stk_status st;
    const stk_backend *be;
    if ((st = eng_check_f32("unary op", x, "the input")) != STK_OK) return st;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) return st;
    if ((st = eng_tensor_new_like(x, false, out)) == STK_OK)
        be->unary(op, stk_tensor_numel(x), tensor_f32(xc), tensor_f32(*out), alpha);
    stk_tensor_release(xc);
    return st;
}

static stk_status unary_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    stk_unary_op op = (stk_unary_op)n->iv[0];
    float alpha = (float)n->fv[0];
    const stk_backend *be;
    stk_status st = eng_backend_of(gout, &be);
    if (st != STK_OK) return st;
    /* gout is contiguous: stk_backward makes it so */
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) == STK_OK)
        be->unary_backward(op, stk_tensor_numel(gout), n->saved[0] ? tensor_f32(n->saved[0]) : NULL,
                           n->saved[1] ? tensor_f32(n->saved[1]) : NULL, tensor_f32(gout),
                           tensor_f32(gin[0]), alpha);
    return st;
}

static stk_status unary_op(const char *name, stk_unary_op op, stk_tensor *x, float alpha,
                           bool save_x, bool save_y, stk_tensor **out)
{
    stk_tensor *y;
    stk_status st = eng_unary_raw(op, x, alpha, &y);
    if (st != STK_OK) return st;
    stk_node *n;
    if ((st = eng_node_attach(y, name, unary_backward, 1, &x, &n)) != STK_OK) {
        stk_tensor_release(y);
        return st;
    }
    if (n) {
        n->iv[0] = op;
        n->fv[0] = alpha;
        stk_tensor *tmp = NULL;
        if (save_x) {
            if ((st = eng_tensor_contiguous_raw(x, &tmp)) != STK_OK) goto fail;
            eng_node_save(n, 0, tmp);
            stk_tensor_release(tmp);
        }
        if (save_y && (st = eng_node_save_output(n, 1, y)) != STK_OK) goto fail;
    }
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(y);
    return st;
}

stk_status stk_neg(stk_tensor *x, stk_tensor **out)
{
    return unary_op("neg", STK_UNARY_NEG, x, 0.f, false, false, out);
}
stk_status stk_add_scalar(stk_tensor *x, float s, stk_tensor **out)
{
    return unary_op("add_scalar", STK_UNARY_ADD_SCALAR, x, s, false, false, out);
}
stk_status stk_mul_scalar(stk_tensor *x, float s, stk_tensor **out)
{
    return unary_op("mul_scalar", STK_UNARY_MUL_SCALAR, x, s, false, false, out);
}
stk_status stk_relu(stk_tensor *x, stk_tensor **out)
{
    /* its output saved for the backward, not its input: the input (batch
     * norm's output, mostly) can then be freed during the forward; the
     * output is kept anyway by the op after it (bench/README.md, "Memory") */
    return unary_op("relu", STK_UNARY_RELU, x, 0.f, false, true, out);
}
stk_status stk_relu6(stk_tensor *x, stk_tensor **out)
{
    return unary_op("relu6", STK_UNARY_RELU6, x, 0.f, false, true, out);
}
stk_status stk_gelu(stk_tensor *x, stk_tensor **out)
{
    return unary_op("gelu", STK_UNARY_GELU, x, 0.f, true, false, out);
}
stk_status stk_sigmoid(stk_tensor *x, stk_tensor **out)
{
    return unary_op("sigmoid", STK_UNARY_SIGMOID, x, 0.f, false, true, out);
}
stk_status stk_tanh(stk_tensor *x, stk_tensor **out)
{
    return unary_op("tanh", STK_UNARY_TANH, x, 0.f, false, true, out);
}
/* The next three keep their input: each gradient is a function of x. */
stk_status stk_silu(stk_tensor *x, stk_tensor **out)
{
    return unary_op("silu", STK_UNARY_SILU, x, 0.f, true, false, out);
}
stk_status stk_hardsigmoid(stk_tensor *x, stk_tensor **out)
{
    return unary_op("hardsigmoid", STK_UNARY_HARDSIGMOID, x, 0.f, true, false, out);
}
stk_status stk_hardswish(stk_tensor *x, stk_tensor **out)
{
    return unary_op("hardswish", STK_UNARY_HARDSWISH, x, 0.f, true, false, out);
}

/* ---- activations by kind ---- */

stk_status stk_activate(stk_tensor *x, stk_activation act, stk_tensor **out)
{
    switch (act) {
    case STK_ACT_NONE: return stk_mul_scalar(x, 1.f, out);
    case STK_ACT_RELU: return stk_relu(x, out);
    case STK_ACT_RELU6: return stk_relu6(x, out);
    case STK_ACT_SILU: return stk_silu(x, out);
    case STK_ACT_GELU: return stk_gelu(x, out);
    case STK_ACT_SIGMOID: return stk_sigmoid(x, out);
    case STK_ACT_HARDSIGMOID: return stk_hardsigmoid(x, out);
    case STK_ACT_HARDSWISH: return stk_hardswish(x, out);
    case STK_ACT_TANH: return stk_tanh(x, out);
    }
    return stk_error(STK_ERR_INVALID_ARG, "unknown activation %d", (int)act);
}

/* ---- dropout ----------------------------------------------------------- */

static stk_status dropout_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    const stk_backend *be;
    stk_status st = eng_backend_of(gout, &be);
    if (st != STK_OK) return st;
    if ((st = eng_node_grad_like(n, 0, false, &gin[0])) == STK_OK)
        be->dropout_backward(stk_tensor_numel(gout), (float)n->fv[0],
                             (const uint8_t *)tensor_ptr(n->saved[0]), tensor_f32(gout),
                             tensor_f32(gin[0]));
    return st;
}

stk_status stk_dropout(stk_tensor *x, float p, bool training, uint64_t seed, uint64_t stream,
                       stk_tensor **out)
{
    if (!(p >= 0.f && p <= 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "dropout: p = %g is outside [0, 1]", (double)p);
    if (!training || p == 0.f) return stk_mul_scalar(x, 1.f, out);
    stk_status st;
    const stk_backend *be;
    if ((st = eng_check_f32("dropout", x, "the input")) != STK_OK) return st;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL, *mask = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) goto fail;
    if ((st = eng_tensor_new_like(x, false, &y)) != STK_OK) goto fail;
    if ((st = eng_tensor_new(x->storage->device, STK_U8, x->ndim, x->shape, false, &mask)) !=
        STK_OK)
        goto fail;
    be->dropout_forward(stk_tensor_numel(x), p, seed, stream, tensor_f32(xc), tensor_f32(y),
                        (uint8_t *)tensor_ptr(mask));
    stk_node *n;
    if ((st = eng_node_attach(y, "dropout", dropout_backward, 1, &x, &n)) != STK_OK) goto fail;
    if (n) {
        n->fv[0] = p;
        eng_node_save(n, 0, mask);
    }
    stk_tensor_release(xc);
    stk_tensor_release(mask);
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(xc);
    stk_tensor_release(y);
    stk_tensor_release(mask);
    return st;
}

stk_status stk_scale_check_finite(int n, stk_tensor *const *ts, float factor, bool *finite)
{
    *finite = true;
    stk_tensor *flag = NULL, *first = NULL;
    const stk_backend *be = NULL;
    stk_status st = STK_OK;
    for (int i = 0; i < n && st == STK_OK; i++) {
        stk_tensor *t = ts[i];
        if (!t) continue;
        if ((st = eng_check_f32("scale_check_finite", t, "a tensor")) != STK_OK) break;
        if (!stk_tensor_is_contiguous(t)) {
            st = stk_error(STK_ERR_INVALID_ARG, "scale_check_finite: tensor %d is not contiguous",
                           i);
            break;
        }
        if (!flag) {
            first = t;
            if ((st = eng_backend_of(t, &be)) != STK_OK ||
                (st = eng_tensor_new(stk_tensor_device(t), STK_I32, 0, NULL, true, &flag)) !=
                    STK_OK)
                break;
        } else if ((st = eng_check_same_device("scale_check_finite", first, t)) != STK_OK) {
            break;
        }
        be->amp_unscale(stk_tensor_numel(t), tensor_f32(t), factor, (int32_t *)tensor_ptr(flag));
    }
    int32_t found = 0;
    if (st == STK_OK && flag) st = stk_tensor_to_host(flag, &found, sizeof found);
    stk_tensor_release(flag);
    if (st == STK_OK) *finite = !found;
    return st;
}
