/* Pinned host memory through cudaHostAlloc, and synchronous host copies on
 * the compute stream. */
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"

#include <pthread.h>

/* The pinned blocks handed out, so that stk_host_free_pinned knows which
 * free to call (the loader's ring has a handful). */
#define MAX_PINNED 256
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *pinned[MAX_PINNED];

bool stk_cuda_host_alloc(size_t bytes, void **out)
{
    if (!stk_cuda_started()) return false;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < MAX_PINNED && slot < 0; i++)
        if (!pinned[i]) slot = i;
    void *p = NULL;
    if (slot >= 0 && cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess)
        pinned[slot] = p;
    else
        cudaGetLastError(); /* fall back to locked pages */
    pthread_mutex_unlock(&lock);
    *out = p;
    return p != NULL;
}

bool stk_cuda_host_free(void *ptr)
{
    bool found = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED && !found; i++)
        if (pinned[i] == ptr) {
            pinned[i] = NULL;
            found = true;
        }
    pthread_mutex_unlock(&lock);
    if (found) cudaFreeHost(ptr);
    return found;
}

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
