/* Building an ONNX graph for the engine (onnx_graph.h): values by name,
 * parameters from the initializers, the nodes' ops checked and resolved,
 * and the forward that runs them in the file's (topological) order. */
#include "engine/onnx_graph_impl.h"

#include "engine/autograd.h"
#include "engine/autograd_impl.h"
#include "engine/nn_impl.h"
#include "engine/tensor_impl.h"
#include "common/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    onnx_op op;
} op_names[] = {
    {"Add", OP_ADD},
    {"Sub", OP_SUB},
    {"Mul", OP_MUL},
    {"Div", OP_DIV},
    {"MatMul", OP_MATMUL},
    {"Gemm", OP_GEMM},
    {"Conv", OP_CONV},
    {"BatchNormalization", OP_BATCHNORM},
    {"Relu", OP_RELU},
    {"Sigmoid", OP_SIGMOID},
    {"Tanh", OP_TANH},
    {"HardSigmoid", OP_HARDSIGMOID},
    {"HardSwish", OP_HARDSWISH},
    {"Clip", OP_CLIP},
    {"Softmax", OP_SOFTMAX},
    {"LogSoftmax", OP_LOGSOFTMAX},
    {"LayerNormalization", OP_LAYERNORM},
    {"MaxPool", OP_MAXPOOL},
    {"AveragePool", OP_AVGPOOL},
    {"GlobalAveragePool", OP_GLOBALAVGPOOL},
    {"Flatten", OP_FLATTEN},
    {"Reshape", OP_RESHAPE},
    {"Transpose", OP_TRANSPOSE},
    {"Concat", OP_CONCAT},
    {"Dropout", OP_DROPOUT},
    {"Identity", OP_IDENTITY},
    {"Constant", OP_CONSTANT},
    {"Shape", OP_SHAPE},
    {"Gather", OP_GATHER},
    {"Unsqueeze", OP_UNSQUEEZE},
    {"Squeeze", OP_SQUEEZE},
    {"Slice", OP_SLICE},
    {"Cast", OP_CAST},
    {"ConstantOfShape", OP_CONSTANTOFSHAPE},
    {"Expand", OP_EXPAND},
    {"Equal", OP_EQUAL},
    {"Where", OP_WHERE},
    {"Less", OP_LESS},
    {"Mod", OP_MOD},
    {"Sqrt", OP_SQRT},
    {"RandomUniformLike", OP_RANDOM_UNIFORM_LIKE},
};

static bool op_of(const stk_onnx_node *n, onnx_op *op)
{
    if (*n->domain && strcmp(n->domain, "ai.onnx")) return false;
    for (size_t i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
        if (!strcmp(n->op_type, op_names[i].name)) {
            *op = op_names[i].op;
            return true;
        }
    return false;
}

/* ---- values by name ------------------------------------------------------------ */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int find_value(const stk_onnx_graph *g, const char *name)
{
    for (uint64_t i = name_hash(name) & (uint64_t)(g->table_size - 1);;
         i = (i + 1) & (uint64_t)(g->table_size - 1)) {
        int v = g->table[i];
        if (v < 0) return -1;
        if (!strcmp(g->names[v], name)) return v;
    }
}

/* The value of that name, made (empty) when new. -1: out of memory. */
static int value_named(stk_onnx_graph *g, const char *name)
{
    int v = find_value(g, name);
    if (v >= 0) return v;
    if (g->n_values == g->cap_values) return -1; /* sized at build: cannot happen */
    v = g->n_values++;
    g->names[v] = name;
    g->values[v] = (onnx_value){0};
    uint64_t i = name_hash(name) & (uint64_t)(g->table_size - 1);
    while (g->table[i] >= 0) i = (i + 1) & (uint64_t)(g->table_size - 1);
    g->table[i] = v;
    return v;
}

/* ---- parameters and constants ------------------------------------------------------ */

static stk_status push_param(stk_onnx_graph *g, const char *name, stk_tensor *t, bool buffer)
{
    stk_param *p = realloc(g->params, (size_t)(g->n_params + 1) * sizeof *p);
    char *copy = strdup(name);
    if (p) g->params = p;
    if (!p || !copy) {
        free(copy);
        stk_tensor_release(t);
        return stk_error(STK_ERR_NOMEM, "%s: no memory for parameter %s", g->what, name);
    }
    g->params[g->n_params++] = (stk_param){copy, t, buffer};
    return STK_OK;
}

/* A float tensor on the CPU from an ONNX tensor of floats. */
static stk_status float_tensor(const stk_onnx_tensor *src, stk_tensor **out)
{
    STK_TRY(eng_tensor_new(STK_DEVICE_CPU, STK_F32, src->ndim, src->dims, false, out));
    memcpy(stk_tensor_data(*out), src->data, (size_t)src->numel * sizeof(float));
    return STK_OK;
}

/* Host numbers from an integer, boolean or double ONNX tensor. */
static stk_status host_numbers(stk_onnx_graph *g, const stk_onnx_tensor *src, onnx_value *v)
{
    size_t es = stk_onnx_dtype_size(src->dtype);
    if (src->dtype != STK_ONNX_INT64 && src->dtype != STK_ONNX_INT32 &&
        src->dtype != STK_ONNX_BOOL && src->dtype != STK_ONNX_UINT8 &&
        src->dtype != STK_ONNX_INT8 && src->dtype != STK_ONNX_DOUBLE)
        return stk_error(STK_ERR_UNSUPPORTED, "%s: tensor %s has ONNX data type %d", g->what,
                         src->name, src->dtype);
    if (!(v->host = malloc((size_t)(src->numel ? src->numel : 1) * sizeof(double))))
        return stk_error(STK_ERR_NOMEM, "%s: no memory for %s", g->what, src->name);
    const unsigned char *b = src->data;
    for (int64_t i = 0; i < src->numel; i++) {
        const unsigned char *e = b + (size_t)i * es;
        int64_t i64 = 0;
        int32_t i32 = 0;
        double d = 0;
        switch (src->dtype) {
        case STK_ONNX_INT64: memcpy(&i64, e, 8), d = (double)i64; break;
        case STK_ONNX_INT32: memcpy(&i32, e, 4), d = i32; break;
        case STK_ONNX_DOUBLE: memcpy(&d, e, 8); break;
        case STK_ONNX_INT8: d = (signed char)*e; break;
        default: d = *e; break; /* bool, uint8 */
        }
        v->host[i] = d;
    }
    v->ndim = src->ndim;
    memcpy(v->dims, src->dims, sizeof v->dims);
    v->numel = src->numel;
    v->is_float = src->dtype == STK_ONNX_DOUBLE;
    return STK_OK;
}

/* A constant's value (an initializer, a Constant node's "value"). */
static stk_status set_constant(stk_onnx_graph *g, const stk_onnx_tensor *src, onnx_value *v)
{
    v->persistent = true;
    if (src->dtype == STK_ONNX_FLOAT) return float_tensor(src, &v->t);
    return host_numbers(g, src, v);
}

/* Batch norm's running statistics (inputs 3 and 4 of BatchNormalization). */
static bool is_bn_statistic(const stk_onnx_model *f, const char *name)
{
    for (int i = 0; i < f->n_nodes; i++) {
        const stk_onnx_node *n = &f->nodes[i];
        if (!strcmp(n->op_type, "BatchNormalization") && n->n_inputs >= 5 &&
            (!strcmp(n->inputs[3], name) || !strcmp(n->inputs[4], name)))
            return true;
    }
    return false;
}

static stk_status add_initializers(stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    for (int i = 0; i < f->n_initializers; i++) {
        const stk_onnx_tensor *src = &f->initializers[i];
        int v = value_named(g, src->name);
        if (v < 0) return stk_error(STK_ERR_NOMEM, "%s: no memory for its values", g->what);
        STK_TRY(set_constant(g, src, &g->values[v]));
        /* the module's weights: its state_dict names (torch's own
         * constants are "onnx::..."), trained unless batch norm's statistics */
        stk_tensor *t = g->values[v].t;
        if (!t || !strncmp(src->name, "onnx::", 6)) continue;
        bool stat = is_bn_statistic(f, src->name);
        if (!stat) stk_tensor_set_requires_grad(t, true);
        stk_tensor_retain(t);
        STK_TRY(push_param(g, src->name, t, stat));
    }
    return STK_OK;
}

/* A batch norm's num_batches_tracked (PyTorch's state_dict has it, ONNX
 * does not): "<scale's prefix>num_batches_tracked", an I32 scalar. */
static stk_status add_counter(stk_onnx_graph *g, onnx_node *n)
{
    n->counter = -1;
    const char *scale = n->src->inputs[1];
    size_t len = strlen(scale);
    if (len < 6 || strcmp(scale + len - 6, "weight")) return STK_OK;
    char name[512];
    if (snprintf(name, sizeof name, "%.*snum_batches_tracked", (int)(len - 6), scale) >=
        (int)sizeof name)
        return STK_OK;
    for (int i = 0; i < g->n_params; i++)
        if (!strcmp(g->params[i].name, name)) {
            n->counter = i;
            return STK_OK;
        }
    stk_tensor *t;
    STK_TRY(eng_tensor_new(STK_DEVICE_CPU, STK_I32, 0, NULL, true, &t));
    n->counter = g->n_params;
    return push_param(g, name, t, true);
}

/* ---- checks at build ------------------------------------------------------------ */

/* Every op it does not have, at once: type, count, first node. */
static stk_status refuse_unknown_ops(stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    stk_strbuf msg = {0};
    int kinds = 0;
    for (int i = 0; i < f->n_nodes; i++) {
        onnx_op op;
        if (op_of(&f->nodes[i], &op) || !strcmp(f->nodes[i].op_type, "Erf")) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(f->nodes[j].op_type, f->nodes[i].op_type) &&
                   !strcmp(f->nodes[j].domain, f->nodes[i].domain);
        if (seen) continue;
        int count = 0;
        for (int j = i; j < f->n_nodes; j++)
            count += !strcmp(f->nodes[j].op_type, f->nodes[i].op_type) &&
                     !strcmp(f->nodes[j].domain, f->nodes[i].domain);
        stk_strbuf_printf(&msg, "%s%s%s%s x%d (first: '%s')", kinds ? ", " : "",
                          *f->nodes[i].domain ? f->nodes[i].domain : "",
                          *f->nodes[i].domain ? "." : "", f->nodes[i].op_type, count,
                          f->nodes[i].name);
        kinds++;
    }
    stk_status st = STK_OK;
    if (kinds)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: %d op type%s Stoke does not run: %s", g->what,
                       kinds, kinds > 1 ? "s" : "", msg.failed ? "(out of memory)" : msg.s);
    free(msg.s);
    return st;
}

/* Batch norm folded into the convolutions: no BatchNormalization, and a
 * Conv whose weight is one of torch's renamed constants. */
static stk_status refuse_folded_bn(const stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    const stk_onnx_node *conv = NULL;
    for (int i = 0; i < f->n_nodes; i++) {
        const stk_onnx_node *n = &f->nodes[i];
        if (!strcmp(n->op_type, "BatchNormalization")) return STK_OK;
        if (!conv && !strcmp(n->op_type, "Conv") && n->n_inputs >= 2 &&
            !strncmp(n->inputs[1], "onnx::", 6) && stk_onnx_initializer(f, n->inputs[1]))
            conv = n;
    }
    if (!conv) return STK_OK;
    return stk_error(STK_ERR_UNSUPPORTED,
                     "%s: its batch norm is folded into the convolutions (Conv '%s' reads "
                     "'%s', not a parameter of the module), so it cannot train as the module "
                     "does; export it in training mode: torch.onnx.export(model, x, \"%s\", "
                     "dynamo=False, training=torch.onnx.TrainingMode.TRAINING, "
                     "do_constant_folding=False)",
                     g->what, conv->name, conv->inputs[1], g->what);
}

/* The first node after `from` that reads value v, or -1. */
static int next_reader(const stk_onnx_graph *g, int from, int v)
{
    for (int i = from + 1; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] == v) return i;
    return -1;
}

/* A one-element float constant's value, or NAN. */
static float scalar_constant(const stk_onnx_graph *g, int v)
{
    const onnx_value *c = v >= 0 ? &g->values[v] : NULL;
    float f = NAN;
    if (c && c->persistent && c->t && stk_tensor_numel(c->t) == 1) memcpy(&f, stk_tensor_data(c->t), 4);
    return f;
}

/* nn.GELU as torch exports it: y = (x * (erf(x / sqrt 2) + 1)) * 0.5, a
 * Div, the Erf, an Add, two Muls (Constants between them). The Div becomes
 * OP_GELU writing the last Mul's output, the other four are skipped. False:
 * not that pattern. */
static bool fold_gelu(stk_onnx_graph *g, int ie)
{
    onnx_node *e = &g->nodes[ie];
    int id = -1;
    for (int i = ie - 1; i >= 0 && id < 0; i--)
        if (g->nodes[i].n_out > 0 && g->nodes[i].out[0] == e->in[0]) id = i;
    int ia = next_reader(g, ie, e->out[0]);
    int im1 = ia >= 0 ? next_reader(g, ia, g->nodes[ia].out[0]) : -1;
    int im2 = im1 >= 0 ? next_reader(g, im1, g->nodes[im1].out[0]) : -1;
    if (id < 0 || im2 < 0) return false;
    onnx_node *d = &g->nodes[id], *a = &g->nodes[ia], *m1 = &g->nodes[im1], *m2 = &g->nodes[im2];
    if (d->op != OP_DIV || a->op != OP_ADD || m1->op != OP_MUL || m2->op != OP_MUL ||
        e->n_in != 1 || d->n_in != 2 || a->n_in != 2 || m1->n_in != 2 || m2->n_in != 2 ||
        a->in[0] != e->out[0])
        return false;
    int x = d->in[0];
    if (!((m1->in[0] == x && m1->in[1] == a->out[0]) || (m1->in[1] == x && m1->in[0] == a->out[0])))
        return false;
    int half = m2->in[0] == m1->out[0] ? m2->in[1] : m2->in[1] == m1->out[0] ? m2->in[0] : -1;
    /* the intermediates are read by nothing else */
    if (next_reader(g, im1, e->out[0]) >= 0 || next_reader(g, im2, a->out[0]) >= 0 ||
        next_reader(g, im2, m1->out[0]) >= 0 || next_reader(g, ie, d->out[0]) >= 0)
        return false;
    if (fabsf(scalar_constant(g, d->in[1]) - 1.41421356f) > 1e-5f ||
        scalar_constant(g, a->in[1]) != 1.f || scalar_constant(g, half) != 0.5f)
        return false;
    d->op = OP_GELU;
    d->n_in = 1;
    d->out[0] = m2->out[0];
    e->op = a->op = m1->op = m2->op = OP_SKIP;
    return true;
}

/* The one node after `from` that reads v (-1: none, or more than one). */
static int only_reader(const stk_onnx_graph *g, int from, int v)
{
    int first = next_reader(g, from, v);
    return first >= 0 && next_reader(g, first, v) < 0 ? first : -1;
}

/* torchvision's stochastic depth as torch exports it (mode "row"):
 * x * (cast(random_uniform_like(noise) < s) / s) with s the survival rate:
 * the Mul becomes OP_DROP_PATH(x, 1 - s), identity outside training, the
 * other four are skipped. False: not that pattern. */
static bool fold_drop_path(stk_onnx_graph *g, int ir)
{
    onnx_node *r = &g->nodes[ir];
    int il = r->n_out ? only_reader(g, ir, r->out[0]) : -1;
    int ic = il >= 0 ? only_reader(g, il, g->nodes[il].out[0]) : -1;
    int id = ic >= 0 ? only_reader(g, ic, g->nodes[ic].out[0]) : -1;
    int im = id >= 0 ? only_reader(g, id, g->nodes[id].out[0]) : -1;
    if (im < 0) return false;
    onnx_node *l = &g->nodes[il], *c = &g->nodes[ic], *d = &g->nodes[id], *m = &g->nodes[im];
    if (l->op != OP_LESS || c->op != OP_CAST || d->op != OP_DIV || m->op != OP_MUL ||
        l->n_in != 2 || d->n_in != 2 || m->n_in != 2 || l->in[0] != r->out[0] ||
        c->in[0] != l->out[0] || d->in[0] != c->out[0])
        return false;
    float s = scalar_constant(g, l->in[1]);
    if (!(s > 0.f && s <= 1.f) || scalar_constant(g, d->in[1]) != s) return false;
    const stk_onnx_attr *to = stk_onnx_node_attr(c->src, "to");
    if (!to || to->type != STK_ONNX_ATTR_INT || to->i != STK_ONNX_FLOAT) return false;
    int x = m->in[0] == d->out[0] ? m->in[1] : m->in[0];
    m->op = OP_DROP_PATH;
    m->in[0] = x;
    m->n_in = 1;
    m->p = 1.f - s;
    r->op = l->op = c->op = d->op = OP_SKIP;
    r->drop_path_part = l->drop_path_part = c->drop_path_part = d->drop_path_part = true;
    return true;
}

/* nn.SiLU as torch exports it: x * sigmoid(x), the sigmoid read by that Mul
 * alone. The Mul becomes OP_SILU(x) (one op: one pass over memory and one
 * saved tensor, not two), the Sigmoid is skipped. */
static void fold_silu(stk_onnx_graph *g, int is)
{
    onnx_node *s = &g->nodes[is];
    int im = s->n_out ? only_reader(g, is, s->out[0]) : -1;
    if (im < 0) return;
    onnx_node *m = &g->nodes[im];
    int x = s->in[0];
    if (m->op != OP_MUL || m->n_in != 2 ||
        !((m->in[0] == x && m->in[1] == s->out[0]) || (m->in[1] == x && m->in[0] == s->out[0])))
        return;
    m->op = OP_SILU;
    m->in[0] = x;
    m->n_in = 1;
    s->op = OP_SKIP;
}

/* A batch norm whose output only a Relu reads: one fused op, as the
 * built-in models run it (the activation's pass over memory and its saved
 * output gone: resnet18 imported 0.98x the built-in without it). */
static void fold_bn_relu(stk_onnx_graph *g, int ib)
{
    onnx_node *b = &g->nodes[ib];
    int ir = b->out[0] >= 0 ? only_reader(g, ib, b->out[0]) : -1;
    if (ir < 0 || g->nodes[ir].op != OP_RELU) return;
    for (int k = 0; k < g->file->n_outputs; k++) /* the graph's output itself: kept */
        if (!strcmp(g->names[b->out[0]], g->file->outputs[k].name)) return;
    for (int k = 1; k < b->n_out; k++) /* the running statistics' outputs, read by nothing */
        if (b->out[k] >= 0 && next_reader(g, ib, b->out[k]) >= 0) return;
    b->relu_after = true;
    b->out[0] = g->nodes[ir].out[0];
    g->nodes[ir].op = OP_SKIP;
}

/* ---- build ------------------------------------------------------------------------ */

void stk_onnx_graph_destroy(stk_onnx_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) {
        if (g->values[i].persistent) stk_tensor_release(g->values[i].t);
        free(g->values[i].host);
    }
    for (int i = 0; i < g->n_nodes; i++) free(g->nodes[i].in);
    for (int i = 0; i < g->n_params; i++) {
        free((char *)g->params[i].name);
        stk_tensor_release(g->params[i].value);
    }
    free(g->params);
    free(g->nodes);
    free(g->values);
    free(g->names);
    free(g->table);
    free(g->what);
    stk_onnx_model_destroy(g->file);
    free(g);
}

static stk_status compile_nodes(stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    for (int i = 0; i < f->n_nodes; i++) {
        const stk_onnx_node *s = &f->nodes[i];
        onnx_node *n = &g->nodes[i];
        n->src = s;
        n->counter = -1;
        if (!op_of(s, &n->op)) n->op = OP_SKIP; /* Erf: only inside GELU (checked below) */
        n->n_in = s->n_inputs, n->n_out = s->n_outputs;
        if (!(n->in = malloc(sizeof(int) * (size_t)(n->n_in + n->n_out + 1))))
            return stk_error(STK_ERR_NOMEM, "%s: no memory for its nodes", g->what);
        n->out = n->in + n->n_in;
        for (int k = 0; k < n->n_in; k++) {
            n->in[k] = *s->inputs[k] ? find_value(g, s->inputs[k]) : -1;
            if (*s->inputs[k] && n->in[k] < 0)
                return stk_error(STK_ERR_CORRUPT,
                                 "%s: node '%s' (%s) reads '%s', which nothing before it makes",
                                 g->what, s->name, s->op_type, s->inputs[k]);
        }
        for (int k = 0; k < n->n_out; k++) {
            n->out[k] = *s->outputs[k] ? value_named(g, s->outputs[k]) : -1;
            if (*s->outputs[k] && n->out[k] < 0)
                return stk_error(STK_ERR_NOMEM, "%s: no memory for its values", g->what);
        }
        if (n->op == OP_CONSTANT) { /* evaluated once, here */
            const stk_onnx_attr *a = stk_onnx_node_attr(s, "value");
            if (!a || a->type != STK_ONNX_ATTR_TENSOR || n->n_out != 1 || n->out[0] < 0)
                return stk_error(STK_ERR_UNSUPPORTED,
                                 "%s: Constant '%s' has no tensor 'value' (Stoke reads only "
                                 "that form)",
                                 g->what, s->name);
            STK_TRY(set_constant(g, a->t, &g->values[n->out[0]]));
            n->op = OP_SKIP;
        }
        if (n->op == OP_BATCHNORM) {
            if (n->n_in < 5)
                return stk_error(STK_ERR_CORRUPT, "%s: BatchNormalization '%s' has %d inputs, not 5",
                                 g->what, s->name, n->n_in);
            STK_TRY(add_counter(g, n));
        }
    }
    for (int i = 0; i < f->n_nodes; i++)
        if (!strcmp(f->nodes[i].op_type, "Erf") && !fold_gelu(g, i))
            return stk_error(STK_ERR_UNSUPPORTED,
                             "%s: node '%s' is an Erf outside the GELU pattern (x * (erf(x / "
                             "sqrt 2) + 1) * 0.5), which Stoke does not run",
                             g->what, f->nodes[i].name);
    for (int i = 0; i < f->n_nodes; i++)
        if (g->nodes[i].op == OP_SIGMOID && g->nodes[i].n_in == 1 && g->nodes[i].in[0] >= 0)
            fold_silu(g, i);
        else if (g->nodes[i].op == OP_BATCHNORM && g->nodes[i].n_out >= 1)
            fold_bn_relu(g, i);
    for (int i = 0; i < f->n_nodes; i++)
        if (g->nodes[i].op == OP_RANDOM_UNIFORM_LIKE && !fold_drop_path(g, i))
            return stk_error(STK_ERR_UNSUPPORTED,
                             "%s: node '%s' is a RandomUniformLike outside torchvision's "
                             "stochastic depth (x * (cast(uniform < s) / s)), which Stoke does "
                             "not run",
                             g->what, f->nodes[i].name);
    return STK_OK;
}

stk_status stk_onnx_graph_build(stk_onnx_model *file, const char *what, stk_onnx_graph **out)
{
    *out = NULL;
    stk_onnx_graph *g = calloc(1, sizeof *g);
    if (!g) {
        stk_onnx_model_destroy(file);
        return stk_error(STK_ERR_NOMEM, "no memory for an ONNX graph");
    }
    g->file = file;
    g->what = strdup(what ? what : "the ONNX model");
    int cap = file->n_initializers + file->n_inputs + 1;
    for (int i = 0; i < file->n_nodes; i++) cap += file->nodes[i].n_outputs;
    g->cap_values = cap;
    g->table_size = 16;
    while (g->table_size < 2 * cap) g->table_size *= 2;
    g->values = calloc((size_t)cap, sizeof *g->values);
    g->names = calloc((size_t)cap, sizeof *g->names);
    g->table = malloc(sizeof(int) * (size_t)g->table_size);
    g->nodes = calloc((size_t)(file->n_nodes ? file->n_nodes : 1), sizeof *g->nodes);
    g->n_nodes = file->n_nodes;
    stk_status st = STK_OK;
    if (!g->what || !g->values || !g->names || !g->table || !g->nodes)
        st = stk_error(STK_ERR_NOMEM, "no memory for an ONNX graph");
    if (st == STK_OK) {
        memset(g->table, 0xff, sizeof(int) * (size_t)g->table_size);
        st = refuse_unknown_ops(g);
    }
    if (st == STK_OK) st = refuse_folded_bn(g);
    if (st == STK_OK) st = add_initializers(g);
    g->input = g->output = -1;
    for (int i = 0; st == STK_OK && i < file->n_inputs; i++) {
        if (find_value(g, file->inputs[i].name) >= 0) continue; /* an initializer listed as input */
        if (g->input >= 0) {
            st = stk_error(STK_ERR_UNSUPPORTED,
                           "%s: the graph has more than one input ('%s', '%s'): Stoke feeds "
                           "one image batch",
                           g->what, g->names[g->input], file->inputs[i].name);
            break;
        }
        if ((g->input = value_named(g, file->inputs[i].name)) < 0)
            st = stk_error(STK_ERR_NOMEM, "%s: no memory for its values", g->what);
    }
    if (st == STK_OK && g->input < 0)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: the graph has no input to feed", g->what);
    if (st == STK_OK) st = compile_nodes(g);
    if (st == STK_OK && file->n_outputs != 1)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: the graph has %d outputs, not one (the logits)",
                       g->what, file->n_outputs);
    if (st == STK_OK && (g->output = find_value(g, file->outputs[0].name)) < 0)
        st = stk_error(STK_ERR_CORRUPT, "%s: its output '%s' is made by no node", g->what,
                       file->outputs[0].name);
    for (int v = 0; v < g->n_values; v++) g->values[v].last_use = -1;
    for (int i = 0; st == STK_OK && i < g->n_nodes; i++)
        for (int k = 0; g->nodes[i].op != OP_SKIP && k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) g->values[g->nodes[i].in[k]].last_use = i;
    if (st != STK_OK) {
        stk_onnx_graph_destroy(g);
        return st;
    }
    *out = g;
    return STK_OK;
}

int stk_onnx_graph_param_count(const stk_onnx_graph *g) { return g->n_params; }

void stk_onnx_graph_file(const stk_onnx_graph *g, const void **bytes, size_t *len)
{
    *bytes = g->file->bytes;
    *len = g->file->n_bytes;
}
const stk_param *stk_onnx_graph_params(const stk_onnx_graph *g) { return g->params; }

int stk_onnx_graph_input_shape(const stk_onnx_graph *g, int64_t *dims)
{
    for (int i = 0; i < g->file->n_inputs; i++)
        if (!strcmp(g->file->inputs[i].name, g->names[g->input])) {
            const stk_onnx_value *v = &g->file->inputs[i];
            for (int d = 0; d < v->ndim; d++) dims[d] = v->dims[d];
            return v->ndim;
        }
    return -1;
}

/* ---- forward ---------------------------------------------------------------------- */

static void clear_value(onnx_value *v)
{
    if (v->persistent) return;
    free(v->host);
    *v = (onnx_value){.last_use = v->last_use};
}

/* After node i: the intermediates it was the last to read go (their memory
 * back to the cache while the step runs, as the built-in models let theirs
 * go), unless another live value holds the same tensor (Identity, a Cast,
 * a view returned as is; the caller's input above all). */
static void drop_read(stk_onnx_graph *g, int i)
{
    const onnx_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || v == g->input || v == g->output || g->values[v].persistent ||
            g->values[v].last_use != i)
            continue;
        stk_tensor *t = g->values[v].t;
        bool aliased = false;
        for (int u = 0; t && u < g->n_values && !aliased; u++)
            aliased = u != v && g->values[u].t == t &&
                      (g->values[u].persistent || u == g->input || u == g->output ||
                       g->values[u].last_use > i);
        if (t && !aliased) eng_scope_drop(t);
        clear_value(&g->values[v]);
    }
}

stk_status stk_onnx_graph_forward(stk_onnx_graph *g, stk_tensor *x, bool training, uint64_t seed,
                                  uint64_t stream, stk_tensor **out)
{
    *out = NULL;
    if (stk_tensor_dtype(x) != STK_F32)
        return stk_error(STK_ERR_INVALID_ARG, "%s: the input must be f32", g->what);
    g->values[g->input].t = x;
    stk_status st = STK_OK;
    for (int i = 0; i < g->n_nodes && st == STK_OK; i++) {
        if (g->nodes[i].op == OP_SKIP) continue;
        st = eng_onnx_run_node(g, i, training, seed, stream);
        if (st != STK_OK) {
            const stk_onnx_node *s = g->nodes[i].src;
            stk_error_prefix(st, "%s: node '%s' (%s)", g->what, s->name, s->op_type);
            break;
        }
        drop_read(g, i);
    }
    stk_tensor *y = g->values[g->output].t;
    if (st == STK_OK && !y)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: its output '%s' is not a float tensor", g->what,
                       g->names[g->output]);
    for (int v = 0; v < g->n_values; v++)
        if (v != g->input) clear_value(&g->values[v]);
    g->values[g->input].t = NULL;
    if (st == STK_OK) *out = y;
    return st;
}

/* ---- the module kind's calls (nn_impl.h: nn.c runs the graph through them) ---- */

void eng_onnx_graph_free(struct stk_onnx_graph *g) { stk_onnx_graph_destroy(g); }

const stk_param *eng_onnx_graph_params(const struct stk_onnx_graph *g, int *n)
{
    *n = stk_onnx_graph_param_count(g);
    return stk_onnx_graph_params(g);
}

stk_status eng_onnx_graph_run(struct stk_onnx_graph *g, stk_tensor *x, bool training,
                              uint64_t seed, uint64_t stream, stk_tensor **out)
{
    return stk_onnx_graph_forward(g, x, training, seed, stream, out);
}
