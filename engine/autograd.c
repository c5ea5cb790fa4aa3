/* The tape: node bookkeeping, backward, no-grad mode and step scopes. */
#include "engine/autograd.h"
#include "common/trace.h"

#include "common/log.h"
#include "engine/autograd_impl.h"

#include <stdlib.h>
#include <string.h>

struct stk_scope {
    stk_tensor **items;
    size_t n, cap;
    stk_scope *parent;
};

static _Thread_local stk_scope *current_scope;
static _Thread_local int no_grad_depth;
static _Thread_local uint64_t generation;

/* ---- scopes ------------------------------------------------------------ */

stk_status stk_scope_begin(stk_scope **out)
{
    stk_scope *s = calloc(1, sizeof *s);
    if (!s) return stk_error(STK_ERR_NOMEM, "no memory for a step scope");
    s->parent = current_scope;
    current_scope = s;
    *out = s;
    return STK_OK;
}

void stk_scope_end(stk_scope *s)
{
    if (!s) return;
    if (current_scope != s)
        stk_log_warn("stk_scope_end: ending a scope that is not the innermost one");
    /* Release in reverse order of creation: outputs before the inputs they hold. */
    for (size_t i = s->n; i-- > 0;) stk_tensor_release(s->items[i]);
    if (current_scope == s) current_scope = s->parent;
    free(s->items);
    free(s);
}

size_t stk_scope_size(const stk_scope *s) { return s ? s->n : 0; }

stk_tensor *eng_tensor_track(stk_tensor *t)
{
    stk_scope *s = current_scope;
    if (!s || !t) return t;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        stk_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items) { /* cannot track: the tensor lives on (a leak, never a crash) */
            stk_log_warn("step scope: no memory to track a tensor; it will not be freed");
            return t;
        }
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return t;
}

void eng_scope_drop(stk_tensor *t)
{
    stk_scope *s = current_scope;
    if (!s || !t) return;
    for (size_t i = s->n; i-- > 0;) /* the newest first: an intermediate was made lately */
        if (s->items[i] == t) {
            memmove(&s->items[i], &s->items[i + 1], (s->n - i - 1) * sizeof *s->items);
            s->n--;
            stk_tensor_release(t);
            return;
        }
}

stk_status eng_compose_end(stk_scope *s, stk_status st, stk_tensor *y, stk_tensor **out)
{
    if (st == STK_OK) stk_tensor_retain(y);
    stk_scope_end(s);
    if (st == STK_OK) *out = eng_tensor_track(y);
    return st;
}

/* ---- grad mode --------------------------------------------------------- */

void stk_no_grad_begin(void) { no_grad_depth++; }
void stk_no_grad_end(void)
{
    if (no_grad_depth > 0) no_grad_depth--;
}
bool stk_grad_enabled(void) { return no_grad_depth == 0; }

/* ---- nodes ------------------------------------------------------------- */

/* A result's stand-in for the nodes that take it as an input: its shape,
 * strides, dtype, device and grad_fn (shared, counted), no storage of its
 * own (an empty borrowed one that carries the device), so its memory is
 * freed when the scope and the saved tensors let go of it. */
static stk_status shape_handle_of(stk_tensor *t, stk_tensor **out)
{
    *out = NULL;
    stk_tensor *s = calloc(1, sizeof *s);
    stk_storage *store = calloc(1, sizeof *store);
    if (!s || !store) {
        free(s);
        free(store);
        return stk_error(STK_ERR_NOMEM, "no memory for the autograd node's input");
    }
    *store = (stk_storage){.device = t->storage->device, .refs = 1, .borrowed = true};
    s->refs = 1;
    s->ndim = t->ndim;
    memcpy(s->shape, t->shape, sizeof s->shape);
    memcpy(s->strides, t->strides, sizeof s->strides);
    s->offset = t->offset;
    s->dtype = t->dtype;
    s->storage = store;
    s->requires_grad = t->requires_grad;
    s->grad_fn = t->grad_fn;
    t->grad_fn->refs++;
    *out = s;
    return STK_OK;
}

stk_status eng_node_attach(stk_tensor *out, const char *name, stk_backward_fn fn, int n_inputs,
                           stk_tensor *const *inputs, stk_node **node)
{
    *node = NULL;
    if (out->storage && !out->storage->made_by) out->storage->made_by = name;
    if (!stk_grad_enabled()) return STK_OK;
    bool any = false;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad) any = true;
    if (!any) return STK_OK;
    stk_node *n = calloc(1, sizeof *n);
    stk_tensor **in = calloc((size_t)n_inputs, sizeof *in);
    if (!n || !in) {
        free(n);
        free(in);
        return stk_error(STK_ERR_NOMEM, "%s: no memory for the autograd node", name);
    }
    n->name = name;
    n->backward = fn;
    n->refs = 1;
    n->n_inputs = n_inputs;
    n->inputs = in;
    for (int i = 0; i < n_inputs; i++) {
        stk_status st = inputs[i] && inputs[i]->grad_fn ? shape_handle_of(inputs[i], &in[i]) : STK_OK;
        if (st != STK_OK) {
            for (int k = 0; k < i; k++) stk_tensor_release(in[k]);
            free(in);
            free(n);
            return stk_error_prefix(st, "%s", name);
        }
        if (!in[i]) {
            in[i] = inputs[i];
            stk_tensor_retain(in[i]);
        }
    }
    out->grad_fn = n;
    out->requires_grad = true;
    *node = n;
    return STK_OK;
}

void eng_node_save(stk_node *n, int slot, stk_tensor *t)
{
    stk_tensor_retain(t);
    stk_tensor_release(n->saved[slot]);
    n->saved[slot] = t;
}

stk_status eng_node_save_output(stk_node *n, int slot, stk_tensor *y)
{
    stk_tensor *alias;
    stk_status st = eng_tensor_alias(y, y->ndim, y->shape, y->strides, y->offset, &alias);
    if (st != STK_OK) return st;
    eng_node_save(n, slot, alias);
    stk_tensor_release(alias);
    return STK_OK;
}

bool eng_node_needs_grad(const stk_node *n, int i)
{
    return n->inputs[i] && n->inputs[i]->requires_grad;
}

static void node_free_state(stk_node *n)
{
    for (int i = 0; i < NODE_MAX_SAVED; i++) {
        stk_tensor_release(n->saved[i]);
        n->saved[i] = NULL;
    }
    free(n->ext);
    n->ext = NULL;
    n->freed = true;
}

void eng_node_release(stk_node *n)
{
    if (!n || --n->refs > 0) return;
    node_free_state(n);
    stk_tensor_release(n->grad);
    for (int i = 0; i < n->n_inputs; i++) stk_tensor_release(n->inputs[i]);
    free(n->inputs);
    free(n);
}

const char *eng_node_name(const stk_node *n) { return n ? n->name : "leaf"; }

stk_status eng_node_grad_like(stk_node *n, int i, bool zero, stk_tensor **out)
{
    stk_tensor *in = n->inputs[i];
    return eng_tensor_new(in->storage->device, STK_F32, in->ndim, in->shape, zero, out);
}

/* ---- backward ---------------------------------------------------------- */

/* *slot += g, without writing into g (it may be shared, e.g. add passes the
 * same gradient to both inputs). Takes over the caller's reference to g. */
static stk_status accumulate(stk_tensor **slot, stk_tensor *g, bool leaf)
{
    stk_status st = STK_OK;
    const stk_backend *be;
    if ((st = eng_backend_of(g, &be)) != STK_OK) goto out;
    if (!*slot) {
        /* A leaf's gradient outlives the step: give it storage of its own. */
        bool own = stk_tensor_is_contiguous(g) &&
                   g->storage->bytes == (size_t)stk_tensor_numel(g) * sizeof(float);
        if (!leaf || own) {
            *slot = g;
            return STK_OK;
        }
        if ((st = eng_tensor_new_like(g, false, slot)) == STK_OK) st = stk_tensor_copy(*slot, g);
        goto out;
    }
    stk_tensor *sum, *a = NULL, *b = NULL;
    if ((st = eng_tensor_new_like(*slot, false, &sum)) != STK_OK) goto out;
    if ((st = eng_tensor_contiguous_raw(*slot, &a)) == STK_OK &&
        (st = eng_tensor_contiguous_raw(g, &b)) == STK_OK) {
        int64_t zero[STK_MAX_DIMS] = {0}, str[STK_MAX_DIMS];
        (void)zero;
        for (int d = 0; d < sum->ndim; d++) str[d] = sum->strides[d];
        be->binary(STK_BINARY_ADD, sum->ndim, sum->shape, tensor_f32(sum), tensor_f32(a), str,
                   tensor_f32(b), str);
    }
    stk_tensor_release(a);
    stk_tensor_release(b);
    if (st != STK_OK) {
        stk_tensor_release(sum);
        goto out;
    }
    stk_tensor_release(*slot);
    *slot = sum;
out:
    stk_tensor_release(g);
    return st;
}

typedef struct node_list {
    stk_node **items;
    size_t n, cap;
} node_list;

static bool list_push(node_list *l, stk_node *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        stk_node **items = realloc(l->items, cap * sizeof *items);
        if (!items) return false;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = n;
    return true;
}

/* Post-order of the nodes reachable from root (inputs before their users). */
static stk_status topo_order(stk_node *root, node_list *order)
{
    uint64_t gen = ++generation;
    node_list stack = {0};
    stk_status st = STK_OK;
    /* Each stack entry is a node; its progress is kept in `iv`-free fashion by
     * re-scanning inputs: a node is emitted once all its input nodes are marked. */
    root->mark = gen;
    if (!list_push(&stack, root)) goto nomem;
    while (stack.n) {
        stk_node *n = stack.items[stack.n - 1];
        if (n->freed) {
            st = stk_error(STK_ERR_INVALID_ARG,
                           "backward through a graph that was already freed (at op %s): call "
                           "backward with retain_graph to run it twice",
                           n->name);
            goto out;
        }
        bool pushed = false;
        for (int i = 0; i < n->n_inputs; i++) {
            stk_node *c = n->inputs[i] ? n->inputs[i]->grad_fn : NULL;
            if (c && c->mark != gen) {
                c->mark = gen;
                if (!list_push(&stack, c)) goto nomem;
                pushed = true;
                break;
            }
        }
        if (!pushed) {
            stack.n--;
            if (!list_push(order, n)) goto nomem;
        }
    }
    goto out;
nomem:
    st = stk_error(STK_ERR_NOMEM, "backward: no memory for the node list");
out:
    free(stack.items);
    return st;
}

/* ---- gradient hooks ---------------------------------------------------- */

static _Thread_local uint64_t hook_pass; /* numbers the backward passes of this thread */

stk_status stk_tensor_set_grad_hook(stk_tensor *leaf, stk_grad_hook fn, void *ctx)
{
    if (leaf->grad_fn || !leaf->requires_grad)
        return stk_error(STK_ERR_INVALID_ARG,
                         "set_grad_hook: the tensor %s is not a leaf that "
                         "requires grad",
                         stk_tensor_shape_str(leaf));
    leaf->grad_hook = fn;
    leaf->grad_hook_ctx = fn ? ctx : NULL;
    return STK_OK;
}

static bool hooked_leaf(const stk_tensor *t)
{
    return t && !t->grad_fn && t->requires_grad && t->grad_hook;
}

/* Count, for each hooked leaf, the edges of this pass's nodes that lead to it. */
static void count_hook_edges(const node_list *order, uint64_t pass)
{
    for (size_t k = 0; k < order->n; k++) {
        stk_node *n = order->items[k];
        for (int i = 0; i < n->n_inputs; i++) {
            stk_tensor *in = n->inputs[i];
            if (!hooked_leaf(in)) continue;
            if (in->pending_pass != pass) {
                in->pending_pass = pass;
                in->pending = 0;
            }
            in->pending++;
        }
    }
}

/* Node n is done (run, or reached by no gradient): its hooked leaf inputs
 * have one contribution fewer to wait for; run the hooks of those that have
 * none left. */
static stk_status finish_hook_edges(stk_node *n, uint64_t pass)
{
    stk_status st = STK_OK;
    for (int i = 0; i < n->n_inputs && st == STK_OK; i++) {
        stk_tensor *in = n->inputs[i];
        if (hooked_leaf(in) && in->pending_pass == pass && --in->pending == 0)
            st = in->grad_hook(in->grad_hook_ctx, in);
    }
    return st;
}

stk_status stk_backward(stk_tensor *out, stk_tensor *grad, bool retain_graph)
{
    if (!out->requires_grad)
        return stk_error(STK_ERR_INVALID_ARG,
                         "backward: the tensor does not require grad (no input of the ops that "
                         "made it requires grad, or it was made in no-grad mode)");
    stk_status st;
    stk_tensor *g0 = NULL;
    if (grad) {
        if (!eng_shape_equal(grad, out)) {
            char a[128];
            snprintf(a, sizeof a, "%s", stk_tensor_shape_str(grad));
            return stk_error(STK_ERR_INVALID_ARG,
                             "backward: the gradient's shape %s differs from the output's %s", a,
                             stk_tensor_shape_str(out));
        }
        if ((st = eng_check_f32("backward", grad, "the gradient")) != STK_OK) return st;
        if ((st = eng_check_same_device("backward", grad, out)) != STK_OK) return st;
        stk_tensor_retain(grad);
        g0 = grad;
    } else {
        if (stk_tensor_numel(out) != 1)
            return stk_error(STK_ERR_INVALID_ARG,
                             "backward: a gradient is needed for the non-scalar output %s",
                             stk_tensor_shape_str(out));
        if ((st = eng_tensor_new_like(out, false, &g0)) != STK_OK) return st;
        const stk_backend *be;
        if ((st = eng_backend_of(out, &be)) != STK_OK) {
            stk_tensor_release(g0);
            return st;
        }
        be->fill(STK_F32, tensor_ptr(g0), 1, 1.0);
    }
    if (!out->grad_fn) {
        if ((st = accumulate(&out->grad, g0, true)) == STK_OK && hooked_leaf(out))
            st = out->grad_hook(out->grad_hook_ctx, out);
        return st;
    }

    node_list order = {0};
    if ((st = topo_order(out->grad_fn, &order)) != STK_OK) {
        stk_tensor_release(g0);
        free(order.items);
        return st;
    }
    uint64_t pass = ++hook_pass;
    count_hook_edges(&order, pass);
    stk_node *root = out->grad_fn;
    stk_tensor_release(root->grad);
    root->grad = g0;
    stk_tensor *gin_small[8], **gin = gin_small;
    for (size_t k = order.n; k-- > 0;) {
        stk_node *n = order.items[k];
        if (!n->grad) { /* no gradient reached it */
            if ((st = finish_hook_edges(n, pass)) != STK_OK) break;
            continue;
        }
        if (n->n_inputs > 8) {
            gin = calloc((size_t)n->n_inputs, sizeof *gin);
            if (!gin) {
                st = stk_error(STK_ERR_NOMEM, "backward: no memory");
                break;
            }
        } else {
            gin = gin_small;
            memset(gin, 0, sizeof gin_small);
        }
        /* Backward functions may assume a contiguous gradient. */
        if (!stk_tensor_is_contiguous(n->grad)) {
            stk_tensor *c;
            if ((st = eng_tensor_contiguous_raw(n->grad, &c)) != STK_OK) {
                if (gin != gin_small) free(gin);
                break;
            }
            stk_tensor_release(n->grad);
            n->grad = c;
        }
        bool traced = stk_trace_ops();
        if (traced) stk_trace_begin_args(n->name, "backward", "backward");
        st = n->backward(n, n->grad, gin);
        if (traced) stk_trace_end();
        for (int i = 0; i < n->n_inputs; i++) {
            stk_tensor *in = n->inputs[i], *g = gin[i];
            if (!g) continue;
            gin[i] = NULL;
            if (st != STK_OK || !in->requires_grad) {
                stk_tensor_release(g);
                continue;
            }
            if (!eng_shape_equal(g, in)) {
                char a[128];
                snprintf(a, sizeof a, "%s", stk_tensor_shape_str(g));
                st = stk_error(STK_ERR_INTERNAL,
                               "backward of %s: gradient shape %s differs from input %d's %s",
                               n->name, a, i, stk_tensor_shape_str(in));
                stk_tensor_release(g);
                continue;
            }
            if (in->grad_fn)
                st = accumulate(&in->grad_fn->grad, g, false);
            else
                st = accumulate(&in->grad, g, true);
        }
        if (gin != gin_small) free(gin);
        stk_tensor_release(n->grad);
        n->grad = NULL;
        if (!retain_graph) node_free_state(n);
        if (st == STK_OK) st = finish_hook_edges(n, pass);
        if (st != STK_OK) break;
    }
    /* On an error, drop the partial gradients still held by nodes. */
    for (size_t k = 0; k < order.n; k++) {
        stk_tensor_release(order.items[k]->grad);
        order.items[k]->grad = NULL;
    }
    free(order.items);
    return st;
}
