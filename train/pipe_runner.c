/* Pipeline schedules and the stage threads (pipe_runner.h). */
#include "train/pipe_runner.h"

#include "common/clock.h"
#include "common/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool stk_pipe_schedule_parse(const char *s, stk_pipe_schedule *out)
{
    if (!strcmp(s, "gpipe"))
        *out = STK_PIPE_GPIPE;
    else if (!strcmp(s, "1f1b"))
        *out = STK_PIPE_1F1B;
    else
        return false;
    return true;
}

const char *stk_pipe_schedule_name(stk_pipe_schedule s)
{
    return s == STK_PIPE_GPIPE ? "gpipe" : "1f1b";
}

void stk_pipe_schedule_ops(stk_pipe_schedule sched, int stages, int micro, int s, int *ops)
{
    int n = 0;
    if (sched == STK_PIPE_GPIPE) {
        for (int i = 0; i < micro; i++) ops[n++] = i;
        for (int i = 0; i < micro; i++) ops[n++] = micro + i;
        return;
    }
    int warm = stages - s - 1 < micro ? stages - s - 1 : micro, f = 0;
    for (; f < warm; f++) ops[n++] = f;
    for (int b = 0; b < micro; b++) {
        if (f < micro) ops[n++] = f++;
        ops[n++] = micro + b;
    }
}

/* The payloads from one stage to a neighbour, in micro-batch order. */
typedef struct channel {
    void **slot; /* [micro]: sent, not yet taken */
    bool *full;
} channel;

typedef struct stage_thread {
    stk_pipe_runner *r;
    int index;
    pthread_t thread;
    bool started;
} stage_thread;

struct stk_pipe_runner {
    int stages;
    stage_thread threads[STK_PIPE_MAX_STAGES];
    void (*thread_init)(void *, int);
    void *init_ctx;
    pthread_mutex_t mu;
    pthread_cond_t start, done, moved; /* a run begins; a stage finished; a payload moved */
    uint64_t generation;               /* runs started */
    int finished;                      /* stages done with this run */
    bool quit;
    /* this run */
    int micro;
    stk_pipe_schedule sched;
    stk_pipe_op op;
    void *ctx;
    bool failed;
    stk_status error;
    char message[1024];
    channel fwd[STK_PIPE_MAX_STAGES], bwd[STK_PIPE_MAX_STAGES]; /* into stage s */
    int cap;                                                    /* slots per channel */
    stk_pipe_stats stats;
    double waited[STK_PIPE_MAX_STAGES]; /* this run: time stage s spent in stk_pipe_recv */
    double t0;
};

static void fail_run(stk_pipe_runner *r, stk_status st)
{
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->failed = true;
        r->error = st;
        snprintf(r->message, sizeof r->message, "%s", stk_last_error());
    }
    pthread_cond_broadcast(&r->moved);
    pthread_mutex_unlock(&r->mu);
}

static void run_stage(stk_pipe_runner *r, int s)
{
    int n = 2 * r->micro, in_flight = 0, peak = 0;
    int *ops = malloc((size_t)n * sizeof *ops);
    if (!ops) {
        fail_run(r, stk_error(STK_ERR_NOMEM, "pipeline stage %d: out of memory", s));
        return;
    }
    stk_pipe_schedule_ops(r->sched, r->stages, r->micro, s, ops);
    double busy = 0;
    for (int i = 0; i < n; i++) {
        bool backward = ops[i] >= r->micro;
        int mb = backward ? ops[i] - r->micro : ops[i];
        pthread_mutex_lock(&r->mu);
        bool stop = r->failed;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
        char what[48];
        if (stk_trace_enabled()) snprintf(what, sizeof what, "micro-batch %d", mb);
        stk_trace_begin_args(backward ? "backward" : "forward", "pipeline", what);
        double t = stk_clock_sec();
        stk_status st = r->op(r->ctx, r, s, mb, backward);
        busy += stk_clock_sec() - t;
        stk_trace_end();
        if (st != STK_OK) {
            stk_error_prefix(st, "pipeline stage %d, %s of micro-batch %d", s,
                             backward ? "backward" : "forward", mb);
            fail_run(r, st);
            break;
        }
        in_flight += backward ? -1 : 1;
        if (in_flight > peak) peak = in_flight;
    }
    free(ops);
    r->stats.busy_s[s] = busy - r->waited[s]; /* (only stage s adds to waited[s]) */
    r->stats.max_in_flight[s] = peak;
}

static void *stage_main(void *arg)
{
    stage_thread *t = arg;
    stk_pipe_runner *r = t->r;
    char name[32];
    snprintf(name, sizeof name, "pipeline stage %d", t->index);
    stk_trace_thread_name(name);
    if (r->thread_init) r->thread_init(r->init_ctx, t->index);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->quit && r->generation == seen) pthread_cond_wait(&r->start, &r->mu);
        if (r->quit) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        seen = r->generation;
        pthread_mutex_unlock(&r->mu);
        run_stage(r, t->index);
        double end = stk_clock_sec();
        pthread_mutex_lock(&r->mu);
        if (end - r->t0 > r->stats.wall_s) r->stats.wall_s = end - r->t0;
        r->finished++;
        pthread_cond_broadcast(&r->done);
        pthread_mutex_unlock(&r->mu);
    }
}

stk_status stk_pipe_runner_create(int stages, void (*thread_init)(void *, int), void *init_ctx,
                                  stk_pipe_runner **out)
{
    *out = NULL;
    if (stages < 1 || stages > STK_PIPE_MAX_STAGES)
        return stk_error(STK_ERR_INVALID_ARG, "pipeline: %d stages (1..%d)", stages,
                         STK_PIPE_MAX_STAGES);
    stk_pipe_runner *r = calloc(1, sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
    r->stages = stages;
    r->thread_init = thread_init;
    r->init_ctx = init_ctx;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->start, NULL);
    pthread_cond_init(&r->done, NULL);
    pthread_cond_init(&r->moved, NULL);
    for (int s = 0; s < stages; s++) {
        r->threads[s] = (stage_thread){r, s, 0, false};
        if (pthread_create(&r->threads[s].thread, NULL, stage_main, &r->threads[s]) != 0) {
            stk_pipe_runner_destroy(r);
            return stk_error(STK_ERR_INTERNAL, "pipeline: cannot start the thread of stage %d", s);
        }
        r->threads[s].started = true;
    }
    *out = r;
    return STK_OK;
}

static void free_channels(stk_pipe_runner *r)
{
    for (int s = 0; s < STK_PIPE_MAX_STAGES; s++) {
        free(r->fwd[s].slot), free(r->fwd[s].full);
        free(r->bwd[s].slot), free(r->bwd[s].full);
        r->fwd[s] = r->bwd[s] = (channel){0};
    }
    r->cap = 0;
}

void stk_pipe_runner_destroy(stk_pipe_runner *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->quit = true;
    pthread_cond_broadcast(&r->start);
    pthread_mutex_unlock(&r->mu);
    for (int s = 0; s < r->stages; s++)
        if (r->threads[s].started) pthread_join(r->threads[s].thread, NULL);
    free_channels(r);
    pthread_cond_destroy(&r->start);
    pthread_cond_destroy(&r->done);
    pthread_cond_destroy(&r->moved);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

stk_status stk_pipe_runner_run(stk_pipe_runner *r, int micro, stk_pipe_schedule sched,
                               stk_pipe_op op, void *ctx, void (*drop)(void *payload),
                               stk_pipe_stats *stats)
{
    if (micro < 1 || micro > STK_PIPE_MAX_MICRO)
        return stk_error(STK_ERR_INVALID_ARG, "pipeline: %d micro-batches (1..%d)", micro,
                         STK_PIPE_MAX_MICRO);
    if (micro > r->cap) {
        free_channels(r);
        for (int s = 0; s < r->stages; s++) {
            channel *c[2] = {&r->fwd[s], &r->bwd[s]};
            for (int k = 0; k < 2; k++) {
                c[k]->slot = calloc((size_t)micro, sizeof *c[k]->slot);
                c[k]->full = calloc((size_t)micro, sizeof *c[k]->full);
                if (!c[k]->slot || !c[k]->full) {
                    free_channels(r);
                    return stk_error(STK_ERR_NOMEM, "pipeline: out of memory");
                }
            }
        }
        r->cap = micro;
    }
    pthread_mutex_lock(&r->mu);
    r->micro = micro;
    r->sched = sched;
    r->op = op;
    r->ctx = ctx;
    r->failed = false;
    r->finished = 0;
    memset(&r->stats, 0, sizeof r->stats);
    memset(r->waited, 0, sizeof r->waited);
    r->stats.stages = r->stages;
    r->stats.micro_batches = micro;
    r->t0 = stk_clock_sec();
    r->generation++;
    pthread_cond_broadcast(&r->start);
    while (r->finished < r->stages) pthread_cond_wait(&r->done, &r->mu);
    stk_status st = r->failed ? r->error : STK_OK;
    pthread_mutex_unlock(&r->mu);
    /* payloads a failed run left behind go to `drop`; the slots are cleared */
    for (int s = 0; s < r->stages; s++)
        for (int i = 0; i < r->cap; i++) {
            channel *c[2] = {&r->fwd[s], &r->bwd[s]};
            for (int k = 0; k < 2; k++)
                if (c[k]->full[i]) {
                    if (drop) drop(c[k]->slot[i]);
                    c[k]->full[i] = false;
                }
        }
    double busy = 0;
    for (int s = 0; s < r->stages; s++) busy += r->stats.busy_s[s];
    r->stats.bubble = r->stats.wall_s > 0 ? 1.0 - busy / r->stages / r->stats.wall_s : 0;
    if (stats) *stats = r->stats;
    if (st != STK_OK) return stk_error(st, "%s", r->message);
    return STK_OK;
}

stk_status stk_pipe_send(stk_pipe_runner *r, int stage, int micro, bool backward, void *payload)
{
    int to = backward ? stage - 1 : stage + 1;
    if (to < 0 || to >= r->stages || micro < 0 || micro >= r->micro)
        return stk_error(STK_ERR_INTERNAL, "pipeline: stage %d has no %s neighbour", stage,
                         backward ? "previous" : "next");
    channel *c = backward ? &r->bwd[to] : &r->fwd[to];
    pthread_mutex_lock(&r->mu);
    c->slot[micro] = payload;
    c->full[micro] = true;
    r->stats.transfers++;
    pthread_cond_broadcast(&r->moved);
    pthread_mutex_unlock(&r->mu);
    return STK_OK;
}

stk_status stk_pipe_recv(stk_pipe_runner *r, int stage, int micro, bool backward, void **payload)
{
    *payload = NULL;
    if (micro < 0 || micro >= r->micro)
        return stk_error(STK_ERR_INTERNAL, "pipeline: micro-batch %d of %d", micro, r->micro);
    channel *c = backward ? &r->bwd[stage] : &r->fwd[stage];
    double t = stk_clock_sec();
    pthread_mutex_lock(&r->mu);
    while (!c->full[micro] && !r->failed) pthread_cond_wait(&r->moved, &r->mu);
    r->waited[stage] += stk_clock_sec() - t;
    bool ok = c->full[micro];
    if (ok) {
        *payload = c->slot[micro];
        c->full[micro] = false;
    }
    pthread_mutex_unlock(&r->mu);
    if (!ok) return stk_error(STK_ERR_CANCELLED, "pipeline: another stage failed");
    return STK_OK;
}
