/* A model as an ONNX file (onnx.h): the module tree walked into nodes and
 * initializers, encoded by hand with common/pb_wire.h (the encoder
 * TensorBoard's files use: ONNX needs nothing more than varints, fixed
 * floats and nested messages, so a protobuf library and its generated code
 * would add a dependency for no gain). Field numbers: onnx/onnx.proto. */
#include "engine/onnx.h"

#include "common/fs.h"
#include "common/pb_wire.h"
#include "engine/nn_impl.h"
#include "engine/onnx_graph.h"
#include "engine/onnx_write_impl.h"

#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "TensorProto.raw_data is little-endian: this writer copies host floats"
#endif

enum { T_FLOAT = 1, T_UINT8 = 2, T_INT64 = 7 };            /* TensorProto.DataType */
enum { A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_INTS = 7 }; /* AttributeProto.type */
enum { GRAPH_NODE = 1, GRAPH_INIT = 5 }; /* GraphProto (the rest: onnx_write.c) */

#define MAX_NAMES 4096
#define NAME_LEN  1024

typedef struct attr {
    const char *name;
    int type;
    int64_t i;
    float f;
    const int64_t *ints;
    int n;
} attr;

typedef struct graph {
    stk_pb nodes, inits; /* GraphProto's node and initializer fields, gathered apart */
    const stk_onnx_options *o;
    const stk_model *m;
    const stk_module *last; /* its output is "logits" */
    bool relu6_bounds;      /* the Clip bounds of ReLU6 written */
    int rank;               /* of the value being emitted: 4 (NCHW) in, 2 after pooling, 3 tokens */
    char scope[1024];       /* "/layer1/layer1.0" */
    char (*names)[NAME_LEN]; /* node names and values used so far */
    int n_names;
    stk_status st;
} graph;

stk_onnx_options stk_onnx_defaults(void)
{
    return (stk_onnx_options){.opset = 0, .fold_bn = true, .mean = {0, 0, 0}, .std = {1, 1, 1}};
}

static void fail(graph *g, stk_status st)
{
    if (g->st == STK_OK) g->st = st;
}

/* snprintf into a name buffer; a name too long fails the export. */
static void fmt(graph *g, char *buf, size_t n, const char *f, ...)
    __attribute__((format(printf, 4, 5)));
static void fmt(graph *g, char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int len = vsnprintf(buf, n, f, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= n)
        fail(g, stk_error(STK_ERR_INVALID_ARG, "ONNX export: a name longer than %zu bytes", n - 1));
}

/* A name not used before in the graph (name, name_1, name_2, ...): its slot. */
static const char *unique(graph *g, const char *want)
{
    if (g->n_names == MAX_NAMES) {
        fail(g, stk_error(STK_ERR_INVALID_ARG, "ONNX export: more than %d nodes", MAX_NAMES));
        return "";
    }
    char *slot = g->names[g->n_names];
    fmt(g, slot, NAME_LEN, "%s", want);
    for (int k = 1;; k++) {
        bool used = false;
        for (int i = 0; i < g->n_names && !used; i++) used = !strcmp(g->names[i], slot);
        if (!used) break;
        fmt(g, slot, NAME_LEN, "%s_%d", want, k);
    }
    g->n_names++;
    return slot;
}

/* A node op in the current scope (local: its part of the name, "relu" for
 * "/layer1/layer1.0/relu/Relu"; NULL: none): returns its output's name. */
static const char *node(graph *g, const char *local, const char *op, const char *const *in,
                        int n_in, const char *out, const attr *a, int n_a)
{
    char want[NAME_LEN];
    fmt(g, want, sizeof want, "%s%s%s/%s", g->scope, local ? "/" : "", local ? local : "", op);
    const char *name = unique(g, want);
    if (!out) {
        fmt(g, want, sizeof want, "%s_output_0", name);
        out = unique(g, want);
    }
    stk_pb *b = &g->nodes;
    size_t m = stk_pb_begin(b, GRAPH_NODE);
    for (int i = 0; i < n_in; i++) stk_pb_string(b, 1, in[i]);
    stk_pb_string(b, 2, out);
    stk_pb_string(b, 3, name);
    stk_pb_string(b, 4, op);
    for (int i = 0; i < n_a; i++) {
        size_t am = stk_pb_begin(b, 5);
        stk_pb_string(b, 1, a[i].name);
        if (a[i].type == A_FLOAT) stk_pb_float(b, 2, a[i].f);
        if (a[i].type == A_INT) stk_pb_int(b, 3, a[i].i);
        for (int k = 0; a[i].type == A_INTS && k < a[i].n; k++) stk_pb_int(b, 8, a[i].ints[k]);
        stk_pb_int(b, 20, a[i].type);
        stk_pb_end(b, am);
    }
    stk_pb_end(b, m);
    return out;
}

static void initializer(graph *g, const char *name, int type, int ndim, const int64_t *dims,
                        const void *data, size_t bytes)
{
    stk_pb *b = &g->inits;
    size_t m = stk_pb_begin(b, GRAPH_INIT);
    for (int d = 0; d < ndim; d++) stk_pb_int(b, 1, dims[d]);
    stk_pb_int(b, 2, type);
    stk_pb_string(b, 8, name);
    stk_pb_bytes(b, 9, data, bytes);
    stk_pb_end(b, m);
}

/* A tensor's floats on the host (malloc'd; NULL: failed, g->st set). */
static float *host(graph *g, const stk_tensor *t)
{
    size_t n = (size_t)stk_tensor_numel(t);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        fail(g, stk_error(STK_ERR_NOMEM, "out of memory"));
        return NULL;
    }
    stk_status st = stk_tensor_to_host(t, h, n * sizeof *h);
    if (st != STK_OK) {
        fail(g, st);
        free(h);
        return NULL;
    }
    return h;
}

/* A model tensor as an initializer named path.suffix; its name. */
static const char *param(graph *g, const stk_module *mod, const char *suffix, const stk_tensor *t)
{
    char want[NAME_LEN];
    fmt(g, want, sizeof want, "%s.%s", mod->path, suffix);
    const char *name = unique(g, want);
    float *h = host(g, t);
    if (!h) return name;
    int64_t dims[8];
    int nd = stk_tensor_ndim(t);
    for (int d = 0; d < nd && d < 8; d++) dims[d] = stk_tensor_dim(t, d);
    initializer(g, name, T_FLOAT, nd, dims, h, (size_t)stk_tensor_numel(t) * sizeof *h);
    free(h);
    return name;
}

/* This module's part of the scope: its name, or parent.N for a numbered
 * child (PyTorch's "layer1.0", "downsample.0"). */
static size_t push_scope(graph *g, const stk_module *mod, const char *parent_local)
{
    size_t len = strlen(g->scope);
    bool numbered = mod->name[0] && isdigit((unsigned char)mod->name[0]);
    if (numbered && parent_local)
        fmt(g, g->scope + len, sizeof g->scope - len, "/%s.%s", parent_local, mod->name);
    else if (mod->name[0])
        fmt(g, g->scope + len, sizeof g->scope - len, "/%s", mod->name);
    return len;
}

static const char *emit(graph *g, const stk_module *mod, const char *parent_local, const char *x);
static const char *activation(graph *g, stk_activation act, const char *x);

/* A convolution, with the batch norm after it folded in when bn is given:
 * w' = w * s, b' = beta + (b - mean) * s, s = gamma / sqrt(var + eps). */
static const char *conv(graph *g, const stk_module *c, const stk_module *bn, const char *x)
{
    const char *w = NULL, *b = NULL;
    if (!bn) {
        w = param(g, c, "weight", c->weight);
        if (c->bias) b = param(g, c, "bias", c->bias);
    } else {
        int64_t o = stk_tensor_dim(c->weight, 0), per = stk_tensor_numel(c->weight) / o;
        float *wt = host(g, c->weight), *gm = host(g, bn->weight), *bt = host(g, bn->bias),
              *mu = host(g, bn->running_mean), *var = host(g, bn->running_var),
              *cb = c->bias ? host(g, c->bias) : NULL, *fb = malloc((size_t)o * sizeof *fb);
        if (!fb) fail(g, stk_error(STK_ERR_NOMEM, "out of memory"));
        if (g->st == STK_OK) {
            for (int64_t k = 0; k < o; k++) {
                double s = gm[k] / sqrt((double)var[k] + (double)g->m->cfg.bn_eps);
                for (int64_t i = 0; i < per; i++) wt[k * per + i] = (float)(wt[k * per + i] * s);
                fb[k] = (float)(bt[k] + ((cb ? cb[k] : 0.0) - mu[k]) * s);
            }
            char want[NAME_LEN];
            int64_t dims[4];
            for (int d = 0; d < 4; d++) dims[d] = stk_tensor_dim(c->weight, d);
            fmt(g, want, sizeof want, "%s.weight", c->path);
            w = unique(g, want);
            initializer(g, w, T_FLOAT, 4, dims, wt, (size_t)(o * per) * sizeof *wt);
            fmt(g, want, sizeof want, "%s.bias", c->path);
            b = unique(g, want);
            initializer(g, b, T_FLOAT, 1, &o, fb, (size_t)o * sizeof *fb);
        }
        free(wt), free(gm), free(bt), free(mu), free(var), free(cb), free(fb);
        if (g->st != STK_OK) return x;
    }
    const stk_conv2d_params *p = &c->conv;
    int64_t k[2] = {stk_tensor_dim(c->weight, 2), stk_tensor_dim(c->weight, 3)},
            st[2] = {p->stride[0], p->stride[1]}, dil[2] = {p->dilation[0], p->dilation[1]},
            pads[4] = {p->padding[0], p->padding[1], p->padding[0], p->padding[1]};
    attr a[] = {{.name = "dilations", .type = A_INTS, .ints = dil, .n = 2},
                {.name = "group", .type = A_INT, .i = p->groups},
                {.name = "kernel_shape", .type = A_INTS, .ints = k, .n = 2},
                {.name = "pads", .type = A_INTS, .ints = pads, .n = 4},
                {.name = "strides", .type = A_INTS, .ints = st, .n = 2}};
    const char *in[3] = {x, w, b};
    return node(g, NULL, "Conv", in, b ? 3 : 2, NULL, a, 5);
}

static const char *batch_norm(graph *g, const stk_module *bn, const char *x)
{
    const char *in[5] = {x, param(g, bn, "weight", bn->weight), param(g, bn, "bias", bn->bias),
                         param(g, bn, "running_mean", bn->running_mean),
                         param(g, bn, "running_var", bn->running_var)};
    attr a[] = {{.name = "epsilon", .type = A_FLOAT, .f = g->m->cfg.bn_eps},
                {.name = "momentum", .type = A_FLOAT, .f = 1.f - g->m->cfg.bn_momentum}};
    return node(g, NULL, "BatchNormalization", in, 5, NULL, a, 2);
}

/* A conv child i of mod, folding the batch norm at i + 1 when asked: the
 * index of the last child used. */
static int conv_at(graph *g, const stk_module *mod, int i, const char **x)
{
    const stk_module *c = mod->kids[i];
    const stk_module *bn =
        g->o->fold_bn && i + 1 < mod->n_kids && mod->kids[i + 1]->kind == MOD_BATCHNORM2D
            ? mod->kids[i + 1]
            : NULL;
    size_t len = push_scope(g, c, mod->name);
    *x = conv(g, c, bn, *x);
    g->scope[len] = '\0';
    return bn ? i + 1 : i;
}

/* The children of mod in order but the one at `skip` (-1: none). */
static const char *children(graph *g, const stk_module *mod, int skip, const char *x)
{
    for (int i = 0; i < mod->n_kids && g->st == STK_OK; i++) {
        if (i == skip) continue;
        if (mod->kids[i]->kind == MOD_CONV2D)
            i = conv_at(g, mod, i, &x);
        else
            x = emit(g, mod->kids[i], mod->name, x);
    }
    return x;
}

/* x + body(x) or x's shortcut (downsample), then a ReLU when the block has one. */
static const char *residual(graph *g, const stk_module *b, const char *x)
{
    const char *h = children(g, b, b->shortcut, x), *id = x;
    if (b->shortcut >= 0) id = emit(g, b->kids[b->shortcut], b->name, x);
    const char *in[2] = {h, id};
    const char *s = node(g, NULL, "Add", in, 2, NULL, NULL, 0);
    if (b->relu_after) /* torch's name for relu's 2nd use */
        return node(g, "relu_1", "Relu", &s, 1, NULL, NULL, 0);
    return activation(g, b->act, s);
}

/* torch exports ReLU6 as Clip(x, 0, 6), the bounds as inputs (opset >= 11). */
static const char *relu6(graph *g, const char *x)
{
    static const float lo = 0.f, hi = 6.f;
    if (!g->relu6_bounds) {
        initializer(g, unique(g, "relu6_min"), T_FLOAT, 0, NULL, &lo, sizeof lo);
        initializer(g, unique(g, "relu6_max"), T_FLOAT, 0, NULL, &hi, sizeof hi);
        g->relu6_bounds = true;
    }
    const char *in[3] = {x, "relu6_min", "relu6_max"};
    return node(g, NULL, "Clip", in, 3, NULL, NULL, 0);
}

static const char *pool(graph *g, const stk_module *mod, const char *op, const char *x)
{
    int64_t stride = mod->stride ? mod->stride : mod->kernel;
    int64_t k[2] = {mod->kernel, mod->kernel}, s[2] = {stride, stride},
            pads[4] = {mod->padding, mod->padding, mod->padding, mod->padding};
    attr a[] = {{.name = "kernel_shape", .type = A_INTS, .ints = k, .n = 2},
                {.name = "pads", .type = A_INTS, .ints = pads, .n = 4},
                {.name = "strides", .type = A_INTS, .ints = s, .n = 2},
                {.name = "count_include_pad", .type = A_INT, .i = 1}};
    return node(g, NULL, op, &x, 1, NULL, a, strcmp(op, "AveragePool") ? 3 : 4);
}

/* ---- the modules of today's architectures ---------------------------------- */

/* A constant initializer (int64 or float values); its name. */
static const char *constant(graph *g, const char *want, int type, int ndim, const int64_t *dims,
                            const void *data, size_t bytes)
{
    const char *name = unique(g, want);
    initializer(g, name, type, ndim, dims, data, bytes);
    return name;
}

static const char *ints_const(graph *g, const char *want, const int64_t *v, int64_t n)
{
    return constant(g, want, T_INT64, 1, &n, v, (size_t)n * sizeof *v);
}

static const char *transpose(graph *g, const char *x, const int64_t *perm, int n)
{
    attr p = {.name = "perm", .type = A_INTS, .ints = perm, .n = n};
    return node(g, NULL, "Transpose", &x, 1, NULL, &p, 1);
}

static const char *binary(graph *g, const char *op, const char *a, const char *b)
{
    const char *in[2] = {a, b};
    return node(g, NULL, op, in, 2, NULL, NULL, 0);
}

/* torch.onnx's forms: SiLU as Sigmoid * x; GELU (erf) as x * (erf(x /
 * sqrt 2) + 1) * 0.5; Hardswish as x * HardSigmoid(x) (HardSwish needs
 * opset 14). */
static const char *activation(graph *g, stk_activation act, const char *x)
{
    attr hs[2] = {{.name = "alpha", .type = A_FLOAT, .f = 1.f / 6.f},
                  {.name = "beta", .type = A_FLOAT, .f = 0.5f}};
    switch (act) {
    case STK_ACT_NONE: return x;
    case STK_ACT_RELU: return node(g, NULL, "Relu", &x, 1, NULL, NULL, 0);
    case STK_ACT_RELU6: return relu6(g, x);
    case STK_ACT_SIGMOID: return node(g, NULL, "Sigmoid", &x, 1, NULL, NULL, 0);
    case STK_ACT_TANH: return node(g, NULL, "Tanh", &x, 1, NULL, NULL, 0);
    case STK_ACT_SILU: return binary(g, "Mul", x, node(g, NULL, "Sigmoid", &x, 1, NULL, NULL, 0));
    case STK_ACT_HARDSIGMOID: return node(g, NULL, "HardSigmoid", &x, 1, NULL, hs, 2);
    case STK_ACT_HARDSWISH:
        return binary(g, "Mul", x, node(g, NULL, "HardSigmoid", &x, 1, NULL, hs, 2));
    case STK_ACT_GELU: {
        static const float sqrt2 = 1.41421356237f, one = 1.f, half = 0.5f;
        const char *d = binary(g, "Div", x, constant(g, "gelu_sqrt2", T_FLOAT, 0, NULL, &sqrt2, 4));
        const char *e = node(g, NULL, "Erf", &d, 1, NULL, NULL, 0);
        const char *a = binary(g, "Add", e, constant(g, "gelu_one", T_FLOAT, 0, NULL, &one, 4));
        return binary(g, "Mul", binary(g, "Mul", x, a),
                      constant(g, "gelu_half", T_FLOAT, 0, NULL, &half, 4));
    }
    }
    return x;
}

static const char *layer_norm(graph *g, const stk_module *mod, const char *x)
{
    if (g->o->opset < 17) {
        fail(g, stk_error(STK_ERR_INVALID_ARG,
                          "ONNX export: %s's layer norm needs --opset 17 (LayerNormalization)",
                          g->m->name));
        return x;
    }
    static const int64_t to_last[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    bool channels = mod->kind == MOD_LAYERNORM2D;
    if (channels) x = transpose(g, x, to_last, 4);
    const char *in[3] = {x, param(g, mod, "weight", mod->weight), param(g, mod, "bias", mod->bias)};
    attr a[2] = {{.name = "axis", .type = A_INT, .i = -1},
                 {.name = "epsilon", .type = A_FLOAT, .f = mod->eps}};
    const char *y = node(g, NULL, "LayerNormalization", in, 3, NULL, a, 2);
    return channels ? transpose(g, y, back, 4) : y;
}

static const char *squeeze_excitation(graph *g, const stk_module *mod, const char *x)
{
    const char *s = node(g, NULL, "GlobalAveragePool", &x, 1, NULL, NULL, 0);
    s = emit(g, mod->kids[0], mod->name, s);
    s = activation(g, mod->act, s);
    s = emit(g, mod->kids[1], mod->name, s);
    s = activation(g, mod->gate, s);
    return binary(g, "Mul", x, s);
}

/* x W^T + b for a [N, S, D] input (MatMul broadcasts; Gemm is 2-D only). */
static const char *linear3(graph *g, const stk_module *mod, const char *wname, const char *bname,
                           const char *x)
{
    static const int64_t t2[2] = {1, 0};
    const char *w = transpose(g, param(g, mod, wname, mod->weight), t2, 2);
    const char *y = binary(g, "MatMul", x, w);
    return mod->bias ? binary(g, "Add", y, param(g, mod, bname, mod->bias)) : y;
}

static const char *attention(graph *g, const stk_module *mod, const char *x)
{
    int64_t d = stk_tensor_dim(mod->weight, 1), h = mod->heads, hd = d / h;
    int64_t shape5[5] = {0, 0, 3, h, hd}, back[3] = {0, 0, d}, zero = 0;
    static const int64_t p5[5] = {2, 0, 3, 1, 4}, kt[4] = {0, 1, 3, 2}, p4[4] = {0, 2, 1, 3};
    const char *qkv = linear3(g, mod, "in_proj_weight", "in_proj_bias", x);
    qkv = binary(g, "Reshape", qkv, ints_const(g, "attention_qkv_shape", shape5, 5));
    qkv = transpose(g, qkv, p5, 5);
    const char *part[3];
    for (int i = 0; i < 3; i++) {
        int64_t idx = i;
        const char *ix = constant(g, "attention_index", T_INT64, 0, NULL, &idx, sizeof idx);
        attr ax = {.name = "axis", .type = A_INT, .i = 0};
        const char *in[2] = {qkv, ix};
        part[i] = node(g, NULL, "Gather", in, 2, NULL, &ax, 1);
    }
    (void)zero;
    float scale = (float)(1.0 / sqrt((double)hd));
    const char *sc = binary(g, "MatMul", part[0], transpose(g, part[1], kt, 4));
    sc = binary(g, "Mul", sc, constant(g, "attention_scale", T_FLOAT, 0, NULL, &scale, 4));
    attr last = {.name = "axis", .type = A_INT, .i = -1};
    sc = node(g, NULL, "Softmax", &sc, 1, NULL, &last, 1);
    const char *o = transpose(g, binary(g, "MatMul", sc, part[2]), p4, 4);
    o = binary(g, "Reshape", o, ints_const(g, "attention_out_shape", back, 3));
    size_t len = push_scope(g, mod->kids[0], mod->name);
    o = linear3(g, mod->kids[0], "weight", "bias", o);
    g->scope[len] = '\0';
    return o;
}

/* [N, 1, D] copies of the class token (Expand to Shape(x)[0], 1, D), put first. */
static const char *class_token(graph *g, const stk_module *mod, const char *x)
{
    int64_t first = 0, rest[2] = {1, stk_tensor_dim(mod->weight, 2)};
    const char *shape = node(g, NULL, "Shape", &x, 1, NULL, NULL, 0);
    attr ax0 = {.name = "axis", .type = A_INT, .i = 0};
    const char *gi[2] = {shape, ints_const(g, "class_token_batch_dim", &first, 1)};
    const char *n = node(g, NULL, "Gather", gi, 2, NULL, &ax0, 1);
    const char *ci[2] = {n, ints_const(g, "class_token_rest", rest, 2)};
    const char *full = node(g, NULL, "Concat", ci, 2, NULL, &ax0, 1);
    const char *e = binary(g, "Expand", param(g, mod, mod->name, mod->weight), full);
    attr ax1 = {.name = "axis", .type = A_INT, .i = 1};
    const char *in[2] = {e, x};
    return node(g, NULL, "Concat", in, 2, NULL, &ax1, 1);
}

static const char *concat(graph *g, const stk_module *mod, const char *x)
{
    const char *ys[64];
    if (mod->n_kids > 64) {
        fail(g, stk_error(STK_ERR_INVALID_ARG, "ONNX export: concat %s of more than 64 branches",
                          mod->path));
        return x;
    }
    for (int i = 0; i < mod->n_kids; i++) ys[i] = emit(g, mod->kids[i], mod->name, x);
    attr ax1 = {.name = "axis", .type = A_INT, .i = 1};
    return node(g, NULL, "Concat", ys, mod->n_kids, NULL, &ax1, 1);
}

static const char *emit(graph *g, const stk_module *mod, const char *parent_local, const char *x)
{
    if (g->st != STK_OK) return x;
    size_t len = push_scope(g, mod, parent_local);
    const char *y = x;
    attr axis1 = {.name = "axis", .type = A_INT, .i = 1};
    switch (mod->kind) {
    case MOD_SEQUENTIAL: y = children(g, mod, -1, x); break;
    case MOD_CONV2D: y = conv(g, mod, NULL, x); break; /* (conv_at folds; not reached) */
    case MOD_BATCHNORM2D: y = batch_norm(g, mod, x); break;
    case MOD_RELU: y = node(g, NULL, "Relu", &x, 1, NULL, NULL, 0); break;
    case MOD_RELU6: y = relu6(g, x); break;
    case MOD_MAXPOOL2D: y = pool(g, mod, "MaxPool", x); break;
    case MOD_AVGPOOL2D: y = pool(g, mod, "AveragePool", x); break;
    case MOD_GLOBAL_AVGPOOL: {
        /* Stoke's gives [N, C]; ONNX's [N, C, 1, 1], then a Flatten as torch's */
        const char *p = node(g, NULL, "GlobalAveragePool", &x, 1, NULL, NULL, 0);
        g->scope[len] = '\0';
        y = node(g, NULL, "Flatten", &p, 1, NULL, &axis1, 1);
        g->rank = 2;
        break;
    }
    case MOD_FLATTEN:
        y = node(g, NULL, "Flatten", &x, 1, NULL, &axis1, 1);
        g->rank = 2;
        break;
    case MOD_DROPOUT: break; /* inference: the identity */
    case MOD_LINEAR: {
        if (g->rank != 2) { /* on [..., in]: Gemm takes 2-D only */
            y = linear3(g, mod, "weight", "bias", x);
            break;
        }
        const char *in[3] = {x, param(g, mod, "weight", mod->weight),
                             mod->bias ? param(g, mod, "bias", mod->bias) : NULL};
        attr a[] = {{.name = "alpha", .type = A_FLOAT, .f = 1.f},
                    {.name = "beta", .type = A_FLOAT, .f = 1.f},
                    {.name = "transB", .type = A_INT, .i = 1}};
        y = node(g, NULL, "Gemm", in, mod->bias ? 3 : 2, mod == g->last ? "logits" : NULL, a, 3);
        break;
    }
    case MOD_RESIDUAL: y = residual(g, mod, x); break;
    case MOD_ACT: y = activation(g, mod->act, x); break;
    case MOD_LAYERNORM:
    case MOD_LAYERNORM2D: y = layer_norm(g, mod, x); break;
    case MOD_PERMUTE: {
        int64_t perm[STK_MAX_DIMS];
        for (int d = 0; d < mod->ndim; d++) perm[d] = mod->dims[d];
        y = transpose(g, x, perm, mod->ndim);
        break;
    }
    case MOD_SE: y = squeeze_excitation(g, mod, x); break;
    case MOD_DROP_PATH: break; /* inference: the identity */
    case MOD_LAYER_SCALE:
    case MOD_POS_EMBED:
        y = binary(g, mod->kind == MOD_LAYER_SCALE ? "Mul" : "Add", x,
                   param(g, mod, mod->name, mod->weight));
        break;
    case MOD_CONCAT: y = concat(g, mod, x); break;
    case MOD_ATTENTION: y = attention(g, mod, x); break;
    case MOD_TOKENS: {
        static const int64_t flat[3] = {0, 0, -1}, t[3] = {0, 2, 1};
        y = transpose(g, binary(g, "Reshape", x, ints_const(g, "tokens_shape", flat, 3)), t, 3);
        g->rank = 3;
        break;
    }
    case MOD_CLASS_TOKEN: y = class_token(g, mod, x); break;
    case MOD_ONNX_GRAPH:
        fail(g, stk_error(STK_ERR_UNSUPPORTED,
                          "exporting a model imported from ONNX is not built yet (its weights "
                          "go back to PyTorch by name: stoke export --format safetensors)"));
        break;
    case MOD_SELECT_TOKEN: {
        int64_t zero = 0;
        attr ax1 = {.name = "axis", .type = A_INT, .i = 1};
        const char *in[2] = {x, constant(g, "token_index", T_INT64, 0, NULL, &zero, sizeof zero)};
        y = node(g, NULL, "Gather", in, 2, NULL, &ax1, 1);
        g->rank = 2;
        break;
    }
    }
    g->scope[len] = '\0';
    return y;
}

/* u8 NHWC pixels to the normalised f32 NCHW input: (x - 255 mean) / (255 std). */
static const char *preprocess(graph *g, int channels)
{
    const stk_onnx_options *o = g->o;
    float mean[3], std[3];
    for (int c = 0; c < channels; c++) mean[c] = 255.f * o->mean[c], std[c] = 255.f * o->std[c];
    int64_t n = channels;
    initializer(g, "input_mean_255", T_FLOAT, 1, &n, mean, (size_t)channels * sizeof *mean);
    initializer(g, "input_std_255", T_FLOAT, 1, &n, std, (size_t)channels * sizeof *std);
    attr to = {.name = "to", .type = A_INT, .i = T_FLOAT};
    const char *x = "input";
    x = node(g, NULL, "Cast", &x, 1, NULL, &to, 1);
    const char *sub[2] = {x, "input_mean_255"};
    x = node(g, NULL, "Sub", sub, 2, NULL, NULL, 0);
    const char *div[2] = {x, "input_std_255"};
    x = node(g, NULL, "Div", div, 2, NULL, NULL, 0);
    int64_t perm[4] = {0, 3, 1, 2};
    attr p = {.name = "perm", .type = A_INTS, .ints = perm, .n = 4};
    return node(g, NULL, "Transpose", &x, 1, NULL, &p, 1);
}

stk_status stk_onnx_export(const stk_model *m, const char *path, const stk_onnx_options *opts)
{
    if (m->root->kind == MOD_ONNX_GRAPH)
        return stk_onnx_graph_export(m->root->graph, &m->cfg, path, opts);
    stk_onnx_options oo = *opts;
    const stk_onnx_options *o = &oo;
    if (!oo.opset) oo.opset = 17;
    if (o->opset != 13 && o->opset != 17)
        return stk_error(STK_ERR_INVALID_ARG, "--opset %d: 17 (the default) or 13", o->opset);
    const stk_module *root = m->root, *last = root;
    while (last && last->kind == MOD_SEQUENTIAL && last->n_kids) /* classifier.1, fc */
        last = last->kids[last->n_kids - 1];
    if (!last || last->kind != MOD_LINEAR)
        return stk_error(STK_ERR_INVALID_ARG, "ONNX export: %s does not end in a linear layer",
                         m->name);
    graph g = {.o = o, .m = m, .last = last, .rank = 4};
    g.names = calloc(MAX_NAMES, sizeof *g.names);
    if (!g.names) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_pb_init(&g.nodes);
    stk_pb_init(&g.inits);
    const stk_model_config *c = &m->cfg;
    unique(&g, "input");
    unique(&g, "logits");
    const char *x = o->input == STK_ONNX_INPUT_U8_NHWC ? preprocess(&g, c->in_channels) : "input";
    emit(&g, root, NULL, x);

    int64_t s = c->image_size, ch = c->in_channels;
    int64_t nchw[4] = {-1, ch, s, s}, nhwc[4] = {-1, s, s, ch}, out[2] = {-1, c->classes};
    stk_pb io;
    stk_pb_init(&io);
    if (o->input == STK_ONNX_INPUT_U8_NHWC)
        eng_onnx_value_info(&io, ENG_ONNX_GRAPH_INPUT, "input", T_UINT8, 4, nhwc);
    else
        eng_onnx_value_info(&io, ENG_ONNX_GRAPH_INPUT, "input", T_FLOAT, 4, nchw);
    eng_onnx_value_info(&io, ENG_ONNX_GRAPH_OUTPUT, "logits", T_FLOAT, 2, out);
    stk_status st = g.st;
    if (st == STK_OK)
        st = eng_onnx_write_model(path, o->opset == 17 ? 8 : 7, o->opset, m->name, &g.nodes,
                                  &g.inits, &io, o);
    stk_pb_deinit(&io);
    stk_pb_deinit(&g.nodes);
    stk_pb_deinit(&g.inits);
    free(g.names);
    return st;
}
