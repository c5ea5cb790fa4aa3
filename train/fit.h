/* A whole training run as one call: the epoch loop, evaluation after each
 * epoch, the last/best checkpoint policy and early stopping (Keras's
 * EarlyStopping), over a trainer (trainer.h). `stoke train` is flags and
 * printing around it; examples/train_minimal.c is the smallest program.
 *
 *     stk_fit_options o = stk_fit_defaults();
 *     o.train = loader;  o.h2d = h2d;        // the training batches
 *     o.val = val_loader;                    // NULL: no evaluation
 *     o.epochs = 30;
 *     o.run_dir = "run";                     // last.safetensors, best.safetensors
 *     o.early = (stk_early_stop){.patience = 3, .restore_best = true};
 *     o.on_epoch = print_line;  o.ctx = &me; // after each epoch; may end the run
 *     stk_fit_result r;
 *     STK_TRY(stk_trainer_fit(trainer, &o, &r)); // r.reason, r.best_epoch, r.best_value
 *
 * Each epoch: train over o.train (stk_trainer_train_epoch), evaluate o.val,
 * o.reduce (data-parallel: the job's figures on every rank), the monitored
 * value against the best so far, checkpoints (last always, best when it
 * improved), o.on_epoch, then the stop rules in this order: early stopping,
 * the last epoch, o.stop_after. The run starts at the trainer's position
 * (a resumed trainer continues its epochs and its early-stopping state,
 * which the checkpoints hold). Need more control? stk_trainer_train_epoch.
 *
 * Early stopping (Keras): an epoch improves when its monitored value is
 * better than the best by strictly more than min_delta (a NaN or infinite
 * value never does); the run stops once `patience` epochs in a row have not
 * improved, counting from start_from_epoch. With restore_best the trainer's
 * model ends with the best epoch's weights and buffers, bit for bit (kept in
 * host memory; after a resume, read from best.safetensors), whatever
 * stopped the run; last.safetensors stays the resumable last epoch.
 */
#pragma once

#include "train/trainer.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_monitor {
    STK_MONITOR_VAL_LOSS,
    STK_MONITOR_VAL_TOP1,
    STK_MONITOR_VAL_TOP5,
    STK_MONITOR_TRAIN_LOSS,
    STK_MONITOR_TRAIN_TOP1,
    STK_MONITOR_EMA_VAL_LOSS, /* the moving average of the weights' evaluation (--ema) */
    STK_MONITOR_EMA_VAL_TOP1,
    STK_MONITOR_EMA_VAL_TOP5,
    STK_MONITORS
} stk_monitor;

/* "val_loss", "val_top1", ...; NULL outside the enum. */
const char *stk_monitor_name(stk_monitor m);
/* The monitor named `name`, or -1. */
int stk_monitor_parse(const char *name);
/* Whether it needs a validation set; the trainer's moving average; whether
 * lower is better (a loss). */
bool stk_monitor_needs_val(stk_monitor m);
bool stk_monitor_is_ema(stk_monitor m);
bool stk_monitor_is_loss(stk_monitor m);

/* Its value after an epoch (val, val_ema NULL: NaN for the monitors that
 * read them). */
double stk_fit_metric(stk_monitor m, const stk_epoch_stats *es, const stk_eval_result *val,
                      const stk_eval_result *val_ema);

typedef enum stk_mode { STK_MODE_AUTO, STK_MODE_MIN, STK_MODE_MAX } stk_mode;

typedef struct stk_early_stop {
    int patience;             /* epochs without improvement before stopping; < 0: never stop */
    stk_monitor monitor;      /* what improves; also what "best" means for best.safetensors */
    double min_delta;         /* an improvement must be larger than this (>= 0) */
    stk_mode mode;            /* AUTO: min for losses, max for accuracies */
    int64_t start_from_epoch; /* epochs (completed) before improvements are counted */
    bool restore_best;        /* end with the best epoch's weights in the model */
} stk_early_stop;

/* What one epoch did, for the callbacks (valid during the call). */
typedef struct stk_fit_epoch {
    int64_t epoch;             /* 0-based: metrics.csv's epoch column is epoch + 1 */
    stk_epoch_stats *train;    /* the reduce callback may rewrite these */
    stk_eval_result *val;      /* NULL without validation; reduce fills it in where
                                  o.val_elsewhere */
    stk_eval_result *val_ema;  /* the same for the trainer's moving average (NULL: none) */
    const uint64_t *confusion; /* o.confusion, filled by this epoch's evaluation (NULL:
                                  not counted, or evaluated on another rank) */
    double monitored;          /* the monitored value (after reduce) */
    bool improved;             /* it is the new best (best.safetensors was written) */
    int64_t wait;              /* epochs without improvement so far */
} stk_fit_epoch;

/* reduce: after the epoch's training and evaluation, before anything is
 * decided from them (data-parallel: average over the ranks, give every rank
 * rank 0's evaluation). on_epoch: once the epoch's best/patience state is
 * known and before its checkpoints are written (a run log row first, then
 * the checkpoint it belongs to); *stop = true ends the run (reason
 * STK_FIT_CALLBACK). Errors end the run with them. */
typedef stk_status (*stk_fit_reduce)(void *ctx, stk_fit_epoch *e);
typedef stk_status (*stk_fit_callback)(void *ctx, const stk_fit_epoch *e, bool *stop);

typedef struct stk_fit_options {
    stk_loader *train; /* the training loader and its H2D stage (both required) */
    stk_h2d *h2d;
    stk_loader *val;     /* opened with stk_trainer_eval_options; NULL: no evaluation */
    uint64_t *confusion; /* classes x classes: each evaluation's confusion matrix, true x
                            predicted (stk_trainer_evaluate_per_class); NULL: none */
    bool val_elsewhere;  /* val NULL here, but another rank evaluates: reduce gives its figures */
    int64_t epochs;      /* the run ends after epoch `epochs` (counted from 1) */
    int64_t stop_after;  /* > 0: this call ends after that many epochs (resume later) */
    const char *run_dir; /* last.safetensors and best.safetensors (made when missing); NULL: none */
    bool write;          /* this process writes run_dir (data-parallel: rank 0) */
    int n_meta;          /* more checkpoint metadata pairs (the run's transforms, ...) */
    const char *const *meta_keys, *const *meta_values;
    stk_early_stop early;
    stk_status (*epoch_begin)(void *ctx, int64_t epoch); /* before each epoch (NULL: none) */
    stk_epoch_progress progress; /* after each step (NULL: none); Ctrl-C through it */
    const char *eval_label;      /* a progress bar on stderr while evaluating; NULL: none */
    stk_fit_reduce reduce;
    stk_fit_callback on_epoch;
    void *ctx; /* given to the callbacks */
} stk_fit_options;

/* Early stopping off (patience -1), monitor val_loss, mode auto, write true. */
stk_fit_options stk_fit_defaults(void);

typedef enum stk_fit_stop {
    STK_FIT_FINISHED,   /* the last epoch ran */
    STK_FIT_EARLY_STOP, /* patience ran out */
    STK_FIT_STOP_AFTER, /* stop_after epochs ran */
    STK_FIT_CALLBACK,   /* on_epoch asked */
    STK_FIT_CANCELLED,  /* progress returned STK_ERR_CANCELLED (Ctrl-C): fit returns it */
    STK_FIT_DIVERGED,   /* a loss or parameter was not finite: fit returns STK_ERR_DIVERGED */
    STK_FIT_FAILED,     /* any other error */
} stk_fit_stop;

/* "finished", "early_stop", "stop_after", "callback", "cancelled", "diverged", "failed". */
const char *stk_fit_stop_name(stk_fit_stop s);

typedef struct stk_fit_result {
    int64_t epochs_run;    /* by this call */
    int64_t stopped_epoch; /* the last epoch trained, counted from 1 (0: none ran) */
    int64_t best_epoch;    /* counted from 1; 0: no epoch improved */
    double best_value;     /* the monitored value there (NaN: none) */
    stk_fit_stop reason;
    stk_epoch_stats train; /* the last epoch's (after reduce) */
    stk_eval_result val;   /* the last epoch's, or with restore_best the best epoch's */
    stk_eval_result best_val;
} stk_fit_result;

/* Run it. Errors (the run ends, the last good checkpoint stays):
 * INVALID_ARG (options: no loader, epochs < 1, a val_* monitor without
 * o.val, patience with restore_best and no run_dir after a resume),
 * STK_ERR_CANCELLED (progress said so), STK_ERR_DIVERGED, the loaders',
 * the engine's, the checkpoints' and the callbacks'. *out is filled in
 * either way with what ran. */
stk_status stk_trainer_fit(stk_trainer *t, const stk_fit_options *o, stk_fit_result *out);

/* The same run an epoch at a time, for a driver that trains the epoch
 * itself (stoke tune feeds several trainers from one stream):
 *
 *     stk_fit *f;
 *     STK_TRY(stk_fit_open(trainer, &o, &f));     // o.train and o.h2d unused
 *     for (int64_t e; (e = stk_fit_next_epoch(f)) >= 0;) {
 *         ... stk_trainer_epoch_start/step/finish, stk_trainer_eval_start/batch/finish
 *         bool stop;
 *         STK_TRY(stk_fit_epoch_done(f, &stats, &val, NULL, &stop));  // judge, report, ...
 *     }
 *     STK_TRY(stk_fit_finish(f, &result));          // restore_best; the result
 *     stk_fit_close(f);
 *
 * epoch_done takes the epoch the trainer just finished (val NULL: none) and
 * does what stk_trainer_fit does after training and evaluating it (reduce,
 * early stopping, on_epoch, checkpoints); next_epoch is then -1 once a stop
 * rule or the last epoch ended the run. The options are copied; the
 * strings and callbacks they point to must outlive f. */
typedef struct stk_fit stk_fit;
stk_status stk_fit_open(stk_trainer *t, const stk_fit_options *o, stk_fit **out);
int64_t stk_fit_next_epoch(const stk_fit *f);
stk_status stk_fit_epoch_done(stk_fit *f, stk_epoch_stats *es, stk_eval_result *val,
                              stk_eval_result *val_ema, bool *stop);
stk_status stk_fit_finish(stk_fit *f, stk_fit_result *out);
/* NULL is a no-op. */
void stk_fit_close(stk_fit *f);

#ifdef __cplusplus
}
#endif
