/* Host memory for the batch ring: who allocates the pages the loader
 * decodes into, passed explicitly (loader options, copy engine) rather than
 * decided by which runtime happens to be started.
 *
 *     const stk_host_allocator *a = ce->host_memory;   // or stk_host_allocator_locked()
 *     void *ring;
 *     bool locked;
 *     if (a->alloc(a->ctx, bytes, &ring, &locked) != STK_OK) ...;
 *     ...
 *     a->free(a->ctx, ring, bytes);
 *
 * The locked-pages allocator (the CPU device's, and the loader's default):
 * page-aligned memory, mlock()ed so it is never paged out, when
 * RLIMIT_MEMLOCK allows; otherwise a one-time warning and plain memory
 * (still page-aligned). The CUDA copy engine's: cudaHostAlloc, the memory
 * its asynchronous copies need (device/copy_engine.h). Thread-safe.
 * (Device memory: device_alloc.h; asynchronous copies: copy_engine.h.)
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_host_allocator {
    void *ctx;
    /* `bytes` of page-aligned host memory, locked when possible (*locked
     * tells). Errors: STK_ERR_NOMEM. */
    stk_status (*alloc)(void *ctx, size_t bytes, void **out, bool *locked);
    /* Free memory from alloc (same size). NULL is a no-op. */
    void (*free)(void *ctx, void *ptr, size_t bytes);
} stk_host_allocator;

/* mmap'd pages, mlock()ed when the limit allows. */
const stk_host_allocator *stk_host_allocator_locked(void);

#ifdef __cplusplus
}
#endif
