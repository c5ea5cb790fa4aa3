/* Private: graph nodes, for the ops that record them. */
#pragma once

#include "engine/tensor_impl.h"

/* Computes the gradients of a node's inputs from the gradient of its output:
 * gin[i] receives a new untracked tensor of input i's shape, or stays NULL
 * (no gradient for that input, or it does not require one). */
typedef stk_status (*stk_backward_fn)(stk_node *n, stk_tensor *gout, stk_tensor **gin);

#define NODE_MAX_SAVED 5

struct stk_node {
    const char *name; /* the op, for messages */
    stk_backward_fn backward;
    int refs; /* its output tensor, and the shape handles of it other nodes hold */
    int n_inputs;
    /* retained: a leaf (or a tensor that needs no gradient) itself; a result
     * of another op as a shape handle: its shape, device and grad_fn without its
     * storage, so that an intermediate's memory goes when nothing else keeps
     * it (what the backward needs of it is in `saved`) */
    stk_tensor **inputs;
    stk_tensor *saved[NODE_MAX_SAVED]; /* retained; released once backward has run */
    int64_t iv[16];                    /* op parameters */
    double fv[4];
    void *ext;        /* extra op state, freed with free() */
    stk_tensor *grad; /* accumulated gradient of the output during backward */
    uint64_t mark;    /* traversal generation */
    bool freed;       /* saved state released: backward cannot run again */
};

/* Record a node for `out` when grad mode is on and any input requires grad;
 * *node is NULL otherwise (then save nothing). Retains the inputs (results
 * of other ops as shape handles: see stk_node.inputs). A backward function reads an
 * input's shape, dtype and device from n->inputs, its values only from
 * `saved`. */
stk_status eng_node_attach(stk_tensor *out, const char *name, stk_backward_fn fn, int n_inputs,
                           stk_tensor *const *inputs, stk_node **node);
/* Keep t for the backward (retained). */
void eng_node_save(stk_node *n, int slot, stk_tensor *t);
/* Keep the node's own output y for the backward: saved as an alias of its
 * storage, since saving y itself would be a reference cycle (y -> node -> y). */
stk_status eng_node_save_output(stk_node *n, int slot, stk_tensor *y);
/* Whether input i needs a gradient. */
bool eng_node_needs_grad(const stk_node *n, int i);
void eng_node_release(stk_node *n);
const char *eng_node_name(const stk_node *n);

/* gin helpers: a new untracked tensor shaped like input i. */
stk_status eng_node_grad_like(stk_node *n, int i, bool zero, stk_tensor **out);

/* Ops built from other ops run them inside a scope of their own, which owns
 * the intermediates (the graph keeps what backward needs):
 *     stk_scope *s; STK_TRY(stk_scope_begin(&s));
 *     st = ...ops..., leaving the result in y;
 *     return eng_compose_end(s, st, y, out);
 * eng_compose_end hands y to the caller (or the caller's scope) on success. */
stk_status eng_compose_end(stk_scope *s, stk_status st, stk_tensor *y, stk_tensor **out);

/* An intermediate the code that made it will not use again: the current
 * scope lets go of it now rather than at its end (what autograd saved of it
 * stays, by its own reference), as PyTorch frees a tensor with its last
 * reference. A tensor the current scope does not own (the caller's input)
 * is left alone. Keeps a forward's peak to what backward needs. */
void eng_scope_drop(stk_tensor *t);
