/* The CUDA backend module's own functions behind its table
 * (device/cuda_module_impl.h, filled in module_table.c) that need no CUDA
 * header to declare. The unit tests that link the backend's objects in
 * call some directly (test_h2d: the copy engine). */
#pragma once

#include "common/status.h"
#include "device/copy_engine.h"
#include "device/device.h"
#include "device/device_collective.h"
#include "device/device_query.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Use GPU `device` (--device cuda:N), before the context is created.
 * Errors: INVALID_ARG (negative, or the context already uses another). */
stk_status stk_cuda_select(int device);

/* The runtime, driver and GPUs (query.c); never fails. */
void stk_cuda_query_runtime(stk_cuda_report *r);

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

/* device/device_collective.h on NCCL (collective_nccl.c; builds with NCCL). */
const char *stk_nccl_library(void);
stk_status stk_nccl_make_id(uint8_t id[STK_DEVICE_COMM_ID_BYTES]);
stk_status stk_nccl_open(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                         stk_device_comm **out);
stk_status stk_nccl_copy(stk_device_comm *c, void *dst, const void *src, size_t bytes);
stk_status stk_nccl_allreduce_avg(stk_device_comm *c, float *buf, size_t n);
stk_status stk_nccl_finish(stk_device_comm *c, double timeout_s);
double stk_nccl_seconds(const stk_device_comm *c);
void stk_nccl_close(stk_device_comm *c);

#ifdef __cplusplus
}
#endif
