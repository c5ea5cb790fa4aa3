/* Pipeline stages on ranks (stoke train --pipeline K under mpirun -np K*D):
 * rank = replica * K + stage, D replicas of one pipeline, each its shard of
 * the data. This gives the link between a rank's stage and the other
 * stages of its pipeline (train/pipeline.h's stk_pipe_link over comm.h's
 * point-to-point calls), and after each step averages batch norm's running
 * statistics and counters (which only a stage's ranks computed) over the
 * replicas onto every rank, so every rank holds the whole model.
 *
 *     stk_pipe_ranks *pr;
 *     STK_TRY(stk_pipe_ranks_open(comm, K, &pr));
 *     tc.pipeline.link = stk_pipe_ranks_link(pr);     // the trainer's pipeline config
 *     ... trainer, then stk_ddp_attach(..., &ddp), stk_ddp_set_ranks_per_replica(ddp, K) ...
 *     STK_TRY(stk_pipe_ranks_average_buffers(pr, trainer, model, ddp));
 *     ... fit ...
 *     stk_trainer_destroy(trainer); stk_ddp_destroy(ddp);
 *     stk_pipe_ranks_close(pr);
 */
#pragma once

#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "train/pipeline.h"
#include "train/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_pipe_ranks stk_pipe_ranks;

/* K stages over comm's ranks. Errors: INVALID_ARG (the ranks are not a
 * multiple of K, naming both), NOMEM. */
stk_status stk_pipe_ranks_open(stk_comm *comm, int stages, stk_pipe_ranks **out);
/* This rank's stage, its replica (the data shard) and the replicas' count. */
int stk_pipe_ranks_stage(const stk_pipe_ranks *p);
int stk_pipe_ranks_replica(const stk_pipe_ranks *p);
int stk_pipe_ranks_replicas(const stk_pipe_ranks *p);
/* The link for the trainer's pipeline (valid while p is). */
const stk_pipe_link *stk_pipe_ranks_link(const stk_pipe_ranks *p);
/* After each optimizer step of t (whose pipeline runs this rank's stage):
 * model's buffers averaged over the replicas through ddp (a hook on t;
 * destroy t before p). */
stk_status stk_pipe_ranks_average_buffers(stk_pipe_ranks *p, stk_trainer *t, stk_model *model,
                                          stk_ddp *ddp);
void stk_pipe_ranks_close(stk_pipe_ranks *p);

#ifdef __cplusplus
}
#endif
