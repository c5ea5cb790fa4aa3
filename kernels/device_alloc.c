#include "kernels/device_alloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A free block waiting for reuse; the list node lives in a separate small
 * allocation so that freed memory is never written to (ASan then still
 * catches a use after free of a cached block: see the poison calls). */
typedef struct free_block {
    void *ptr;
    size_t size; /* bin size */
    struct free_block *next;
} free_block;

typedef struct device_heap {
    pthread_mutex_t lock;
    free_block *free_list; /* all cached blocks, most recently freed first */
    stk_mem_stats stats;
} device_heap;

static device_heap heaps[STK_DEVICE_COUNT] = {
    {PTHREAD_MUTEX_INITIALIZER, NULL, {0}},
    {PTHREAD_MUTEX_INITIALIZER, NULL, {0}},
};

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

const char *stk_device_name(stk_device dev)
{
    switch (dev) {
    case STK_DEVICE_CPU: return "cpu";
    case STK_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

size_t stk_device_bin_size(size_t bytes)
{
    if (bytes <= 4096) return bytes ? (bytes + 63) & ~(size_t)63 : 64;
    /* 8 bins per power of two: step = 2^(floor(log2(bytes)) - 3). */
    int log2 = 63 - __builtin_clzll((unsigned long long)bytes);
    size_t step = (size_t)1 << (log2 - 3);
    return (bytes + step - 1) & ~(step - 1);
}

static void release_cache_locked(device_heap *h)
{
    free_block *b = h->free_list;
    while (b) {
        free_block *next = b->next;
        UNPOISON(b->ptr, b->size);
        free(b->ptr);
        h->stats.reserved -= b->size;
        free(b);
        b = next;
    }
    h->free_list = NULL;
}

stk_status stk_device_alloc(stk_device dev, size_t bytes, void **out)
{
    *out = NULL;
    if (dev != STK_DEVICE_CPU)
        return stk_error(STK_ERR_UNSUPPORTED, "device %s: no backend for it in this build",
                         stk_device_name(dev));
    device_heap *h = &heaps[dev];
    size_t size = stk_device_bin_size(bytes);
    pthread_mutex_lock(&h->lock);
    void *p = NULL;
    for (free_block **pb = &h->free_list; *pb; pb = &(*pb)->next) {
        if ((*pb)->size == size) {
            free_block *b = *pb;
            *pb = b->next;
            p = b->ptr;
            free(b);
            UNPOISON(p, size);
            break;
        }
    }
    if (!p) {
        p = aligned_alloc(64, size);
        if (!p && h->free_list) { /* give the cache back and try once more */
            release_cache_locked(h);
            p = aligned_alloc(64, size);
        }
        if (!p) {
            stk_mem_stats s = h->stats;
            pthread_mutex_unlock(&h->lock);
            return stk_error(STK_ERR_NOMEM,
                             "out of %s memory: cannot allocate %zu bytes (%llu allocated, "
                             "%llu reserved)",
                             stk_device_name(dev), bytes, (unsigned long long)s.allocated,
                             (unsigned long long)s.reserved);
        }
        h->stats.reserved += size;
        h->stats.n_fresh++;
    }
    h->stats.allocated += size;
    h->stats.n_alloc++;
    if (h->stats.allocated > h->stats.peak_allocated) h->stats.peak_allocated = h->stats.allocated;
    pthread_mutex_unlock(&h->lock);
    *out = p;
    return STK_OK;
}

void stk_device_free(stk_device dev, void *ptr, size_t bytes)
{
    if (!ptr) return;
    device_heap *h = &heaps[dev];
    size_t size = stk_device_bin_size(bytes);
    free_block *b = malloc(sizeof *b);
    pthread_mutex_lock(&h->lock);
    h->stats.allocated -= size;
    if (!b) { /* cannot cache it: give it back */
        free(ptr);
        h->stats.reserved -= size;
    } else {
        POISON(ptr, size);
        *b = (free_block){ptr, size, h->free_list};
        h->free_list = b;
    }
    pthread_mutex_unlock(&h->lock);
}

void stk_device_mem_stats(stk_device dev, stk_mem_stats *out)
{
    device_heap *h = &heaps[dev];
    pthread_mutex_lock(&h->lock);
    *out = h->stats;
    pthread_mutex_unlock(&h->lock);
}

void stk_device_reset_peak(stk_device dev)
{
    device_heap *h = &heaps[dev];
    pthread_mutex_lock(&h->lock);
    h->stats.peak_allocated = h->stats.allocated;
    pthread_mutex_unlock(&h->lock);
}

void stk_device_empty_cache(stk_device dev)
{
    device_heap *h = &heaps[dev];
    pthread_mutex_lock(&h->lock);
    release_cache_locked(h);
    pthread_mutex_unlock(&h->lock);
}

/* Free the cache at exit so that LeakSanitizer reports only real leaks. */
__attribute__((destructor)) static void release_all_caches(void)
{
    for (int d = 0; d < STK_DEVICE_COUNT; d++) stk_device_empty_cache((stk_device)d);
}
