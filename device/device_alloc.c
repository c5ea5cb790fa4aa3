#include "device/device_alloc.h"
#include "device/device_heap_ops_impl.h"

#include <malloc.h>
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
    void *event; /* NULL, or reuse only once this device event has completed */
    struct free_block *next;
} free_block;

/* Bins: 64 of 64 B steps up to 4 KiB, then 8 per power of two up to 2^48. */
#define N_BINS (64 + 8 * (48 - 12))

typedef struct bin_counts {
    uint64_t live, cached, n_alloc, n_fresh;
} bin_counts;

typedef struct device_heap {
    pthread_mutex_t lock;
    const stk_heap_ops *ops; /* NULL: the device's backend is not loaded (yet) */
    free_block *free_list;   /* all cached blocks, most recently freed first */
    stk_mem_stats stats;
    bin_counts bins[N_BINS];
} device_heap;

/* Blocks of 1 MiB and more straight from mmap and back with munmap
 * (glibc's threshold, fixed: its default one grows to 32 MiB as blocks are
 * freed, and memory freed below it stays in the process), so that a block
 * the cache gives back leaves the resident set. Fixing it also fixes
 * glibc's trim threshold at 128 KiB, and the smaller buffers that oneDNN's
 * primitives and the engine take and free every step then went back to the
 * system at the top of the heap and came back as fresh pages: 5,700 page
 * faults a vit_tiny step (64 px, batch 32), none once up to 8 MiB of free
 * heap top may stay (perf stat -e page-faults). */
static void cpu_heap_init(void)
{
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
}

static stk_status cpu_sys_alloc(size_t size, void **out)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cpu_heap_init);
    *out = aligned_alloc(64, size);
    return *out ? STK_OK : STK_ERR_NOMEM;
}

static void cpu_describe_free(char *buf, size_t n) { buf[0] = n ? '\0' : buf[0]; }

static const stk_heap_ops cpu_heap_ops = {
    .sys_alloc = cpu_sys_alloc,
    .sys_free = free,
    .host_addressable = true,
    .bounded_cache = true,
    .describe_free = cpu_describe_free,
};

/* The CUDA heap's ops come from the backend module on the first CUDA
 * allocation (cuda_module_impl.h). */
static device_heap heaps[STK_DEVICE_COUNT] = {
    {PTHREAD_MUTEX_INITIALIZER, &cpu_heap_ops, NULL, {0}},
    {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, {0}},
};

/* The heap of `dev` with its ops, loading the CUDA module on first use.
 * Errors: STK_ERR_UNSUPPORTED (no backend: why). */
static stk_status heap_of(stk_device dev, device_heap **out)
{
    *out = NULL;
    if ((unsigned)dev >= STK_DEVICE_COUNT)
        return stk_error(STK_ERR_UNSUPPORTED, "device %d: not a device", (int)dev);
    device_heap *h = &heaps[dev];
    if (!__atomic_load_n(&h->ops, __ATOMIC_ACQUIRE)) {
        const stk_heap_ops *ops = stk_cuda_heap_ops_load();
        if (!ops) return stk_error_prefix(STK_ERR_UNSUPPORTED, "device %s: ", stk_device_name(dev));
        __atomic_store_n(&h->ops, ops, __ATOMIC_RELEASE);
    }
    *out = h;
    return STK_OK;
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(h, p, n)                                                                            \
    do {                                                                                           \
        if ((h)->ops->host_addressable) ASAN_POISON_MEMORY_REGION(p, n);                           \
    } while (0)
#define UNPOISON(h, p, n)                                                                          \
    do {                                                                                           \
        if ((h)->ops->host_addressable) ASAN_UNPOISON_MEMORY_REGION(p, n);                         \
    } while (0)
#else
#define POISON(h, p, n)   ((void)(h), (void)(p), (void)(n))
#define UNPOISON(h, p, n) ((void)(h), (void)(p), (void)(n))
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

/* The index of a bin size (stk_device_bin_size's result) in bins[]. */
static int bin_index(size_t size)
{
    if (size <= 4096) return (int)(size / 64) - 1;
    int log2 = 63 - __builtin_clzll((unsigned long long)size);
    int i = 64 + (log2 - 12) * 8 + (int)(size >> (log2 - 3)) - 8;
    return i < N_BINS ? i : N_BINS - 1;
}

static size_t bin_size_at(int i)
{
    if (i < 64) return (size_t)(i + 1) * 64;
    int log2 = 12 + (i - 64) / 8;
    return (size_t)(8 + (i - 64) % 8) << (log2 - 3);
}

static void drop_block(device_heap *h, free_block *b)
{
    h->bins[bin_index(b->size)].cached--;
    UNPOISON(h, b->ptr, b->size);
    if (b->event) h->ops->event_release(b->event);
    h->ops->sys_free(b->ptr);
    h->stats.reserved -= b->size;
    free(b);
}

/* Give every cached block back to the system, also those whose event has not
 * completed: cudaFree waits for the device's queued work before freeing. */
static void release_cache_locked(device_heap *h)
{
    free_block *b = h->free_list;
    while (b) {
        free_block *next = b->next;
        drop_block(h, b);
        b = next;
    }
    h->free_list = NULL;
}

/* At a miss (no cached block of the size asked for), keep what the heap
 * holds (in use + cached) within the peak in use plus a slack: the oldest
 * freed blocks go back to the system until `size` fits. Exact-size bins
 * otherwise keep every size a step ever freed, and a training step's sizes
 * change through it: the cache then held 6.4 GiB at a peak in use of 5.2
 * (resnet18, 224 px, batch 128; bench/README.md, "Memory"). Bounding the
 * cached bytes alone (peak / 16) instead flushed the whole cache at the
 * first miss of each step and every step's tensors came back as fresh
 * pages: mobilenet_v2 spent a fifth of its time in page faults. The slack
 * is at least 256 MiB: with 64 a small model's step (cnn, 144 MiB in use at
 * its peak) still met a third of its allocations with fresh pages, 15% of
 * the step in page faults (kernels/README.md, "bf16 on the CPU"). */
static void trim_cache_locked(device_heap *h, size_t size)
{
    uint64_t peak = h->stats.peak_allocated;
    if (h->stats.allocated + size > peak) peak = h->stats.allocated + size;
    uint64_t slack = peak / 16 > (256u << 20) ? peak / 16 : (256u << 20);
    while (h->stats.reserved + size > peak + slack && h->free_list) {
        free_block **pb = &h->free_list; /* the last: the oldest freed */
        while ((*pb)->next) pb = &(*pb)->next;
        free_block *b = *pb;
        *pb = NULL;
        drop_block(h, b);
    }
}

static bool block_ready(device_heap *h, free_block *b)
{
    if (!b->event) return true;
    if (!h->ops->event_done(b->event)) return false;
    h->ops->event_release(b->event);
    b->event = NULL;
    return true;
}

stk_status stk_device_alloc(stk_device dev, size_t bytes, void **out)
{
    *out = NULL;
    device_heap *h;
    stk_status st = heap_of(dev, &h);
    if (st != STK_OK) return st;
    size_t size = stk_device_bin_size(bytes);
    pthread_mutex_lock(&h->lock);
    void *p = NULL;
    for (free_block **pb = &h->free_list; *pb; pb = &(*pb)->next) {
        if ((*pb)->size == size && block_ready(h, *pb)) {
            free_block *b = *pb;
            *pb = b->next;
            p = b->ptr;
            free(b);
            UNPOISON(h, p, size);
            h->bins[bin_index(size)].cached--;
            break;
        }
    }
    if (!p) {
        if (h->ops->bounded_cache) trim_cache_locked(h, size);
        st = h->ops->sys_alloc(size, &p);
        if (st == STK_ERR_NOMEM && h->free_list) { /* give the cache back, try once more */
            release_cache_locked(h);
            st = h->ops->sys_alloc(size, &p);
        }
        if (st != STK_OK) {
            stk_mem_stats s = h->stats;
            pthread_mutex_unlock(&h->lock);
            if (st != STK_ERR_NOMEM) return st; /* the device itself failed: its message */
            char dev_free[128];
            h->ops->describe_free(dev_free, sizeof dev_free);
            return stk_error(STK_ERR_NOMEM,
                             "out of %s memory: cannot allocate %zu bytes (%llu allocated, "
                             "%llu reserved, cache released%s)",
                             stk_device_name(dev), bytes, (unsigned long long)s.allocated,
                             (unsigned long long)s.reserved, dev_free);
        }
        h->stats.reserved += size;
        h->stats.n_fresh++;
        h->bins[bin_index(size)].n_fresh++;
    }
    h->stats.allocated += size;
    h->stats.n_alloc++;
    h->bins[bin_index(size)].n_alloc++;
    h->bins[bin_index(size)].live++;
    if (h->stats.allocated > h->stats.peak_allocated) h->stats.peak_allocated = h->stats.allocated;
    pthread_mutex_unlock(&h->lock);
    *out = p;
    return STK_OK;
}

void stk_device_free_after(stk_device dev, void *ptr, size_t bytes, void *event)
{
    if (!ptr) return;
    device_heap *h = &heaps[dev];
    size_t size = stk_device_bin_size(bytes);
    free_block *b = malloc(sizeof *b);
    pthread_mutex_lock(&h->lock);
    h->stats.allocated -= size;
    h->bins[bin_index(size)].live--;
    if (!b) { /* cannot cache it: give it back (the system call waits for the device) */
        if (event) h->ops->event_release(event);
        h->ops->sys_free(ptr);
        h->stats.reserved -= size;
    } else {
        POISON(h, ptr, size);
        *b = (free_block){ptr, size, event, h->free_list};
        h->free_list = b;
        h->bins[bin_index(size)].cached++;
    }
    pthread_mutex_unlock(&h->lock);
}

void stk_device_free(stk_device dev, void *ptr, size_t bytes)
{
    stk_device_free_after(dev, ptr, bytes, NULL);
}

void stk_device_mem_stats(stk_device dev, stk_mem_stats *out)
{
    device_heap *h = &heaps[dev];
    pthread_mutex_lock(&h->lock);
    *out = h->stats;
    pthread_mutex_unlock(&h->lock);
}

int stk_device_mem_classes(stk_device dev, stk_mem_class *out, int max)
{
    if ((unsigned)dev >= STK_DEVICE_COUNT) return 0;
    device_heap *h = &heaps[dev];
    int n = 0;
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < N_BINS; i++) {
        const bin_counts *c = &h->bins[i];
        if (!c->n_alloc) continue;
        if (n < max)
            out[n] = (stk_mem_class){bin_size_at(i), c->live, c->cached, c->n_alloc, c->n_fresh};
        n++;
    }
    pthread_mutex_unlock(&h->lock);
    return n;
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
    if (!__atomic_load_n(&h->ops, __ATOMIC_ACQUIRE)) return; /* nothing was ever allocated */
    pthread_mutex_lock(&h->lock);
    release_cache_locked(h);
    pthread_mutex_unlock(&h->lock);
}

/* Free the CPU cache at exit so that LeakSanitizer reports only real leaks.
 * (Not the GPU's: at exit the CUDA runtime may already be torn down, and the
 * driver reclaims device memory with the process.) */
__attribute__((destructor)) static void release_cpu_cache(void)
{
    stk_device_empty_cache(STK_DEVICE_CPU);
}
