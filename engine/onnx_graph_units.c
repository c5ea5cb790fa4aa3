/* An imported graph as a chain of units, for pipeline stages
 * (onnx_graph_impl.h; nn.c's stk_model_unit_count and
 * stk_model_forward_units run them).
 *
 * A cut between two nodes is where one tensor alone flows from the nodes
 * before it to the nodes after it, and no parameter is read on both sides
 * (stages train their parameters at once). Host numbers (shape arithmetic,
 * which depends on shapes only) may cross a cut: the run that ends at it
 * keeps them, by the shape of the tensor crossing, for the runs that start
 * there (the carry). The dry run at load tells which values are tensors.
 * The stretches between cuts become units named after the module their
 * nodes belong to (the legacy exporter's node names, "/layer1/layer1.0/
 * conv1/Conv"; the dynamo exporter's name scopes): the top-level module, or
 * the numbered child of a top-level Sequential ("layer1.0"), as the
 * built-in models' units are named. Neighbouring stretches of one module
 * are one unit; stretches of functional calls at the top ("/Relu") join
 * the unit before them. */
#include "engine/nn_impl.h"
#include "engine/onnx_graph_impl.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 128

/* Host numbers live at a unit's start, as a run ending there left them
 * for a batch whose crossing tensor has the shape `dims`. */
struct eng_onnx_carry {
    struct eng_onnx_carry *next;
    int unit, ndim, n;
    int64_t dims[STK_ONNX_MAX_DIMS];
    onnx_value *copies; /* n: one per value of the unit's carry list */
};

/* Stages of one model run in threads of their own: the carry lists change
 * under this lock (held for a copy of a few shapes). */
static pthread_mutex_t carry_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the module a node belongs to ---------------------------------------------- */

#define LEVELS 16

/* A node's module path ("encoder.layers.encoder_layer_0.mlp"), and where
 * each level's prefix ends ("encoder", "encoder.layers", ...). */
typedef struct module_path {
    char s[KEY_MAX];
    int depth, min_depth;
    int end[LEVELS];
} module_path;

/* Append one level: the dynamo exporter's scopes are full paths
 * ("layer1.0.conv1"), the legacy exporter's names hold a Sequential's
 * children in full ("layer1.0") and other children by attribute ("conv1"). */
static void add_level(module_path *m, const char *part, size_t len)
{
    size_t at = m->depth ? (size_t)m->end[m->depth - 1] : 0;
    if (!len || m->depth == LEVELS) return;
    if (at && len > at && !strncmp(part, m->s, at) && part[at] == '.') {
        part += at + 1, len -= at + 1; /* a full path: its last part */
    }
    if (at + 1 + len >= KEY_MAX) return;
    if (at) m->s[at++] = '.';
    memcpy(m->s + at, part, len);
    m->s[at + len] = '\0';
    m->end[m->depth++] = (int)(at + len);
}

/* The name scopes' items between the first ('' or a hook's) and the last
 * (the op), or the legacy node name's parts but its last. */
static void node_path(const stk_onnx_node *s, module_path *m)
{
    m->s[0] = '\0';
    m->depth = 0;
    if (s->scopes[0] == '[') { /* "['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d']" */
        const char *items[LEVELS + 2];
        size_t lens[LEVELS + 2];
        int n = 0;
        for (const char *p = s->scopes; (p = strchr(p, '\'')) && n < LEVELS + 2;) {
            const char *e = strchr(p + 1, '\'');
            if (!e) break;
            items[n] = p + 1, lens[n] = (size_t)(e - p - 1), n++;
            p = e + 1;
        }
        for (int i = 1; i + 1 < n; i++) add_level(m, items[i], lens[i]);
    } else if (s->name[0] == '/') { /* "/layer1/layer1.0/conv1/Conv" */
        for (const char *p = s->name + 1, *e; (e = strchr(p, '/')); p = e + 1)
            add_level(m, p, (size_t)(e - p));
    }
}

/* ---- finding the cuts ------------------------------------------------------------ */

void eng_onnx_units_free(stk_onnx_graph *g)
{
    for (int u = 0; u < g->n_units; u++) free(g->unit_names[u]);
    free(g->unit_names);
    free(g->unit_first);
    free(g->unit_in);
    free(g->param_unit);
    free(g->carry_start);
    free(g->carry_vals);
    for (struct eng_onnx_carry *c = g->carry ? g->carry->next : NULL, *next; c; c = next) {
        next = c->next;
        for (int k = 0; k < c->n; k++) free(c->copies[k].host);
        free(c->copies);
        free(c);
    }
    free(g->seen_tensor);
    g->unit_names = NULL, g->unit_first = g->unit_in = g->param_unit = NULL;
    free(g->carry);
    g->carry_start = g->carry_vals = NULL, g->carry = NULL, g->seen_tensor = NULL;
    g->n_units = 0;
}

stk_status eng_onnx_units_record(stk_onnx_graph *g)
{
    free(g->seen_tensor);
    g->seen_tensor = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *g->seen_tensor);
    if (!g->seen_tensor) return stk_error(STK_ERR_NOMEM, "%s: no memory for its units", g->what);
    g->recording = true;
    return STK_OK;
}

/* Per value: the node that makes it, the first and the last that read it
 * (-1: none; the input is made before node 0, the output read after the last). */
typedef struct value_span {
    int made, first_read, last_read, param;
} value_span;

static void spans_of(const stk_onnx_graph *g, value_span *sp)
{
    for (int v = 0; v < g->n_values; v++) sp[v] = (value_span){-1, -1, -1, -1};
    for (int i = 0; i < g->n_nodes; i++) {
        const onnx_node *n = &g->nodes[i];
        if (n->op == OP_SKIP) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0) continue;
            if (sp[v].first_read < 0) sp[v].first_read = i;
            sp[v].last_read = i;
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && sp[n->out[k]].made < 0) sp[n->out[k]].made = i;
    }
    sp[g->output].last_read = g->n_nodes;
    for (int v = 0; v < g->n_values; v++)
        for (int p = 0; g->values[v].persistent && g->values[v].t && p < g->n_params; p++)
            if (g->params[p].value == g->values[v].t) sp[v].param = p;
}

/* Whether the graph can be cut before node p: *tensor gets the one tensor
 * crossing; *n_host the host numbers crossing (listed in host when not NULL). */
static bool cut_before(const stk_onnx_graph *g, const value_span *sp, int p, int *tensor,
                       int *host, int *n_host)
{
    int tensors = 0;
    *n_host = 0;
    for (int v = 0; v < g->n_values; v++) {
        const value_span *s = &sp[v];
        if (g->values[v].persistent) {
            if (s->param >= 0 && s->first_read >= 0 && s->first_read < p && s->last_read >= p)
                return false; /* a parameter read on both sides */
            continue;
        }
        bool made_before = v == g->input || (s->made >= 0 && s->made < p);
        if (!made_before || s->last_read < p) continue;
        if (g->seen_tensor[v]) {
            if (++tensors > 1) return false;
            *tensor = v;
        } else {
            if (host) host[*n_host] = v;
            ++*n_host;
        }
    }
    return tensors == 1;
}

/* A stretch's module (its first node's that has one) and the depth of its
 * shallowest node (0: a functional call at the top). */
static void stretch_path(const stk_onnx_graph *g, int a, int b, module_path *m)
{
    m->depth = 0;
    m->s[0] = '\0';
    m->min_depth = LEVELS;
    for (int i = a; i < b; i++) {
        if (g->nodes[i].op == OP_SKIP) continue;
        module_path here;
        node_path(g->nodes[i].src, &here);
        if (here.depth < m->min_depth) m->min_depth = here.depth;
        if (!m->depth) memcpy(m->s, here.s, sizeof m->s), memcpy(m->end, here.end, sizeof m->end),
                       m->depth = here.depth;
    }
}

/* The key of a stretch at level d: its module's prefix there, "" when its
 * module is not that deep (a functional call of the module above). */
static size_t key_len(const module_path *m, int d)
{
    return d >= 0 && d < m->depth ? (size_t)m->end[d] : 0;
}

static bool same_key(const module_path *a, const module_path *b, int d)
{
    size_t la = key_len(a, d), lb = key_len(b, d);
    return la && la == lb && !strncmp(a->s, b->s, la);
}

typedef struct unit_list {
    int n;
    int *first;       /* the first stretch of each unit */
    char (*names)[KEY_MAX];
} unit_list;

/* Stretches [a, b), all of one module at level d - 1: one unit per module
 * at level d, in turn split by level d + 1 where two or more of its
 * stretches run children of it alone, different ones (a Sequential's
 * children: "layer1.0", "encoder.layers.encoder_layer_3"; not a residual
 * block's last ReLU, cut from the rest after the Add, the block's own op).
 * A stretch without a module at level d goes with the one before it (or,
 * first, after it). */
static void group(const module_path *paths, int a, int b, int d, unit_list *u)
{
    int start = a;
    while (start < b) {
        int key = start; /* the stretch whose module names the group */
        while (key < b && !key_len(&paths[key], d)) key++;
        if (key == b) { /* nothing deeper: one unit of the module above */
            if (u->n && start > a) return; /* (the unit before goes on) */
            snprintf(u->names[u->n], KEY_MAX, "%.*s", (int)key_len(&paths[a], d - 1), paths[a].s);
            u->first[u->n++] = start;
            return;
        }
        int end = key + 1;
        while (end < b && (same_key(&paths[end], &paths[key], d) || !key_len(&paths[end], d)))
            end++;
        int changes = 0, last = -1; /* two or more children alone: changes > 1 */
        for (int i = key; i < end; i++) {
            if (paths[i].min_depth <= d + 1) continue; /* the module's own ops in it */
            if (last < 0 || !same_key(&paths[i], &paths[last], d + 1)) changes++;
            last = i;
        }
        int before = u->n;
        if (changes > 1 && d + 1 < LEVELS) group(paths, start, end, d + 1, u);
        if (u->n == before) {
            snprintf(u->names[u->n], KEY_MAX, "%.*s", (int)key_len(&paths[key], d), paths[key].s);
            u->first[u->n++] = start;
        }
        start = end;
    }
}

static stk_status name_units(stk_onnx_graph *g, char (*keys)[KEY_MAX])
{
    if (!(g->unit_names = calloc((size_t)g->n_units, sizeof *g->unit_names)))
        return stk_error(STK_ERR_NOMEM, "%s: no memory for its units", g->what);
    for (int u = 0; u < g->n_units; u++) {
        int same = 0;
        for (int w = 0; w < u; w++) same += !strcmp(keys[w], keys[u]);
        char name[KEY_MAX + 16];
        if (!keys[u][0]) /* no module names at all: the first node's */
            snprintf(name, sizeof name, "%s", g->nodes[g->unit_first[u]].src->name);
        else if (same) /* a module run twice apart (a shared activation): its second unit */
            snprintf(name, sizeof name, "%s#%d", keys[u], same + 1);
        else
            snprintf(name, sizeof name, "%s", keys[u]);
        if (!(g->unit_names[u] = strdup(name)))
            return stk_error(STK_ERR_NOMEM, "%s: no memory for its units", g->what);
    }
    return STK_OK;
}

/* Parameters to the unit of the first node that reads (or, a counter, updates) them. */
static void assign_params(stk_onnx_graph *g, const value_span *sp)
{
    for (int p = 0; p < g->n_params; p++) g->param_unit[p] = 0;
    for (int u = 0; u < g->n_units; u++)
        for (int i = g->unit_first[u]; i < g->unit_first[u + 1]; i++)
            if (g->nodes[i].op != OP_SKIP && g->nodes[i].counter >= 0)
                g->param_unit[g->nodes[i].counter] = u;
    for (int v = 0; v < g->n_values; v++) {
        if (sp[v].param < 0 || sp[v].first_read < 0) continue;
        int u = 0;
        while (u + 1 < g->n_units && g->unit_first[u + 1] <= sp[v].first_read) u++;
        g->param_unit[sp[v].param] = u;
    }
}

/* From the cuts' list (node indices, 0 first, n_nodes last): the units,
 * neighbouring stretches of one module merged. */
static stk_status make_units(stk_onnx_graph *g, const value_span *sp, const int *cuts, int n_cuts)
{
    int stretches = n_cuts - 1;
    module_path *paths = calloc((size_t)stretches, sizeof *paths);
    unit_list ul = {0, calloc((size_t)stretches, sizeof *ul.first),
                    calloc((size_t)stretches, sizeof *ul.names)};
    stk_status st = paths && ul.first && ul.names
                        ? STK_OK
                        : stk_error(STK_ERR_NOMEM, "%s: no memory for its units", g->what);
    for (int c = 0; st == STK_OK && c < stretches; c++)
        stretch_path(g, cuts[c], cuts[c + 1], &paths[c]);
    if (st == STK_OK) group(paths, 0, stretches, 0, &ul);
    int n = ul.n;
    int *first = ul.first;
    char(*keys)[KEY_MAX] = ul.names;
    for (int u = 0; u < n; u++) first[u] = cuts[first[u]];
    free(paths);
    if (st == STK_OK && n > 1) {
        g->n_units = n;
        g->unit_first = calloc((size_t)n + 1, sizeof *g->unit_first);
        g->unit_in = calloc((size_t)n + 1, sizeof *g->unit_in);
        g->param_unit = calloc((size_t)(g->n_params ? g->n_params : 1), sizeof *g->param_unit);
        g->carry_start = calloc((size_t)n + 2, sizeof *g->carry_start);
        g->carry = calloc(1, sizeof *g->carry); /* the list's head, never moved */
        int carried = 0, n_host, tensor; /* the host numbers crossing all cuts, counted first */
        for (int u = 1; u < n; u++) {
            cut_before(g, sp, first[u], &tensor, NULL, &n_host);
            carried += n_host;
        }
        g->carry_vals = calloc((size_t)(carried ? carried : 1), sizeof *g->carry_vals);
        if (!g->unit_first || !g->unit_in || !g->param_unit || !g->carry_start || !g->carry_vals ||
            !g->carry)
            st = stk_error(STK_ERR_NOMEM, "%s: no memory for its units", g->what);
        for (int u = 0; st == STK_OK && u < n; u++) {
            g->unit_first[u] = first[u];
            n_host = 0;
            g->carry_start[u + 1] = g->carry_start[u];
            if (u == 0) {
                g->unit_in[u] = g->input;
                continue;
            }
            cut_before(g, sp, first[u], &g->unit_in[u], g->carry_vals + g->carry_start[u], &n_host);
            g->carry_start[u + 1] += n_host;
        }
        if (st == STK_OK) {
            g->unit_first[n] = g->n_nodes;
            g->unit_in[n] = g->output;
            g->carry_start[n + 1] = g->carry_start[n];
            assign_params(g, sp);
            st = name_units(g, keys);
        }
    }
    if (st != STK_OK) eng_onnx_units_free(g);
    free(keys);
    free(first);
    return st;
}

stk_status eng_onnx_find_units(stk_onnx_graph *g)
{
    g->recording = false;
    if (!g->seen_tensor || !g->seen_tensor[g->input]) { /* the dry run did not run */
        free(g->seen_tensor);
        g->seen_tensor = NULL;
        return STK_OK;
    }
    value_span *sp = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *sp);
    int *cuts = calloc((size_t)g->n_nodes + 2, sizeof *cuts);
    stk_status st = sp && cuts ? STK_OK : stk_error(STK_ERR_NOMEM, "%s: no memory", g->what);
    if (st == STK_OK) {
        spans_of(g, sp);
        int n_cuts = 0, tensor, n_host;
        cuts[n_cuts++] = 0;
        for (int p = 1; p < g->n_nodes; p++)
            if (g->nodes[p].op != OP_SKIP && cut_before(g, sp, p, &tensor, NULL, &n_host))
                cuts[n_cuts++] = p;
        cuts[n_cuts++] = g->n_nodes;
        st = make_units(g, sp, cuts, n_cuts);
    }
    free(g->seen_tensor);
    g->seen_tensor = NULL;
    free(sp);
    free(cuts);
    return st;
}

/* ---- running units --------------------------------------------------------------- */

int eng_onnx_graph_unit_count(const struct stk_onnx_graph *g) { return g->n_units; }

const char *eng_onnx_graph_unit_name(const struct stk_onnx_graph *g, int u)
{
    return u >= 0 && u < g->n_units ? g->unit_names[u] : NULL;
}

int eng_onnx_graph_param_unit(const struct stk_onnx_graph *g, int p)
{
    return g->n_units && p >= 0 && p < g->n_params ? g->param_unit[p] : -1;
}

static bool same_shape(const struct eng_onnx_carry *c, int u, const stk_tensor *t)
{
    if (c->unit != u || c->ndim != stk_tensor_ndim(t)) return false;
    for (int d = 0; d < c->ndim; d++)
        if (c->dims[d] != stk_tensor_dim(t, d)) return false;
    return true;
}

static stk_status copy_host(onnx_value *to, const onnx_value *from)
{
    *to = *from;
    to->t = NULL;
    to->host = malloc(sizeof(double) * (size_t)(from->numel ? from->numel : 1));
    if (!to->host) return stk_error(STK_ERR_NOMEM, "no memory for a shape");
    if (from->numel) memcpy(to->host, from->host, sizeof(double) * (size_t)from->numel);
    return STK_OK;
}

/* After a run ending where unit u starts: its host numbers crossing, kept
 * for t's shape (once: the same shapes give the same numbers). */
static stk_status carry_out(stk_onnx_graph *g, const eng_onnx_run *r, int u, const stk_tensor *t)
{
    int n = g->carry_start[u + 1] - g->carry_start[u];
    const int *vals = g->carry_vals + g->carry_start[u];
    if (n == 0) return STK_OK;
    pthread_mutex_lock(&carry_lock);
    bool have = false;
    for (const struct eng_onnx_carry *c = g->carry->next; c && !have; c = c->next)
        have = same_shape(c, u, t);
    stk_status st = STK_OK;
    struct eng_onnx_carry *c = have ? NULL : calloc(1, sizeof *c);
    if (!have && (!c || !(c->copies = calloc((size_t)n, sizeof *c->copies))))
        st = stk_error(STK_ERR_NOMEM, "%s: no memory for its shapes", g->what);
    for (int k = 0; !have && st == STK_OK && k < n; k++) {
        if (!r->values[vals[k]].host)
            st = stk_error(STK_ERR_UNSUPPORTED, "%s: '%s' crosses into unit %s without numbers",
                           g->what, g->names[vals[k]], g->unit_names[u]);
        else
            st = copy_host(&c->copies[k], &r->values[vals[k]]);
    }
    if (!have && st == STK_OK) {
        c->n = n, c->unit = u, c->ndim = stk_tensor_ndim(t);
        for (int d = 0; d < c->ndim; d++) c->dims[d] = stk_tensor_dim(t, d);
        c->next = g->carry->next, g->carry->next = c;
    } else if (c) {
        for (int k = 0; c->copies && k < n; k++) free(c->copies[k].host);
        free(c->copies);
        free(c);
    }
    pthread_mutex_unlock(&carry_lock);
    return st;
}

/* Before a run starting at unit u: the host numbers the units before it computed. */
static stk_status carry_in(stk_onnx_graph *g, eng_onnx_run *r, int u, const stk_tensor *x)
{
    int n = g->carry_start[u + 1] - g->carry_start[u];
    const int *vals = g->carry_vals + g->carry_start[u];
    if (n == 0) return STK_OK;
    pthread_mutex_lock(&carry_lock);
    const struct eng_onnx_carry *c = g->carry->next;
    while (c && !same_shape(c, u, x)) c = c->next;
    stk_status st = c ? STK_OK
                      : stk_error(STK_ERR_INVALID_ARG,
                                  "%s: unit %s needs shapes the units before it compute: run "
                                  "them first at this size (%s)",
                                  g->what, g->unit_names[u], stk_tensor_shape_str(x));
    for (int k = 0; c && st == STK_OK && k < n; k++)
        st = copy_host(&r->values[vals[k]], &c->copies[k]);
    pthread_mutex_unlock(&carry_lock);
    return st;
}

stk_status eng_onnx_graph_run_units(struct stk_onnx_graph *g, int from, int to, stk_tensor *x,
                                    bool training, uint64_t seed, uint64_t stream,
                                    stk_tensor **out)
{
    *out = NULL;
    if (from < 0 || to > g->n_units || from >= to)
        return stk_error(STK_ERR_INVALID_ARG, "%s: units %d..%d outside its %d", g->what, from,
                         to - 1, g->n_units);
    if (stk_tensor_dtype(x) != STK_F32)
        return stk_error(STK_ERR_INVALID_ARG, "%s: the input must be f32", g->what);
    int in = g->unit_in[from], last = g->unit_in[to];
    eng_onnx_run r;
    STK_TRY(eng_onnx_run_begin(g, in, last, &r));
    r.values[in].t = x;
    stk_status st = carry_in(g, &r, from, x);
    if (st == STK_OK)
        st = eng_onnx_run_nodes(&r, g->unit_first[from], g->unit_first[to], training, seed, stream);
    stk_tensor *y = r.values[last].t;
    if (st == STK_OK && !y)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: '%s' is not a float tensor", g->what,
                       g->names[last]);
    if (st == STK_OK && to < g->n_units) st = carry_out(g, &r, to, y);
    eng_onnx_run_end(&r);
    if (st == STK_OK) *out = y;
    return st;
}
