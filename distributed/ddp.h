/* Data-parallel training (what PyTorch's DistributedDataParallel does) on a
 * trainer: every rank runs the same model on its shard of each batch, and
 * the gradients are averaged over the ranks before each optimizer step.
 *
 *     stk_comm *c;
 *     STK_TRY(stk_comm_open(&c));
 *     o.rank = stk_comm_rank(c), o.world = stk_comm_world(c);   // the loader's shard
 *     ... model, optimizer, trainer ...
 *     stk_ddp_check_item items[] = {{"--batch", "32"}, {"--lr", "0.05"}};
 *     stk_ddp *d;
 *     STK_TRY(stk_ddp_attach(trainer, model, c, 2, items, &d));  // rank 0's weights everywhere
 *     ... stk_trainer_train_epoch as usual ...
 *     stk_trainer_destroy(trainer);                           // then
 *     stk_ddp_destroy(d);
 *
 * How: attach checks that every rank runs the same configuration (the
 * caller's items, then the model's parameter names, shapes and which are
 * trainable: every rank learns the first difference, with both values, and
 * fails with the same message), then broadcasts parameters and buffers
 * from rank 0. Both are collectives under the communicator's watchdog. The trainable parameters are
 * cut into buckets in reverse order (the order their gradients become final in backward): the first
 * about 1 MB, the others about 25 MB. The trainer's GRAD_READY hook copies each gradient into its
 * bucket's flat buffer; when a bucket is full a communication thread all-reduces it while backward
 * goes on; buckets are reduced in the same order on every rank. AFTER_BACKWARD waits for the last
 * bucket and writes the averages (sum / world) back into the gradients. Batch norm keeps per-rank
 * statistics, as DDP does, unless stk_ddp_sync_batch_norm. Every all-reduce (buckets, sync batch
 * norm, stk_ddp_allreduce) runs on the communication thread in the order it was asked for, which is
 * the same on every rank.
 *
 * On GPUs in a build with NCCL the buckets are device memory: each
 * gradient is copied in on the compute stream, and a full bucket's
 * all-reduce (NCCL's average) is queued on a communication stream behind
 * those copies, overlapping the rest of backward; AFTER_BACKWARD makes the
 * compute stream wait for them, waits on the host too (bounded by the
 * watchdog) and copies the averages back. Otherwise (CPU, or no NCCL)
 * gradients travel through host memory and MPI on the communication thread.
 * Every trainable parameter must receive a gradient in every step (no
 * unused parameters). One ddp per trainer.
 */
#pragma once

#include "distributed/comm.h"
#include "engine/nn.h"
#include "train/trainer.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_ddp stk_ddp;

/* A value every rank must agree on before training starts, as text (a flag's
 * value, a file's fingerprint in hex). */
typedef struct stk_ddp_check_item {
    const char *name;
    const char *value;
} stk_ddp_check_item;

/* Errors: INVALID_ARG (a rank differs: "rank 1 differs from rank 0: --batch
 * 32 against 16", the same message on every rank), the communicator's
 * (the watchdog's timeout among them), NOMEM. */
stk_status stk_ddp_attach(stk_trainer *t, stk_model *m, stk_comm *c, int n_items,
                          const stk_ddp_check_item *items, stk_ddp **out);
/* Stop the communication thread and free. Destroy the trainer first (its
 * hooks point here). NULL is a no-op. */
void stk_ddp_destroy(stk_ddp *d);

/* The watchdog: a step whose gradient all-reduce has not finished `seconds`
 * after backward (another rank hung, stopped or died) fails with
 * STK_ERR_IO naming the step, instead of waiting forever;
 * the caller then stops the job (stk_comm_abort). Default 300 s. */
void stk_ddp_set_timeout(stk_ddp *d, double seconds);

/* All-reduce (sum) `n` floats through the communication thread, under the
 * watchdog, in order with the gradient buckets: for the figures of an epoch
 * or the statistics of sync batch norm. Main thread only. */
stk_status stk_ddp_allreduce(stk_ddp *d, float *buf, size_t n);

/* An epoch's figures for the job, on every rank (stk_trainer_fit's reduce
 * step, train/fit.h): the training loss, accuracy and stall averaged over
 * the ranks (equal shards: plain means), images/s summed; with `val` (the
 * run has a validation set), rank 0's evaluation given to every rank
 * exactly, and with `val_ema` (the trainer keeps a moving average) that
 * average's evaluation too. The ranks wait for rank 0's evaluation at most
 * the watchdog's timeout plus `eval_allowance_s`. Main thread only. */
stk_status stk_ddp_reduce_epoch(stk_ddp *d, stk_epoch_stats *es, stk_eval_result *val,
                                stk_eval_result *val_ema, double eval_allowance_s);

/* Batch norm in train mode takes its statistics over every rank's batch
 * (PyTorch's SyncBatchNorm; engine/ops.h stk_batch_norm_sync), through
 * stk_ddp_allreduce. Nothing in a world of one. */
void stk_ddp_sync_batch_norm(stk_ddp *d);

/* Pipeline stages on ranks (train/pipeline.h): every `k` ranks work on one
 * batch, so the job's images/s is the ranks' sum / k. */
void stk_ddp_set_ranks_per_replica(stk_ddp *d, int k);

typedef struct stk_ddp_stats {
    const char *library; /* what moves the gradients: "NCCL 2.28.9", "Open MPI v4.1.4" */
    int buckets;
    uint64_t bytes_per_step; /* gradient bytes all-reduced per step (per rank) */
    uint64_t steps;
    double comm_s;    /* time in gradient all-reduces (NCCL: the stream's, from events) */
    double exposed_s; /* the step's time waiting for it after backward */
} stk_ddp_stats;
void stk_ddp_get_stats(const stk_ddp *d, stk_ddp_stats *out);

#ifdef __cplusplus
}
#endif
