/* Private helpers shared by the op files: untracked building blocks that the
 * backward functions use (they never touch the step scope). */
#pragma once

#include "engine/autograd.h"
#include "engine/autograd_impl.h"

stk_status eng_reshape_raw(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out);
stk_status eng_permute_raw(stk_tensor *t, const int *dims, stk_tensor **out);
stk_status eng_narrow_raw(stk_tensor *t, int d, int64_t start, int64_t length, stk_tensor **out);
stk_status eng_expand_raw(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out);
/* g summed over the dimensions along which `like` was broadcast to g's shape. */
stk_status eng_sum_to_like(stk_tensor *g, const stk_tensor *like, stk_tensor **out);
/* out = a (op) b with broadcasting, untracked. */
stk_status eng_binary_raw(stk_binary_op op, stk_tensor *a, stk_tensor *b, stk_tensor **out);
/* out = f(x) element-wise, untracked. */
stk_status eng_unary_raw(stk_unary_op op, stk_tensor *x, float alpha, stk_tensor **out);
/* Broadcast shape of a and b (NumPy rules); error names `op`. */
stk_status eng_broadcast_shape(const char *op, const stk_tensor *a, const stk_tensor *b, int *ndim,
                               int64_t *shape);
/* Batch norm's per-channel vectors: NULL, or contiguous f32 [c]. */
stk_status eng_bn_check_channel_vec(const char *what, const stk_tensor *t, int64_t c);
/* Row-major matmul of contiguous operands, untracked (see ops_matmul.c). */
stk_status eng_matmul_raw(stk_tensor *a, bool ta, stk_tensor *b, bool tb, stk_tensor **out);

/* Autocast (autocast.c): true inside stk_autocast_begin/end on a backend
 * with f16 kernels; then matmul and conv2d compute from f16 copies of their
 * f32 operands (eng_half_copy: a contiguous f16 copy of contiguous t). */
bool eng_autocast_f16(const stk_backend *be);
/* Inside begin/end on a backend with bf16 kernels instead (the CPU): its
 * *_bf16 entries take the f32 operands and round them to bf16 themselves. */
bool eng_autocast_bf16(const stk_backend *be);
stk_status eng_half_copy(const stk_backend *be, const stk_tensor *t, stk_tensor **out);
