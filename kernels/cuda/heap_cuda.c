/* CUDA memory for the caching allocator (device/device_alloc.c):
 * cudaMalloc/cudaFree, and events for blocks freed while another stream may
 * still use them. */
#include "kernels/cuda/context.h"
#include "device/device_heap_ops_impl.h"

#include <stdio.h>

static stk_status cuda_sys_alloc(size_t size, void **out)
{
    stk_cuda_ctx *cx;
    stk_status st = stk_cuda_context(&cx);
    if (st != STK_OK) return st;
    cudaError_t e = cudaMalloc(out, size);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the error so later calls do not report it */
        *out = NULL;
        return stk_cuda_check(e, "cudaMalloc");
    }
    return STK_OK;
}

static void cuda_sys_free(void *ptr) { cudaFree(ptr); }

static bool cuda_event_done(void *event)
{
    return cudaEventQuery((cudaEvent_t)event) == cudaSuccess;
}

static void cuda_event_release(void *event) { cudaEventDestroy((cudaEvent_t)event); }

static void cuda_describe_free(char *buf, size_t n)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) == cudaSuccess)
        snprintf(buf, n, "; the GPU has %zu MiB free of %zu MiB", free_b >> 20, total >> 20);
    else
        snprintf(buf, n, "%s", "");
}

const stk_heap_ops stk_cuda_heap_ops = {
    .sys_alloc = cuda_sys_alloc,
    .sys_free = cuda_sys_free,
    .event_done = cuda_event_done,
    .event_release = cuda_event_release,
    /* Not poisoned even in the host emulation, where device memory is host
     * memory: a block freed on the host may still be used by work queued on
     * the stream before the free (stream-ordered reuse is the point of the
     * cache), so poisoning at host time reports correct programs. */
    .host_addressable = false,
    .describe_free = cuda_describe_free,
};
