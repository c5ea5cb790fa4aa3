/* Pinned host memory through cudaHostAlloc, and synchronous host copies on
 * the compute stream. */
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"

static stk_status pinned_alloc(void *ctx, size_t bytes, void **out, bool *locked)
{
    (void)ctx;
    *out = NULL;
    *locked = false;
    stk_cuda_ctx *cx;
    stk_status st = stk_cuda_context(&cx);
    if (st != STK_OK) return st;
    if ((st = stk_cuda_check(cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocDefault),
                             "allocating pinned host memory")) != STK_OK) {
        *out = NULL;
        return stk_error(STK_ERR_NOMEM, "%s", stk_last_error());
    }
    *locked = true; /* page-locked by the driver */
    return STK_OK;
}

static void pinned_free(void *ctx, void *ptr, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    if (ptr) cudaFreeHost(ptr);
}

static const stk_host_allocator pinned_allocator = {.alloc = pinned_alloc, .free = pinned_free};

const stk_host_allocator *stk_cuda_host_allocator(void) { return &pinned_allocator; }

static stk_status copy_sync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            const char *what)
{
    stk_cuda_ctx *cx;
    stk_status st = stk_cuda_context(&cx);
    if (st != STK_OK) return st;
    if (bytes)
        stk_cuda_note(stk_cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, cx->compute), what));
    return stk_cuda_sync();
}

stk_status stk_cuda_to_host(void *dst, const void *src, size_t bytes)
{
    return copy_sync(dst, src, bytes, cudaMemcpyDeviceToHost, "copying GPU memory to the host");
}

stk_status stk_cuda_from_host(void *dst, const void *src, size_t bytes)
{
    return copy_sync(dst, src, bytes, cudaMemcpyHostToDevice, "copying host memory to the GPU");
}
