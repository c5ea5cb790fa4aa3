/* Define-by-run autograd and the step scope.
 *
 * Every op whose inputs require grad records a node with its inputs and a
 * backward function; stk_backward(loss) runs the nodes in reverse
 * topological order and accumulates gradients into the leaves that require
 * grad (stk_tensor_grad). The graph is freed as backward goes, unless
 * `retain_graph` is set; a second backward through a freed graph fails with
 * a message naming the op.
 *
 *     stk_scope *scope;
 *     stk_scope_begin(&scope);                  // one training step
 *     stk_tensor *logits, *loss;
 *     STK_TRY(model_forward(x, &logits));           // ops: the scope owns the results
 *     STK_TRY(stk_cross_entropy(logits, labels, 0.f, &loss));
 *     STK_TRY(stk_backward(loss, NULL, false));      // grads land in the parameters
 *     stk_optim_step(opt);
 *     stk_scope_end(scope);                     // every intermediate and node freed
 *
 * Memory: stk_scope_end frees every tensor made by ops inside the scope (and
 * with them their graph nodes) at once. Parameters, their gradients and
 * optimizer state are made outside any scope and live until released.
 * Scopes nest; end them innermost first.
 *
 * Threading: grad mode and the scope stack are per thread.
 */
#pragma once

#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_scope stk_scope;

/* Start a step scope on this thread. Errors: STK_ERR_NOMEM. */
stk_status stk_scope_begin(stk_scope **out);
/* Free every tensor the scope owns, then the scope. NULL is a no-op. */
void stk_scope_end(stk_scope *scope);
/* Number of tensors the scope owns (for tests and statistics). */
size_t stk_scope_size(const stk_scope *scope);

/* Back-propagate from `out`. `grad` is d(loss)/d(out): NULL means 1 and needs
 * a one-element `out`. Errors: STK_ERR_INVALID_ARG (out does not require
 * grad, no grad for a non-scalar, grad's shape differs, a graph already
 * freed), kernel errors. */
stk_status stk_backward(stk_tensor *out, stk_tensor *grad, bool retain_graph);

/* Gradient hooks: fn(ctx, leaf) runs during every stk_backward that reaches
 * `leaf`, as soon as the leaf's gradient is final for that pass (every node
 * that contributes to it has run), while the rest of backward is still to
 * come: data-parallel training starts a gradient's all-reduce there.
 * Leaves are finished in reverse order of use (the last layer first). The
 * gradient (stk_tensor_grad) may be read, not replaced; the hook must not
 * run ops that record a graph. An error returned by fn stops backward with
 * it. fn NULL removes the hook. Errors: INVALID_ARG (not a leaf that
 * requires grad). */
typedef stk_status (*stk_grad_hook)(void *ctx, stk_tensor *leaf);
stk_status stk_tensor_set_grad_hook(stk_tensor *leaf, stk_grad_hook fn, void *ctx);

/* No-grad mode: ops record nothing while it is on (nests like a counter). */
void stk_no_grad_begin(void);
void stk_no_grad_end(void);
bool stk_grad_enabled(void);

#ifdef __cplusplus
}
#endif
