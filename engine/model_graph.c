/* A model's module tree as text (the "model_graph" of a checkpoint) and
 * back: a model built with the module API is saved with its description,
 * so `stoke info`, `eval`, `predict` and `export` rebuild it without the
 * program that made it.
 *
 *     stoke-graph 1
 *     bn 1e-05 0.1                         (batch norm's eps and momentum)
 *     0 sequential - 0
 *     1 conv2d conv1 1 32 3 1 1 1 0        (in out kernel stride padding groups bias)
 *     1 residual block 1 -1 0              (after-activation shortcut-index relu)
 *     2 se se 32 8 1 5                     (channels squeeze act gate)
 *     ...
 *
 * A line: depth, kind, name ("-" for none), the kind's numbers. Reading
 * goes through the public builders, which check every size; the text is
 * refused, naming the line, if anything does not fit. */
#include "common/text.h"
#include "engine/nn_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAPH_HEADER    "stoke-graph 1\n"
#define GRAPH_MAX_DEPTH 32
#define GRAPH_MAX_NUMS  8

/* ---- writing ---------------------------------------------------------------------- */

static int64_t dim(const stk_tensor *t, int d) { return stk_tensor_dim(t, d); }

static void describe(stk_strbuf *t, const stk_module *m, int depth)
{
    const char *name = m->name[0] ? m->name : "-";
    stk_strbuf_printf(t, "%d ", depth);
    switch (m->kind) {
    case MOD_SEQUENTIAL: stk_strbuf_printf(t, "sequential %s %d", name, m->open_units); break;
    case MOD_RESIDUAL:
        stk_strbuf_printf(t, "residual %s %d %d %d", name, (int)m->act, m->shortcut, m->relu_after);
        break;
    case MOD_CONCAT: stk_strbuf_printf(t, "concat %s", name); break;
    case MOD_LINEAR:
        stk_strbuf_printf(t, "linear %s %lld %lld %d", name, (long long)dim(m->weight, 1),
                          (long long)dim(m->weight, 0), m->bias != NULL);
        break;
    case MOD_CONV2D:
        stk_strbuf_printf(t, "conv2d %s %lld %lld %lld %d %d %d %d", name,
                          (long long)(dim(m->weight, 1) * m->conv.groups),
                          (long long)dim(m->weight, 0), (long long)dim(m->weight, 2),
                          m->conv.stride[0], m->conv.padding[0], m->conv.groups, m->bias != NULL);
        break;
    case MOD_BATCHNORM2D:
        stk_strbuf_printf(t, "batchnorm2d %s %lld", name, (long long)dim(m->weight, 0));
        break;
    case MOD_LAYERNORM:
    case MOD_LAYERNORM2D:
        stk_strbuf_printf(t, "%s %s %lld %.9g",
                          m->kind == MOD_LAYERNORM ? "layer_norm" : "layer_norm2d", name,
                          (long long)dim(m->weight, 0), (double)m->eps);
        break;
    case MOD_RELU: stk_strbuf_printf(t, "relu %s", name); break;
    case MOD_RELU6: stk_strbuf_printf(t, "relu6 %s", name); break;
    case MOD_ACT: stk_strbuf_printf(t, "act %s %d", name, (int)m->act); break;
    case MOD_MAXPOOL2D:
    case MOD_AVGPOOL2D:
        stk_strbuf_printf(t, "%s %s %d %d %d", m->kind == MOD_MAXPOOL2D ? "maxpool2d" : "avgpool2d",
                          name, m->kernel, m->stride, m->padding);
        break;
    case MOD_GLOBAL_AVGPOOL: stk_strbuf_printf(t, "global_avgpool %s", name); break;
    case MOD_FLATTEN: stk_strbuf_printf(t, "flatten %s", name); break;
    case MOD_DROPOUT: stk_strbuf_printf(t, "dropout %s %.9g", name, (double)m->p); break;
    case MOD_DROP_PATH: stk_strbuf_printf(t, "drop_path %s %.9g", name, (double)m->p); break;
    case MOD_LAYER_SCALE:
        stk_strbuf_printf(t, "layer_scale %s %lld %d", name, (long long)dim(m->weight, 0),
                          stk_tensor_ndim(m->weight) == 3);
        break;
    case MOD_SE:
        stk_strbuf_printf(t, "se %s %lld %lld %d %d", name, (long long)dim(m->kids[0]->weight, 1),
                          (long long)dim(m->kids[0]->weight, 0), (int)m->act, (int)m->gate);
        break;
    case MOD_ATTENTION:
        stk_strbuf_printf(t, "attention %s %lld %d", name, (long long)dim(m->weight, 1), m->heads);
        break;
    case MOD_PERMUTE:
        stk_strbuf_printf(t, "permute %s %d", name, m->ndim);
        for (int d = 0; d < m->ndim; d++) stk_strbuf_printf(t, " %d", m->dims[d]);
        break;
    case MOD_TOKENS: stk_strbuf_printf(t, "tokens %s", name); break;
    case MOD_CLASS_TOKEN:
        stk_strbuf_printf(t, "class_token %s %lld", name, (long long)dim(m->weight, 2));
        break;
    case MOD_POS_EMBED:
        stk_strbuf_printf(t, "pos_embedding %s %lld %lld", name, (long long)dim(m->weight, 1),
                          (long long)dim(m->weight, 2));
        break;
    case MOD_SELECT_TOKEN: stk_strbuf_printf(t, "select_token %s", name); break;
    case MOD_ONNX_GRAPH: stk_strbuf_printf(t, "onnx_graph %s", name); break; /* refused below */
    }
    stk_strbuf_printf(t, "\n");
    /* squeeze-excitation's and attention's children are theirs: implied */
    if (m->kind == MOD_SE || m->kind == MOD_ATTENTION) return;
    for (int i = 0; i < m->n_kids; i++) describe(t, m->kids[i], depth + 1);
}

stk_status eng_model_graph_write(const stk_model *m, char **out)
{
    stk_strbuf t = {0};
    stk_strbuf_printf(&t, GRAPH_HEADER);
    stk_strbuf_printf(&t, "bn %.9g %.9g\n", (double)m->cfg.bn_eps, (double)m->cfg.bn_momentum);
    describe(&t, m->root, 0);
    if (t.failed) {
        free(t.s);
        return stk_error(STK_ERR_NOMEM, "out of memory for the model's description");
    }
    *out = t.s;
    return STK_OK;
}

/* ---- reading ---------------------------------------------------------------------- */

typedef struct line {
    int depth;
    char kind[24], name[40];
    int64_t v[GRAPH_MAX_NUMS];
    double f[GRAPH_MAX_NUMS]; /* the same numbers as floats */
    int n;
} line;

static stk_status bad(int no, const char *why)
{
    return stk_error(STK_ERR_FORMAT, "model_graph line %d: %s", no, why);
}

/* One line (NUL-terminated, no newline) into l. */
static stk_status parse_line(const char *s, int no, line *l)
{
    memset(l, 0, sizeof *l);
    int used = 0;
    if (sscanf(s, "%d %23s %39s%n", &l->depth, l->kind, l->name, &used) != 3)
        return bad(no, "expected: depth, kind, name");
    if (l->depth < 0 || l->depth > GRAPH_MAX_DEPTH) return bad(no, "depth out of range");
    if (!strcmp(l->name, "-")) l->name[0] = '\0';
    const char *p = s + used;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (l->n == GRAPH_MAX_NUMS) return bad(no, "too many numbers");
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno || (*end && *end != ' ')) return bad(no, "not a number");
        l->f[l->n] = d;
        l->v[l->n++] = d >= -1e15 && d <= 1e15 ? (int64_t)d : INT64_MAX;
        p = end;
    }
    return STK_OK;
}

static stk_status want(const line *l, int no, int n)
{
    return l->n == n ? STK_OK : bad(no, "wrong count of numbers for its kind");
}

static bool is_int(const line *l, int i, int64_t lo, int64_t hi)
{
    return l->f[i] == (double)l->v[i] && l->v[i] >= lo && l->v[i] <= hi;
}

static stk_status ints(const line *l, int no, int n, int64_t lo, int64_t hi)
{
    STK_TRY(want(l, no, n));
    for (int i = 0; i < n; i++)
        if (!is_int(l, i, lo, hi)) return bad(no, "a number out of range");
    return STK_OK;
}

/* The ViT pieces have no public builder: checked here. */
static stk_status param_module(eng_module_kind kind, const line *l, int no, stk_module **m)
{
    int n = kind == MOD_POS_EMBED ? 2 : 1;
    STK_TRY(ints(l, no, n, 1, 1 << 20));
    int64_t shape[3] = {1, n == 2 ? l->v[0] : 1, l->v[n - 1]};
    if (!(*m = eng_mod_parent_param(kind, l->name, 3, shape))) return STK_ERR_NOMEM;
    return STK_OK;
}

/* The line's check, then (when it passed) the builder call. */
#define CHECKED(check, call)                                                                       \
    do {                                                                                           \
        stk_status s_ = (check);                                                                   \
        return s_ != STK_OK ? s_ : (call);                                                         \
    } while (0)

static stk_status build(const line *l, int no, stk_module **m)
{
    const char *k = l->kind, *nm = l->name;
    *m = NULL;
    if (!strcmp(k, "sequential")) {
        STK_TRY(ints(l, no, 1, 0, 1));
        STK_TRY(stk_module_sequential(nm, m));
        (*m)->open_units = l->v[0];
        return STK_OK;
    }
    if (!strcmp(k, "residual")) {
        STK_TRY(want(l, no, 3));
        if (!is_int(l, 0, 0, STK_ACT_TANH) || !is_int(l, 1, -1, 1 << 20) || !is_int(l, 2, 0, 1))
            return bad(no, "a number out of range");
        STK_TRY(stk_module_residual(nm, (stk_activation)l->v[0], m));
        (*m)->shortcut = (int)l->v[1]; /* checked against the children at the end */
        (*m)->relu_after = l->v[2];
        return STK_OK;
    }
    if (!strcmp(k, "concat")) CHECKED(want(l, no, 0), stk_module_concat(nm, m));
    if (!strcmp(k, "linear"))
        CHECKED(ints(l, no, 3, 0, 1 << 24), stk_module_linear(nm, l->v[0], l->v[1], l->v[2], m));
    if (!strcmp(k, "conv2d"))
        CHECKED(ints(l, no, 7, 0, 1 << 24),
                stk_module_conv2d_grouped(nm, l->v[0], l->v[1], (int)l->v[2], (int)l->v[3],
                                          (int)l->v[4], (int)l->v[5], l->v[6], m));
    if (!strcmp(k, "batchnorm2d"))
        CHECKED(ints(l, no, 1, 1, 1 << 24), stk_module_batchnorm2d(nm, l->v[0], m));
    if (!strcmp(k, "layer_norm") || !strcmp(k, "layer_norm2d")) {
        STK_TRY(want(l, no, 2));
        if (!is_int(l, 0, 1, 1 << 24)) return bad(no, "a number out of range");
        return (k[10] ? stk_module_layer_norm2d : stk_module_layer_norm)(nm, l->v[0],
                                                                         (float)l->f[1], m);
    }
    if (!strcmp(k, "relu")) CHECKED(want(l, no, 0), stk_module_relu(nm, m));
    if (!strcmp(k, "relu6")) CHECKED(want(l, no, 0), stk_module_activation(nm, STK_ACT_RELU6, m));
    if (!strcmp(k, "act"))
        CHECKED(ints(l, no, 1, STK_ACT_RELU, STK_ACT_TANH),
                stk_module_activation(nm, (stk_activation)l->v[0], m));
    if (!strcmp(k, "maxpool2d") || !strcmp(k, "avgpool2d")) {
        STK_TRY(ints(l, no, 3, 0, 64));
        if (l->v[0] < 1) return bad(no, "a kernel below 1");
        return (k[0] == 'm' ? stk_module_maxpool2d : stk_module_avgpool2d)(
            nm, (int)l->v[0], (int)l->v[1], (int)l->v[2], m);
    }
    if (!strcmp(k, "global_avgpool")) CHECKED(want(l, no, 0), stk_module_global_avgpool(nm, m));
    if (!strcmp(k, "flatten")) CHECKED(want(l, no, 0), stk_module_flatten(nm, m));
    if (!strcmp(k, "dropout")) CHECKED(want(l, no, 1), stk_module_dropout(nm, (float)l->f[0], m));
    if (!strcmp(k, "drop_path"))
        CHECKED(want(l, no, 1), stk_module_drop_path(nm, (float)l->f[0], m));
    if (!strcmp(k, "layer_scale"))
        CHECKED(ints(l, no, 2, 0, 1 << 24), stk_module_layer_scale(nm, l->v[0], 1.f, l->v[1], m));
    if (!strcmp(k, "se"))
        CHECKED(ints(l, no, 4, 0, 1 << 24),
                stk_module_squeeze_excitation(nm, l->v[0], l->v[1], (stk_activation)l->v[2],
                                              (stk_activation)l->v[3], m));
    if (!strcmp(k, "attention"))
        CHECKED(ints(l, no, 2, 1, 1 << 24), stk_module_attention(nm, l->v[0], (int)l->v[1], m));
    if (!strcmp(k, "permute")) {
        if (l->n < 1 || !is_int(l, 0, 1, STK_MAX_DIMS) || l->n != 1 + l->v[0])
            return bad(no, "permute: a count, then that many dimensions");
        int dims[STK_MAX_DIMS];
        for (int d = 0; d < l->v[0]; d++) {
            if (!is_int(l, 1 + d, 0, STK_MAX_DIMS)) return bad(no, "a dimension out of range");
            dims[d] = (int)l->v[1 + d];
        }
        return stk_module_permute(nm, (int)l->v[0], dims, m);
    }
    if (!strcmp(k, "tokens") || !strcmp(k, "select_token")) {
        STK_TRY(want(l, no, 0));
        if (!(*m = eng_mod_new(k[0] == 't' ? MOD_TOKENS : MOD_SELECT_TOKEN, nm)))
            return STK_ERR_NOMEM;
        return STK_OK;
    }
    if (!strcmp(k, "class_token")) return param_module(MOD_CLASS_TOKEN, l, no, m);
    if (!strcmp(k, "pos_embedding")) return param_module(MOD_POS_EMBED, l, no, m);
    return bad(no, "unknown kind of module");
}

/* Each residual's shortcut index names one of its children. */
static stk_status check_shortcuts(const stk_module *m)
{
    if (m->kind == MOD_RESIDUAL && (m->shortcut < -1 || m->shortcut >= m->n_kids))
        return stk_error(STK_ERR_FORMAT, "model_graph: residual %s's shortcut %d is not a child",
                         m->name, m->shortcut);
    for (int i = 0; i < m->n_kids; i++) STK_TRY(check_shortcuts(m->kids[i]));
    return STK_OK;
}

stk_status eng_model_graph_read(const char *desc, stk_module **root, float *bn_eps,
                                float *bn_momentum)
{
    *root = NULL;
    if (strncmp(desc, GRAPH_HEADER, strlen(GRAPH_HEADER)))
        return stk_error(STK_ERR_FORMAT,
                         "model_graph: not a description Stoke wrote "
                         "(no '%.13s' line)",
                         GRAPH_HEADER);
    stk_module *stack[GRAPH_MAX_DEPTH + 1] = {0};
    const char *p = desc + strlen(GRAPH_HEADER);
    double eps, mom;
    int used = 0;
    if (sscanf(p, "bn %lf %lf\n%n", &eps, &mom, &used) != 2 || !used || !(eps > 0 && eps < 1) ||
        !(mom > 0 && mom <= 1))
        return stk_error(STK_ERR_FORMAT, "model_graph line 2: expected 'bn EPS MOMENTUM' "
                                         "(eps in (0, 1), momentum in (0, 1])");
    *bn_eps = (float)eps, *bn_momentum = (float)mom;
    p += used;
    stk_status st = STK_OK;
    for (int no = 3; *p && st == STK_OK; no++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char buf[512];
        if (len >= sizeof buf) {
            st = bad(no, "too long");
            break;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len + (nl != NULL);
        line l;
        stk_module *m = NULL;
        if ((st = parse_line(buf, no, &l)) != STK_OK) break;
        if ((l.depth == 0) != (*root == NULL) || (l.depth > 0 && !stack[l.depth - 1])) {
            st = bad(no, l.depth ? "a module without a parent" : "a second root");
            break;
        }
        if ((st = build(&l, no, &m)) != STK_OK) {
            if (st == STK_ERR_NOMEM) break;
            stk_error_prefix(st, "model_graph line %d", no);
            break;
        }
        if (l.depth == 0)
            *root = m;
        else if ((st = stk_module_add(stack[l.depth - 1], m)) != STK_OK) {
            stk_error_prefix(st, "model_graph line %d", no);
            break;
        }
        stack[l.depth] = m;
        for (int d = l.depth + 1; d <= GRAPH_MAX_DEPTH; d++) stack[d] = NULL;
    }
    if (st == STK_OK && !*root) st = stk_error(STK_ERR_FORMAT, "model_graph: no modules");
    if (st == STK_OK) st = check_shortcuts(*root);
    if (st != STK_OK) {
        eng_mod_free(*root);
        *root = NULL;
    }
    return st;
}

/* ---- the public calls (nn.h) ------------------------------------------------------ */

stk_status stk_model_describe(const stk_model *m, char **out)
{
    *out = NULL;
    if (m->root->kind == MOD_ONNX_GRAPH)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "a model imported from ONNX is described by its file, not by a module "
                         "graph");
    return eng_model_graph_write(m, out);
}

stk_status stk_model_from_description(const char *desc, const stk_model_config *cfg,
                                      stk_model **out)
{
    *out = NULL;
    stk_module *root;
    stk_model_config c = *cfg;
    STK_TRY(eng_model_graph_read(desc, &root, &c.bn_eps, &c.bn_momentum));
    return stk_model_from_module(root, &c, out);
}

stk_status stk_model_description_check(const char *desc)
{
    stk_module *root;
    float eps, momentum;
    STK_TRY(eng_model_graph_read(desc, &root, &eps, &momentum));
    eng_mod_free(root);
    return STK_OK;
}
