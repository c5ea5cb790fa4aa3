/* One running trial of `stoke tune` (stk_tune_trial.c), private to the sweep:
 * set up as `stoke train` would be (train_setup.h), an epoch at a time
 * through fit's calls (train/fit.h), and what every rank learns of it.
 *
 * An epoch of a trial ends in two halves: its own (tune_trial_epoch: fit
 * judges the epoch, writes metrics.csv and checkpoints, and a report of
 * the result is made), then, once every rank's reports are in, the
 * scheduler's (tune_run.c feeds them in trial order and tells the trial's
 * owner what to do: stop, keep its state, clone another's). */
#pragma once

#include "runlog/tfevents.h"
#include "tune/sweep.h"

/* What every rank learns of a trial's epoch (or of its failure). */
typedef enum report_kind { REPORT_RESULT, REPORT_ENDED, REPORT_ERROR } report_kind;

typedef struct tune_report {
    int64_t trial, epoch; /* epoch: done, counted from 1 */
    double value;         /* the sweep's metric */
    int32_t kind;         /* report_kind */
    int32_t status;       /* REPORT_ENDED: STK_TRIAL_COMPLETED or STK_TRIAL_EARLY_STOPPED */
    int64_t epochs_run, best_epoch;
    double best_value, seconds;
    char error[512];
} tune_report;

typedef struct live {
    const stk_tune_config *c;
    stk_tfevents *hparams; /* its HParams session (NULL without TensorBoard) */
    stk_tune_trial *t;
    stk_run r;
    stk_fit *fit;
    stk_epoch_run er;
    stk_eval_run ev;
    bool running; /* set up, not ended */
    bool active;  /* in this epoch */
    bool failed;  /* ended by an error since the last report: one is owed */
    double t0;
} live;

/* Set trial L->t up, on `data`'s loaders when given (a group's first
 * trial opens them). false: it failed (ended as ERROR, a report owed). */
bool tune_trial_start(live *L, const live *data);
/* An error of its step or evaluation: it ends (ERROR, a report owed). */
void tune_trial_failed(live *L);
/* The trial's half of the end of an epoch: *r its report (false: none,
 * it failed here and is owed one). */
bool tune_trial_epoch(live *L, tune_report *r);
/* The report owed by a failed trial. */
void tune_trial_error_report(live *L, tune_report *r);
/* End its run (fit finished, the HParams session closed) with `status`. */
void tune_trial_end(live *L, stk_trial_status status, const char *error);
/* Close what is left of it (an interrupted trial stays PENDING). */
void tune_trial_close(live *L, bool closes_data);

/* A trial ended (any rank's): the progress line and trials.csv (rank 0). */
void tune_announce(const stk_tune_config *c, stk_tune_trial *trials, int64_t n, stk_tune_trial *t);
