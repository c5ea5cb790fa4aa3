/* Private: the tensor and storage structs, and helpers the ops share.
 * Included by the engine sources and by tests; not part of the public API. */
#pragma once

#include "engine/autograd.h"
#include "engine/tensor.h"
#include "kernels/backend.h"

typedef struct stk_node stk_node;

typedef struct stk_storage {
    void *data;
    size_t bytes;
    stk_device device;
    int refs;
    bool borrowed; /* stk_tensor_wrap: the caller's memory, never freed here */
    /* for out-of-memory messages (tensor_registry.c): the op that made it
     * (the first autograd node attached to a tensor on it), its first shape */
    const char *made_by;
    int ndim;
    int64_t shape[STK_MAX_DIMS];
    stk_dtype dtype;
    struct stk_storage *live_prev, *live_next; /* the live list, under its lock */
} stk_storage;

/* Storages the engine allocated and has not freed, per device: added by
 * eng_tensor_new, removed when the last reference goes. Thread-safe. */
void eng_live_add(stk_storage *s);
void eng_live_remove(stk_storage *s);
/* "; largest live tensors: 25.7 MB conv2d [128, 64, 32, 32] f32, ...; by op:
 * conv2d 102.8 MB (4), ..." for `dev` into buf (empty when none). */
void eng_live_describe(stk_device dev, char *buf, size_t n);

struct stk_tensor {
    int refs;
    int ndim;
    int64_t shape[STK_MAX_DIMS];
    int64_t strides[STK_MAX_DIMS]; /* elements */
    int64_t offset;                /* elements from storage->data */
    stk_dtype dtype;
    stk_storage *storage;
    bool requires_grad; /* leaves: set by the user; results: set when grad_fn is */
    stk_tensor *grad;   /* leaves only: accumulated gradient (untracked, owned) */
    stk_node *grad_fn;  /* the node that made this tensor (owned), NULL for leaves */
    /* leaves: stk_tensor_set_grad_hook's callback, and the backward pass's
     * count of gradient contributions still to come (valid in pass `pending_pass`) */
    stk_grad_hook grad_hook;
    void *grad_hook_ctx;
    int pending;
    uint64_t pending_pass;
};

/* A new untracked contiguous tensor (the caller owns its one reference);
 * zero-filled when `zero`. */
stk_status eng_tensor_new(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape, bool zero,
                          stk_tensor **out);
/* A new untracked tensor with t's shape, dtype and device. */
stk_status eng_tensor_new_like(const stk_tensor *t, bool zero, stk_tensor **out);
/* An untracked view of t's storage (no autograd). */
stk_status eng_tensor_alias(const stk_tensor *t, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset, stk_tensor **out);
/* A contiguous untracked tensor with t's values: t itself retained when it is
 * already contiguous, else a copy. Not recorded by autograd. */
stk_status eng_tensor_contiguous_raw(stk_tensor *t, stk_tensor **out);

/* Hand a new tensor to the innermost step scope when one is active (the
 * scope then owns the reference); returns t. */
stk_tensor *eng_tensor_track(stk_tensor *t);

/* f32 data pointer (device memory for other devices). */
static inline float *tensor_f32(const stk_tensor *t)
{
    return (float *)t->storage->data + t->offset;
}
static inline void *tensor_ptr(const stk_tensor *t)
{
    return (char *)t->storage->data + (size_t)t->offset * stk_dtype_size(t->dtype);
}

int64_t eng_shape_numel(int ndim, const int64_t *shape);
bool eng_shape_equal(const stk_tensor *a, const stk_tensor *b);
/* Normalise a possibly negative dimension index; -1 when out of range. */
int eng_dim_index(int d, int ndim);

/* Checks shared by the ops; each returns STK_OK or sets a message naming `op`. */
stk_status eng_check_f32(const char *op, const stk_tensor *t, const char *what);
stk_status eng_check_same_device(const char *op, const stk_tensor *a, const stk_tensor *b);
stk_status eng_backend_of(const stk_tensor *t, const stk_backend **be);
