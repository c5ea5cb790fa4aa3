/* An imported ONNX graph written back as an ONNX file for inference
 * (stk_onnx_graph_export, onnx_graph.h): the file's own nodes in eval mode
 * with the trained weights, so that what the user exported from PyTorch in
 * training mode comes back as torch.onnx.export writes an eval-mode model:
 *
 *   - BatchNormalization in eval form (one output, no training_mode),
 *     folded into the Conv before it when that Conv's output is read by the
 *     batch norm alone (unless fold_bn is off);
 *   - Dropout and torchvision's stochastic depth (the RandomUniformLike ...
 *     Mul the importer runs as one drop path) become Identity;
 *   - the input is "input" (f32 NCHW, or u8 NHWC with Cast, Sub, Div,
 *     Transpose in front), the output "logits", the batch dimension
 *     "batch" (unless the file fixed it), as the built-in models' export
 *     names them;
 *   - everything else (shape arithmetic, Constants, GELU's Erf ...) as the
 *     file has it, under the file's opset.
 *
 * Field numbers: onnx/onnx.proto (as engine/onnx_export.c). */
#include "engine/onnx.h"
#include "engine/onnx_graph_impl.h"
#include "engine/onnx_write_impl.h"

#include "common/fs.h"
#include "common/pb_wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "TensorProto.raw_data is little-endian: this writer copies host floats"
#endif

enum { GRAPH_NODE = 1, GRAPH_INIT = 5 }; /* GraphProto (the rest: onnx_write.c) */
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5 };
enum { NODE_DOMAIN = 7 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_S = 4, ATTR_T = 5, ATTR_FLOATS = 7 };
enum { ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9 };

/* The names the written graph gives the file's input and output. */
#define IN_NAME     "input"
#define IN_F32_NAME "input_f32_nchw" /* the preprocessing's output, with u8 input */
#define OUT_NAME    "logits"

typedef struct writer {
    const stk_onnx_graph *g;
    const stk_onnx_options *o;
    stk_pb nodes, inits;
    const char *in_name; /* what the file's input is called in the written graph */
    bool *conv_folded;   /* per node: a Conv with the batch norm after it folded in */
    bool *bn_folded;     /* per node: a BatchNormalization folded into its Conv */
    const char **used;   /* the names the written nodes read (initializers among them) */
    int n_used, cap_used;
    const char **made; /* initializers the folds wrote themselves */
    int n_made, cap_made;
    stk_status st;
} writer;

static void remember(writer *w, const char ***list, int *n, int *cap, const char *name)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 256;
        const char **l = realloc(*list, (size_t)c * sizeof *l);
        if (!l) {
            w->st = stk_error(STK_ERR_NOMEM, "out of memory");
            return;
        }
        *list = l, *cap = c;
    }
    (*list)[(*n)++] = name;
}

static bool listed(const char *const *list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], name)) return true;
    return false;
}

/* A value's name in the written graph: the input and output renamed; a
 * value of the file that already has one of the new names moves aside. */
static const char *renamed(const writer *w, const char *name, char *buf, size_t n)
{
    const stk_onnx_graph *g = w->g;
    if (!strcmp(name, g->names[g->input])) return w->in_name;
    if (!strcmp(name, g->names[g->output])) return OUT_NAME;
    if (!strcmp(name, IN_NAME) || !strcmp(name, OUT_NAME) || !strcmp(name, IN_F32_NAME) ||
        !strncmp(name, "input_mean_255", 14) || !strncmp(name, "input_std_255", 13)) {
        snprintf(buf, n, "%s_file", name);
        return buf;
    }
    return name;
}

static void name_field(writer *w, stk_pb *b, int field, const char *name)
{
    char buf[1100];
    if (strlen(name) > 1000) {
        w->st = stk_error(STK_ERR_UNSUPPORTED, "%s: a value name of %zu bytes", w->g->what,
                          strlen(name));
        return;
    }
    stk_pb_string(b, field, *name ? renamed(w, name, buf, sizeof buf) : "");
}

static void tensor(stk_pb *b, int field, const char *name, int dtype, int ndim, const int64_t *dims,
                   const void *data, size_t bytes)
{
    size_t t = stk_pb_begin(b, field);
    for (int d = 0; d < ndim; d++) stk_pb_int(b, TENSOR_DIMS, dims[d]);
    stk_pb_int(b, TENSOR_TYPE, dtype);
    if (name) stk_pb_string(b, TENSOR_NAME, name);
    stk_pb_bytes(b, TENSOR_RAW, data, bytes);
    stk_pb_end(b, t);
}

static void attribute(stk_pb *b, const stk_onnx_attr *a)
{
    size_t m = stk_pb_begin(b, NODE_ATTR);
    stk_pb_string(b, ATTR_NAME, a->name);
    switch (a->type) {
    case STK_ONNX_ATTR_FLOAT: stk_pb_float(b, ATTR_F, a->f); break;
    case STK_ONNX_ATTR_INT: stk_pb_int(b, ATTR_I, a->i); break;
    case STK_ONNX_ATTR_STRING: stk_pb_bytes(b, ATTR_S, a->s, a->s_len); break;
    case STK_ONNX_ATTR_TENSOR:
        tensor(b, ATTR_T, NULL, a->t->dtype, a->t->ndim, a->t->dims, a->t->data, a->t->bytes);
        break;
    case STK_ONNX_ATTR_FLOATS:
        for (int k = 0; k < a->n; k++) stk_pb_float(b, ATTR_FLOATS, a->floats[k]);
        break;
    case STK_ONNX_ATTR_INTS:
        for (int k = 0; k < a->n; k++) stk_pb_int(b, ATTR_INTS, a->ints[k]);
        break;
    default: break;
    }
    stk_pb_int(b, ATTR_TYPE, a->type);
    stk_pb_end(b, m);
}

/* A node: op, inputs, outputs and attributes (skip_attr: one left out);
 * track: its inputs remembered as read (they are the file's names). */
static void node(writer *w, const char *name, const char *op, const char *domain,
                 const char *const *in, int n_in, const char *const *out, int n_out,
                 const stk_onnx_attr *attrs, int n_attrs, const char *skip_attr, bool track)
{
    stk_pb *b = &w->nodes;
    size_t m = stk_pb_begin(b, GRAPH_NODE);
    for (int k = 0; k < n_in; k++) {
        name_field(w, b, NODE_INPUT, in[k]);
        if (track) remember(w, &w->used, &w->n_used, &w->cap_used, in[k]);
    }
    for (int k = 0; k < n_out; k++) name_field(w, b, NODE_OUTPUT, out[k]);
    stk_pb_string(b, NODE_NAME, name);
    stk_pb_string(b, NODE_OP, op);
    for (int k = 0; k < n_attrs; k++)
        if (!skip_attr || strcmp(attrs[k].name, skip_attr)) attribute(b, &attrs[k]);
    if (domain && *domain) stk_pb_string(b, NODE_DOMAIN, domain);
    stk_pb_end(b, m);
}

/* ---- batch norm folded into the Conv before it -------------------------------- */

/* A parameter's float values by name (NULL: not a float parameter). */
static const float *param_floats(const stk_onnx_graph *g, const char *name, int64_t *numel)
{
    for (int i = 0; i < g->n_params; i++)
        if (!strcmp(g->params[i].name, name) && stk_tensor_dtype(g->params[i].value) == STK_F32 &&
            stk_tensor_device(g->params[i].value) == STK_DEVICE_CPU) {
            *numel = stk_tensor_numel(g->params[i].value);
            return stk_tensor_data(g->params[i].value);
        }
    return NULL;
}

/* How many of the file's node inputs read the value of that name (by the
 * file's nodes: the importer's folds rewrite their compiled inputs), but
 * Shape (the dynamo exporter's reads the weight for the bias's size). */
static int readers(const stk_onnx_graph *g, const char *name)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].src->n_inputs; k++)
            n += !strcmp(g->nodes[i].src->inputs[k], name) && g->nodes[i].op != OP_SHAPE;
    return n;
}

/* The node that makes value v, or NULL. */
static const onnx_node *maker(const stk_onnx_graph *g, int v)
{
    for (int i = 0; v >= 0 && i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->nodes[i].out[k] == v) return &g->nodes[i];
    return NULL;
}

/* A Conv's bias that is zeros made in the graph: the dynamo exporter's
 * Expand(CastLike(0, x), Shape(weight)[0]) for a convolution without one. */
static bool zero_bias(const stk_onnx_graph *g, int v)
{
    const onnx_node *e = maker(g, v);
    if (!e || e->op != OP_EXPAND || e->n_in < 1) return false;
    int c = e->in[0];
    const onnx_node *cl = maker(g, c);
    if (cl && cl->op == OP_CASTLIKE && cl->n_in >= 1) c = cl->in[0];
    const onnx_value *z = c >= 0 ? &g->values[c] : NULL;
    if (!z || !z->persistent) return false;
    if (z->host && z->numel == 1) return z->host[0] == 0;
    if (z->t && stk_tensor_dtype(z->t) == STK_F32 && stk_tensor_numel(z->t) == 1 &&
        stk_tensor_device(z->t) == STK_DEVICE_CPU)
        return ((const float *)stk_tensor_data(z->t))[0] == 0.f;
    return z->host && z->numel == 1 && z->host[0] == 0;
}

/* The batch norm that alone reads Conv ic's output (and whose statistics
 * and affine are parameters), or -1. */
static int bn_after(const stk_onnx_graph *g, int ic)
{
    const onnx_node *c = &g->nodes[ic];
    if (c->op != OP_CONV || c->src->n_outputs != 1 || c->out[0] < 0 || c->out[0] == g->output ||
        c->src->n_inputs < 2)
        return -1;
    const char *y = c->src->outputs[0];
    int64_t n;
    if (readers(g, y) != 1 || readers(g, c->src->inputs[1]) != 1 ||
        !param_floats(g, c->src->inputs[1], &n))
        return -1;
    if (c->src->n_inputs >= 3 && *c->src->inputs[2] && !param_floats(g, c->src->inputs[2], &n) &&
        !zero_bias(g, c->in[2]))
        return -1;
    for (int i = ic + 1; i < g->n_nodes; i++) {
        const onnx_node *b = &g->nodes[i];
        if (b->src->n_inputs < 1 || strcmp(b->src->inputs[0], y)) continue;
        if (b->op != OP_BATCHNORM || b->src->n_inputs < 5) return -1;
        for (int k = 1; k < 5; k++)
            if (!param_floats(g, b->src->inputs[k], &n)) return -1;
        return i;
    }
    return -1;
}

/* Conv ic with batch norm ib folded in: W' = W s, b' = (b - mean) s + beta,
 * s = gamma / sqrt(var + eps) per output channel; under the conv's own
 * parameter names (as the built-in models' export: "<conv>.bias" made when
 * the conv had none). */
static void write_folded_conv(writer *w, int ic, int ib)
{
    const stk_onnx_graph *g = w->g;
    const stk_onnx_node *c = g->nodes[ic].src, *b = g->nodes[ib].src;
    int64_t nw, nb = 0, ng, nbeta, nmean, nvar;
    const float *W = param_floats(g, c->inputs[1], &nw);
    const float *cb = c->n_inputs >= 3 && *c->inputs[2] ? param_floats(g, c->inputs[2], &nb) : NULL;
    /* (a bias that is not a parameter is zeros: bn_after) */
    const float *gamma = param_floats(g, b->inputs[1], &ng);
    const float *beta = param_floats(g, b->inputs[2], &nbeta);
    const float *mean = param_floats(g, b->inputs[3], &nmean);
    const float *var = param_floats(g, b->inputs[4], &nvar);
    const stk_onnx_tensor *wt = stk_onnx_initializer(g->file, c->inputs[1]);
    int64_t co = wt && wt->ndim >= 1 ? wt->dims[0] : 0;
    if (co <= 0 || nw % co || ng != co || nbeta != co || nmean != co || nvar != co ||
        (cb && nb != co)) {
        w->st = stk_error(STK_ERR_CORRUPT,
                          "%s: Conv '%s' and BatchNormalization '%s' disagree "
                          "on the channels",
                          g->what, c->name, b->name);
        return;
    }
    const stk_onnx_attr *ea = stk_onnx_node_attr(b, "epsilon");
    double eps = ea && ea->type == STK_ONNX_ATTR_FLOAT ? ea->f : 1e-5;
    int64_t per = nw / co;
    float *W2 = malloc((size_t)(nw + co) * sizeof *W2), *B2 = W2 ? W2 + nw : NULL;
    char bias_name[1100];
    if (!W2) {
        w->st = stk_error(STK_ERR_NOMEM, "out of memory");
        return;
    }
    for (int64_t o = 0; o < co; o++) {
        double s = gamma[o] / sqrt((double)var[o] + eps);
        for (int64_t k = 0; k < per; k++) W2[o * per + k] = (float)(W[o * per + k] * s);
        B2[o] = (float)(((cb ? cb[o] : 0.0) - mean[o]) * s + beta[o]);
    }
    const char *wname = c->inputs[1];
    size_t len = strlen(wname);
    if (cb)
        snprintf(bias_name, sizeof bias_name, "%s", c->inputs[2]);
    else if (len >= 6 && !strcmp(wname + len - 6, "weight"))
        snprintf(bias_name, sizeof bias_name, "%.*sbias", (int)(len - 6), wname);
    else
        snprintf(bias_name, sizeof bias_name, "%s.bias", wname);
    if (!cb && stk_onnx_initializer(g->file, bias_name)) /* taken: another name */
        snprintf(bias_name + strlen(bias_name), sizeof bias_name - strlen(bias_name), "_folded");
    char buf[1100];
    tensor(&w->inits, GRAPH_INIT, renamed(w, wname, buf, sizeof buf), STK_ONNX_FLOAT, wt->ndim,
           wt->dims, W2, (size_t)nw * sizeof *W2);
    tensor(&w->inits, GRAPH_INIT, renamed(w, bias_name, buf, sizeof buf), STK_ONNX_FLOAT, 1, &co,
           B2, (size_t)co * sizeof *B2);
    free(W2);
    remember(w, &w->made, &w->n_made, &w->cap_made, wname);
    if (cb) remember(w, &w->made, &w->n_made, &w->cap_made, c->inputs[2]);
    /* the input and output as the file names them (node() renames) */
    const char *in[3] = {c->inputs[0], wname, bias_name};
    const char *out = b->outputs[0];
    remember(w, &w->used, &w->n_used, &w->cap_used, c->inputs[0]);
    node(w, c->name, "Conv", c->domain, in, 3, &out, 1, c->attrs, c->n_attrs, NULL, false);
}

/* ---- the nodes and initializers -------------------------------------------------- */

static void write_node(writer *w, int i)
{
    const stk_onnx_graph *g = w->g;
    const onnx_node *n = &g->nodes[i];
    const stk_onnx_node *s = n->src;
    if (n->drop_path_part || w->bn_folded[i] || n->param_copy) return; /* (copies: initializers) */
    if (w->conv_folded[i]) {
        int ib = bn_after(g, i);
        write_folded_conv(w, i, ib);
        return;
    }
    switch (n->op) {
    case OP_BATCHNORM: /* eval form: Y only; training_mode's default is 0 */
        node(w, s->name, s->op_type, s->domain, s->inputs, 5, s->outputs, 1, s->attrs, s->n_attrs,
             "training_mode", true);
        return;
    case OP_DROPOUT:
        node(w, s->name, "Identity", "", s->inputs, 1, s->outputs, 1, NULL, 0, NULL, true);
        return;
    case OP_DROP_PATH: { /* the Mul that the importer runs as drop path: x */
        const char *x = g->names[n->in[0]], *y = s->outputs[0];
        node(w, s->name, "Identity", "", &x, 1, &y, 1, NULL, 0, NULL, true);
        return;
    }
    default:
        node(w, s->name, s->op_type, s->domain, s->inputs, s->n_inputs, s->outputs, s->n_outputs,
             s->attrs, s->n_attrs, NULL, true);
    }
}

/* The initializers the written nodes read: the trained parameters' values,
 * the others (torch's constants, integer tensors) as the file has them. */
static void write_initializers(writer *w)
{
    const stk_onnx_graph *g = w->g;
    const stk_onnx_model *f = g->file;
    char buf[1100];
    for (int i = 0; i < f->n_initializers && w->st == STK_OK; i++) {
        const stk_onnx_tensor *t = &f->initializers[i];
        if (!listed(w->used, w->n_used, t->name) || listed(w->made, w->n_made, t->name)) continue;
        const char *name = renamed(w, t->name, buf, sizeof buf);
        int64_t numel = 0;
        const float *p = param_floats(g, t->name, &numel);
        if (p && t->dtype == STK_ONNX_FLOAT && numel == t->numel)
            tensor(&w->inits, GRAPH_INIT, name, t->dtype, t->ndim, t->dims, p,
                   (size_t)numel * sizeof *p);
        else
            tensor(&w->inits, GRAPH_INIT, name, t->dtype, t->ndim, t->dims, t->data, t->bytes);
    }
    /* the weights the eval-mode exporter gave as Identity of another: their own now */
    for (int i = 0; i < g->n_nodes && w->st == STK_OK; i++) {
        const onnx_node *n = &g->nodes[i];
        const char *out = n->src->outputs[0];
        if (!n->param_copy || !listed(w->used, w->n_used, out) || listed(w->made, w->n_made, out))
            continue;
        const stk_onnx_tensor *t = stk_onnx_initializer(f, n->src->inputs[0]);
        int64_t numel = 0;
        const float *p = param_floats(g, out, &numel);
        if (!t || !p || numel != t->numel) {
            w->st = stk_error(STK_ERR_INTERNAL, "%s: weight %s not found", g->what, out);
            return;
        }
        tensor(&w->inits, GRAPH_INIT, renamed(w, out, buf, sizeof buf), STK_ONNX_FLOAT, t->ndim,
               t->dims, p, (size_t)numel * sizeof *p);
    }
}

/* u8 NHWC pixels to the file's normalised f32 NCHW input. */
static void write_preprocess(writer *w, int channels)
{
    const stk_onnx_options *o = w->o;
    float mean[3], std[3];
    for (int c = 0; c < channels; c++) mean[c] = 255.f * o->mean[c], std[c] = 255.f * o->std[c];
    int64_t n = channels;
    tensor(&w->inits, GRAPH_INIT, "input_mean_255", STK_ONNX_FLOAT, 1, &n, mean,
           (size_t)channels * sizeof *mean);
    tensor(&w->inits, GRAPH_INIT, "input_std_255", STK_ONNX_FLOAT, 1, &n, std,
           (size_t)channels * sizeof *std);
    const int64_t perm[4] = {0, 3, 1, 2};
    stk_onnx_attr to = {.name = "to", .type = STK_ONNX_ATTR_INT, .i = STK_ONNX_FLOAT};
    stk_onnx_attr pa = {.name = "perm", .type = STK_ONNX_ATTR_INTS, .ints = perm, .n = 4};
    /* these names are the written graph's own (no renaming applies) */
    const char *steps[4][3] = {{"/preprocess/Cast", "Cast", "/preprocess/Cast_output_0"},
                               {"/preprocess/Sub", "Sub", "/preprocess/Sub_output_0"},
                               {"/preprocess/Div", "Div", "/preprocess/Div_output_0"},
                               {"/preprocess/Transpose", "Transpose", IN_F32_NAME}};
    const char *x = IN_NAME;
    for (int k = 0; k < 4; k++) {
        stk_pb *b = &w->nodes;
        size_t m = stk_pb_begin(b, GRAPH_NODE);
        stk_pb_string(b, NODE_INPUT, x);
        if (k == 1) stk_pb_string(b, NODE_INPUT, "input_mean_255");
        if (k == 2) stk_pb_string(b, NODE_INPUT, "input_std_255");
        stk_pb_string(b, NODE_OUTPUT, steps[k][2]);
        stk_pb_string(b, NODE_NAME, steps[k][0]);
        stk_pb_string(b, NODE_OP, steps[k][1]);
        if (k == 0) attribute(b, &to);
        if (k == 3) attribute(b, &pa);
        stk_pb_end(b, m);
        x = steps[k][2];
    }
}

static const stk_onnx_value *file_value(const stk_onnx_value *vs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(vs[i].name, name)) return &vs[i];
    return NULL;
}

stk_status stk_onnx_graph_export(const stk_onnx_graph *g, const stk_model_config *cfg,
                                 const char *path, const stk_onnx_options *o)
{
    const stk_onnx_model *f = g->file;
    if (o->opset && o->opset != f->opset)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--opset %d: a model imported from ONNX is written in its file's opset "
                         "(%lld)",
                         o->opset, (long long)f->opset);
    for (int i = 0; i < g->n_params; i++)
        if (stk_tensor_device(g->params[i].value) != STK_DEVICE_CPU)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s: ONNX export reads the weights on the CPU (stk_model_to the CPU "
                             "first)",
                             g->what);
    const stk_onnx_value *fin = file_value(f->inputs, f->n_inputs, g->names[g->input]);
    if (!fin || fin->ndim != 4 || (o->input == STK_ONNX_INPUT_U8_NHWC && cfg->in_channels > 3))
        return stk_error(STK_ERR_UNSUPPORTED, "%s: the graph's input is not [N, C, H, W]", g->what);
    writer w = {.g = g, .o = o};
    w.in_name = o->input == STK_ONNX_INPUT_U8_NHWC ? IN_F32_NAME : IN_NAME;
    w.conv_folded = calloc((size_t)(2 * g->n_nodes + 1), sizeof(bool));
    if (!w.conv_folded) return stk_error(STK_ERR_NOMEM, "out of memory");
    w.bn_folded = w.conv_folded + g->n_nodes;
    for (int i = 0; o->fold_bn && i < g->n_nodes; i++) {
        int ib = bn_after(g, i);
        if (ib >= 0) w.conv_folded[i] = w.bn_folded[ib] = true;
    }
    stk_pb_init(&w.nodes);
    stk_pb_init(&w.inits);
    if (o->input == STK_ONNX_INPUT_U8_NHWC) write_preprocess(&w, cfg->in_channels);
    for (int i = 0; i < g->n_nodes && w.st == STK_OK; i++) write_node(&w, i);
    write_initializers(&w);

    /* the batch symbolic ("batch") unless the file fixed it (its Reshapes may hold it) */
    int64_t s = cfg->image_size, ch = cfg->in_channels, n = fin->dims[0] > 0 ? fin->dims[0] : -1;
    int64_t nchw[4] = {n, ch, s, s}, nhwc[4] = {n, s, s, ch}, out[2] = {n, cfg->classes};
    stk_pb io;
    stk_pb_init(&io);
    if (o->input == STK_ONNX_INPUT_U8_NHWC)
        eng_onnx_value_info(&io, ENG_ONNX_GRAPH_INPUT, IN_NAME, STK_ONNX_UINT8, 4, nhwc);
    else
        eng_onnx_value_info(&io, ENG_ONNX_GRAPH_INPUT, IN_NAME, STK_ONNX_FLOAT, 4, nchw);
    eng_onnx_value_info(&io, ENG_ONNX_GRAPH_OUTPUT, OUT_NAME, STK_ONNX_FLOAT, 2, out);
    stk_status st = w.st;
    if (st == STK_OK)
        st = eng_onnx_write_model(path, f->ir_version, f->opset,
                                  f->graph_name && *f->graph_name ? f->graph_name : "onnx",
                                  &w.nodes, &w.inits, &io, o);
    stk_pb_deinit(&io);
    stk_pb_deinit(&w.nodes);
    stk_pb_deinit(&w.inits);
    free(w.conv_folded);
    free(w.used);
    free(w.made);
    return st;
}
