/* Modules: construction, the state dict, forward. */
#include "engine/autograd.h"
#include "engine/nn_blocks_impl.h"
#include "engine/nn_impl.h"
#include "common/trace.h"
#include "engine/ops_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

stk_module *eng_mod_new(eng_module_kind kind, const char *name)
{
    stk_module *m = calloc(1, sizeof *m);
    if (!m) {
        stk_error(STK_ERR_NOMEM, "no memory for a module");
        return NULL;
    }
    m->kind = kind;
    m->shortcut = -1;
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

void eng_mod_free(stk_module *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_kids; i++) eng_mod_free(m->kids[i]);
    free(m->kids);
    stk_tensor_release(m->weight);
    stk_tensor_release(m->bias);
    stk_tensor_release(m->running_mean);
    stk_tensor_release(m->running_var);
    stk_tensor_release(m->num_batches_tracked);
    if (m->graph) eng_onnx_graph_free(m->graph);
    free((char *)m->path);
    free(m);
}

bool eng_mod_add(stk_module *parent, stk_module *child)
{
    if (!child) return false;
    stk_module **k = realloc(parent->kids, (size_t)(parent->n_kids + 1) * sizeof *k);
    if (!k) {
        eng_mod_free(child);
        stk_error(STK_ERR_NOMEM, "no memory for a module");
        return false;
    }
    parent->kids = k;
    k[parent->n_kids++] = child;
    return true;
}

static stk_tensor *param_new(int ndim, const int64_t *shape, bool trainable)
{
    stk_tensor *t;
    if (eng_tensor_new(STK_DEVICE_CPU, STK_F32, ndim, shape, true, &t) != STK_OK) return NULL;
    stk_tensor_set_requires_grad(t, trainable);
    return t;
}

stk_module *eng_mod_linear(const char *name, int64_t in, int64_t out, bool bias)
{
    stk_module *m = eng_mod_new(MOD_LINEAR, name);
    if (!m) return NULL;
    int64_t ws[2] = {out, in};
    m->weight = param_new(2, ws, true);
    if (bias) m->bias = param_new(1, &out, true);
    if (!m->weight || (bias && !m->bias)) {
        eng_mod_free(m);
        return NULL;
    }
    return m;
}

stk_module *eng_mod_conv(const char *name, int64_t in, int64_t out, int k, int stride, int pad,
                         bool bias)
{
    return eng_mod_conv_grouped(name, in, out, k, stride, pad, 1, bias);
}

stk_module *eng_mod_conv_grouped(const char *name, int64_t in, int64_t out, int k, int stride,
                                 int pad, int groups, bool bias)
{
    stk_module *m = eng_mod_new(MOD_CONV2D, name);
    if (!m) return NULL;
    int64_t ws[4] = {out, in / groups, k, k};
    m->weight = param_new(4, ws, true);
    if (bias) m->bias = param_new(1, &out, true);
    m->conv = (stk_conv2d_params){{stride, stride}, {pad, pad}, {1, 1}, groups};
    if (!m->weight || (bias && !m->bias)) {
        eng_mod_free(m);
        return NULL;
    }
    return m;
}

stk_module *eng_mod_bn(const char *name, int64_t c)
{
    stk_module *m = eng_mod_new(MOD_BATCHNORM2D, name);
    if (!m) return NULL;
    m->weight = param_new(1, &c, true);
    m->bias = param_new(1, &c, true);
    m->running_mean = param_new(1, &c, false);
    m->running_var = param_new(1, &c, false);
    stk_tensor *nbt = NULL;
    if (eng_tensor_new(STK_DEVICE_CPU, STK_I32, 0, NULL, true, &nbt) == STK_OK)
        m->num_batches_tracked = nbt;
    if (!m->weight || !m->bias || !m->running_mean || !m->running_var || !nbt) {
        eng_mod_free(m);
        return NULL;
    }
    stk_tensor_fill(m->weight, 1.0);
    stk_tensor_fill(m->running_var, 1.0);
    return m;
}

stk_module *eng_mod_act(const char *name, stk_activation act)
{
    stk_module *m = eng_mod_new(act == STK_ACT_RELU    ? MOD_RELU
                                : act == STK_ACT_RELU6 ? MOD_RELU6
                                                       : MOD_ACT,
                                name);
    if (m) m->act = act;
    return m;
}

stk_module *eng_mod_layer_norm(const char *name, int64_t c, float eps, bool channels)
{
    stk_module *m = eng_mod_new(channels ? MOD_LAYERNORM2D : MOD_LAYERNORM, name);
    if (!m) return NULL;
    m->eps = eps;
    m->weight = param_new(1, &c, true);
    m->bias = param_new(1, &c, true);
    if (!m->weight || !m->bias) {
        eng_mod_free(m);
        return NULL;
    }
    stk_tensor_fill(m->weight, 1.0);
    return m;
}

stk_module *eng_mod_permute(const char *name, int ndim, const int *dims)
{
    stk_module *m = eng_mod_new(MOD_PERMUTE, name);
    if (!m) return NULL;
    m->ndim = ndim;
    for (int d = 0; d < ndim; d++) m->dims[d] = dims[d];
    return m;
}

stk_module *eng_mod_se(const char *name, int64_t c, int64_t squeeze, stk_activation act,
                       stk_activation gate)
{
    stk_module *m = eng_mod_new(MOD_SE, name);
    if (!m) return NULL;
    m->act = act;
    m->gate = gate;
    if (!eng_mod_add(m, eng_mod_conv("fc1", c, squeeze, 1, 1, 0, true)) ||
        !eng_mod_add(m, eng_mod_conv("fc2", squeeze, c, 1, 1, 0, true))) {
        eng_mod_free(m);
        return NULL;
    }
    return m;
}

stk_module *eng_mod_drop_path(const char *name, float p)
{
    stk_module *m = eng_mod_new(MOD_DROP_PATH, name);
    if (m) m->p = p;
    return m;
}

stk_module *eng_mod_parent_param(eng_module_kind kind, const char *name, int ndim,
                                 const int64_t *shape)
{
    stk_module *m = eng_mod_new(kind, name);
    if (!m) return NULL;
    m->param_of_parent = true;
    if (!(m->weight = param_new(ndim, shape, true))) {
        eng_mod_free(m);
        return NULL;
    }
    return m;
}

stk_module *eng_mod_layer_scale(const char *name, int64_t c, int ndim, float value)
{
    int64_t shape[3] = {c, 1, 1};
    stk_module *m = eng_mod_parent_param(MOD_LAYER_SCALE, name, ndim, shape);
    if (m) {
        m->init = WINIT_CONST;
        m->init_value = value;
    }
    return m;
}

stk_module *eng_mod_attention(const char *name, int64_t dim, int heads)
{
    stk_module *m = eng_mod_new(MOD_ATTENTION, name);
    if (!m) return NULL;
    int64_t ws[2] = {3 * dim, dim}, bs = 3 * dim;
    m->heads = heads;
    m->weight_name = "in_proj_weight";
    m->bias_name = "in_proj_bias";
    m->init = WINIT_XAVIER_BIAS_0;
    m->weight = param_new(2, ws, true);
    m->bias = param_new(1, &bs, true);
    stk_module *out = eng_mod_linear("out_proj", dim, dim, true);
    if (out) out->init = WINIT_DEFAULT_BIAS_0; /* MultiheadAttention zeroes its bias */
    if (!m->weight || !m->bias || !eng_mod_add(m, out)) {
        eng_mod_free(m);
        return NULL;
    }
    return m;
}

/* ---- state dict ---------------------------------------------------------- */

static stk_status push_param(stk_model *m, const char *prefix, const char *leaf, stk_tensor *t,
                             bool buffer)
{
    if (!t) return STK_OK;
    stk_param *p = realloc(m->params, (size_t)(m->n_params + 1) * sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "no memory for the state dict");
    m->params = p;
    size_t len = strlen(prefix) + strlen(leaf) + 2;
    char *name = malloc(len);
    if (!name) return stk_error(STK_ERR_NOMEM, "no memory for the state dict");
    snprintf(name, len, "%s%s%s", prefix, *prefix ? "." : "", leaf);
    p[m->n_params++] = (stk_param){name, t, buffer};
    return STK_OK;
}

static stk_status collect(stk_model *m, stk_module *mod, const char *prefix)
{
    free((char *)mod->path);
    mod->path = strdup(prefix);
    if (!mod->path) return stk_error(STK_ERR_NOMEM, "no memory for the state dict");
    stk_status st;
    if (mod->param_of_parent) return STK_OK; /* pushed by the parent, under its path */
    if (mod->kind == MOD_ONNX_GRAPH) { /* the file's names, as they are */
        int n;
        const stk_param *gp = eng_onnx_graph_params(mod->graph, &n);
        for (int i = 0; i < n; i++)
            if ((st = push_param(m, "", gp[i].name, gp[i].value, gp[i].is_buffer)) != STK_OK)
                return st;
        return STK_OK;
    }
    if ((st = push_param(m, prefix, mod->weight_name ? mod->weight_name : "weight", mod->weight,
                         false)) != STK_OK ||
        (st = push_param(m, prefix, mod->bias_name ? mod->bias_name : "bias", mod->bias, false)) !=
            STK_OK ||
        (st = push_param(m, prefix, "running_mean", mod->running_mean, true)) != STK_OK ||
        (st = push_param(m, prefix, "running_var", mod->running_var, true)) != STK_OK ||
        (st = push_param(m, prefix, "num_batches_tracked", mod->num_batches_tracked, true)) !=
            STK_OK)
        return st;
    /* a module's own parameters come before its children's, as in
     * PyTorch's state dict ("class_token", then "conv_proj.weight") */
    for (int i = 0; i < mod->n_kids; i++) {
        stk_module *k = mod->kids[i];
        if (!k->param_of_parent) continue;
        free((char *)k->path);
        if (!(k->path = strdup(prefix)))
            return stk_error(STK_ERR_NOMEM, "no memory for the state dict");
        if ((st = push_param(m, prefix, k->name, k->weight, false)) != STK_OK) return st;
    }
    for (int i = 0; i < mod->n_kids; i++) {
        stk_module *k = mod->kids[i];
        if (k->param_of_parent) continue;
        /* a child without a name groups its children under this path
         * (torchvision's encoder layer: two residual sums, one name) */
        char sub[256];
        snprintf(sub, sizeof sub, "%s%s%s", prefix, *prefix && *k->name ? "." : "", k->name);
        if ((st = collect(m, k, sub)) != STK_OK) return st;
    }
    return STK_OK;
}

/* Appends k's units to m->units (when not NULL) and counts them: k itself,
 * or, for a sequential that is open (the root's children, and those marked
 * open_units: a stage of blocks), its children's units. */
static int add_units(stk_model *m, stk_module *k, bool open, int n)
{
    if (!open || k->kind != MOD_SEQUENTIAL || !k->n_kids) {
        if (m->units) m->units[n] = k;
        return n + 1;
    }
    for (int j = 0; j < k->n_kids; j++) n = add_units(m, k->kids[j], k->kids[j]->open_units, n);
    return n;
}

/* The chain of units: root's children, sequential ones opened one level
 * (deeper where a builder marked a sequential open_units). */
static stk_status collect_units(stk_model *m)
{
    stk_module *r = m->root;
    int n = 0;
    for (int i = 0; i < r->n_kids; i++) n = add_units(m, r->kids[i], true, n);
    if (!(m->units = calloc((size_t)(n ? n : 1), sizeof *m->units)))
        return stk_error(STK_ERR_NOMEM, "no memory for the model's units");
    n = 0;
    for (int i = 0; i < r->n_kids; i++) n = add_units(m, r->kids[i], true, n);
    m->n_units = r->kind == MOD_SEQUENTIAL ? n : 0;
    return STK_OK;
}

stk_status eng_model_collect_params(stk_model *m)
{
    STK_TRY(collect(m, m->root, ""));
    return collect_units(m);
}

/* An imported graph cut into units (onnx_graph_units.c), or NULL: a graph
 * without cuts is one unit, the graph module itself, as a built-in's are modules. */
static struct stk_onnx_graph *cut_graph(const stk_model *m)
{
    struct stk_onnx_graph *g = m->root->kind == MOD_ONNX_GRAPH ? m->root->graph : NULL;
    return g && eng_onnx_graph_unit_count(g) > 1 ? g : NULL;
}

int stk_model_unit_count(const stk_model *m)
{
    const struct stk_onnx_graph *g = cut_graph(m);
    return g ? eng_onnx_graph_unit_count(g) : m->n_units;
}

const char *stk_model_unit_name(const stk_model *m, int i)
{
    const struct stk_onnx_graph *g = cut_graph(m);
    if (g) return eng_onnx_graph_unit_name(g, i);
    return i >= 0 && i < m->n_units ? m->units[i]->path : NULL;
}

int stk_model_param_unit(const stk_model *m, int p)
{
    if (p < 0 || p >= m->n_params) return -1;
    const struct stk_onnx_graph *g = cut_graph(m);
    if (g) return eng_onnx_graph_param_unit(g, p);
    const char *name = m->params[p].name;
    for (int u = 0; u < m->n_units; u++) { /* a unit's parameters: under its module path */
        size_t n = strlen(m->units[u]->path);
        if (!strncmp(name, m->units[u]->path, n) && name[n] == '.') return u;
    }
    return -1;
}

void stk_model_destroy(stk_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_params; i++) free((char *)m->params[i].name);
    free(m->params);
    free(m->units);
    eng_mod_free(m->root);
    free(m);
}

void stk_model_train(stk_model *m, bool training) { m->training = training; }

void stk_model_set_sync_batch_norm(stk_model *m, const stk_allreduce *ar)
{
    m->sync_bn = ar ? *ar : (stk_allreduce){0};
}

stk_status stk_model_to(stk_model *m, stk_device dev)
{
    for (int i = 0; i < m->n_params; i++) {
        stk_tensor *v = m->params[i].value;
        if (stk_tensor_dtype(v) == STK_I32) continue; /* counters are host bookkeeping */
        stk_status st = stk_tensor_move_to(v, dev);
        if (st != STK_OK) return stk_error_prefix(st, "%s", m->params[i].name);
    }
    if (m->root->kind == MOD_ONNX_GRAPH) return eng_onnx_graph_to(m->root->graph, dev);
    return STK_OK;
}
bool stk_model_is_training(const stk_model *m) { return m->training; }
int stk_model_param_count(const stk_model *m) { return m->n_params; }
const stk_param *stk_model_param(const stk_model *m, int i)
{
    return i >= 0 && i < m->n_params ? &m->params[i] : NULL;
}
const char *stk_model_name(const stk_model *m) { return m->name; }
const stk_model_config *stk_model_get_config(const stk_model *m) { return &m->cfg; }

/* One pass over every f32 tensor (stk_scale_check_finite with a factor of
 * 1, an exact identity); the slow search for the name runs only when a value
 * is not finite. */
stk_status stk_model_check_finite(const stk_model *m, const char **bad)
{
    *bad = NULL;
    /* once per step: no heap allocation for models up to 256 tensors (resnet18: 122) */
    stk_tensor *small[256] = {0}, **ts = small;
    if (m->n_params > 256 && !(ts = calloc((size_t)m->n_params, sizeof *ts)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_params; i++) {
        stk_tensor *p = m->params[i].value;
        ts[i] = stk_tensor_dtype(p) == STK_F32 && stk_tensor_is_contiguous(p) ? p : NULL;
    }
    bool finite;
    stk_status st = stk_scale_check_finite(m->n_params, ts, 1.0f, &finite);
    if (ts != small) free(ts);
    if (st != STK_OK || finite) return st;
    for (int i = 0; i < m->n_params && !*bad; i++) {
        stk_tensor *p = m->params[i].value;
        if (stk_tensor_dtype(p) != STK_F32) continue;
        int64_t n = stk_tensor_numel(p);
        float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
        if (!h) return stk_error(STK_ERR_NOMEM, "out of memory");
        if ((st = stk_tensor_to_host(p, h, (size_t)n * sizeof *h)) == STK_OK)
            for (int64_t k = 0; k < n; k++)
                if (!isfinite(h[k])) {
                    *bad = m->params[i].name;
                    break;
                }
        free(h);
        if (st != STK_OK) return st;
    }
    if (!*bad) *bad = "?";
    return STK_OK;
}

const stk_param *stk_model_find(const stk_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return &m->params[i];
    return NULL;
}

int64_t stk_model_trainable_numel(const stk_model *m)
{
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (!m->params[i].is_buffer && stk_tensor_requires_grad(m->params[i].value))
            n += stk_tensor_numel(m->params[i].value);
    return n;
}

/* A parameter (not a buffer) under prefix: "layer1" matches
 * "layer1.0.conv1.weight", not "layer10...". */
static bool under(const stk_param *p, const char *prefix, size_t len)
{
    if (p->is_buffer || strncmp(p->name, prefix, len)) return false;
    return !len || p->name[len] == '\0' || p->name[len] == '.' || prefix[len - 1] == '.';
}

int stk_model_set_requires_grad(stk_model *m, const char *prefix, bool on)
{
    int hits = 0;
    size_t len = strlen(prefix);
    for (int i = 0; i < m->n_params; i++)
        if (under(&m->params[i], prefix, len)) {
            stk_tensor_set_requires_grad(m->params[i].value, on);
            hits++;
        }
    return hits;
}

void stk_model_count(const stk_model *m, const char *prefix, int64_t *trainable, int64_t *frozen)
{
    *trainable = *frozen = 0;
    size_t len = strlen(prefix);
    for (int i = 0; i < m->n_params; i++)
        if (under(&m->params[i], prefix, len))
            *(stk_tensor_requires_grad(m->params[i].value) ? trainable : frozen) +=
                stk_tensor_numel(m->params[i].value);
}

/* ---- forward -------------------------------------------------------------- */

static uint64_t path_hash(const char *s) /* FNV-1a, 20 bits */
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h & 0xFFFFF;
}

static stk_status forward(stk_model *m, stk_module *mod, const stk_module *act, stk_tensor *x,
                          stk_tensor **out);

/* The forward this thread runs (dropout streams): pipeline stages run
 * forwards of one model on threads of their own. */
static _Thread_local uint64_t forward_id;

/* The ReLU or ReLU6 layer that runs fused into the batch norm `mod`
 * (stk_batch_norm_act), when `next` is one; NULL otherwise. Not with
 * synchronised batch norm (its own op). */
static const stk_module *fused_act(const stk_model *m, const stk_module *mod,
                                   const stk_module *next)
{
    if (mod->kind != MOD_BATCHNORM2D || !next || (m->training && m->sync_bn.sum)) return NULL;
    return next->kind == MOD_RELU || next->kind == MOD_RELU6 ? next : NULL;
}

/* Runs mods[*i] on *h (with the activation after it, fused_act) and lets
 * the input go once that has run (eng_scope_drop: freed unless autograd kept
 * it): the forward holds what backward needs, not every intermediate. With
 * the nodes' input shape handles (autograd_impl.h): resnet18 at 224 px,
 * batch 64, 2,716 -> 1,508 MiB at the peak (2,312 with the handles alone;
 * bench/README.md, "Memory"). mods[skip] (a residual block's shortcut) is
 * never fused. Advances *i past what ran. */
static stk_status step_through(stk_model *m, stk_module *const *mods, int *i, int end, int skip,
                               stk_tensor **h, stk_tensor *keep)
{
    stk_tensor *in = *h;
    const stk_module *mod = mods[*i];
    if (mod->kind == MOD_DROP_PATH && (!m->training || mod->p == 0.f)) {
        (*i)++; /* the identity: no copy (evaluation, and the first blocks' rate 0) */
        return STK_OK;
    }
    const stk_module *act =
        *i + 1 < end && *i + 1 != skip ? fused_act(m, mods[*i], mods[*i + 1]) : NULL;
    STK_TRY(forward(m, mods[*i], act, in, h));
    *i += act ? 2 : 1;
    if (in != keep && *h != in) eng_scope_drop(in); /* (a container may hand its input back) */
    return STK_OK;
}

static stk_status forward_kids(stk_model *m, stk_module *mod, stk_tensor *x, stk_tensor **out)
{
    stk_tensor *h = x;
    for (int i = 0; i < mod->n_kids;)
        STK_TRY(step_through(m, mod->kids, &i, mod->n_kids, -1, &h, x));
    *out = h;
    return STK_OK;
}

static stk_status residual(stk_model *m, stk_module *b, stk_tensor *x, stk_tensor **out)
{
    stk_tensor *h = x, *id = x, *s;
    for (int i = 0; i < b->n_kids;)
        if (i == b->shortcut)
            i++;
        else
            STK_TRY(step_through(m, b->kids, &i, b->n_kids, b->shortcut, &h, x));
    if (b->shortcut >= 0) /* downsample */
        STK_TRY(forward(m, b->kids[b->shortcut], NULL, x, &id));
    STK_TRY(stk_add(h, id, &s));
    if (h != x) eng_scope_drop(h);
    if (id != x) eng_scope_drop(id);
    stk_activation after = b->relu_after ? STK_ACT_RELU : b->act;
    if (after == STK_ACT_NONE) {
        *out = s;
        return STK_OK;
    }
    STK_TRY(stk_activate(s, after, out));
    eng_scope_drop(s);
    return STK_OK;
}

/* Each child on x, the results side by side along dim 1 (channels). */
static stk_status concat(stk_model *m, stk_module *mod, stk_tensor *x, stk_tensor **out)
{
    if (!mod->n_kids) return stk_error(STK_ERR_INVALID_ARG, "concat %s has no branches", mod->name);
    stk_tensor *small[8], **ys = small;
    if (mod->n_kids > 8 && !(ys = calloc((size_t)mod->n_kids, sizeof *ys)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = STK_OK;
    for (int i = 0; i < mod->n_kids && st == STK_OK; i++)
        st = forward(m, mod->kids[i], NULL, x, &ys[i]);
    if (st == STK_OK) st = stk_cat(mod->n_kids, ys, 1, out);
    if (ys != small) free(ys);
    return st;
}

static stk_status forward_one(stk_model *m, stk_module *mod, const stk_module *act, stk_tensor *x,
                              stk_tensor **out)
{
    switch (mod->kind) {
    case MOD_SEQUENTIAL: return forward_kids(m, mod, x, out);
    case MOD_LINEAR: return stk_linear(x, mod->weight, mod->bias, out);
    case MOD_CONV2D: return stk_conv2d(x, mod->weight, mod->bias, &mod->conv, out);
    case MOD_BATCHNORM2D: {
        stk_status st =
            m->training && m->sync_bn.sum
                ? stk_batch_norm_sync(x, mod->weight, mod->bias, mod->running_mean,
                                      mod->running_var, m->cfg.bn_momentum, m->cfg.bn_eps,
                                      &m->sync_bn, out)
                : stk_batch_norm_act(x, mod->weight, mod->bias, mod->running_mean, mod->running_var,
                                     m->training, m->cfg.bn_momentum, m->cfg.bn_eps,
                                     !act                     ? STK_BN_ACT_NONE
                                     : act->kind == MOD_RELU6 ? STK_BN_ACT_RELU6
                                                              : STK_BN_ACT_RELU,
                                     out);
        if (st == STK_OK && m->training) /* as PyTorch: every training forward */
            ((int32_t *)stk_tensor_data(mod->num_batches_tracked))[0]++;
        return st;
    }
    case MOD_RELU: return stk_relu(x, out);
    case MOD_RELU6: return stk_relu6(x, out);
    case MOD_MAXPOOL2D: return stk_max_pool2d(x, mod->kernel, mod->stride, mod->padding, out);
    case MOD_AVGPOOL2D: return stk_avg_pool2d(x, mod->kernel, mod->stride, mod->padding, true, out);
    case MOD_GLOBAL_AVGPOOL: return stk_global_avg_pool2d(x, out);
    case MOD_FLATTEN: return stk_flatten(x, 1, -1, out);
    case MOD_DROPOUT:
        /* stream: this forward and this layer, so masks never repeat */
        return stk_dropout(x, mod->p, m->training, m->cfg.seed,
                           (forward_id << 20) ^ path_hash(mod->path), out);
    case MOD_RESIDUAL: return residual(m, mod, x, out);
    case MOD_ACT: return stk_activate(x, mod->act, out);
    case MOD_LAYERNORM: return stk_layer_norm(x, mod->weight, mod->bias, mod->eps, out);
    case MOD_LAYERNORM2D: return stk_layer_norm2d(x, mod->weight, mod->bias, mod->eps, out);
    case MOD_PERMUTE:
        if (stk_tensor_ndim(x) != mod->ndim)
            return stk_error(STK_ERR_INVALID_ARG, "permute: input %s must have %d dimensions",
                             stk_tensor_shape_str(x), mod->ndim);
        return stk_permute(x, mod->dims, out);
    case MOD_SE:
        return eng_se_forward(x, mod->kids[0]->weight, mod->kids[0]->bias, mod->kids[1]->weight,
                              mod->kids[1]->bias, mod->act, mod->gate, out);
    case MOD_DROP_PATH:
        return stk_drop_path(x, mod->p, m->training, m->cfg.seed,
                             (forward_id << 20) ^ path_hash(mod->path), out);
    case MOD_LAYER_SCALE: return stk_mul(x, mod->weight, out);
    case MOD_CONCAT: return concat(m, mod, x, out);
    case MOD_ATTENTION:
        return eng_attention_forward(x, mod->weight, mod->bias, mod->kids[0]->weight,
                                     mod->kids[0]->bias, mod->heads, out);
    case MOD_TOKENS: return eng_tokens_forward(x, out);
    case MOD_CLASS_TOKEN: return eng_class_token_forward(mod->weight, x, out);
    case MOD_POS_EMBED: return eng_pos_embed_forward(mod->weight, x, out);
    case MOD_SELECT_TOKEN: return eng_select_token_forward(x, out);
    case MOD_ONNX_GRAPH:
        return eng_onnx_graph_run(mod->graph, x, m->training, m->cfg.seed, forward_id << 20, out);
    }
    return stk_error(STK_ERR_INTERNAL, "unknown module kind %d", (int)mod->kind);
}

/* The trace's names of layer kinds (string constants: trace.h keeps pointers). */
static const char *const kind_names[] = {[MOD_SEQUENTIAL] = "sequential",
                                         [MOD_LINEAR] = "linear",
                                         [MOD_CONV2D] = "conv2d",
                                         [MOD_BATCHNORM2D] = "batch_norm",
                                         [MOD_RELU] = "relu",
                                         [MOD_RELU6] = "relu6",
                                         [MOD_MAXPOOL2D] = "max_pool2d",
                                         [MOD_AVGPOOL2D] = "avg_pool2d",
                                         [MOD_GLOBAL_AVGPOOL] = "global_avg_pool",
                                         [MOD_FLATTEN] = "flatten",
                                         [MOD_DROPOUT] = "dropout",
                                         [MOD_RESIDUAL] = "residual",
                                         [MOD_ACT] = "activation",
                                         [MOD_LAYERNORM] = "layer_norm",
                                         [MOD_LAYERNORM2D] = "layer_norm2d",
                                         [MOD_PERMUTE] = "permute",
                                         [MOD_SE] = "squeeze_excitation",
                                         [MOD_DROP_PATH] = "drop_path",
                                         [MOD_LAYER_SCALE] = "layer_scale",
                                         [MOD_CONCAT] = "concat",
                                         [MOD_ATTENTION] = "attention",
                                         [MOD_TOKENS] = "tokens",
                                         [MOD_CLASS_TOKEN] = "class_token",
                                         [MOD_POS_EMBED] = "pos_embedding",
                                         [MOD_SELECT_TOKEN] = "select_token",
                                         [MOD_ONNX_GRAPH] = "onnx_graph"};

/* --trace-ops: each layer a span, named by kind, with its path and input
 * shape; a batch norm with its activation fused is one span,
 * "bn1+relu1 [...]". */
static void trace_layer_begin(const stk_module *mod, const stk_module *act, const stk_tensor *x)
{
    char what[96];
    int n = snprintf(what, sizeof what, "%s%s%s [", mod->path && *mod->path ? mod->path : mod->name,
                     act ? "+" : "", act ? act->name : "");
    for (int d = 0; d < stk_tensor_ndim(x) && n > 0 && (size_t)n < sizeof what; d++)
        n += snprintf(what + n, sizeof what - (size_t)n, "%s%lld", d ? "," : "",
                      (long long)stk_tensor_dim(x, d));
    if (n > 0 && (size_t)n < sizeof what) snprintf(what + n, sizeof what - (size_t)n, "]");
    stk_trace_begin_args(kind_names[mod->kind], "op", what);
}

static stk_status forward(stk_model *m, stk_module *mod, const stk_module *act, stk_tensor *x,
                          stk_tensor **out)
{
    bool traced = stk_trace_ops() && mod->kind != MOD_SEQUENTIAL;
    if (traced) trace_layer_begin(mod, act, x);
    stk_status st = forward_one(m, mod, act, x, out);
    if (traced) stk_trace_end();
    /* Name the innermost failing layer once (containers pass errors through). */
    if (st != STK_OK && mod->kind != MOD_SEQUENTIAL && mod->kind != MOD_RESIDUAL &&
        mod->kind != MOD_CONCAT && strncmp(stk_last_error(), "layer ", 6))
        stk_error_prefix(st, "layer %s", mod->path && *mod->path ? mod->path : mod->name);
    return st;
}

/* The model's input: [N, in_channels, H, W]. */
static stk_status check_input(const stk_model *m, const stk_tensor *x)
{
    int64_t want = m->cfg.in_channels;
    if (stk_tensor_ndim(x) != 4 || stk_tensor_dim(x, 1) != want)
        return stk_error(STK_ERR_INVALID_ARG, "%s: input %s must be [N, %lld, H, W]", m->name,
                         stk_tensor_shape_str(x), (long long)want);
    return STK_OK;
}

stk_status stk_model_forward(stk_model *m, stk_tensor *x, stk_tensor **out)
{
    STK_TRY(check_input(m, x));
    forward_id = ++m->forward_count;
    /* Intermediates belong to a scope of the forward's own (the graph keeps
     * what backward needs), so a forward outside any scope leaks nothing. */
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *y = NULL;
    stk_status st = forward(m, m->root, NULL, x, &y);
    return eng_compose_end(s, st, y, out);
}

stk_status stk_model_forward_units(stk_model *m, int from, int to, uint64_t id, stk_tensor *x,
                                   stk_tensor **out)
{
    int units = stk_model_unit_count(m);
    if (from < 0 || to > units || from >= to)
        return stk_error(STK_ERR_INVALID_ARG, "%s: units %d..%d outside its %d", m->name, from,
                         to - 1, units);
    if (from == 0) STK_TRY(check_input(m, x));
    forward_id = id;
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *h = x;
    stk_status st = STK_OK;
    struct stk_onnx_graph *g = cut_graph(m);
    if (g)
        st = eng_onnx_graph_run_units(g, from, to, x, m->training, m->cfg.seed, id << 20, &h);
    for (int i = from; !g && i < to && st == STK_OK;)
        st = step_through(m, m->units, &i, to, -1, &h, x);
    return eng_compose_end(s, st, st == STK_OK ? h : NULL, out);
}
