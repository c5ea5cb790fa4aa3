/* The CUDA device runtime: one context per process (device 0 or the one
 * chosen with stk_cuda_select), its streams and library handles, and how
 * CUDA, cuBLAS and cuDNN errors become stk_status.
 *
 *     stk_cuda_ctx *cx;
 *     if (stk_cuda_context(&cx) != STK_OK) return ...;    // message says why
 *     stk_cuda_unary(op, n, x, y, 0.f, cx->compute);       // queued, asynchronous
 *     stk_status st = stk_cuda_sync();                      // waits; first error
 *
 * Streams: every op of the engine runs on `compute`, in order, so memory
 * freed by one op and reused by the next needs no synchronisation (the
 * caching allocator relies on it); host-to-device batch copies run on
 * `copy` and the compute stream waits on their events (cuda/copy_engine.c).
 *
 * Errors: the backend's void kernels cannot return one, so the first error
 * of an asynchronous call is kept ("sticky") and returned by the next
 * stk_cuda_sync() (the engine syncs when it reads results on the host).
 * Called from one thread, except stk_cuda_context which is thread-safe.
 */
#pragma once

#include "common/status.h"
#include "kernels/cuda/cuda_device.h" /* stk_cuda_select */

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_cuda_ctx {
    int device;
    cudaStream_t compute, copy;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
} stk_cuda_ctx;

/* The context, created on first use. Errors: STK_ERR_CUDA (no driver, no
 * device, a library that fails to start), the same on every later call. */
stk_status stk_cuda_context(stk_cuda_ctx **out);

/* true once the context has been created successfully (does not create it). */
bool stk_cuda_started(void);

/* Wait for the compute stream; returns the first error since the last sync. */
stk_status stk_cuda_sync(void);

/* Turn library results into stk_status (STK_OK on success) with `what` in
 * the message; stk_cuda_note keeps the first failure for stk_cuda_sync. */
stk_status stk_cuda_check(cudaError_t e, const char *what);
stk_status stk_cublas_check(cublasStatus_t e, const char *what);
stk_status stk_cudnn_check(cudnnStatus_t e, const char *what);
void stk_cuda_note(stk_status st);

#ifdef __cplusplus
}
#endif
