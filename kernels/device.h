/* The device runtime, as far as the loader needs it: pinned host memory for
 * the batch ring. (Device memory: device_alloc.h; asynchronous copies:
 * copy_engine.h.)
 *
 *     void *ring;
 *     bool locked;
 *     if (stk_host_alloc_pinned(bytes, &ring, &locked) != STK_OK) ...;
 *     ...
 *     stk_host_free_pinned(ring, bytes);
 *
 * CPU implementation: page-aligned memory, mlock()ed so it is never paged
 * out, when RLIMIT_MEMLOCK allows; otherwise a one-time warning and plain
 * memory (still page-aligned). Once the CUDA context exists (training on
 * a GPU), cudaHostAlloc, so the H2D stage's copies run asynchronously.
 * Thread-safe.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>

/* Allocate `bytes` of page-aligned host memory, locked when possible
 * (*locked tells). Errors: STK_ERR_NOMEM. */
stk_status stk_host_alloc_pinned(size_t bytes, void **out, bool *locked);

/* Free memory from stk_host_alloc_pinned (same size). NULL is a no-op. */
void stk_host_free_pinned(void *ptr, size_t bytes);
