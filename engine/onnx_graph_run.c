/* One forward over nodes of an imported graph, on a copy of its values of
 * its own (onnx_graph_impl.h's eng_onnx_run). */
#include "engine/onnx_graph_impl.h"

#include "engine/autograd_impl.h"

#include <stdlib.h>
#include <string.h>

static void clear_value(onnx_value *v)
{
    if (v->persistent) return;
    free(v->host);
    *v = (onnx_value){.last_use = v->last_use};
}

/* After node i: the intermediates it was the last to read go (their memory
 * back to the cache while the step runs, as the built-in models let theirs
 * go), unless another live value holds the same tensor (Identity, a Cast,
 * a view returned as is; the run's input above all). r->values is the
 * run's own copy of the values. */
static void drop_read(const eng_onnx_run *r, int i)
{
    const stk_onnx_graph *g = r->g;
    onnx_value *vals = r->values;
    const onnx_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || v == r->in || v == r->out || vals[v].persistent || vals[v].last_use != i)
            continue;
        stk_tensor *t = vals[v].t;
        bool aliased = false;
        for (int u = 0; t && u < g->n_values && !aliased; u++)
            aliased = u != v && vals[u].t == t &&
                      (vals[u].persistent || u == r->in || u == r->out || vals[u].last_use > i);
        if (t && !aliased) eng_scope_drop(t);
        clear_value(&vals[v]);
    }
}

stk_status eng_onnx_run_begin(stk_onnx_graph *g, int in, int out, eng_onnx_run *r)
{
    *r = (eng_onnx_run){.g = g, .in = in, .out = out};
    /* Each run writes its values into a copy of its own, so that pipeline
     * stages run disjoint nodes of one graph at once: what a node caches on
     * a constant (its host numbers, its tensor) lives in the copy and goes
     * with the run (eng_onnx_run_end), so runs never write what they share. */
    r->values = malloc(sizeof *r->values * (size_t)(g->n_values ? g->n_values : 1));
    if (!r->values) return stk_error(STK_ERR_NOMEM, "%s: no memory for a forward", g->what);
    memcpy(r->values, g->values, sizeof *r->values * (size_t)g->n_values);
    r->shared = *g;
    r->shared.values = r->values;
    return STK_OK;
}

stk_status eng_onnx_run_nodes(eng_onnx_run *r, int from, int to, bool training, uint64_t seed,
                              uint64_t stream)
{
    stk_onnx_graph *g = r->g;
    for (int i = from; i < to; i++) {
        if (g->nodes[i].op == OP_SKIP) continue;
        stk_status st = eng_onnx_run_node(&r->shared, i, training, seed, stream);
        if (st != STK_OK) {
            const stk_onnx_node *s = g->nodes[i].src;
            return stk_error_prefix(st, "%s: node '%s' (%s)", g->what, s->name, s->op_type);
        }
        const onnx_node *n = &g->nodes[i];
        for (int k = 0; g->recording && k < n->n_out; k++) /* the load's dry run: units */
            if (n->out[k] >= 0 && r->values[n->out[k]].t) g->seen_tensor[n->out[k]] = true;
        drop_read(r, i);
    }
    return STK_OK;
}

void eng_onnx_run_end(eng_onnx_run *r)
{
    if (!r->values) return;
    if (r->g->recording) r->g->seen_tensor[r->in] = true;
    for (int v = 0; v < r->g->n_values; v++) {
        onnx_value *w = &r->values[v], *own = &r->g->values[v];
        if (w->persistent) { /* a cache a node made after all: this run's alone */
            if (w->host != own->host) free(w->host);
            if (w->t != own->t) stk_tensor_release(w->t);
        } else if (v != r->in) {
            clear_value(w);
        }
    }
    free(r->values);
    r->values = NULL;
}

