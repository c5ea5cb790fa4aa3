/* A fixed pool of threads with a blocking parallel-for.
 *
 * Threads are created once and sleep on a condition variable between jobs
 * (no sleep-polling, no thread per job). Items are handed out one at a time
 * from an atomic counter, so uneven items (a large JPEG next to a small one)
 * balance themselves. The `worker` argument (0..size-1) indexes per-worker
 * scratch state such as a JPEG decoder.
 *
 *     static void decode_one(void *ctx, size_t i, int worker) { ... }
 *
 *     stk_pool *pool;
 *     if (stk_pool_create(4, &pool) != STK_OK) return ...;
 *     stk_pool_parallel_for(pool, n_items, decode_one, &ctx);
 *     stk_pool_destroy(pool);
 *
 * Threading: stk_pool_parallel_for may be called from any one thread at a
 * time per pool (concurrent callers are serialised). `fn` must not call
 * parallel_for on the same pool. Errors inside `fn` are the caller's to
 * collect (e.g. a status per item).
 */
#pragma once

#include "common/status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_pool stk_pool;

typedef void (*stk_pool_fn)(void *ctx, size_t index, int worker);

/* Create a pool of `threads` threads (>= 1). Errors: STK_ERR_INVALID_ARG,
 * STK_ERR_NOMEM, STK_ERR_IO (thread creation failed). */
stk_status stk_pool_create(int threads, stk_pool **out);

/* Join every thread and free the pool. NULL is a no-op. */
void stk_pool_destroy(stk_pool *pool);

/* Number of threads. */
int stk_pool_size(const stk_pool *pool);

/* Run fn(ctx, i, worker) for every i in [0, n) on the pool's threads and
 * return when all calls have returned. */
void stk_pool_parallel_for(stk_pool *pool, size_t n, stk_pool_fn fn, void *ctx);

/* Number of online CPUs (>= 1). */
int stk_cpu_count(void);

#ifdef __cplusplus
}
#endif
