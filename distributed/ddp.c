/* Gradient buckets, the communication thread and the trainer hooks (ddp.h). */
#include "distributed/ddp.h"

#include "common/trace.h"

#include "common/clock.h"
#include "common/crc32c.h"
#include "device/device_collective.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FIRST_BUCKET_BYTES ((size_t)1 << 20)
#define BUCKET_BYTES       ((size_t)25 << 20)

typedef struct slot {
    int bucket;
    size_t offset; /* floats into the bucket */
    size_t numel;
    bool got; /* this step's gradient is in the bucket */
} slot;

typedef struct bucket {
    float *buf; /* host memory, or device memory (of dev) with NCCL */
    stk_tensor *dev;
    size_t numel;
    int params, pending; /* parameters in it; still to come this step */
} bucket;

/* One all-reduce for the communication thread: a bucket, or a caller's
 * buffer (stk_ddp_allreduce). */
typedef struct job {
    float *buf;
    size_t n;
    int bucket; /* -1: a caller's */
} job;

struct stk_ddp {
    stk_comm *comm;
    int ranks_per_replica; /* pipeline stages on ranks: ranks working on one batch */
    stk_model *model;
    int n_params;
    slot *slots; /* per model parameter; numel 0 for buffers and frozen ones */
    bucket *buckets;
    int n_buckets;
    stk_device_comm *dc; /* gradients on the GPU with NCCL; NULL: through host memory and MPI */
    pthread_t thread;
    bool thread_started;
    /* Guarded by lock. The queue runs in the order jobs were added, which is
     * the same on every rank (backward visits the same graph in the same
     * order), so the ranks' collectives always match. */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    job *queue; /* a ring of n_buckets + 1 */
    int q_head, q_len;
    int buckets_done; /* this step */
    bool extra_done;  /* the caller's all-reduce */
    bool shutdown;
    stk_status failed; /* the thread's error (message in error) */
    char error[STK_ERROR_MAX];
    double comm_s;
    /* main thread only */
    double timeout_s; /* the watchdog (stk_ddp_set_timeout) */
    double exposed_s;
    uint64_t steps, bytes_per_step;
};

/* ---- the communication thread ------------------------------------------------ */

static void *comm_main(void *p)
{
    stk_ddp *d = p;
    stk_trace_thread_name("data-parallel communication");
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (!d->shutdown && d->q_len == 0) pthread_cond_wait(&d->cv, &d->lock);
        if (d->shutdown) break;
        job j = d->queue[d->q_head];
        pthread_mutex_unlock(&d->lock);
        double t0 = stk_clock_sec();
        char what[48] = "";
        if (stk_trace_enabled()) {
            if (j.bucket >= 0)
                snprintf(what, sizeof what, "bucket %d, %.2f MB", j.bucket, j.n * 4e-6);
            else
                snprintf(what, sizeof what, "%zu floats", j.n);
        }
        stk_trace_begin_args(j.bucket >= 0 ? "all-reduce bucket" : "all-reduce", "ddp", what);
        stk_status st = stk_comm_allreduce_sum(d->comm, j.buf, j.n);
        stk_trace_end();
        double t = stk_clock_sec() - t0;
        pthread_mutex_lock(&d->lock);
        d->q_head = (d->q_head + 1) % (d->n_buckets + 1);
        d->q_len--;
        if (st != STK_OK && d->failed == STK_OK) {
            d->failed = st;
            snprintf(d->error, sizeof d->error, "%s", stk_last_error());
        }
        if (j.bucket >= 0) {
            d->comm_s += t;
            d->buckets_done++;
        } else {
            d->extra_done = true;
        }
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* Queue an all-reduce (lock held). */
static void push_job(stk_ddp *d, job j)
{
    d->queue[(d->q_head + d->q_len) % (d->n_buckets + 1)] = j;
    d->q_len++;
    pthread_cond_broadcast(&d->cv);
}

/* ---- trainer hooks ---------------------------------------------------------------- */

static stk_status on_grad_ready(void *ctx, const stk_step_info *info)
{
    stk_ddp *d = ctx;
    slot *s = &d->slots[info->param];
    if (!s->numel || s->got) return STK_OK;
    bucket *b = &d->buckets[s->bucket];
    if (d->dc) {
        if (!stk_tensor_is_contiguous(info->grad))
            return stk_error(STK_ERR_INVALID_ARG, "data-parallel: a non-contiguous gradient");
        STK_TRY(stk_device_comm_copy(d->dc, b->buf + s->offset, stk_tensor_device_data(info->grad),
                                     s->numel * sizeof(float)));
        s->got = true;
        /* NCCL queues the all-reduce behind the copies on its own stream */
        return --b->pending == 0 ? stk_device_comm_allreduce_avg(d->dc, b->buf, b->numel) : STK_OK;
    }
    STK_TRY(stk_tensor_to_host(info->grad, b->buf + s->offset, s->numel * sizeof(float)));
    s->got = true;
    pthread_mutex_lock(&d->lock);
    if (--b->pending == 0) push_job(d, (job){b->buf, b->numel, s->bucket});
    pthread_mutex_unlock(&d->lock);
    return STK_OK;
}

/* now + seconds, for pthread_cond_timedwait */
static struct timespec deadline_in(double seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)seconds;
    t.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* NCCL averaged the buckets on the GPU: wait (bounded), copy back. */
static stk_status after_backward_device(stk_ddp *d, const stk_step_info *info)
{
    double t0 = stk_clock_sec();
    stk_status st = stk_device_comm_finish(d->dc, d->timeout_s);
    d->exposed_s += stk_clock_sec() - t0;
    if (st == STK_ERR_IO)
        return stk_error(STK_ERR_IO,
                         "step %lld: %s: another rank has hung, stopped or died (its own output "
                         "may say why); stopping the job",
                         (long long)info->step + 1, stk_last_error());
    STK_TRY(st);
    for (int k = 0; k < d->n_buckets; k++) d->buckets[k].pending = d->buckets[k].params;
    for (int i = 0; i < d->n_params; i++) {
        slot *s = &d->slots[i];
        if (!s->numel) continue;
        s->got = false;
        stk_tensor *g = stk_tensor_grad(stk_model_param(d->model, i)->value);
        STK_TRY(stk_device_comm_copy(d->dc, stk_tensor_device_data(g),
                                     d->buckets[s->bucket].buf + s->offset,
                                     s->numel * sizeof(float)));
    }
    d->steps++;
    return STK_OK;
}

static stk_status after_backward(void *ctx, const stk_step_info *info)
{
    stk_ddp *d = ctx;
    for (int i = 0; i < d->n_params; i++)
        if (d->slots[i].numel && !d->slots[i].got)
            return stk_error(STK_ERR_INVALID_ARG,
                             "data-parallel step %lld: %s received no gradient (every trainable "
                             "parameter must take part in every step)",
                             (long long)info->step + 1, stk_model_param(d->model, i)->name);
    if (d->dc) {
        stk_trace_begin("gradient all-reduce wait", "ddp");
        stk_status st = after_backward_device(d, info);
        stk_trace_end();
        return st;
    }
    double t0 = stk_clock_sec();
    struct timespec deadline = deadline_in(d->timeout_s);
    stk_trace_begin("gradient all-reduce wait", "ddp");
    pthread_mutex_lock(&d->lock);
    bool late = false;
    while (d->failed == STK_OK && d->buckets_done < d->n_buckets && !late)
        late = pthread_cond_timedwait(&d->cv, &d->lock, &deadline) == ETIMEDOUT;
    stk_trace_end();
    if (late && d->buckets_done < d->n_buckets) {
        pthread_mutex_unlock(&d->lock);
        /* the communication thread is stuck inside MPI: the job must be stopped */
        return stk_error(STK_ERR_IO,
                         "step %lld: the gradient all-reduce has not finished after "
                         "%.0f s: another rank has hung, stopped or died (its own output may say "
                         "why); stopping the job",
                         (long long)info->step + 1, d->timeout_s);
    }
    stk_status failed = d->failed;
    /* the next step fills every bucket again */
    for (int k = 0; k < d->n_buckets; k++) d->buckets[k].pending = d->buckets[k].params;
    d->buckets_done = 0;
    pthread_mutex_unlock(&d->lock);
    d->exposed_s += stk_clock_sec() - t0;
    if (failed != STK_OK) return stk_error(failed, "%s", d->error);
    float inv = 1.f / (float)stk_comm_world(d->comm);
    for (int k = 0; k < d->n_buckets; k++)
        for (size_t j = 0; j < d->buckets[k].numel; j++) d->buckets[k].buf[j] *= inv;
    for (int i = 0; i < d->n_params; i++) {
        slot *s = &d->slots[i];
        if (!s->numel) continue;
        s->got = false;
        stk_tensor *g = stk_tensor_grad(stk_model_param(d->model, i)->value);
        STK_TRY(stk_tensor_copy_from_host(g, d->buckets[s->bucket].buf + s->offset,
                                          s->numel * sizeof(float)));
    }
    d->steps++;
    return STK_OK;
}

/* ---- set-up ----------------------------------------------------------------------- */

/* The model as every rank must hold it: parameter names, shapes, and which
 * are trainable (ranks that freeze other parameters would all-reduce buckets
 * of other sizes). */
static uint64_t model_fingerprint(const stk_ddp *d)
{
    uint64_t h = STK_FNV1A64_BASIS;
    for (int i = 0; i < d->n_params; i++) {
        const stk_param *p = stk_model_param(d->model, i);
        h = stk_fnv1a64(h, p->name, strlen(p->name) + 1);
        const char *shape = stk_tensor_shape_str(p->value);
        h = stk_fnv1a64(h, shape, strlen(shape) + 1);
        unsigned char trainable = !p->is_buffer && stk_tensor_requires_grad(p->value);
        h = stk_fnv1a64(h, &trainable, 1);
    }
    return h;
}

#define ITEM_TEXT 120 /* bytes of an item's value shown in a difference */

/* Item `i` differs between rank r and rank 0: both values, gathered from
 * every rank (each rank takes the same decision, so all of them call this). */
static stk_status name_difference(stk_ddp *d, const stk_ddp_check_item *item, int r)
{
    int world = stk_comm_world(d->comm);
    char mine[ITEM_TEXT] = "", *all = calloc((size_t)world, ITEM_TEXT);
    if (!all) return stk_error(STK_ERR_NOMEM, "out of memory");
    snprintf(mine, sizeof mine, "%s", item->value);
    stk_status st = stk_comm_allgather(d->comm, mine, ITEM_TEXT, all);
    if (st == STK_OK) {
        all[(size_t)r * ITEM_TEXT + ITEM_TEXT - 1] = all[ITEM_TEXT - 1] = '\0';
        st = stk_error(STK_ERR_INVALID_ARG, "rank %d differs from rank 0: %s %s against %s", r,
                       item->name, all + (size_t)r * ITEM_TEXT, all);
    }
    free(all);
    return st;
}

/* Every rank's items against rank 0's; the model is one more item. */
static stk_status check_same(stk_ddp *d, int n_items, const stk_ddp_check_item *items)
{
    int world = stk_comm_world(d->comm), n = n_items + 1;
    uint64_t *mine = calloc((size_t)n, sizeof *mine), *all = calloc((size_t)n * world, sizeof *all);
    stk_status st = STK_OK;
    if (!mine || !all) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n_items; i++)
        mine[i] = stk_fnv1a64(STK_FNV1A64_BASIS, items[i].value, strlen(items[i].value));
    mine[n_items] = model_fingerprint(d);
    if ((st = stk_comm_allgather(d->comm, mine, (size_t)n * sizeof *mine, all)) != STK_OK) goto out;
    /* the first item that differs, and the first rank it differs on */
    for (int i = 0; i < n && st == STK_OK; i++)
        for (int r = 1; r < world; r++) {
            if (all[(size_t)r * n + i] == all[i]) continue;
            if (i == n_items)
                st = stk_error(STK_ERR_INVALID_ARG,
                               "rank %d runs another model than rank 0 (parameter names, "
                               "shapes or which are trainable differ)",
                               r);
            else
                st = name_difference(d, &items[i], r);
            break;
        }
out:
    free(mine);
    free(all);
    return st;
}

/* Rank 0's parameters and buffers on every rank. */
static stk_status broadcast_model(stk_ddp *d)
{
    for (int i = 0; i < d->n_params; i++) {
        stk_tensor *t = stk_model_param(d->model, i)->value;
        size_t bytes = (size_t)stk_tensor_numel(t) * stk_dtype_size(stk_tensor_dtype(t));
        void *h = malloc(bytes ? bytes : 1);
        if (!h) return stk_error(STK_ERR_NOMEM, "out of memory");
        stk_status st = stk_tensor_to_host(t, h, bytes);
        if (st == STK_OK) st = stk_comm_broadcast(d->comm, h, bytes, 0);
        if (st == STK_OK) st = stk_tensor_copy_from_host(t, h, bytes);
        free(h);
        if (st != STK_OK)
            return stk_error_prefix(st, "broadcasting %s", stk_model_param(d->model, i)->name);
    }
    return STK_OK;
}

/* A model on the GPU in a build with NCCL: its communicator, the id from
 * rank 0 over MPI. Every rank takes the same decision (check_same compared
 * the models, and the device is part of the flags every rank shares). */
static stk_status open_device_comm(stk_ddp *d)
{
    int world = stk_comm_world(d->comm);
    if (world < 2 || !stk_device_comm_library()) return STK_OK;
    bool on_gpu = false;
    for (int i = 0; i < d->n_params; i++)
        if (stk_tensor_device(stk_model_param(d->model, i)->value) == STK_DEVICE_CUDA)
            on_gpu = true;
    if (!on_gpu) return STK_OK;
    uint8_t id[STK_DEVICE_COMM_ID_BYTES] = {0};
    int rank = stk_comm_rank(d->comm);
    if (rank == 0) STK_TRY(stk_device_comm_make_id(id));
    STK_TRY(stk_comm_broadcast(d->comm, id, sizeof id, 0));
    stk_status st = stk_device_comm_open(id, rank, world, &d->dc);
    return st == STK_OK ? st : stk_error_prefix(st, "starting NCCL");
}

/* Buckets over the trainable parameters in reverse order. */
static stk_status make_buckets(stk_ddp *d)
{
    if (!(d->slots = calloc((size_t)(d->n_params ? d->n_params : 1), sizeof *d->slots)) ||
        !(d->buckets = calloc((size_t)(d->n_params ? d->n_params : 1), sizeof *d->buckets)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    size_t cap = FIRST_BUCKET_BYTES / sizeof(float);
    bucket *b = NULL;
    for (int i = d->n_params - 1; i >= 0; i--) {
        const stk_param *p = stk_model_param(d->model, i);
        if (p->is_buffer || !stk_tensor_requires_grad(p->value)) continue;
        size_t n = (size_t)stk_tensor_numel(p->value);
        if (!b || (b->numel > 0 && b->numel + n > cap)) {
            if (b) cap = BUCKET_BYTES / sizeof(float);
            b = &d->buckets[d->n_buckets++];
        }
        d->slots[i] = (slot){.bucket = (int)(b - d->buckets), .offset = b->numel, .numel = n};
        b->numel += n;
        b->params++;
    }
    if (!(d->queue = calloc((size_t)d->n_buckets + 1, sizeof *d->queue)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < d->n_buckets; k++) {
        bucket *bk = &d->buckets[k];
        if (d->dc) {
            int64_t n = (int64_t)bk->numel;
            STK_TRY(stk_tensor_zeros_on(STK_DEVICE_CUDA, STK_F32, 1, &n, &bk->dev));
            bk->buf = stk_tensor_device_data(bk->dev);
        } else if (!(bk->buf = malloc(bk->numel * sizeof(float)))) {
            return stk_error(STK_ERR_NOMEM, "no memory for a %zu-byte gradient bucket",
                             bk->numel * sizeof(float));
        }
        bk->pending = bk->params;
        d->bytes_per_step += bk->numel * sizeof(float);
    }
    return STK_OK;
}

stk_status stk_ddp_attach(stk_trainer *t, stk_model *m, stk_comm *c, int n_items,
                          const stk_ddp_check_item *items, stk_ddp **out)
{
    *out = NULL;
    stk_ddp *d = calloc(1, sizeof *d);
    if (!d) return stk_error(STK_ERR_NOMEM, "out of memory");
    d->comm = c;
    d->model = m;
    d->n_params = stk_model_param_count(m);
    d->timeout_s = 300;
    d->ranks_per_replica = 1;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cv, NULL);
    stk_status st;
    if ((st = check_same(d, n_items, items)) != STK_OK || (st = broadcast_model(d)) != STK_OK ||
        (st = open_device_comm(d)) != STK_OK || (st = make_buckets(d)) != STK_OK)
        goto fail;
    if (stk_comm_world(c) > 1) {
        if (pthread_create(&d->thread, NULL, comm_main, d) != 0) {
            st = stk_error(STK_ERR_NOMEM, "cannot start the communication thread");
            goto fail;
        }
        d->thread_started = true;
        if ((st = stk_trainer_add_hook(t, STK_STEP_GRAD_READY, on_grad_ready, d)) != STK_OK ||
            (st = stk_trainer_add_hook(t, STK_STEP_AFTER_BACKWARD, after_backward, d)) != STK_OK)
            goto fail;
    }
    *out = d;
    return STK_OK;
fail:
    stk_ddp_destroy(d);
    return st;
}

void stk_ddp_destroy(stk_ddp *d)
{
    if (!d) return;
    if (d->thread_started) {
        pthread_mutex_lock(&d->lock);
        d->shutdown = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
    }
    stk_device_comm_close(d->dc);
    for (int k = 0; k < d->n_buckets; k++) {
        if (d->buckets[k].dev)
            stk_tensor_release(d->buckets[k].dev);
        else
            free(d->buckets[k].buf);
    }
    free(d->buckets);
    free(d->queue);
    free(d->slots);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

stk_status stk_ddp_allreduce(stk_ddp *d, float *buf, size_t n)
{
    if (!d->thread_started) return STK_OK; /* a world of one */
    struct timespec deadline = deadline_in(d->timeout_s);
    pthread_mutex_lock(&d->lock);
    d->extra_done = false;
    push_job(d, (job){buf, n, -1});
    bool late = false;
    while (!d->extra_done && !late)
        late = pthread_cond_timedwait(&d->cv, &d->lock, &deadline) == ETIMEDOUT;
    bool done = d->extra_done;
    stk_status failed = d->failed;
    pthread_mutex_unlock(&d->lock);
    if (!done)
        return stk_error(STK_ERR_IO,
                         "an all-reduce of %zu values has not finished after %.0f s: another "
                         "rank has hung, stopped or died (its own output may say why); stopping "
                         "the job",
                         n, d->timeout_s);
    return failed == STK_OK ? STK_OK : stk_error(failed, "%s", d->error);
}

stk_status stk_ddp_reduce_epoch(stk_ddp *d, stk_epoch_stats *es, stk_eval_result *val,
                                stk_eval_result *val_ema, double eval_allowance_s)
{
    int world = stk_comm_world(d->comm);
    es->images_per_sec *= (double)world / d->ranks_per_replica; /* equal batches: the job's rate */
    if (world == 1) return STK_OK;
    /* rank 0 evaluates while the others wait here, longer than a step may */
    if (val) STK_TRY(stk_comm_barrier(d->comm, d->timeout_s + eval_allowance_s));
    float m[3] = {(float)es->loss, (float)es->accuracy, (float)es->stall_pct};
    STK_TRY(stk_ddp_allreduce(d, m, 3));
    es->loss = m[0] / world;
    es->accuracy = m[1] / world;
    es->stall_pct = m[2] / world;
    if (!val) return STK_OK;
    /* rank 0's evaluation (and its moving average's), bit for bit: every
     * rank decides early stopping alike */
    stk_eval_result none = {0}, *ema = val_ema ? val_ema : &none;
    double v[6] = {val->loss, val->top1, val->top5, ema->loss, ema->top1, ema->top5};
    STK_TRY(stk_comm_broadcast(d->comm, v, sizeof v, 0));
    val->loss = v[0], val->top1 = v[1], val->top5 = v[2];
    ema->loss = v[3], ema->top1 = v[4], ema->top5 = v[5];
    return STK_OK;
}

static stk_status sync_bn_sum(void *ctx, float *buf, size_t n)
{
    return stk_ddp_allreduce(ctx, buf, n);
}

void stk_ddp_sync_batch_norm(stk_ddp *d)
{
    if (d->thread_started)
        stk_model_set_sync_batch_norm(d->model, &(stk_allreduce){sync_bn_sum, d});
}

void stk_ddp_set_ranks_per_replica(stk_ddp *d, int k) { d->ranks_per_replica = k > 1 ? k : 1; }

void stk_ddp_set_timeout(stk_ddp *d, double seconds) { d->timeout_s = seconds > 0 ? seconds : 1; }

void stk_ddp_get_stats(const stk_ddp *d, stk_ddp_stats *out)
{
    stk_ddp *m = (stk_ddp *)d; /* the lock only */
    pthread_mutex_lock(&m->lock);
    out->comm_s = d->dc ? stk_device_comm_seconds(d->dc) : d->comm_s;
    pthread_mutex_unlock(&m->lock);
    out->library = d->dc ? stk_device_comm_library() : stk_comm_library(d->comm);
    out->buckets = d->n_buckets;
    out->bytes_per_step = d->bytes_per_step;
    out->steps = d->steps;
    out->exposed_s = d->exposed_s;
}
