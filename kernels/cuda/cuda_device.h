/* What the rest of Stoke (loader, tools, tests) uses of the CUDA backend
 * without including CUDA headers. Present in builds with the CUDA backend
 * (STOKE_CUDA_BACKEND); kernels/backend.h's stk_backend_get(STK_DEVICE_CUDA)
 * is the op table itself. */
#pragma once

#include "common/status.h"
#include "kernels/copy_engine.h"
#include "kernels/device.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Use GPU `device` (--device cuda:N), before the context is created.
 * Errors: INVALID_ARG (negative, or the context already uses another). */
stk_status stk_cuda_select(int device);

/* The copy engine on the context's copy stream (cuda/copy_engine_cuda.c).
 * Errors: STK_ERR_CUDA (no usable device: the message says why). */
stk_status stk_copy_engine_cuda(const stk_copy_engine **out);

/* Host memory the GPU can copy from asynchronously (cudaHostAlloc, through
 * the context): the CUDA copy engine's host_memory. */
const stk_host_allocator *stk_cuda_host_allocator(void);

/* Copies between host memory and device memory on the compute stream,
 * waiting for completion (used by the engine's host copies, item() and
 * checkpoints). Errors: STK_ERR_CUDA, including a sticky error of earlier
 * asynchronous work. */
stk_status stk_cuda_to_host(void *dst, const void *src, size_t bytes);
stk_status stk_cuda_from_host(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
