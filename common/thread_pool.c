#include "common/thread_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stk_pool {
    pthread_t *threads;
    int size;

    pthread_mutex_t submit_lock; /* serialises callers of parallel_for */

    /* Guarded by `lock`: */
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* a new job (generation) or shutdown */
    pthread_cond_t done_cv; /* the last worker finished the job */
    unsigned long generation;
    int busy; /* workers still inside the current job */
    bool shutdown;
    stk_pool_fn fn;
    void *ctx;
    size_t n;

    size_t next; /* next item to hand out: atomic, not under the lock */
};

typedef struct worker_arg {
    stk_pool *pool;
    int id;
} worker_arg;

static void *worker_main(void *p)
{
    worker_arg *arg = p;
    stk_pool *pool = arg->pool;
    int id = arg->id;
    free(arg);
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->shutdown && pool->generation == seen)
            pthread_cond_wait(&pool->work_cv, &pool->lock);
        if (pool->shutdown) break;
        seen = pool->generation;
        stk_pool_fn fn = pool->fn;
        void *ctx = pool->ctx;
        size_t n = pool->n;
        pthread_mutex_unlock(&pool->lock);

        for (;;) {
            size_t i = __atomic_fetch_add(&pool->next, 1, __ATOMIC_RELAXED);
            if (i >= n) break;
            fn(ctx, i, id);
        }

        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0) pthread_cond_signal(&pool->done_cv);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

stk_status stk_pool_create(int threads, stk_pool **out)
{
    *out = NULL;
    if (threads < 1 || threads > 4096)
        return stk_error(STK_ERR_INVALID_ARG, "thread pool: %d threads (must be 1..4096)", threads);
    stk_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return stk_error(STK_ERR_NOMEM, "thread pool: out of memory");
    pool->threads = calloc((size_t)threads, sizeof *pool->threads);
    if (!pool->threads) {
        free(pool);
        return stk_error(STK_ERR_NOMEM, "thread pool: out of memory");
    }
    pthread_mutex_init(&pool->submit_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work_cv, NULL);
    pthread_cond_init(&pool->done_cv, NULL);
    for (int i = 0; i < threads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        int rc = arg ? 0 : ENOMEM;
        if (arg) {
            arg->pool = pool;
            arg->id = i;
            rc = pthread_create(&pool->threads[i], NULL, worker_main, arg);
            if (rc) free(arg);
        }
        if (rc) {
            stk_pool_destroy(pool); /* joins the `size` threads started so far */
            return stk_error(STK_ERR_IO, "thread pool: cannot start thread %d: %s", i,
                             strerror(rc));
        }
        pool->size = i + 1;
    }
    *out = pool;
    return STK_OK;
}

void stk_pool_destroy(stk_pool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = true;
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->size; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->work_cv);
    pthread_cond_destroy(&pool->done_cv);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->submit_lock);
    free(pool->threads);
    free(pool);
}

int stk_pool_size(const stk_pool *pool) { return pool->size; }

void stk_pool_parallel_for(stk_pool *pool, size_t n, stk_pool_fn fn, void *ctx)
{
    if (n == 0) return;
    pthread_mutex_lock(&pool->submit_lock);
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    __atomic_store_n(&pool->next, 0, __ATOMIC_RELAXED);
    pool->busy = pool->size;
    pool->generation++;
    pthread_cond_broadcast(&pool->work_cv);
    while (pool->busy > 0) pthread_cond_wait(&pool->done_cv, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->submit_lock);
}

int stk_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
