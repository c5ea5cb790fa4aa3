/* Tensors: n-dimensional arrays on a device, with views and autograd.
 *
 *     int64_t shape[2] = {2, 3};
 *     float host[6] = {1, 2, 3, 4, 5, 6};
 *     stk_tensor *x, *xt;
 *     if (stk_tensor_from_host(STK_F32, 2, shape, host, &x) != STK_OK) ...;
 *     stk_tensor_set_requires_grad(x, true);       // a leaf that collects gradients
 *     stk_transpose(x, 0, 1, &xt);                 // a view: shares x's storage
 *     stk_tensor_print(xt, stderr);
 *     stk_tensor_release(xt);                      // outside a step scope the caller
 *     stk_tensor_release(x);                       // owns every tensor it gets
 *
 * Ownership: every function that hands out a tensor gives the caller one
 * reference, which stk_tensor_release() drops; storage is freed with its last
 * tensor. Inside a step scope (autograd.h) the scope owns the tensors that ops
 * make, and frees them all at its end: the caller releases nothing, and keeps
 * a tensor past the scope with stk_tensor_retain() taken before it ends.
 *
 * Layout: shape and strides in elements, at most STK_MAX_DIMS dimensions,
 * row-major when contiguous. View rules follow PyTorch: stk_view fails when
 * the strides cannot express the new shape, stk_reshape copies then.
 * Compute ops take f32; f16/bf16/i32/u8 are for storage, labels, pixels and
 * conversion (stk_tensor_to_dtype).
 *
 * Threading: a tensor and its graph belong to one thread at a time.
 */
#pragma once

#include "common/status.h"
#include "device/device_alloc.h"
#include "kernels/dtype.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_MAX_DIMS 6

typedef struct stk_tensor stk_tensor;

/* The dtype's name ("f32", ...); stk_dtype_size() is in kernels/dtype.h. */
const char *stk_dtype_name(stk_dtype dt);

/* A new contiguous tensor on the CPU, zero-filled. Errors: STK_ERR_INVALID_ARG
 * (rank, negative size), STK_ERR_NOMEM. */
stk_status stk_tensor_zeros(stk_dtype dt, int ndim, const int64_t *shape, stk_tensor **out);
/* The same on a given device. */
stk_status stk_tensor_zeros_on(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape,
                               stk_tensor **out);
/* A new contiguous tensor holding a copy of `data` (numel elements of dt). */
stk_status stk_tensor_from_host(stk_dtype dt, int ndim, const int64_t *shape, const void *data,
                                stk_tensor **out);
/* A tensor over memory the caller owns (e.g. a loader batch), without a
 * copy: contiguous, not freed by Stoke; the memory must outlive the tensor
 * and everything made from it that keeps it (a step scope's contents). */
stk_status stk_tensor_wrap(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape, void *data,
                           stk_tensor **out);
/* A 0-dimensional f32 tensor. */
stk_status stk_tensor_scalar(float value, stk_tensor **out);

/* Copy the elements (in row-major order, whatever the strides) to `dst`,
 * which holds `bytes` >= numel * element size. A GPU tensor's copy waits
 * for the queued work and reports its first error. */
stk_status stk_tensor_to_host(const stk_tensor *t, void *dst, size_t bytes);
/* Overwrite the elements of `t` (a view writes through) from row-major host data. */
stk_status stk_tensor_copy_from_host(stk_tensor *t, const void *src, size_t bytes);
/* Set every element to `value` (converted to the dtype). Not recorded by autograd. */
stk_status stk_tensor_fill(stk_tensor *t, double value);
/* Copy src's elements into dst (same shape, any strides, dtypes and devices). Not recorded. */
stk_status stk_tensor_copy(stk_tensor *dst, const stk_tensor *src);

void stk_tensor_retain(stk_tensor *t);
/* Drop one reference; NULL is a no-op. */
void stk_tensor_release(stk_tensor *t);

int stk_tensor_ndim(const stk_tensor *t);
int64_t stk_tensor_dim(const stk_tensor *t, int d); /* d < 0 counts from the end */
int64_t stk_tensor_stride(const stk_tensor *t, int d);
int64_t stk_tensor_numel(const stk_tensor *t);
stk_dtype stk_tensor_dtype(const stk_tensor *t);
stk_device stk_tensor_device(const stk_tensor *t);
bool stk_tensor_is_contiguous(const stk_tensor *t);
/* Pointer to the first element on the CPU (NULL for other devices). Valid
 * while the tensor lives. */
void *stk_tensor_data(const stk_tensor *t);
/* Pointer to the first element in the memory of the tensor's device (device
 * memory for a GPU tensor), for libraries that work on it (NCCL). Work
 * queued on the tensor is ordered by the device's compute stream. */
void *stk_tensor_device_data(const stk_tensor *t);
/* Shape as text, e.g. "[128, 3, 32, 32]" (thread-local buffer, valid until the next call). */
const char *stk_tensor_shape_str(const stk_tensor *t);
/* Value of a one-element f32 tensor (a GPU tensor's waits for the queued
 * work; NaN when that work failed). */
float stk_tensor_item(const stk_tensor *t);

/* Autograd flags. A leaf with requires_grad collects gradients in grad. */
void stk_tensor_set_requires_grad(stk_tensor *t, bool on);
bool stk_tensor_requires_grad(const stk_tensor *t);
/* The accumulated gradient (NULL before the first backward); owned by t. */
stk_tensor *stk_tensor_grad(const stk_tensor *t);
/* Drop the accumulated gradient (the next backward starts from zero). */
void stk_tensor_zero_grad(stk_tensor *t);
/* Give a leaf that requires grad and has none a gradient of zeros (the
 * parameters of pipeline stages another process runs, so that every
 * parameter's gradient takes part in the all-reduce). */
stk_status stk_tensor_ensure_grad(stk_tensor *t);

/* Print shape, dtype, device and (up to a few) values, for debugging. */
void stk_tensor_print(const stk_tensor *t, FILE *f);

/* Views (share storage; differentiable). A negative dim counts from the end. */
stk_status stk_view(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out);
stk_status stk_reshape(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out);
stk_status stk_permute(stk_tensor *t, const int *dims, stk_tensor **out);
stk_status stk_transpose(stk_tensor *t, int d0, int d1, stk_tensor **out);
stk_status stk_squeeze(stk_tensor *t, int dim, stk_tensor **out);
stk_status stk_unsqueeze(stk_tensor *t, int dim, stk_tensor **out);
stk_status stk_narrow(stk_tensor *t, int dim, int64_t start, int64_t length, stk_tensor **out);
/* Broadcast to `shape` (size-1 dims stretch, new leading dims added); -1 keeps a size. */
stk_status stk_expand(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out);
/* Flatten dims [start, end] into one. */
stk_status stk_flatten(stk_tensor *t, int start, int end, stk_tensor **out);

/* A contiguous tensor with t's values (t itself, retained, when already contiguous). */
stk_status stk_contiguous(stk_tensor *t, stk_tensor **out);
/* A contiguous copy (differentiable). */
stk_status stk_clone(stk_tensor *t, stk_tensor **out);
/* The same storage without history: requires_grad off, no graph. */
stk_status stk_detach(stk_tensor *t, stk_tensor **out);
/* A contiguous copy converted to dt (round to nearest even for f16/bf16). Not differentiable. */
stk_status stk_tensor_to_dtype(const stk_tensor *t, stk_dtype dt, stk_tensor **out);
/* A contiguous copy of t on `dev` (not differentiable: a new leaf). */
stk_status stk_tensor_to_device(const stk_tensor *t, stk_device dev, stk_tensor **out);
/* Move t's data to `dev` in place: every holder of t (a model, an optimizer)
 * sees the moved tensor; its gradient is dropped. t must own its contiguous
 * storage (parameters and buffers do). Errors: INVALID_ARG (a view), NOMEM. */
stk_status stk_tensor_move_to(stk_tensor *t, stk_device dev);

#ifdef __cplusplus
}
#endif
