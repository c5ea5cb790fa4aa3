/* Asynchronous host-to-device copies: the part of the device runtime the
 * loader's H2D stage (loader/h2d.h) is written against, so that the CPU
 * device, the CUDA backend (cudaMemcpyAsync on a copy stream, events) and
 * the tests' delayed-copy device all serve the same stage unchanged.
 *
 *     const stk_copy_engine *ce = stk_copy_engine_cpu();
 *     if (!ce->in_place) {
 *         uint64_t t;
 *         ce->copy_async(ce->ctx, dev, host, bytes, &t);
 *         ...                                  // other work overlaps the copy
 *         ce->wait(ce->ctx, t);                // host memory may be reused now
 *     }
 *
 * Contract: copies complete in the order they were started; `wait` blocks
 * until the copy with that ticket (and so every earlier one) has completed;
 * the source must stay untouched until then. A copy starts only after the
 * device work queued before copy_async (which may still read the
 * destination's previous batch) has finished, and device work queued after
 * copy_async sees the copied data. Called from one thread.
 */
#pragma once

#include "common/status.h"
#include "device/device.h"
#include "device/device_alloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_copy_engine {
    void *ctx;
    stk_device device;
    /* true: the device reads host memory directly (the CPU): no copies, no buffers */
    bool in_place;
    /* Host memory to copy from: what the loader's batch ring should be made
     * of (CUDA: cudaHostAlloc, without which copies are not asynchronous). */
    const stk_host_allocator *host_memory;
    /* Device buffers for the stage. */
    stk_status (*alloc)(void *ctx, size_t bytes, void **out);
    void (*free)(void *ctx, void *ptr, size_t bytes);
    /* Start copying `bytes` from host `src` to device `dst`; *ticket names the copy. */
    stk_status (*copy_async)(void *ctx, void *dst, const void *src, size_t bytes, uint64_t *ticket);
    /* Block until copy `ticket` has completed. */
    stk_status (*wait)(void *ctx, uint64_t ticket);
    /* For a timeline (common/trace.h): when copy `ticket` ran on the device,
     * on the host's CLOCK_MONOTONIC in ns, measured by device events; false
     * when it was not timed (tracing was off when it started, or 64 copies
     * have started since). Valid after wait(ticket). NULL: the device does
     * not time copies (the CPU: there are none). */
    bool (*copy_times)(void *ctx, uint64_t ticket, uint64_t *start_ns, uint64_t *end_ns);
    /* A consumer on a stream of its own (DLPack's stream argument: CUDA's
     * cudaStream_t as an integer, 1 the legacy default stream, 2 the
     * per-thread one) is done with device buffer `dst` once the work queued
     * on `stream` so far has run: the next copy_async into `dst` waits for
     * that work, on the device. Callable from any thread. NULL: the device
     * has no streams (the CPU). */
    stk_status (*release_after)(void *ctx, void *dst, uintptr_t stream);
} stk_copy_engine;

/* The CPU device: in place (the engine computes on the pinned host batch). */
const stk_copy_engine *stk_copy_engine_cpu(void);

/* Make device `dev` ready (for CUDA: GPU `index`, its context, streams and
 * libraries) and give its copy engine. Call it before opening the loader
 * that feeds the device, and pass the engine's host_memory in the loader's
 * options. Errors: STK_ERR_UNSUPPORTED (no usable GPU, or a build without
 * the CUDA backend: the message says why), STK_ERR_INVALID_ARG (index out
 * of range, or another GPU already in use), STK_ERR_CUDA. */
stk_status stk_copy_engine_open(stk_device dev, int index, const stk_copy_engine **out);

#ifdef __cplusplus
}
#endif
