/* Device memory for tensors: a caching allocator per device, with statistics.
 *
 *     void *p;
 *     if (stk_device_alloc(STK_DEVICE_CPU, bytes, &p) != STK_OK) ...;
 *     ...
 *     stk_device_free(STK_DEVICE_CPU, p, bytes);      // same size as allocated
 *     stk_mem_stats s;
 *     stk_device_mem_stats(STK_DEVICE_CPU, &s);      // allocated / reserved / peak
 *
 * Why a cache: a training step allocates and frees the same few dozen buffer
 * sizes every step. Reusing them keeps the heap flat and avoids the page
 * faults of fresh mmap()ed memory (glibc hands out large blocks with mmap).
 * Sizes are rounded up to a bin (64 B steps below 4 KiB, then 8 steps per
 * power of two, so at most 12.5% is wasted) and freed blocks are kept on a
 * free list per bin until stk_device_empty_cache() or an allocation failure.
 * The CUDA heap is the same cache over cudaMalloc (kernels/cuda/heap_cuda.c).
 * Its reuse is stream-aware: the engine runs every op on one compute stream,
 * in order, so a block freed there can serve the next allocation at once; a
 * block another stream may still be using is freed with
 * stk_device_free_after(..., event) and reused only once that event has
 * completed. Out of memory: the cache is released and the allocation
 * retried before the error (with the numbers) is returned.
 *
 * Thread-safe (one mutex per device).
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_device {
    STK_DEVICE_CPU = 0,
    STK_DEVICE_CUDA = 1,
} stk_device;

#define STK_DEVICE_COUNT 2

/* Name of a device kind ("cpu", "cuda"). */
const char *stk_device_name(stk_device dev);

typedef struct stk_mem_stats {
    uint64_t allocated;      /* bytes handed out and not yet freed (after rounding) */
    uint64_t reserved;       /* allocated + bytes cached for reuse */
    uint64_t peak_allocated; /* highest `allocated` since start or the last reset */
    uint64_t n_alloc;        /* number of allocations served */
    uint64_t n_fresh;        /* ... of which had to get new memory from the system */
} stk_mem_stats;

/* Allocate `bytes` (64-byte aligned) on `dev`. Zero bytes gives a valid
 * unique pointer. Errors: STK_ERR_NOMEM (with the numbers), STK_ERR_UNSUPPORTED
 * (no backend for `dev` in this build). */
stk_status stk_device_alloc(stk_device dev, size_t bytes, void **out);

/* Return memory from stk_device_alloc; `bytes` must be the size asked for.
 * NULL is a no-op. */
void stk_device_free(stk_device dev, void *ptr, size_t bytes);

/* Free a block that work queued on some stream may still use: it is reused
 * only once `event` (a cudaEvent_t recorded after that work; the heap owns it
 * from now on) has completed. */
void stk_device_free_after(stk_device dev, void *ptr, size_t bytes, void *event);

/* Current statistics of `dev`. */
void stk_device_mem_stats(stk_device dev, stk_mem_stats *out);

/* Start a new peak: peak_allocated = allocated. */
void stk_device_reset_peak(stk_device dev);

/* Give every cached (free) block back to the system. */
void stk_device_empty_cache(stk_device dev);

/* One size class (bin) of a device's cache, for `stoke train --memory-report`. */
typedef struct stk_mem_class {
    size_t size;           /* the bin's block size */
    uint64_t live, cached; /* blocks handed out now / kept for reuse now */
    uint64_t n_alloc;      /* allocations served from this bin */
    uint64_t n_fresh;      /* ... that needed new memory from the system */
} stk_mem_class;

/* The size classes of `dev` that served at least one allocation, smallest
 * first: up to `max` into out; returns how many there are (may exceed max). */
int stk_device_mem_classes(stk_device dev, stk_mem_class *out, int max);

/* The bin size that a request of `bytes` is rounded up to (exposed for tests). */
size_t stk_device_bin_size(size_t bytes);

#ifdef __cplusplus
}
#endif
