/* The CUDA copy engine behind device/copy_engine.h, which the loader's H2D
 * stage (loader/h2d.c) drives: each batch is copied with cudaMemcpyAsync on
 * the context's copy stream, an event is recorded after it, and the compute
 * stream is made to wait on that event, so every op queued afterwards sees
 * the whole batch while the copy of the next batch overlaps the current
 * step. The copy stream in turn waits for the compute work queued before the
 * copy: the device buffer it overwrites held the batch of an earlier step. `wait` blocks the host
 * until a copy's event has completed: only then may the loader refill that pinned buffer.
 * A consumer on a stream of its own (the Python package's DLPack views)
 * marks a buffer it released with release_after; the next copy into that
 * buffer waits for the mark on the copy stream. */
#include "device/copy_engine.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"

#include "common/clock.h"
#include "common/trace.h"

#include <pthread.h>
#include <stdio.h>

#define EVENTS 64 /* tickets map to events modulo this; older tickets wait on newer copies */
#define FENCES 64 /* device buffers released by consumers on other streams */

/* release_after's mark: the consumer's work on `dst`, recorded on its stream */
typedef struct fence {
    void *dst;
    cudaEvent_t done;
    bool armed; /* recorded and not yet waited for by a copy */
} fence;

typedef struct cuda_copy_engine {
    stk_cuda_ctx *cx;
    cudaEvent_t events[EVENTS];
    cudaEvent_t compute_done; /* the compute work queued before a copy */
    uint64_t issued;          /* tickets handed out */
    /* --trace: timing events around each copy (only while tracing), and an
     * anchor event whose completion was seen on the host clock, so device
     * times become host times: anchor_ns + (event - anchor) */
    cudaEvent_t t_start[EVENTS], t_end[EVENTS], anchor;
    uint64_t timed[EVENTS]; /* the ticket each slot's timing events belong to (0: none) */
    uint64_t anchor_ns;     /* 0: no anchor yet */
    bool timing_ready;
    pthread_mutex_t fence_mu; /* release_after may come from any thread */
    fence fences[FENCES];
} cuda_copy_engine;

/* The timing events, made on the first traced copy. */
static bool timing_setup(cuda_copy_engine *ce)
{
    if (ce->timing_ready) return true;
    for (int i = 0; i < EVENTS; i++)
        if (cudaEventCreate(&ce->t_start[i]) != cudaSuccess ||
            cudaEventCreate(&ce->t_end[i]) != cudaSuccess)
            return false;
    if (cudaEventCreate(&ce->anchor) != cudaSuccess) return false;
    /* the anchor: recorded and waited for now, its host time read right after */
    if (cudaEventRecord(ce->anchor, ce->cx->copy) != cudaSuccess ||
        cudaEventSynchronize(ce->anchor) != cudaSuccess)
        return false;
    ce->anchor_ns = stk_clock_ns();
    ce->timing_ready = true;
    return true;
}

static bool ce_copy_times(void *ctx, uint64_t ticket, uint64_t *start_ns, uint64_t *end_ns)
{
    cuda_copy_engine *ce = ctx;
    int k = (int)(ticket % EVENTS);
    if (!ce->timing_ready || ce->timed[k] != ticket) return false;
    float a = 0, b = 0;
    if (cudaEventElapsedTime(&a, ce->anchor, ce->t_start[k]) != cudaSuccess ||
        cudaEventElapsedTime(&b, ce->anchor, ce->t_end[k]) != cudaSuccess)
        return false;
    *start_ns = ce->anchor_ns + (uint64_t)((double)a * 1e6);
    *end_ns = ce->anchor_ns + (uint64_t)((double)b * 1e6);
    return true;
}

static stk_status ce_alloc(void *ctx, size_t bytes, void **out)
{
    (void)ctx;
    return stk_device_alloc(STK_DEVICE_CUDA, bytes, out);
}

static void ce_free(void *ctx, void *ptr, size_t bytes)
{
    (void)ctx;
    stk_device_free(STK_DEVICE_CUDA, ptr, bytes);
}

static stk_status ce_release_after(void *ctx, void *dst, uintptr_t stream)
{
    cuda_copy_engine *ce = ctx;
    stk_status st = STK_OK;
    pthread_mutex_lock(&ce->fence_mu);
    fence *f = NULL;
    for (int i = 0; i < FENCES && !f; i++)
        if (ce->fences[i].dst == dst) f = &ce->fences[i];
    for (int i = 0; i < FENCES && !f; i++)
        if (!ce->fences[i].dst) {
            f = &ce->fences[i];
            st = stk_cuda_check(cudaEventCreateWithFlags(&f->done, cudaEventDisableTiming),
                                "creating a release event");
            if (st == STK_OK) f->dst = dst;
        }
    if (!f && st == STK_OK)
        st = stk_error(STK_ERR_INVALID_ARG, "more than %d device buffers released on streams",
                       FENCES);
    if (st == STK_OK && (st = stk_cuda_check(cudaEventRecord(f->done, (cudaStream_t)stream),
                                             "marking the consumer's stream")) == STK_OK)
        f->armed = true;
    pthread_mutex_unlock(&ce->fence_mu);
    return st;
}

/* The copy stream waits for a consumer's release of dst (ce_release_after). */
static stk_status wait_release(cuda_copy_engine *ce, void *dst)
{
    stk_status st = STK_OK;
    pthread_mutex_lock(&ce->fence_mu);
    for (int i = 0; i < FENCES; i++)
        if (ce->fences[i].dst == dst && ce->fences[i].armed) {
            st = stk_cuda_check(cudaStreamWaitEvent(ce->cx->copy, ce->fences[i].done, 0),
                                "cudaStreamWaitEvent");
            ce->fences[i].armed = false;
        }
    pthread_mutex_unlock(&ce->fence_mu);
    return st;
}

static stk_status ce_copy_async(void *ctx, void *dst, const void *src, size_t bytes,
                                uint64_t *ticket)
{
    cuda_copy_engine *ce = ctx;
    uint64_t t = ++ce->issued;
    cudaEvent_t ev = ce->events[t % EVENTS];
    stk_status st = wait_release(ce, dst);
    if (st != STK_OK) return st;
    /* the destination buffer held an earlier batch: the steps queued on it must finish first */
    if ((st = stk_cuda_check(cudaEventRecord(ce->compute_done, ce->cx->compute),
                             "cudaEventRecord")) != STK_OK ||
        (st = stk_cuda_check(cudaStreamWaitEvent(ce->cx->copy, ce->compute_done, 0),
                             "cudaStreamWaitEvent")) != STK_OK)
        return st;
    int k = (int)(t % EVENTS);
    bool timed = stk_trace_active() && timing_setup(ce);
    ce->timed[k] = timed ? t : 0;
    if (timed && (st = stk_cuda_check(cudaEventRecord(ce->t_start[k], ce->cx->copy),
                                      "cudaEventRecord")) != STK_OK)
        return st;
    if ((st = stk_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ce->cx->copy),
                             "copying a batch to the GPU")) != STK_OK ||
        (timed && (st = stk_cuda_check(cudaEventRecord(ce->t_end[k], ce->cx->copy),
                                       "cudaEventRecord")) != STK_OK) ||
        (st = stk_cuda_check(cudaEventRecord(ev, ce->cx->copy), "cudaEventRecord")) != STK_OK ||
        (st = stk_cuda_check(cudaStreamWaitEvent(ce->cx->compute, ev, 0), "cudaStreamWaitEvent")) !=
            STK_OK)
        return st;
    *ticket = t;
    return STK_OK;
}

static stk_status ce_wait(void *ctx, uint64_t ticket)
{
    cuda_copy_engine *ce = ctx;
    return stk_cuda_check(cudaEventSynchronize(ce->events[ticket % EVENTS]),
                          "waiting for a batch copy");
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cuda_copy_engine engine;
static stk_copy_engine table;
static stk_status init_status;
static char init_error[STK_ERROR_MAX];

static void init_once(void)
{
    pthread_mutex_init(&engine.fence_mu, NULL);
    stk_status st = stk_cuda_context(&engine.cx);
    for (int i = 0; i < EVENTS && st == STK_OK; i++)
        st = stk_cuda_check(cudaEventCreateWithFlags(&engine.events[i], cudaEventDisableTiming),
                            "creating copy events");
    if (st == STK_OK)
        st = stk_cuda_check(cudaEventCreateWithFlags(&engine.compute_done, cudaEventDisableTiming),
                            "creating copy events");
    init_status = st;
    if (st != STK_OK) {
        snprintf(init_error, sizeof init_error, "%s", stk_last_error());
        return;
    }
    table = (stk_copy_engine){.ctx = &engine,
                              .device = STK_DEVICE_CUDA,
                              .in_place = false,
                              .host_memory = stk_cuda_host_allocator(),
                              .alloc = ce_alloc,
                              .free = ce_free,
                              .copy_async = ce_copy_async,
                              .wait = ce_wait,
                              .copy_times = ce_copy_times,
                              .release_after = ce_release_after};
}

stk_status stk_copy_engine_cuda(const stk_copy_engine **out)
{
    *out = NULL;
    pthread_once(&once, init_once);
    if (init_status != STK_OK) return stk_error(init_status, "%s", init_error);
    *out = &table;
    return STK_OK;
}
