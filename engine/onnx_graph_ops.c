/* The nodes of an ONNX graph on the engine's ops (onnx_graph.h): float
 * tensors through the differentiable ops, shape arithmetic on the host. */
#include "engine/onnx_graph_impl.h"

#include "engine/autograd.h"
#include "engine/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXD STK_ONNX_MAX_DIMS

static const stk_onnx_attr *onnx_attr(const onnx_node *n, const char *name)
{
    return stk_onnx_node_attr(n->src, name);
}

/* ---- values ------------------------------------------------------------------------ */

static onnx_value *in_value(stk_onnx_graph *g, const onnx_node *n, int k)
{
    return k < n->n_in && n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
}

/* Host numbers as a float tensor on the graph's device: the value's own
 * (kept) for a constant, the caller's scope's otherwise. */
static stk_status host_as_tensor(const stk_onnx_graph *g, onnx_value *v)
{
    float *f = malloc(sizeof(float) * (size_t)(v->numel ? v->numel : 1));
    if (!f) return stk_error(STK_ERR_NOMEM, "no memory for a constant");
    for (int64_t i = 0; i < v->numel; i++) f[i] = (float)v->host[i];
    stk_status st;
    if (v->persistent) {
        st = eng_tensor_new(STK_DEVICE_CPU, STK_F32, v->ndim, v->dims, false, &v->t);
        if (st == STK_OK && v->numel) memcpy(stk_tensor_data(v->t), f, sizeof(float) * (size_t)v->numel);
    } else {
        st = stk_tensor_from_host(STK_F32, v->ndim, v->dims, f, &v->t);
    }
    free(f);
    if (st == STK_OK && g->device != STK_DEVICE_CPU) st = stk_tensor_move_to(v->t, g->device);
    return st;
}

/* Input k as a float tensor (host numbers made into one). */
static stk_status in_tensor(stk_onnx_graph *g, const onnx_node *n, int k, stk_tensor **out)
{
    onnx_value *v = in_value(g, n, k);
    *out = NULL;
    if (!v || (!v->t && !v->host))
        return stk_error(STK_ERR_INVALID_ARG, "input %d is missing", k);
    if (!v->t) STK_TRY(host_as_tensor(g, v));
    *out = v->t;
    return STK_OK;
}

/* A small float constant of the file (not a parameter), which shape
 * arithmetic may read as numbers (torch's attention scales a head by
 * 1 / sqrt(float(head_dim))): its values kept as host numbers too. */
static bool small_constant(onnx_value *v)
{
    if (!v || v->host || !v->t || !v->persistent || stk_tensor_requires_grad(v->t) ||
        stk_tensor_dtype(v->t) != STK_F32 || stk_tensor_numel(v->t) > 64 ||
        stk_tensor_device(v->t) != STK_DEVICE_CPU)
        return false;
    int64_t numel = stk_tensor_numel(v->t);
    if (!(v->host = malloc(sizeof(double) * (size_t)(numel ? numel : 1)))) return false;
    const float *f = stk_tensor_data(v->t);
    for (int64_t i = 0; i < numel; i++) v->host[i] = f[i];
    v->ndim = stk_tensor_ndim(v->t);
    for (int d = 0; d < v->ndim; d++) v->dims[d] = stk_tensor_dim(v->t, d);
    v->numel = numel;
    v->is_float = true;
    return true;
}

stk_status eng_onnx_graph_move(stk_onnx_graph *g, stk_device dev)
{
    for (int i = 0; i < g->n_values; i++) {
        onnx_value *v = &g->values[i];
        if (!v->persistent || !v->t || stk_tensor_dtype(v->t) != STK_F32) continue;
        if (stk_tensor_device(v->t) == STK_DEVICE_CPU) small_constant(v); /* host numbers first */
        STK_TRY(stk_tensor_move_to(v->t, dev));
    }
    g->device = dev;
    return STK_OK;
}

/* Input k as host numbers (shape arithmetic). */
static stk_status in_host(stk_onnx_graph *g, const onnx_node *n, int k, const onnx_value **out)
{
    onnx_value *v = in_value(g, n, k);
    if (v && !v->host) small_constant(v);
    if (!v || !v->host)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "input %d must be a constant or shape arithmetic (Stoke computes shapes "
                         "on the host), not a tensor computed from the data",
                         k);
    *out = v;
    return STK_OK;
}

/* Shape arithmetic: every input host numbers or a small constant. */
static bool all_host(stk_onnx_graph *g, const onnx_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        onnx_value *v = in_value(g, n, k);
        if (v && !v->host && !(v->persistent && v->t && !stk_tensor_requires_grad(v->t) &&
                               stk_tensor_numel(v->t) <= 64))
            return false;
    }
    return true;
}

static void set_tensor(stk_onnx_graph *g, const onnx_node *n, int k, stk_tensor *t)
{
    if (k < n->n_out && n->out[k] >= 0) g->values[n->out[k]].t = t;
}

/* Output k as host numbers of the given shape (data copied; NULL: zeros). */
static stk_status set_host(stk_onnx_graph *g, const onnx_node *n, int k, int ndim,
                           const int64_t *dims, const double *data)
{
    if (k >= n->n_out || n->out[k] < 0) return STK_OK;
    onnx_value *v = &g->values[n->out[k]];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= dims[d];
    if (ndim > MAXD || numel < 0 || numel > (1 << 24))
        return stk_error(STK_ERR_UNSUPPORTED, "a host value of %lld elements", (long long)numel);
    free(v->host);
    v->host = calloc((size_t)(numel ? numel : 1), sizeof(double));
    if (!v->host) return stk_error(STK_ERR_NOMEM, "no memory for a shape");
    if (data) memcpy(v->host, data, sizeof(double) * (size_t)numel);
    v->ndim = ndim;
    if (ndim) memcpy(v->dims, dims, sizeof(int64_t) * (size_t)ndim);
    v->numel = numel;
    return STK_OK;
}

/* Output k's host numbers take `from`'s type (float or integer). */
static stk_status keep_type(stk_onnx_graph *g, const onnx_node *n, int k, bool is_float,
                            stk_status st)
{
    if (st == STK_OK && k < n->n_out && n->out[k] >= 0) g->values[n->out[k]].is_float = is_float;
    return st;
}

static int64_t attr_int(const onnx_node *n, const char *name, int64_t dflt)
{
    const stk_onnx_attr *a = onnx_attr(n, name);
    return a && a->type == STK_ONNX_ATTR_INT ? a->i : dflt;
}

static float attr_float(const onnx_node *n, const char *name, float dflt)
{
    const stk_onnx_attr *a = onnx_attr(n, name);
    return a && a->type == STK_ONNX_ATTR_FLOAT ? a->f : dflt;
}

/* INTS attribute: count (0 when absent), values in v[0..max). -1: too many. */
static int attr_ints(const onnx_node *n, const char *name, int64_t *v, int max)
{
    const stk_onnx_attr *a = onnx_attr(n, name);
    if (!a || a->type != STK_ONNX_ATTR_INTS) return 0;
    if (a->n > max) return -1;
    if (a->n) memcpy(v, a->ints, sizeof(int64_t) * (size_t)a->n);
    return a->n;
}

/* ---- host arithmetic (NumPy broadcasting) --------------------------------------------- */

typedef double (*host_fn)(const double *args);
static double h_add(const double *a) { return a[0] + a[1]; }
static double h_sub(const double *a) { return a[0] - a[1]; }
static double h_mul(const double *a) { return a[0] * a[1]; }
static double h_div(const double *a) { return a[1] != 0 ? trunc(a[0] / a[1]) : 0; } /* integers */
static double h_fdiv(const double *a) { return a[0] / a[1]; }
static double h_eq(const double *a) { return a[0] == a[1]; }
static double h_where(const double *a) { return a[0] != 0 ? a[1] : a[2]; }
static double h_less(const double *a) { return a[0] < a[1]; }
static double h_mod(const double *a) /* ONNX's fmod 0: the divisor's sign */
{
    if (a[1] == 0) return 0;
    double r = fmod(a[0], a[1]);
    return r != 0 && (r < 0) != (a[1] < 0) ? r + a[1] : r;
}
static double h_sqrt(const double *a) { return sqrt(a[0]); }

/* out (output 0) = f over the values, broadcast to their common shape
 * (or to `to` when given: Expand). */
static stk_status host_map(stk_onnx_graph *g, const onnx_node *n, int n_args,
                           const onnx_value *const *v, int to_nd, const int64_t *to, host_fn f)
{
    int nd = to_nd;
    for (int k = 0; k < n_args; k++)
        if (v[k]->ndim > nd) nd = v[k]->ndim;
    int64_t dims[MAXD];
    for (int d = 0; d < nd; d++) {
        int dt = d - (nd - to_nd);
        dims[d] = dt >= 0 ? to[dt] : 1;
        for (int k = 0; k < n_args; k++) {
            int dk = d - (nd - v[k]->ndim);
            int64_t s = dk >= 0 ? v[k]->dims[dk] : 1;
            if (s != 1 && dims[d] != 1 && s != dims[d])
                return stk_error(STK_ERR_INVALID_ARG, "shapes do not broadcast");
            if (s != 1) dims[d] = s;
        }
    }
    STK_TRY(set_host(g, n, 0, nd, dims, NULL));
    onnx_value *o = &g->values[n->out[0]];
    o->is_float = false;
    for (int k = 0; k < n_args; k++) o->is_float |= v[k]->is_float;
    for (int64_t i = 0; i < o->numel; i++) {
        double args[3];
        for (int k = 0; k < n_args; k++) {
            int64_t idx = 0, rem = i, mul = 1;
            for (int d = nd - 1; d >= 0; d--) {
                int64_t c = rem % dims[d];
                rem /= dims[d];
                int dk = d - (nd - v[k]->ndim);
                if (dk < 0) continue;
                if (v[k]->dims[dk] != 1) idx += c * mul;
                mul *= v[k]->dims[dk];
            }
            args[k] = v[k]->host[idx];
        }
        o->host[i] = f(args);
    }
    return STK_OK;
}

static stk_status host_broadcast(stk_onnx_graph *g, const onnx_node *n, int n_args, host_fn f)
{
    const onnx_value *v[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n_args; k++) STK_TRY(in_host(g, n, k, &v[k]));
    return host_map(g, n, n_args, v, 0, NULL, f);
}

static double h_first(const double *a) { return a[0]; }

/* ---- ops ------------------------------------------------------------------------------ */

typedef stk_status (*binary_fn)(stk_tensor *, stk_tensor *, stk_tensor **);

static stk_status run_binary(stk_onnx_graph *g, const onnx_node *n, binary_fn tf, host_fn hf)
{
    if (all_host(g, n)) {
        if (hf == h_div) { /* ONNX divides integers as integers, floats exactly */
            const onnx_value *a = NULL, *b = NULL;
            STK_TRY(in_host(g, n, 0, &a));
            STK_TRY(in_host(g, n, 1, &b));
            if (a->is_float || b->is_float) hf = h_fdiv;
        }
        return host_broadcast(g, n, 2, hf);
    }
    stk_tensor *a, *b, *y;
    STK_TRY(in_tensor(g, n, 0, &a));
    STK_TRY(in_tensor(g, n, 1, &b));
    STK_TRY(tf(a, b, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_gemm(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *a, *b, *c = NULL, *y;
    STK_TRY(in_tensor(g, n, 0, &a));
    STK_TRY(in_tensor(g, n, 1, &b));
    if (in_value(g, n, 2)) STK_TRY(in_tensor(g, n, 2, &c));
    float alpha = attr_float(n, "alpha", 1.f), beta = attr_float(n, "beta", 1.f);
    int64_t ta = attr_int(n, "transA", 0), tb = attr_int(n, "transB", 0);
    if (!ta && tb && alpha == 1.f && beta == 1.f && (!c || stk_tensor_ndim(c) == 1)) {
        STK_TRY(stk_linear(a, b, c, &y)); /* nn.Linear's form */
    } else {
        if (ta) STK_TRY(stk_transpose(a, 0, 1, &a));
        if (tb) STK_TRY(stk_transpose(b, 0, 1, &b));
        STK_TRY(stk_matmul(a, b, &y));
        if (alpha != 1.f) STK_TRY(stk_mul_scalar(y, alpha, &y));
        if (c && beta != 1.f) STK_TRY(stk_mul_scalar(c, beta, &c));
        if (c && beta != 0.f) STK_TRY(stk_add(y, c, &y));
    }
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* Square 2-D windows: kernel, stride, symmetric padding, dilation. */
static stk_status window_2d(const onnx_node *n, int64_t kernel_from_w, int *k, int *s, int *p,
                            int *dil)
{
    int64_t ks[MAXD], st[MAXD], pads[2 * MAXD], dl[MAXD];
    int nk = attr_ints(n, "kernel_shape", ks, MAXD), ns = attr_ints(n, "strides", st, MAXD);
    int np = attr_ints(n, "pads", pads, 2 * MAXD), nd = attr_ints(n, "dilations", dl, MAXD);
    const stk_onnx_attr *ap = onnx_attr(n, "auto_pad");
    if (ap && ap->type == STK_ONNX_ATTR_STRING && strcmp(ap->s, "NOTSET"))
        return stk_error(STK_ERR_UNSUPPORTED, "auto_pad %s (only explicit pads)", ap->s);
    if (nk == 0 && kernel_from_w > 0) ks[0] = ks[1] = kernel_from_w, nk = 2;
    if (nk != 2 || (ns && ns != 2) || (np && np != 4) || (nd && nd != 2))
        return stk_error(STK_ERR_UNSUPPORTED, "only 2-D windows over NCHW");
    if (ks[0] != ks[1] || (ns && st[0] != st[1]) || (np && (pads[0] != pads[1] ||
        pads[0] != pads[2] || pads[0] != pads[3])) || (nd && dl[0] != dl[1]))
        return stk_error(STK_ERR_UNSUPPORTED, "only square windows with equal padding on all sides");
    if (ks[0] < 1 || ks[0] > 1024 || (ns && (st[0] < 1 || st[0] > 1024)) ||
        (np && (pads[0] < 0 || pads[0] > 1024)) || (nd && (dl[0] < 1 || dl[0] > 1024)))
        return stk_error(STK_ERR_INVALID_ARG, "window sizes out of range");
    *k = (int)ks[0], *s = ns ? (int)st[0] : 1, *p = np ? (int)pads[0] : 0;
    *dil = nd ? (int)dl[0] : 1;
    return STK_OK;
}

static stk_status run_conv(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *x, *w, *b = NULL, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    STK_TRY(in_tensor(g, n, 1, &w));
    const onnx_value *bias = in_value(g, n, 2);
    bool zero_bias = bias && bias->host; /* the dynamo exporter's Expand(0) for a conv without */
    for (int64_t i = 0; zero_bias && i < bias->numel; i++) zero_bias = bias->host[i] == 0;
    if (bias && !zero_bias) STK_TRY(in_tensor(g, n, 2, &b));
    if (stk_tensor_ndim(w) != 4) return stk_error(STK_ERR_UNSUPPORTED, "only 2-D convolutions");
    int k, s, p, d;
    STK_TRY(window_2d(n, stk_tensor_dim(w, 2), &k, &s, &p, &d));
    if (stk_tensor_dim(w, 2) != k || stk_tensor_dim(w, 3) != k)
        return stk_error(STK_ERR_INVALID_ARG, "kernel_shape does not match the weight %s",
                         stk_tensor_shape_str(w));
    int64_t groups = attr_int(n, "group", 1);
    if (groups < 1 || groups > (1 << 20)) return stk_error(STK_ERR_INVALID_ARG, "group %lld", (long long)groups);
    stk_conv2d_params cp = {{s, s}, {p, p}, {d, d}, (int)groups};
    STK_TRY(stk_conv2d(x, w, b, &cp, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_batch_norm(stk_onnx_graph *g, const onnx_node *n, bool training)
{
    stk_tensor *x, *t[4], *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    for (int k = 0; k < 4; k++) STK_TRY(in_tensor(g, n, k + 1, &t[k]));
    /* ONNX's momentum weighs the old statistics: PyTorch's is 1 - it */
    float momentum = 1.f - attr_float(n, "momentum", 0.9f), eps = attr_float(n, "epsilon", 1e-5f);
    STK_TRY(stk_batch_norm_act(x, t[0], t[1], t[2], t[3], training, momentum, eps,
                               n->relu_after ? STK_BN_ACT_RELU : STK_BN_ACT_NONE, &y));
    if (training && n->counter >= 0) ((int32_t *)stk_tensor_data(g->params[n->counter].value))[0]++;
    set_tensor(g, n, 0, y);
    set_tensor(g, n, 1, t[2]);
    set_tensor(g, n, 2, t[3]);
    return STK_OK;
}

typedef stk_status (*unary_fn)(stk_tensor *, stk_tensor **);

static stk_status run_unary(stk_onnx_graph *g, const onnx_node *n, unary_fn f)
{
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    STK_TRY(f(x, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* Input k as one number: host, or a one-element float constant. */
static stk_status in_scalar(stk_onnx_graph *g, const onnx_node *n, int k, double *out)
{
    const onnx_value *v = in_value(g, n, k);
    if (v && v->host && v->numel == 1) {
        *out = v->host[0];
        return STK_OK;
    }
    if (v && v->t && v->persistent && stk_tensor_numel(v->t) == 1 &&
        stk_tensor_device(v->t) == STK_DEVICE_CPU) {
        float f;
        memcpy(&f, stk_tensor_data(v->t), sizeof f);
        *out = f;
        return STK_OK;
    }
    return stk_error(STK_ERR_UNSUPPORTED, "input %d must be a one-element constant", k);
}

/* Clip as the exporter writes ReLU6 (0, 6) and ReLU (0, none). */
static stk_status run_clip(stk_onnx_graph *g, const onnx_node *n)
{
    double lo = -INFINITY, hi = INFINITY;
    if (in_value(g, n, 1)) STK_TRY(in_scalar(g, n, 1, &lo));
    if (in_value(g, n, 2)) STK_TRY(in_scalar(g, n, 2, &hi));
    if (lo == 0 && hi == 6) return run_unary(g, n, stk_relu6);
    if (lo == 0 && hi == INFINITY) return run_unary(g, n, stk_relu);
    return stk_error(STK_ERR_UNSUPPORTED, "Clip to [%g, %g] (Stoke runs [0, 6] and [0, inf))",
                     lo, hi);
}

static stk_status run_hardsigmoid(stk_onnx_graph *g, const onnx_node *n)
{
    float alpha = attr_float(n, "alpha", 0.2f), beta = attr_float(n, "beta", 0.5f);
    if (fabsf(alpha - 1.f / 6.f) > 1e-6f || beta != 0.5f)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "HardSigmoid with alpha %g, beta %g (Stoke runs torch's: 1/6, 0.5)",
                         (double)alpha, (double)beta);
    return run_unary(g, n, stk_hardsigmoid);
}

static int axis_of(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

static stk_status run_softmax(stk_onnx_graph *g, const onnx_node *n, bool log)
{
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    int axis = axis_of(attr_int(n, "axis", -1), stk_tensor_ndim(x));
    STK_TRY(log ? stk_log_softmax(x, axis, &y) : stk_softmax(x, axis, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_layer_norm(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *x, *w, *b = NULL, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    w = NULL;
    if (in_value(g, n, 1)) STK_TRY(in_tensor(g, n, 1, &w));
    if (in_value(g, n, 2)) STK_TRY(in_tensor(g, n, 2, &b));
    bool parts = strcmp(n->src->op_type, "LayerNormalization") != 0; /* folded from its parts */
    if (!parts && axis_of(attr_int(n, "axis", -1), stk_tensor_ndim(x)) != stk_tensor_ndim(x) - 1)
        return stk_error(STK_ERR_UNSUPPORTED, "layer norm over more than the last dimension");
    STK_TRY(stk_layer_norm(x, w, b, parts ? n->p : attr_float(n, "epsilon", 1e-5f), &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_pool(stk_onnx_graph *g, const onnx_node *n, bool max)
{
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    if (n->n_out > 1 && n->out[1] >= 0) return stk_error(STK_ERR_UNSUPPORTED, "MaxPool's indices");
    if (attr_int(n, "ceil_mode", 0)) return stk_error(STK_ERR_UNSUPPORTED, "ceil_mode 1");
    int k, s, p, d;
    STK_TRY(window_2d(n, 0, &k, &s, &p, &d));
    if (d != 1) return stk_error(STK_ERR_UNSUPPORTED, "dilated pooling");
    if (max)
        STK_TRY(stk_max_pool2d(x, k, s, p, &y));
    else
        STK_TRY(stk_avg_pool2d(x, k, s, p, attr_int(n, "count_include_pad", 0) != 0, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_global_pool(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    STK_TRY(stk_global_avg_pool2d(x, &y));
    int64_t shape[4] = {stk_tensor_dim(y, 0), stk_tensor_dim(y, 1), 1, 1};
    STK_TRY(stk_reshape(y, 4, shape, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* The dims of input k, tensor or host. */
static int dims_of(stk_onnx_graph *g, const onnx_node *n, int k, int64_t *dims)
{
    const onnx_value *v = in_value(g, n, k);
    if (!v) return -1;
    if (v->host) {
        memcpy(dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
        return v->ndim;
    }
    if (!v->t) return -1;
    for (int d = 0; d < stk_tensor_ndim(v->t); d++) dims[d] = stk_tensor_dim(v->t, d);
    return stk_tensor_ndim(v->t);
}

/* Output 0 = input 0 with a new shape (a reshape of a tensor, or of host numbers). */
static stk_status reshaped(stk_onnx_graph *g, const onnx_node *n, int ndim, const int64_t *dims)
{
    const onnx_value *v = in_value(g, n, 0);
    if (v->host) { /* infer a -1 as stk_reshape does */
        int64_t to[MAXD], known = 1;
        int free_dim = -1;
        for (int d = 0; d < ndim; d++) {
            to[d] = dims[d];
            if (dims[d] == -1 && free_dim < 0)
                free_dim = d;
            else
                known *= dims[d];
        }
        if (free_dim >= 0 && known > 0) to[free_dim] = v->numel / known;
        return keep_type(g, n, 0, v->is_float, set_host(g, n, 0, ndim, to, v->host));
    }
    stk_tensor *y;
    STK_TRY(stk_reshape(v->t, ndim, dims, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_flatten(stk_onnx_graph *g, const onnx_node *n)
{
    int64_t dims[MAXD];
    int nd = dims_of(g, n, 0, dims);
    if (nd < 0) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    int axis = axis_of(attr_int(n, "axis", 1), nd);
    if (axis < 0 || axis > nd) return stk_error(STK_ERR_INVALID_ARG, "axis out of range");
    int64_t two[2] = {1, 1};
    for (int d = 0; d < nd; d++) two[d < axis ? 0 : 1] *= dims[d];
    return reshaped(g, n, 2, two);
}

static stk_status run_reshape(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *s = NULL;
    STK_TRY(in_host(g, n, 1, &s));
    int64_t dims[MAXD], to[MAXD];
    int nd = dims_of(g, n, 0, dims);
    if (nd < 0) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    if (s->numel > MAXD) return stk_error(STK_ERR_UNSUPPORTED, "a shape of %lld dimensions", (long long)s->numel);
    bool allowzero = attr_int(n, "allowzero", 0) != 0;
    for (int d = 0; d < s->numel; d++) {
        to[d] = (int64_t)s->host[d];
        if (to[d] == 0 && !allowzero) {
            if (d >= nd) return stk_error(STK_ERR_INVALID_ARG, "shape copies dimension %d of %d", d, nd);
            to[d] = dims[d];
        }
    }
    return reshaped(g, n, (int)s->numel, to); /* stk_reshape infers a -1 */
}

static stk_status run_transpose(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *x, *y;
    const onnx_value *v = in_value(g, n, 0);
    if (v && v->host && v->ndim <= 1)
        return keep_type(g, n, 0, v->is_float, set_host(g, n, 0, v->ndim, v->dims, v->host));
    STK_TRY(in_tensor(g, n, 0, &x));
    int nd = stk_tensor_ndim(x);
    int64_t p[MAXD];
    int np = attr_ints(n, "perm", p, MAXD);
    int perm[MAXD];
    if (np != 0 && np != nd) return stk_error(STK_ERR_INVALID_ARG, "perm has %d entries for %d dims", np, nd);
    for (int d = 0; d < nd; d++) perm[d] = np ? (int)p[d] : nd - 1 - d;
    STK_TRY(stk_permute(x, perm, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_concat(stk_onnx_graph *g, const onnx_node *n)
{
    if (all_host(g, n)) { /* 1-D shape pieces */
        double buf[64];
        int64_t len = 0;
        bool is_float = false;
        for (int k = 0; k < n->n_in; k++) {
            const onnx_value *v = NULL;
            STK_TRY(in_host(g, n, k, &v));
            if (v->ndim != 1 || len + v->numel > 64)
                return stk_error(STK_ERR_UNSUPPORTED, "host Concat of other than short 1-D pieces");
            memcpy(buf + len, v->host, sizeof(double) * (size_t)v->numel);
            len += v->numel;
            is_float |= v->is_float;
        }
        return keep_type(g, n, 0, is_float, set_host(g, n, 0, 1, &len, buf));
    }
    stk_tensor *xs[64], *y;
    if (n->n_in > 64) return stk_error(STK_ERR_UNSUPPORTED, "Concat of over 64 inputs");
    for (int k = 0; k < n->n_in; k++) STK_TRY(in_tensor(g, n, k, &xs[k]));
    int axis = axis_of(attr_int(n, "axis", 0), stk_tensor_ndim(xs[0]));
    STK_TRY(stk_cat(n->n_in, xs, axis, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* Active in training only, whatever the file says (its mask output unset:
 * nothing in torch's exports reads it). */
static stk_status run_dropout(stk_onnx_graph *g, int i, bool training, uint64_t seed,
                              uint64_t stream)
{
    const onnx_node *n = &g->nodes[i];
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    double p = attr_float(n, "ratio", 0.5f);
    if (in_value(g, n, 1)) STK_TRY(in_scalar(g, n, 1, &p));
    if (!(p >= 0 && p < 1)) return stk_error(STK_ERR_INVALID_ARG, "ratio %g outside [0, 1)", p);
    STK_TRY(stk_dropout(x, (float)p, training, seed, stream ^ ((uint64_t)(i + 1) << 40), &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_identity(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *v = in_value(g, n, 0);
    if (!v) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    if (v->host)
        return keep_type(g, n, 0, v->is_float, set_host(g, n, 0, v->ndim, v->dims, v->host));
    set_tensor(g, n, 0, v->t);
    return STK_OK;
}

static stk_status run_shape(stk_onnx_graph *g, const onnx_node *n)
{
    int64_t dims[MAXD];
    int nd = dims_of(g, n, 0, dims);
    if (nd < 0) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    int64_t start = attr_int(n, "start", 0), end = attr_int(n, "end", nd);
    if (start < 0) start += nd;
    if (end < 0) end += nd;
    if (start < 0) start = 0;
    if (end > nd) end = nd;
    double v[MAXD];
    int64_t len = end > start ? end - start : 0;
    for (int64_t d = 0; d < len; d++) v[d] = (double)dims[start + d];
    return set_host(g, n, 0, 1, &len, v);
}

/* Gather of a run of consecutive indices (of any shape) from a tensor: the
 * dynamo exporter's as_strided over a contiguous view (convnext's
 * classifier) is one, x.flatten()[arange(N * C)].reshape(N, C, 1, 1): a
 * narrow and a reshape. Other index patterns are refused. */
static stk_status gather_run(stk_onnx_graph *g, const onnx_node *n, const onnx_value *data,
                             const onnx_value *idx, int axis, const int64_t *dims)
{
    int64_t first = idx->numel ? (int64_t)idx->host[0] : 0;
    if (first < 0) first += dims[axis];
    for (int64_t k = 0; k < idx->numel; k++)
        if ((int64_t)idx->host[k] != first + k && (int64_t)idx->host[k] != first + k - dims[axis])
            return stk_error(STK_ERR_UNSUPPORTED,
                             "Gather of %lld indices that are not consecutive (Stoke gathers a "
                             "few indices, or a run of them)",
                             (long long)idx->numel);
    if (first < 0 || first + idx->numel > dims[axis])
        return stk_error(STK_ERR_INVALID_ARG, "indices out of range");
    int nd = stk_tensor_ndim(data->t);
    if (nd - 1 + idx->ndim > MAXD) return stk_error(STK_ERR_UNSUPPORTED, "too many dimensions");
    stk_tensor *y;
    STK_TRY(stk_narrow(data->t, axis, first, idx->numel, &y));
    int64_t to[MAXD];
    int out = 0;
    for (int d = 0; d < axis; d++) to[out++] = dims[d];
    for (int d = 0; d < idx->ndim; d++) to[out++] = idx->dims[d];
    for (int d = axis + 1; d < nd; d++) to[out++] = dims[d];
    STK_TRY(stk_reshape(y, out, to, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_gather(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *idx = NULL;
    STK_TRY(in_host(g, n, 1, &idx));
    const onnx_value *data = in_value(g, n, 0);
    if (!data) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    int64_t dims[MAXD];
    int nd = dims_of(g, n, 0, dims);
    int axis = axis_of(attr_int(n, "axis", 0), nd);
    if (axis < 0 || axis >= nd) return stk_error(STK_ERR_INVALID_ARG, "axis out of range");
    if ((idx->numel > 64 || idx->ndim > 1) && data->t)
        return gather_run(g, n, data, idx, axis, dims);
    if (idx->numel > 64 || idx->ndim > 1)
        return stk_error(STK_ERR_UNSUPPORTED, "Gather of other than a few indices");
    int64_t at[64];
    for (int64_t k = 0; k < idx->numel; k++) {
        at[k] = (int64_t)idx->host[k];
        if (at[k] < 0) at[k] += dims[axis];
        if (at[k] < 0 || at[k] >= dims[axis])
            return stk_error(STK_ERR_INVALID_ARG, "index %lld out of range", (long long)at[k]);
    }
    if (data->host) {
        if (nd != 1) return stk_error(STK_ERR_UNSUPPORTED, "host Gather of a %d-D value", nd);
        double v[64];
        for (int64_t k = 0; k < idx->numel; k++) v[k] = data->host[at[k]];
        return keep_type(g, n, 0, data->is_float, set_host(g, n, 0, idx->ndim, idx->dims, v));
    }
    /* tensors: narrow per index (x[:, 0] for ViT's class token) */
    stk_tensor *parts[64], *y;
    for (int64_t k = 0; k < idx->numel; k++) STK_TRY(stk_narrow(data->t, axis, at[k], 1, &parts[k]));
    if (idx->numel == 1)
        y = parts[0];
    else
        STK_TRY(stk_cat((int)idx->numel, parts, axis, &y));
    if (idx->ndim == 0) STK_TRY(stk_squeeze(y, axis, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* Axes from input 1 (opset 13) or the attribute (before). -1: none given. */
static int axes_of(stk_onnx_graph *g, const onnx_node *n, int64_t *axes)
{
    const onnx_value *v = in_value(g, n, 1);
    if (v && v->host && v->numel <= MAXD) {
        for (int64_t k = 0; k < v->numel; k++) axes[k] = (int64_t)v->host[k];
        return (int)v->numel;
    }
    int na = attr_ints(n, "axes", axes, MAXD);
    return na > 0 ? na : -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static stk_status run_unsqueeze(stk_onnx_graph *g, const onnx_node *n)
{
    int64_t dims[MAXD], axes[MAXD], to[MAXD];
    int nd = dims_of(g, n, 0, dims), na = axes_of(g, n, axes);
    if (nd < 0 || na < 1 || nd + na > MAXD) return stk_error(STK_ERR_INVALID_ARG, "bad axes");
    int out = nd + na;
    for (int k = 0; k < na; k++) axes[k] = axis_of(axes[k], out);
    qsort(axes, (size_t)na, sizeof *axes, cmp_i64);
    for (int d = 0, k = 0, src = 0; d < out; d++) {
        if (k < na && axes[k] == d) {
            to[d] = 1, k++;
        } else {
            if (src >= nd) return stk_error(STK_ERR_INVALID_ARG, "bad axes");
            to[d] = dims[src++];
        }
    }
    return reshaped(g, n, out, to);
}

static stk_status run_squeeze(stk_onnx_graph *g, const onnx_node *n)
{
    int64_t dims[MAXD], axes[MAXD], to[MAXD];
    int nd = dims_of(g, n, 0, dims), na = axes_of(g, n, axes);
    if (nd < 0) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    bool drop[MAXD] = {false};
    for (int k = 0; k < na; k++) {
        int a = axis_of(axes[k], nd);
        if (a < 0 || a >= nd || dims[a] != 1)
            return stk_error(STK_ERR_INVALID_ARG, "axis %lld is not of size 1", (long long)axes[k]);
        drop[a] = true;
    }
    int out = 0;
    for (int d = 0; d < nd; d++)
        if (!(na < 0 ? dims[d] == 1 : drop[d])) to[out++] = dims[d];
    return reshaped(g, n, out, to);
}

static stk_status run_slice(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *starts = NULL, *ends = NULL, *axes = NULL, *steps = NULL;
    STK_TRY(in_host(g, n, 1, &starts));
    STK_TRY(in_host(g, n, 2, &ends));
    if (in_value(g, n, 3)) STK_TRY(in_host(g, n, 3, &axes));
    if (in_value(g, n, 4)) STK_TRY(in_host(g, n, 4, &steps));
    int64_t dims[MAXD];
    int nd = dims_of(g, n, 0, dims);
    const onnx_value *data = in_value(g, n, 0);
    if (nd < 0 || starts->numel != ends->numel || starts->numel > MAXD)
        return stk_error(STK_ERR_INVALID_ARG, "starts and ends disagree");
    stk_tensor *y = data->t;
    double hv[64];
    int64_t hlen = data->host ? data->numel : 0;
    if (data->host) {
        if (nd != 1 || hlen > 64) return stk_error(STK_ERR_UNSUPPORTED, "host Slice of a %d-D value", nd);
        memcpy(hv, data->host, sizeof(double) * (size_t)hlen);
    }
    for (int64_t k = 0; k < starts->numel; k++) {
        int a = axes ? axis_of((int64_t)axes->host[k], nd) : (int)k;
        if (a < 0 || a >= nd) return stk_error(STK_ERR_INVALID_ARG, "axis out of range");
        if (steps && steps->host[k] != 1) return stk_error(STK_ERR_UNSUPPORTED, "Slice with a step other than 1");
        double s = starts->host[k], e = ends->host[k], len = (double)dims[a];
        if (s < 0) s += len;
        if (e < 0) e += len;
        s = s < 0 ? 0 : s > len ? len : s;
        e = e < s ? s : e > len ? len : e;
        if (data->host) {
            memmove(hv, hv + (int64_t)s, sizeof(double) * (size_t)(e - s));
            hlen = (int64_t)(e - s);
        } else {
            STK_TRY(stk_narrow(y, a, (int64_t)s, (int64_t)(e - s), &y));
        }
        dims[a] = (int64_t)(e - s);
    }
    if (data->host) return keep_type(g, n, 0, data->is_float, set_host(g, n, 0, 1, &hlen, hv));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_cast(stk_onnx_graph *g, const onnx_node *n)
{
    int64_t to = attr_int(n, "to", 0);
    const onnx_value *v = in_value(g, n, 0);
    if (!v) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    bool to_float = to == STK_ONNX_FLOAT || to == STK_ONNX_DOUBLE;
    if (v->t) {
        if (!to_float) return stk_error(STK_ERR_UNSUPPORTED, "Cast of a float tensor to type %lld", (long long)to);
        set_tensor(g, n, 0, v->t);
        return STK_OK;
    }
    STK_TRY(set_host(g, n, 0, v->ndim, v->dims, v->host));
    onnx_value *o = &g->values[n->out[0]];
    o->is_float = to_float;
    for (int64_t i = 0; i < o->numel; i++)
        o->host[i] = to == STK_ONNX_BOOL ? o->host[i] != 0 : to_float ? o->host[i] : trunc(o->host[i]);
    return STK_OK;
}

static stk_status run_constant_of_shape(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *s = NULL;
    STK_TRY(in_host(g, n, 0, &s));
    int64_t dims[MAXD];
    if (s->numel > MAXD) return stk_error(STK_ERR_UNSUPPORTED, "a shape of %lld dimensions", (long long)s->numel);
    for (int d = 0; d < s->numel; d++) dims[d] = (int64_t)s->host[d];
    double value = 0;
    const stk_onnx_attr *a = onnx_attr(n, "value");
    if (a && a->type == STK_ONNX_ATTR_TENSOR && a->t->numel == 1) {
        if (a->t->dtype == STK_ONNX_FLOAT) {
            float f;
            memcpy(&f, a->t->data, 4);
            value = f;
        } else if (a->t->dtype == STK_ONNX_INT64) {
            int64_t i;
            memcpy(&i, a->t->data, 8);
            value = (double)i;
        }
    }
    STK_TRY(set_host(g, n, 0, (int)s->numel, dims, NULL));
    onnx_value *o = &g->values[n->out[0]];
    o->is_float = a && a->type == STK_ONNX_ATTR_TENSOR && a->t->dtype == STK_ONNX_FLOAT;
    for (int64_t i = 0; i < o->numel; i++) o->host[i] = value;
    return STK_OK;
}

static stk_status run_expand(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *s = NULL;
    STK_TRY(in_host(g, n, 1, &s));
    const onnx_value *v = in_value(g, n, 0);
    if (!v) return stk_error(STK_ERR_INVALID_ARG, "input 0 is missing");
    if (s->numel > MAXD) return stk_error(STK_ERR_UNSUPPORTED, "a shape of %lld dimensions", (long long)s->numel);
    if (v->host) {
        int64_t target[MAXD];
        for (int d = 0; d < s->numel; d++) target[d] = (int64_t)s->host[d];
        return host_map(g, n, 1, &v, (int)s->numel, target, h_first);
    }
    int64_t dims[MAXD], to[MAXD];
    int nd = dims_of(g, n, 0, dims), ns = (int)s->numel;
    int out = nd > ns ? nd : ns;
    stk_tensor *x = v->t;
    for (int d = 0; d < out; d++) {
        int dx = d - (out - nd), dsh = d - (out - ns);
        int64_t a = dx >= 0 ? dims[dx] : 1, b = dsh >= 0 ? (int64_t)s->host[dsh] : 1;
        if (a != 1 && b != 1 && a != b) return stk_error(STK_ERR_INVALID_ARG, "shapes do not broadcast");
        to[d] = a == 1 ? b : a;
    }
    while (stk_tensor_ndim(x) < out) STK_TRY(stk_unsqueeze(x, 0, &x));
    stk_tensor *y;
    STK_TRY(stk_expand(x, out, to, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* CastLike(x, like): x in like's type. Float constants become host
 * numbers, so that the dynamo exporter's glue (a zero bias Expanded to the
 * channels) stays shape arithmetic. */
static stk_status run_cast_like(stk_onnx_graph *g, const onnx_node *n)
{
    onnx_value *v = in_value(g, n, 0);
    const onnx_value *like = in_value(g, n, 1);
    if (!v || !like) return stk_error(STK_ERR_INVALID_ARG, "an input is missing");
    bool to_float = like->t != NULL || like->is_float;
    if (v->t && !v->host) small_constant(v);
    if (!v->host) {
        if (!to_float)
            return stk_error(STK_ERR_UNSUPPORTED, "CastLike of a float tensor to an integer type");
        set_tensor(g, n, 0, v->t);
        return STK_OK;
    }
    STK_TRY(set_host(g, n, 0, v->ndim, v->dims, v->host));
    onnx_value *o = &g->values[n->out[0]];
    o->is_float = to_float;
    for (int64_t i = 0; !to_float && i < o->numel; i++) o->host[i] = trunc(o->host[i]);
    return STK_OK;
}

static double h_pow(const double *a) { return pow(a[0], a[1]); }

/* Pow: shape arithmetic, or a tensor squared (x * x) or to the first power. */
static stk_status run_pow(stk_onnx_graph *g, const onnx_node *n)
{
    if (all_host(g, n)) return host_broadcast(g, n, 2, h_pow);
    const onnx_value *e = NULL;
    STK_TRY(in_host(g, n, 1, &e));
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    if (e->numel == 1 && e->host[0] == 2)
        STK_TRY(stk_mul(x, x, &y));
    else if (e->numel == 1 && e->host[0] == 1)
        y = x;
    else
        return stk_error(STK_ERR_UNSUPPORTED, "Pow of a tensor to other than 1 or 2");
    set_tensor(g, n, 0, y);
    return STK_OK;
}

/* Range(start, limit, delta): shape arithmetic. */
static stk_status run_range(stk_onnx_graph *g, const onnx_node *n)
{
    const onnx_value *a = NULL, *b = NULL, *c = NULL;
    STK_TRY(in_host(g, n, 0, &a));
    STK_TRY(in_host(g, n, 1, &b));
    STK_TRY(in_host(g, n, 2, &c));
    if (a->numel != 1 || b->numel != 1 || c->numel != 1 || c->host[0] == 0)
        return stk_error(STK_ERR_INVALID_ARG, "start, limit and delta must be scalars, delta not 0");
    double count = ceil((b->host[0] - a->host[0]) / c->host[0]);
    int64_t len = count > 0 ? (int64_t)count : 0;
    if (len > (1 << 24)) return stk_error(STK_ERR_UNSUPPORTED, "a Range of %lld values", (long long)len);
    STK_TRY(set_host(g, n, 0, 1, &len, NULL));
    onnx_value *o = &g->values[n->out[0]];
    for (int64_t i = 0; i < len; i++) o->host[i] = a->host[0] + (double)i * c->host[0];
    o->is_float = a->is_float || b->is_float || c->is_float;
    return STK_OK;
}

/* ReduceMean over float tensors: axes as the attribute (opset < 18) or
 * input 1 (18); the spatial axes of NCHW as the global pool. */
static stk_status run_reduce_mean(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *x, *y;
    STK_TRY(in_tensor(g, n, 0, &x));
    int64_t axes[MAXD];
    int nd = stk_tensor_ndim(x), na = axes_of(g, n, axes);
    bool keep = attr_int(n, "keepdims", 1) != 0;
    int dims[MAXD];
    if (na < 0 && attr_int(n, "noop_with_empty_axes", 0)) {
        set_tensor(g, n, 0, x);
        return STK_OK;
    }
    if (na < 0) { /* all of them */
        na = nd;
        for (int d = 0; d < nd; d++) axes[d] = d;
    }
    bool spatial = nd == 4 && na == 2;
    for (int k = 0; k < na; k++) {
        dims[k] = axis_of(axes[k], nd);
        if (dims[k] < 0 || dims[k] >= nd)
            return stk_error(STK_ERR_INVALID_ARG, "axis %lld of a %d-D tensor", (long long)axes[k], nd);
        spatial = spatial && dims[k] >= 2;
    }
    if (spatial && dims[0] != dims[1]) {
        STK_TRY(stk_global_avg_pool2d(x, &y));
        if (keep) {
            int64_t shape[4] = {stk_tensor_dim(y, 0), stk_tensor_dim(y, 1), 1, 1};
            STK_TRY(stk_reshape(y, 4, shape, &y));
        }
    } else {
        STK_TRY(stk_mean(x, na, dims, keep, &y));
    }
    set_tensor(g, n, 0, y);
    return STK_OK;
}

static stk_status run_matmul(stk_onnx_graph *g, const onnx_node *n)
{
    stk_tensor *a, *b, *y;
    STK_TRY(in_tensor(g, n, 0, &a));
    STK_TRY(in_tensor(g, n, 1, &b));
    STK_TRY(stk_matmul(a, b, &y));
    set_tensor(g, n, 0, y);
    return STK_OK;
}

stk_status eng_onnx_run_node(stk_onnx_graph *g, int i, bool training, uint64_t seed,
                             uint64_t stream)
{
    const onnx_node *n = &g->nodes[i];
    switch (n->op) {
    case OP_ADD: return run_binary(g, n, stk_add, h_add);
    case OP_SUB: return run_binary(g, n, stk_sub, h_sub);
    case OP_MUL: return run_binary(g, n, stk_mul, h_mul);
    case OP_DIV: return run_binary(g, n, stk_div, h_div);
    case OP_EQUAL: return host_broadcast(g, n, 2, h_eq);
    case OP_WHERE: return host_broadcast(g, n, 3, h_where);
    case OP_LESS: return host_broadcast(g, n, 2, h_less);
    case OP_MOD: return host_broadcast(g, n, 2, h_mod);
    case OP_POW: return run_pow(g, n);
    case OP_SQRT: { /* shape arithmetic (a head's scale) */
        STK_TRY(host_broadcast(g, n, 1, h_sqrt));
        if (n->out[0] >= 0) g->values[n->out[0]].is_float = true;
        return STK_OK;
    }
    case OP_DROP_PATH: {
        stk_tensor *x, *y;
        STK_TRY(in_tensor(g, n, 0, &x));
        STK_TRY(stk_drop_path(x, n->p, training, seed, stream ^ ((uint64_t)(i + 1) << 40), &y));
        set_tensor(g, n, 0, y);
        return STK_OK;
    }
    case OP_RANDOM_UNIFORM_LIKE: /* only inside stochastic depth (refused at build otherwise) */
        return stk_error(STK_ERR_INTERNAL, "a RandomUniformLike left unfolded");
    case OP_MATMUL: return run_matmul(g, n);
    case OP_GEMM: return run_gemm(g, n);
    case OP_CONV: return run_conv(g, n);
    case OP_BATCHNORM: return run_batch_norm(g, n, training);
    case OP_RELU: return run_unary(g, n, stk_relu);
    case OP_SIGMOID: return run_unary(g, n, stk_sigmoid);
    case OP_TANH: return run_unary(g, n, stk_tanh);
    case OP_HARDSWISH: return run_unary(g, n, stk_hardswish);
    case OP_GELU: return run_unary(g, n, stk_gelu);
    case OP_SILU: return run_unary(g, n, stk_silu);
    case OP_HARDSIGMOID: return run_hardsigmoid(g, n);
    case OP_CLIP: return run_clip(g, n);
    case OP_SOFTMAX: return run_softmax(g, n, false);
    case OP_LOGSOFTMAX: return run_softmax(g, n, true);
    case OP_LAYERNORM: return run_layer_norm(g, n);
    case OP_MAXPOOL: return run_pool(g, n, true);
    case OP_AVGPOOL: return run_pool(g, n, false);
    case OP_GLOBALAVGPOOL: return run_global_pool(g, n);
    case OP_FLATTEN: return run_flatten(g, n);
    case OP_RESHAPE: return run_reshape(g, n);
    case OP_TRANSPOSE: return run_transpose(g, n);
    case OP_CONCAT: return run_concat(g, n);
    case OP_DROPOUT: return run_dropout(g, i, training, seed, stream);
    case OP_IDENTITY: return run_identity(g, n);
    case OP_SHAPE: return run_shape(g, n);
    case OP_GATHER: return run_gather(g, n);
    case OP_UNSQUEEZE: return run_unsqueeze(g, n);
    case OP_SQUEEZE: return run_squeeze(g, n);
    case OP_SLICE: return run_slice(g, n);
    case OP_CAST: return run_cast(g, n);
    case OP_CONSTANTOFSHAPE: return run_constant_of_shape(g, n);
    case OP_EXPAND: return run_expand(g, n);
    case OP_CASTLIKE: return run_cast_like(g, n);
    case OP_RANGE: return run_range(g, n);
    case OP_REDUCEMEAN: return run_reduce_mean(g, n);
    case OP_CONSTANT:
    case OP_SKIP: return STK_OK;
    }
    return stk_error(STK_ERR_INTERNAL, "unknown op %d", (int)n->op);
}
