/* Pipeline schedules and the threads that run them: K stages, one thread
 * each, push M micro-batches through a chain (stage s feeds s + 1 forward,
 * s + 1 feeds s backward) in the order a schedule gives each stage. What a
 * stage does for a micro-batch is the caller's (train/pipeline.c runs model
 * units; bench_pipeline sleeps); the runner orders the work, hands the
 * payloads between neighbours, and measures.
 *
 *     stk_pipe_runner *r;
 *     STK_TRY(stk_pipe_runner_create(2, NULL, NULL, &r));
 *     stk_pipe_stats s;
 *     STK_TRY(stk_pipe_runner_run(r, 8, STK_PIPE_1F1B, my_op, ctx, &s));
 *     // my_op(ctx, r, stage, micro, backward): stage 0 .. K-1; forward of a
 *     // stage s > 0 takes its input with stk_pipe_recv(r, s, micro, &p) and
 *     // every stage but the last passes its output on with stk_pipe_send.
 *
 * Schedules (each stage's order of work; backward passes in micro-batch
 * order 0..M-1 in both, so gradients accumulate in the same order as M
 * forward+backward passes on one device):
 *   GPipe: every forward, then every backward; a stage holds the
 *          activations of all M micro-batches at its peak.
 *   1F1B:  (PipeDream-flush) stage s runs min(K - s - 1, M) forwards, then
 *          alternates one forward and one backward, then the remaining
 *          backwards: at most K - s micro-batches' activations at once.
 * Both leave (K - 1) / (M + K - 1) of the time idle with equal stages.
 *
 * Threading: one thread drives a runner; the op runs on the stage threads,
 * which live as long as the runner (per-thread state such as oneDNN's
 * primitives is made once). */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_PIPE_MAX_STAGES 8
#define STK_PIPE_MAX_MICRO  4096

typedef enum stk_pipe_schedule { STK_PIPE_GPIPE, STK_PIPE_1F1B } stk_pipe_schedule;

/* "gpipe" or "1f1b" -> *out; false when neither. */
bool stk_pipe_schedule_parse(const char *s, stk_pipe_schedule *out);
const char *stk_pipe_schedule_name(stk_pipe_schedule s);

/* Stage s's work in order: ops[i] = micro-batch index, + M for a backward
 * (2M entries). */
void stk_pipe_schedule_ops(stk_pipe_schedule sched, int stages, int micro, int s, int *ops);

typedef struct stk_pipe_runner stk_pipe_runner;

/* The work of one stage on one micro-batch. An error stops the run: every
 * stage's waits return, and the run reports the first error. */
typedef stk_status (*stk_pipe_op)(void *ctx, stk_pipe_runner *r, int stage, int micro,
                                  bool backward);

typedef struct stk_pipe_stats {
    int stages, micro_batches;
    int64_t transfers;                      /* payloads handed between stages */
    int max_in_flight[STK_PIPE_MAX_STAGES]; /* forwards not yet backward, at most */
    double busy_s[STK_PIPE_MAX_STAGES];     /* time in the op, waits excluded */
    double wall_s;                          /* the run, start to the last stage's end */
    double bubble;                          /* 1 - mean busy / wall */
} stk_pipe_stats;

/* `stages` threads (1..STK_PIPE_MAX_STAGES); thread_init (may be NULL) runs
 * once on each at its start with (init_ctx, stage). Errors: INVALID_ARG,
 * NOMEM, RESOURCE (no thread). */
stk_status stk_pipe_runner_create(int stages, void (*thread_init)(void *, int), void *init_ctx,
                                  stk_pipe_runner **out);
void stk_pipe_runner_destroy(stk_pipe_runner *r);

/* Run `micro` micro-batches (1..4096) under `sched`; waits for every stage.
 * After a failed run, `drop` (may be NULL) gets each payload sent and never
 * taken. */
stk_status stk_pipe_runner_run(stk_pipe_runner *r, int micro, stk_pipe_schedule sched,
                               stk_pipe_op op, void *ctx, void (*drop)(void *payload),
                               stk_pipe_stats *stats);

/* From inside an op: hand `payload` of micro-batch `micro` to the next stage
 * (forward) or the previous one (backward); take the one sent to `stage`
 * for `micro`, waiting for it. Payloads arrive in micro-batch order.
 * Errors: INTERNAL (no such neighbour or micro-batch), CANCELLED when
 * another stage failed (its error is the run's). */
stk_status stk_pipe_send(stk_pipe_runner *r, int stage, int micro, bool backward, void *payload);
stk_status stk_pipe_recv(stk_pipe_runner *r, int stage, int micro, bool backward, void **payload);

#ifdef __cplusplus
}
#endif
