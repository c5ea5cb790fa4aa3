/* How the caching allocator (device_alloc.c) gets memory from, and returns
 * it to, one device kind: the CPU's aligned_alloc/free here, CUDA's
 * cudaMalloc/cudaFree and events in cuda/heap_cuda.c. Private to kernels/. */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_heap_ops {
    /* Fresh memory of `size` bytes (a bin size, 64-byte aligned at least). */
    stk_status (*sys_alloc)(size_t size, void **out);
    void (*sys_free)(void *ptr);
    /* A block freed with an event (stk_device_free_after) is reused only once
     * its event has completed; `event_done` asks, `event_release` drops it. */
    bool (*event_done)(void *event);
    void (*event_release)(void *event);
    /* AddressSanitizer may poison cached blocks: the memory is host memory and
     * nothing but the host uses it after a free (the CPU). */
    bool host_addressable;
    /* The cache gives back blocks it could not use at a miss (the CPU: the
     * resident set stays near the peak in use); else it keeps them (CUDA:
     * cudaMalloc and cudaFree are slow and synchronise). */
    bool bounded_cache;
    /* One line about the device's own free memory, for out-of-memory messages. */
    void (*describe_free)(char *buf, size_t n);
} stk_heap_ops;

/* Inside the CUDA backend module (cuda/heap_cuda.c). */
extern const stk_heap_ops stk_cuda_heap_ops;

/* The same ops seen from the host: the module's, loaded on the first call
 * (cuda_module.c). NULL when it cannot be loaded; the message says why. */
const stk_heap_ops *stk_cuda_heap_ops_load(void);

#ifdef __cplusplus
}
#endif
