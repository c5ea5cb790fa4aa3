/* The CUDA runtime subset Stoke calls, on the host (README.md says what
 * this proves and what it cannot). Streams are worker threads draining FIFO
 * queues; events count recordings and completions; device memory is host
 * memory that the runtime tracks, so copies of the wrong kind are refused
 * as the real runtime would fault on them. One emulated GPU. */
#include "host_cuda.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct task {
    void (*fn)(void *);
    void *arg;
    struct task *next;
} task;

struct CUstream_st {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    task *head, *tail;
    bool busy, stop;
    int held;
    struct CUstream_st *next_stream; /* all live streams */
};

struct CUevent_st {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded, completed;
    double completed_at; /* seconds (CLOCK_MONOTONIC): cudaEventElapsedTime */
};

static pthread_mutex_t global = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *streams;
static _Thread_local cudaError_t last_error = cudaSuccess;

/* ---- misuse --------------------------------------------------------------- */

void stk_host_cuda_misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "host CUDA: API misuse: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

/* ---- memory registry -------------------------------------------------------- */

typedef struct block {
    char *p;
    size_t n;
    bool device; /* else pinned host */
} block;

static block *blocks;
static size_t n_blocks, cap_blocks, device_bytes;

static size_t memory_limit(void)
{
    const char *e = getenv("STOKE_HOST_CUDA_MEM_MB"); /* tests shrink it to provoke OOM */
    return e ? (size_t)strtoull(e, NULL, 10) << 20 : (size_t)4 << 30;
}

static bool add_block(void *p, size_t n, bool device)
{
    if (n_blocks == cap_blocks) {
        size_t cap = cap_blocks ? 2 * cap_blocks : 64;
        block *b = realloc(blocks, cap * sizeof *b);
        if (!b) return false;
        blocks = b, cap_blocks = cap;
    }
    blocks[n_blocks++] = (block){p, n, device};
    return true;
}

static const block *find_block(const void *p, size_t bytes)
{
    const char *c = p;
    for (size_t i = 0; i < n_blocks; i++)
        if (c >= blocks[i].p && c + bytes <= blocks[i].p + blocks[i].n) return &blocks[i];
    return NULL;
}

bool stk_host_cuda_is_device(const void *p, size_t bytes)
{
    pthread_mutex_lock(&global);
    const block *b = find_block(p, bytes);
    bool dev = b && b->device;
    pthread_mutex_unlock(&global);
    return dev;
}

static bool is_pinned(const void *p, size_t bytes)
{
    pthread_mutex_lock(&global);
    const block *b = find_block(p, bytes);
    bool pinned = b && !b->device;
    pthread_mutex_unlock(&global);
    return pinned;
}

static cudaError_t alloc_block(void **out, size_t size, bool device, size_t align)
{
    *out = NULL;
    size_t n = (size + align - 1) / align * align;
    pthread_mutex_lock(&global);
    if (device && device_bytes + n > memory_limit()) {
        pthread_mutex_unlock(&global);
        return fail(cudaErrorMemoryAllocation);
    }
    void *p = aligned_alloc(align, n ? n : align);
    if (!p || !add_block(p, n ? n : align, device)) {
        pthread_mutex_unlock(&global);
        free(p);
        return fail(cudaErrorMemoryAllocation);
    }
    if (device) device_bytes += n ? n : align;
    pthread_mutex_unlock(&global);
    *out = p;
    return cudaSuccess;
}

static cudaError_t free_block(void *p, bool device)
{
    if (!p) return cudaSuccess;
    cudaDeviceSynchronize(); /* as cudaFree: waits for queued work */
    pthread_mutex_lock(&global);
    for (size_t i = 0; i < n_blocks; i++)
        if (blocks[i].p == p && blocks[i].device == device) {
            if (device) device_bytes -= blocks[i].n;
            blocks[i] = blocks[--n_blocks];
            pthread_mutex_unlock(&global);
            free(p);
            return cudaSuccess;
        }
    pthread_mutex_unlock(&global);
    stk_host_cuda_misuse("%s(%p): not a pointer from %s", device ? "cudaFree" : "cudaFreeHost", p,
                         device ? "cudaMalloc" : "cudaHostAlloc");
    return fail(cudaErrorInvalidValue);
}

cudaError_t cudaMalloc(void **devPtr, size_t size) { return alloc_block(devPtr, size, true, 256); }
cudaError_t cudaFree(void *devPtr) { return free_block(devPtr, true); }

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc_block(pHost, size, false, 4096);
}

cudaError_t cudaFreeHost(void *ptr) { return free_block(ptr, false); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    pthread_mutex_lock(&global);
    *total = memory_limit();
    *free_bytes = *total > device_bytes ? *total - device_bytes : 0;
    pthread_mutex_unlock(&global);
    return cudaSuccess;
}

/* ---- streams ---------------------------------------------------------------- */

static void *worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while ((!s->head || s->held) && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head && s->stop) break;
        if (s->held && !s->stop) continue;
        task *t = s->head;
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void stream_sync(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head || s->busy) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

cudaError_t cudaDeviceSynchronize(void)
{
    pthread_mutex_lock(&global);
    struct CUstream_st *all[64];
    int n = 0;
    for (struct CUstream_st *s = streams; s && n < 64; s = s->next_stream) all[n++] = s;
    pthread_mutex_unlock(&global);
    for (int i = 0; i < n; i++) stream_sync(all[i]);
    return cudaSuccess;
}

void stk_host_cuda_submit(cudaStream_t s, void (*fn)(void *), void *arg)
{
    /* the legacy default stream (NULL, cudaStreamLegacy; the per-thread one
     * is treated alike): after everything else, on the caller */
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) {
        cudaDeviceSynchronize();
        fn(arg);
        return;
    }
    task *t = malloc(sizeof *t);
    if (!t) { /* no memory for the queue: run in order by draining first */
        stream_sync(s);
        fn(arg);
        return;
    }
    *t = (task){fn, arg, NULL};
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Kernels compiled with kernels/cuda/launch.h's host emulation land here. */
void stk_emu_submit(void *stream, void (*fn)(void *), void *arg)
{
    stk_host_cuda_submit((cudaStream_t)stream, fn, arg);
}

void stk_host_cuda_hold(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    s->held++;
    pthread_mutex_unlock(&s->mu);
}

void stk_host_cuda_release(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    s->held--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    (void)flags;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return fail(cudaErrorMemoryAllocation);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, worker, s) != 0) {
        free(s);
        return fail(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&global);
    s->next_stream = streams;
    streams = s;
    pthread_mutex_unlock(&global);
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    pthread_mutex_lock(&global);
    for (struct CUstream_st **p = &streams; *p; p = &(*p)->next_stream)
        if (*p == s) {
            *p = s->next_stream;
            break;
        }
    pthread_mutex_unlock(&global);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    s->held = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) return cudaDeviceSynchronize();
    stream_sync(s);
    return cudaSuccess;
}

/* ---- events ------------------------------------------------------------------ */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) return fail(cudaErrorMemoryAllocation);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    /* CUDA allows destroying an event with work pending; wait for it here
     * so the queued completion never touches freed memory */
    pthread_mutex_lock(&e->mu);
    while (e->completed < e->recorded) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
    return cudaSuccess;
}

typedef struct event_mark {
    struct CUevent_st *e;
    uint64_t target;
} event_mark;

static void complete_event(void *arg)
{
    event_mark *m = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&m->e->mu);
    if (m->target > m->e->completed) m->e->completed = m->target;
    m->e->completed_at = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
    pthread_cond_broadcast(&m->e->cv);
    pthread_mutex_unlock(&m->e->mu);
    free(m);
}

static void wait_event(void *arg)
{
    event_mark *m = arg;
    pthread_mutex_lock(&m->e->mu);
    while (m->e->completed < m->target) pthread_cond_wait(&m->e->cv, &m->e->mu);
    pthread_mutex_unlock(&m->e->mu);
    free(m);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    event_mark *m = malloc(sizeof *m);
    if (!m) return fail(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&e->mu);
    m->e = e;
    m->target = ++e->recorded;
    pthread_mutex_unlock(&e->mu);
    stk_host_cuda_submit(s, complete_event, m);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    event_mark *m = malloc(sizeof *m);
    if (!m) return fail(cudaErrorMemoryAllocation);
    pthread_mutex_lock(&e->mu);
    m->e = e;
    m->target = e->recorded; /* the most recent record at the time of the call */
    pthread_mutex_unlock(&e->mu);
    stk_host_cuda_submit(s, wait_event, m);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    pthread_mutex_lock(&e->mu);
    bool done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->mu);
    return done ? cudaSuccess : cudaErrorNotReady; /* not an error: not sticky */
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    pthread_mutex_lock(&e->mu);
    uint64_t target = e->recorded;
    while (e->completed < target) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (cudaEventQuery(start) != cudaSuccess || cudaEventQuery(end) != cudaSuccess)
        return cudaErrorNotReady;
    pthread_mutex_lock(&start->mu);
    double a = start->completed_at;
    pthread_mutex_unlock(&start->mu);
    pthread_mutex_lock(&end->mu);
    double b = end->completed_at;
    pthread_mutex_unlock(&end->mu);
    *ms = (float)((b - a) * 1e3);
    return cudaSuccess;
}

/* ---- copies -------------------------------------------------------------------- */

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t n;
    void *staged; /* owned copy of pageable source memory */
    int value;    /* memset */
    bool is_set;
} copy_job;

static void run_copy(void *arg)
{
    copy_job *j = arg;
    if (j->is_set)
        memset(j->dst, j->value, j->n);
    else
        memcpy(j->dst, j->staged ? j->staged : j->src, j->n);
    free(j->staged);
    free(j);
}

/* The kind must match where the pointers live, as on a GPU (where the
 * wrong kind reads garbage or faults). cudaMemcpyDefault infers it. */
static bool kind_ok(const void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    bool dd = stk_host_cuda_is_device(dst, n), sd = stk_host_cuda_is_device(src, n);
    bool ok = kind == cudaMemcpyDefault || (kind == cudaMemcpyHostToDevice && dd && !sd) ||
              (kind == cudaMemcpyDeviceToHost && !dd && sd) ||
              (kind == cudaMemcpyDeviceToDevice && dd && sd) ||
              (kind == cudaMemcpyHostToHost && !dd && !sd);
    if (!ok)
        stk_host_cuda_misuse("cudaMemcpy kind %d but dst %p is %s and src %p is %s", (int)kind, dst,
                             dd ? "device" : "host", src, sd ? "device" : "host");
    return ok;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (!count) return cudaSuccess;
    if (!kind_ok(dst, src, count, kind)) return fail(cudaErrorInvalidValue);
    copy_job *j = calloc(1, sizeof *j);
    if (!j) return fail(cudaErrorMemoryAllocation);
    *j = (copy_job){.dst = dst, .src = src, .n = count};
    bool from_pageable = !stk_host_cuda_is_device(src, count) && !is_pinned(src, count);
    bool to_pageable = !stk_host_cuda_is_device(dst, count) && !is_pinned(dst, count);
    if (from_pageable) { /* CUDA stages pageable memory before returning */
        j->staged = malloc(count);
        if (!j->staged) {
            free(j);
            return fail(cudaErrorMemoryAllocation);
        }
        memcpy(j->staged, src, count);
    }
    stk_host_cuda_submit(stream, run_copy, j);
    if (to_pageable) cudaStreamSynchronize(stream); /* returns once the copy is done */
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    cudaDeviceSynchronize();
    return cudaMemcpyAsync(dst, src, count, kind, NULL);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    if (!count) return cudaSuccess;
    if (!stk_host_cuda_is_device(devPtr, count)) {
        stk_host_cuda_misuse("cudaMemsetAsync(%p, %zu bytes): not device memory", devPtr, count);
        return fail(cudaErrorInvalidValue);
    }
    copy_job *j = calloc(1, sizeof *j);
    if (!j) return fail(cudaErrorMemoryAllocation);
    *j = (copy_job){.dst = devPtr, .n = count, .value = value, .is_set = true};
    stk_host_cuda_submit(stream, run_copy, j);
    return cudaSuccess;
}

/* ---- device and errors ----------------------------------------------------------- */

/* One emulated GPU, or STOKE_HOST_CUDA_DEVICES of them (1..16) for tests
 * of one GPU per rank; they all share the host's memory. */
static int device_count(void)
{
    const char *e = getenv("STOKE_HOST_CUDA_DEVICES");
    int n = e ? atoi(e) : 1;
    return n >= 1 && n <= 16 ? n : 1;
}

static _Thread_local int current_device;

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "host emulation (Stoke tests, not a GPU)");
    prop->totalGlobalMem = memory_limit();
    prop->major = 8;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
    }
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    default: return "cudaErrorUnknown";
    }
}
