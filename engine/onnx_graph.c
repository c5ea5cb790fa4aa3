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
    {"CastLike", OP_CASTLIKE},
    {"Range", OP_RANGE},
    {"ReduceMean", OP_REDUCEMEAN},
    {"Pow", OP_POW},
    {"Gelu", OP_GELU}, /* opset 20, the dynamo exporter's default opset */
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
    if (src->numel) /* (an empty tensor has no data to copy) */
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

/* A Constant node's value: "value" (a tensor), or the dynamo exporter's
 * "value_float(s)" and "value_int(s)" (a scalar or a 1-D list). */
static stk_status constant_node(stk_onnx_graph *g, const onnx_node *n)
{
    const stk_onnx_node *s = n->src;
    if (n->n_out != 1 || n->out[0] < 0 || s->n_attrs != 1)
        return stk_error(STK_ERR_CORRUPT, "%s: Constant '%s' has %d outputs and %d attributes, "
                         "not one of each", g->what, s->name, n->n_out, s->n_attrs);
    const stk_onnx_attr *a = &s->attrs[0];
    onnx_value *v = &g->values[n->out[0]];
    if (!strcmp(a->name, "value") && a->type == STK_ONNX_ATTR_TENSOR)
        return set_constant(g, a->t, v);
    stk_onnx_tensor t = {.name = s->name, .ndim = 1};
    int64_t i64;
    if (!strcmp(a->name, "value_float") && a->type == STK_ONNX_ATTR_FLOAT)
        t.dtype = STK_ONNX_FLOAT, t.ndim = 0, t.numel = 1, t.data = &a->f;
    else if (!strcmp(a->name, "value_floats") && a->type == STK_ONNX_ATTR_FLOATS)
        t.dtype = STK_ONNX_FLOAT, t.numel = t.dims[0] = a->n, t.data = a->floats;
    else if (!strcmp(a->name, "value_int") && a->type == STK_ONNX_ATTR_INT)
        i64 = a->i, t.dtype = STK_ONNX_INT64, t.ndim = 0, t.numel = 1, t.data = &i64;
    else if (!strcmp(a->name, "value_ints") && a->type == STK_ONNX_ATTR_INTS)
        t.dtype = STK_ONNX_INT64, t.numel = t.dims[0] = a->n, t.data = a->ints;
    else
        return stk_error(STK_ERR_UNSUPPORTED,
                         "%s: Constant '%s' holds '%s', which Stoke does not read (value, "
                         "value_float(s), value_int(s))",
                         g->what, s->name, a->name);
    t.bytes = (size_t)t.numel * stk_onnx_dtype_size(t.dtype);
    return set_constant(g, &t, v);
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
        if (find_value(g, src->name) >= 0)
            return stk_error(STK_ERR_CORRUPT, "%s: initializer '%s' appears twice", g->what,
                             src->name);
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

/* The legacy exporter in eval mode keeps one initializer for state_dict
 * tensors of equal values (every batch norm's fresh weight of ones) and
 * gives the others as Identity(layer4.0.bn1.weight) -> layer4.1.bn2.weight.
 * Each is a weight of its own: a copy under its own name, trained (or a
 * running statistic) apart, the Identity skipped. */
static stk_status own_weight(stk_onnx_graph *g, onnx_node *n)
{
    const stk_onnx_node *s = n->src;
    if (n->n_in != 1 || n->n_out != 1 || n->in[0] < 0 || n->out[0] < 0 ||
        !stk_onnx_initializer(g->file, s->inputs[0]) || !strncmp(s->outputs[0], "onnx::", 6) ||
        strchr(s->outputs[0], '/') || !g->values[n->in[0]].t ||
        stk_tensor_dtype(g->values[n->in[0]].t) != STK_F32)
        return STK_OK;
    stk_tensor *src = g->values[n->in[0]].t, *t;
    int64_t dims[STK_ONNX_MAX_DIMS];
    for (int d = 0; d < stk_tensor_ndim(src) && d < STK_ONNX_MAX_DIMS; d++)
        dims[d] = stk_tensor_dim(src, d);
    STK_TRY(eng_tensor_new(STK_DEVICE_CPU, STK_F32, stk_tensor_ndim(src), dims, false, &t));
    if (stk_tensor_numel(src))
        memcpy(stk_tensor_data(t), stk_tensor_data(src), (size_t)stk_tensor_numel(src) * sizeof(float));
    bool stat = is_bn_statistic(g->file, s->outputs[0]);
    if (!stat) stk_tensor_set_requires_grad(t, true);
    onnx_value *v = &g->values[n->out[0]];
    v->t = t;
    v->persistent = true;
    stk_tensor_retain(t);
    n->op = OP_SKIP;
    n->param_copy = true;
    return push_param(g, s->outputs[0], t, stat);
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

/* The dynamo exporter's optimizer (optimize=True, its default) folds batch
 * norm into the convolutions under the convolutions' own names: its
 * signature still lists the running statistics the graph no longer has. */
static stk_status refuse_dynamo_folded_bn(const stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    const char *sig = f->torch_signature;
    for (const char *p = sig ? strstr(sig, "BUFFER target='") : NULL; p;
         p = strstr(p + 1, "BUFFER target='")) {
        const char *name = p + 15, *end = strchr(name, '\'');
        if (!end || end - name > 400 || end - name < 12 || strncmp(end - 12, "running_mean", 12))
            continue;
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(end - name), name);
        if (stk_onnx_initializer(f, buf)) continue;
        return stk_error(STK_ERR_UNSUPPORTED,
                         "%s: its batch norm is folded into the convolutions (the module's "
                         "buffer %s is not in the graph: the dynamo exporter's optimizer folds "
                         "it), so it cannot train as the module does; export it with "
                         "torch.onnx.export(model, (x,), \"%s\", dynamo=True, optimize=False), "
                         "or dynamo=False, training=torch.onnx.TrainingMode.TRAINING, "
                         "do_constant_folding=False",
                         g->what, buf, g->what);
    }
    return STK_OK;
}

/* Batch norm folded into the convolutions: no BatchNormalization, and a
 * Conv whose weight is one of torch's renamed constants. */
static stk_status refuse_folded_bn(const stk_onnx_graph *g)
{
    const stk_onnx_model *f = g->file;
    STK_TRY(refuse_dynamo_folded_bn(g));
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
    /* x times (erf + 1), then times 0.5 (the legacy exporter), or 0.5 times
     * (erf + 1), then times x (the dynamo exporter) */
    int x = d->in[0];
    int p = m1->in[0] == a->out[0] ? m1->in[1] : m1->in[1] == a->out[0] ? m1->in[0] : -2;
    int q = m2->in[0] == m1->out[0] ? m2->in[1] : m2->in[1] == m1->out[0] ? m2->in[0] : -2;
    int half = p == x ? q : q == x ? p : -1;
    if (p < -1 || q < -1 || half < 0) return false;
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

/* The node before `before` that makes value v, or -1. */
static int producer(const stk_onnx_graph *g, int before, int v)
{
    for (int i = before - 1; i >= 0; i--)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] == v) return i;
    return -1;
}

/* torchvision's stochastic depth as torch exports it (mode "row"):
 * x * (cast(random_uniform_like(noise) < s) / s) with s the survival rate
 * (the dynamo exporter casts with CastLike, s too: CastLike(s, noise)):
 * the Mul becomes OP_DROP_PATH(x, 1 - s), identity outside training, the
 * others are skipped. False: not that pattern. */
static bool fold_drop_path(stk_onnx_graph *g, int ir)
{
    onnx_node *r = &g->nodes[ir];
    if (r->n_out < 1 || r->out[0] < 0) return false;
    int il = -1, is = -1; /* the Less; the CastLike of s */
    for (int i = next_reader(g, ir, r->out[0]); i >= 0; i = next_reader(g, i, r->out[0])) {
        const onnx_node *n = &g->nodes[i];
        if (n->op == OP_LESS && n->n_in == 2 && n->in[0] == r->out[0] && il < 0)
            il = i;
        else if (n->op == OP_CASTLIKE && n->n_in == 2 && n->in[1] == r->out[0] && is < 0)
            is = i;
        else
            return false;
    }
    int ic = il >= 0 ? only_reader(g, il, g->nodes[il].out[0]) : -1;
    int id = ic >= 0 ? only_reader(g, ic, g->nodes[ic].out[0]) : -1;
    int im = id >= 0 ? only_reader(g, id, g->nodes[id].out[0]) : -1;
    if (im < 0) return false;
    onnx_node *l = &g->nodes[il], *c = &g->nodes[ic], *d = &g->nodes[id], *m = &g->nodes[im];
    if ((c->op != OP_CAST && c->op != OP_CASTLIKE) || d->op != OP_DIV || m->op != OP_MUL ||
        d->n_in != 2 || m->n_in != 2 || c->in[0] != l->out[0] || d->in[0] != c->out[0])
        return false;
    float s = scalar_constant(g, l->in[1]);
    if (is >= 0) { /* Less(noise, CastLike(s, noise)), read by the Less alone */
        onnx_node *sc = &g->nodes[is];
        if (sc->n_out < 1 || l->in[1] != sc->out[0] || only_reader(g, is, sc->out[0]) != il ||
            producer(g, il, l->in[1]) != is)
            return false;
        s = scalar_constant(g, sc->in[0]);
    }
    if (!(s > 0.f && s <= 1.f) || scalar_constant(g, d->in[1]) != s) return false;
    if (c->op == OP_CAST) {
        const stk_onnx_attr *to = stk_onnx_node_attr(c->src, "to");
        if (!to || to->type != STK_ONNX_ATTR_INT || to->i != STK_ONNX_FLOAT) return false;
    }
    int x = m->in[0] == d->out[0] ? m->in[1] : m->in[0];
    m->op = OP_DROP_PATH;
    m->in[0] = x;
    m->n_in = 1;
    m->p = 1.f - s;
    r->op = l->op = c->op = d->op = OP_SKIP;
    r->drop_path_part = l->drop_path_part = c->drop_path_part = d->drop_path_part = true;
    if (is >= 0) g->nodes[is].op = OP_SKIP, g->nodes[is].drop_path_part = true;
    return true;
}

/* A ReduceMean over the last axis only (keepdims): its axes [-1] as the
 * attribute (opset < 18) or a constant input. */
static bool mean_over_last(const stk_onnx_graph *g, const onnx_node *n)
{
    const stk_onnx_attr *k = stk_onnx_node_attr(n->src, "keepdims");
    if (n->op != OP_REDUCEMEAN || (k && k->type == STK_ONNX_ATTR_INT && k->i != 1)) return false;
    const stk_onnx_attr *a = stk_onnx_node_attr(n->src, "axes");
    if (a) return a->type == STK_ONNX_ATTR_INTS && a->n == 1 && a->ints[0] == -1;
    const onnx_value *v = n->n_in == 2 && n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;
    return v && v->host && v->numel == 1 && v->host[0] == -1;
}

/* nn.LayerNorm as the exporter writes it below opset 17 (no
 * LayerNormalization): m = mean(x), d = x - m, (d / sqrt(mean(d^2) + eps))
 * * weight + bias. The first ReduceMean becomes OP_LAYERNORM(x, weight,
 * bias) writing the last node's output (eps in p), the others are skipped.
 * Without the affine (elementwise_affine=False) it ends at the Div. */
static stk_status fold_layer_norm(stk_onnx_graph *g, int im)
{
    onnx_node *m = &g->nodes[im];
    if (!mean_over_last(g, m) || m->n_out != 1 || m->out[0] < 0 || m->in[0] < 0) return STK_OK;
    int x = m->in[0];
    int is = only_reader(g, im, m->out[0]);
    if (is < 0) return STK_OK;
    onnx_node *sub = &g->nodes[is];
    if (sub->op != OP_SUB || sub->n_in != 2 || sub->in[0] != x || sub->in[1] != m->out[0])
        return STK_OK;
    int ip = next_reader(g, is, sub->out[0]);
    int idv = ip >= 0 ? next_reader(g, ip, sub->out[0]) : -1;
    if (idv < 0 || next_reader(g, idv, sub->out[0]) >= 0) return STK_OK; /* Pow and Div alone */
    int ir = only_reader(g, ip, g->nodes[ip].out[0]);
    int ia = ir >= 0 ? only_reader(g, ir, g->nodes[ir].out[0]) : -1;
    int iq = ia >= 0 ? only_reader(g, ia, g->nodes[ia].out[0]) : -1;
    if (iq < 0 || only_reader(g, iq, g->nodes[iq].out[0]) != idv) return STK_OK;
    onnx_node *pw = &g->nodes[ip], *r = &g->nodes[ir], *a = &g->nodes[ia], *q = &g->nodes[iq],
              *dv = &g->nodes[idv];
    if (pw->op != OP_POW || pw->n_in != 2 || pw->in[0] != sub->out[0] ||
        scalar_constant(g, pw->in[1]) != 2.f || !mean_over_last(g, r) || r->in[0] != pw->out[0] ||
        a->op != OP_ADD || a->n_in != 2 || a->in[0] != r->out[0] || q->op != OP_SQRT ||
        q->in[0] != a->out[0] || dv->op != OP_DIV || dv->n_in != 2 || dv->in[0] != sub->out[0] ||
        dv->in[1] != q->out[0])
        return STK_OK;
    float eps = scalar_constant(g, a->in[1]);
    if (!(eps > 0)) return STK_OK;
    /* the affine: * weight, + bias (1-D parameters of the last dimension) */
    int w = -1, b = -1, last = idv;
    int imul = only_reader(g, idv, dv->out[0]);
    onnx_node *mul = imul >= 0 ? &g->nodes[imul] : NULL;
    if (mul && mul->op == OP_MUL && mul->n_in == 2 && mul->in[0] == dv->out[0] &&
        mul->in[1] >= 0 && g->values[mul->in[1]].persistent && g->values[mul->in[1]].t &&
        stk_tensor_ndim(g->values[mul->in[1]].t) == 1) {
        w = mul->in[1], last = imul;
        int iadd = only_reader(g, imul, mul->out[0]);
        onnx_node *add = iadd >= 0 ? &g->nodes[iadd] : NULL;
        if (add && add->op == OP_ADD && add->n_in == 2 && add->in[0] == mul->out[0] &&
            add->in[1] >= 0 && g->values[add->in[1]].persistent && g->values[add->in[1]].t &&
            stk_tensor_ndim(g->values[add->in[1]].t) == 1)
            b = add->in[1], last = iadd;
    }
    int *io = malloc(sizeof(int) * 5); /* in: x, weight, bias; out: y */
    if (!io) return stk_error(STK_ERR_NOMEM, "%s: no memory for its nodes", g->what);
    io[0] = x, io[1] = w, io[2] = b, io[3] = g->nodes[last].out[0], io[4] = -1;
    free(m->in);
    m->in = io, m->out = io + 3, m->n_in = 3, m->n_out = 1;
    m->op = OP_LAYERNORM;
    m->p = eps;
    for (int i = is; i <= last; i++)
        if (i == is || i == ip || i == ir || i == ia || i == iq || i == idv || i == last ||
            (i == imul && w >= 0))
            g->nodes[i].op = OP_SKIP;
    return STK_OK;
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
    eng_onnx_units_free(g);
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
            if (*s->outputs[k] && find_value(g, s->outputs[k]) >= 0) /* ONNX is SSA */
                return stk_error(STK_ERR_CORRUPT,
                                 "%s: node '%s' (%s) writes '%s', which is already made (an "
                                 "initializer, the input or an earlier node's output)",
                                 g->what, s->name, s->op_type, s->outputs[k]);
            n->out[k] = *s->outputs[k] ? value_named(g, s->outputs[k]) : -1;
            if (*s->outputs[k] && n->out[k] < 0)
                return stk_error(STK_ERR_NOMEM, "%s: no memory for its values", g->what);
        }
        if (n->op == OP_CONSTANT) { /* evaluated once, here */
            STK_TRY(constant_node(g, n));
            n->op = OP_SKIP;
        }
        if (n->op == OP_IDENTITY) STK_TRY(own_weight(g, n));
        const stk_onnx_attr *approx = stk_onnx_node_attr(s, "approximate");
        if (n->op == OP_GELU && approx && approx->s && strcmp(approx->s, "none"))
            return stk_error(STK_ERR_UNSUPPORTED,
                             "%s: node '%s' is a Gelu with approximate='%s'; Stoke runs the "
                             "exact (erf) form, nn.GELU()'s default",
                             g->what, s->name, approx->s);
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
        if (g->nodes[i].op == OP_REDUCEMEAN) STK_TRY(fold_layer_norm(g, i));
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

stk_status stk_onnx_graph_forward(stk_onnx_graph *g, stk_tensor *x, bool training, uint64_t seed,
                                  uint64_t stream, stk_tensor **out)
{
    *out = NULL;
    if (stk_tensor_dtype(x) != STK_F32)
        return stk_error(STK_ERR_INVALID_ARG, "%s: the input must be f32", g->what);
    eng_onnx_run r;
    STK_TRY(eng_onnx_run_begin(g, g->input, g->output, &r));
    r.values[g->input].t = x;
    stk_status st = eng_onnx_run_nodes(&r, 0, g->n_nodes, training, seed, stream);
    stk_tensor *y = r.values[g->output].t;
    if (st == STK_OK && !y)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: its output '%s' is not a float tensor", g->what,
                       g->names[g->output]);
    eng_onnx_run_end(&r);
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

stk_status eng_onnx_graph_to(struct stk_onnx_graph *g, stk_device dev)
{
    return eng_onnx_graph_move(g, dev);
}

stk_status eng_onnx_graph_run(struct stk_onnx_graph *g, stk_tensor *x, bool training,
                              uint64_t seed, uint64_t stream, stk_tensor **out)
{
    return stk_onnx_graph_forward(g, x, training, seed, stream, out);
}
