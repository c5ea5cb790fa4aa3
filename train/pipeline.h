/* A model's gradients over micro-batches, on one device or as a pipeline
 * of stages: --micro-batches M, --pipeline K, --schedule, --split-after.
 *
 *     stk_pipeline_config c = {.stages = 2, .micro_batches = 4,
 *                              .schedule = STK_PIPE_1F1B, .threads = 2};
 *     stk_pipeline *p;
 *     STK_TRY(stk_pipeline_create(model, &c, &p));
 *     float loss;
 *     stk_tensor *logits;
 *     STK_TRY(stk_pipeline_step(p, x, labels, 0.1f, 1.f, step, &loss, &logits, NULL));
 *     // every trainable parameter's gradient now holds the batch's; then the optimizer
 *
 * The batch of N splits into M micro-batches (sizes differ by at most 1);
 * each one's cross-entropy is weighted by its share of N, so the summed
 * gradients are those of the batch's mean loss; batch norm sees each
 * micro-batch alone (GPipe's choice: statistics per micro-batch, running
 * statistics updated once per micro-batch).
 *
 * One stage (K = 1): forward and backward of each micro-batch in turn on
 * the calling thread (gradient accumulation: the reference a pipeline
 * equals). K stages: the model's units (stk_model_unit_count) cut into K
 * contiguous runs, after the units named in split_after or, by default,
 * balanced by each unit's forward time measured on the first micro-batch;
 * each stage on a thread of its own with threads / K OpenMP threads (the
 * CPU's "devices": thread groups with their own oneDNN primitives and
 * scratch), running the schedule (train/pipe_runner.h). Activations go
 * forward and their gradients back as copies: 2 M (K - 1) transfers a
 * step. The parameters stay where they are: a checkpoint is the same
 * model under the same names whatever K was.
 *
 * With a link (stages on ranks: one stage a process, the stage's forward
 * and backward on the calling thread): the split must be given by name (the
 * processes cannot measure each other's units); activations and gradients
 * travel as a header (shape) and the floats; after the schedule the last
 * stage sends the batch's loss and logits to the others, so every stage
 * returns them; every trainable parameter of the other stages gets a zero
 * gradient; and each micro-batch's loss is multiplied by K, so that the
 * data-parallel average over all ranks (sum / world, every parameter's
 * gradient nonzero on one rank per pipeline) is the average over the
 * pipelines. The CPU only.
 *
 * Threading: one thread drives a pipeline; the model must not be used
 * elsewhere during a step. */
#pragma once

#include "engine/nn.h"
#include "train/pipe_runner.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stages in other processes (MPI ranks: tools/train_setup.c makes one):
 * this process runs stage `stage` of a pipeline whose others it reaches
 * through send/recv (bytes to / from that stage's process, the same tag on
 * both sides). send only starts a send (*pending); buf stays untouched
 * until wait(pending) returns, which the pipeline calls before the step
 * ends. */
typedef struct stk_pipe_link {
    int stage;
    void *ctx;
    stk_status (*send)(void *ctx, int stage, int tag, const void *buf, size_t bytes,
                       void **pending);
    stk_status (*wait)(void *ctx, void *pending);
    stk_status (*recv)(void *ctx, int stage, int tag, void *buf, size_t bytes);
} stk_pipe_link;

typedef struct stk_pipeline_config {
    int stages;                 /* K: 1 .. STK_PIPE_MAX_STAGES */
    int micro_batches;          /* M: 1 .. STK_PIPE_MAX_MICRO */
    stk_pipe_schedule schedule; /* K > 1 */
    const char *split_after;    /* K - 1 unit names, comma-separated, in order; NULL: balanced */
    int threads;                /* CPU threads for all stages (0: the current OpenMP count) */
    const stk_pipe_link *link;  /* NULL: every stage here; else this process's stage alone */
    bool autocast;              /* the stage threads run in autocast (--amp; engine/autocast.h) */
} stk_pipeline_config;

typedef struct stk_pipeline stk_pipeline;

/* Errors: INVALID_ARG (K or M out of range; more stages than units; a name
 * in split_after that is not a unit, out of order, or not K - 1 of them,
 * listing the units), NOMEM, INTERNAL (no thread). */
stk_status stk_pipeline_create(stk_model *m, const stk_pipeline_config *c, stk_pipeline **out);
void stk_pipeline_destroy(stk_pipeline *p);

/* One step's forward and backward: x [N, C, H, W] f32, labels i32 [N]
 * (N >= M). Gradients accumulate into the parameters' (as backward does);
 * each micro-batch's loss is multiplied by loss_scale too (a loss scaler's;
 * 1 otherwise). *loss: the batch's mean loss (unscaled); *logits [N,
 * classes], no history, the caller's to release; stats may be NULL. forward_id numbers the step's
 * forwards for dropout (micro-batch i uses forward_id * STK_PIPE_MAX_MICRO + i). Errors:
 * INVALID_ARG (N < M), those of the model's forward and backward, naming the stage and micro-batch.
 */
stk_status stk_pipeline_step(stk_pipeline *p, stk_tensor *x, stk_tensor *labels, float smoothing,
                             float loss_scale, uint64_t forward_id, float *loss,
                             stk_tensor **logits, stk_pipe_stats *stats);

/* After the first step (or at create with split_after): the stages as
 * text, "stage 0: conv1 .. layer2.1 (9 units), stage 1: layer3.0 .. fc (6
 * units)"; before it, "balanced at the first step". */
const char *stk_pipeline_describe(const stk_pipeline *p, char *buf, size_t n);
/* Stage s runs units [stk_pipeline_stage_first(p, s), ...(p, s + 1)); -1 before the split. */
int stk_pipeline_stage_first(const stk_pipeline *p, int s);
/* With a link: whether parameter i of the model (stk_model_param) belongs
 * to this process's stage (true for all without a link, or before the
 * split). */
bool stk_pipeline_owns_param(const stk_pipeline *p, int i);

#ifdef __cplusplus
}
#endif
