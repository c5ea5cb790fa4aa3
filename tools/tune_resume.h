/* Resuming a `stoke tune` sweep (tune_resume.c), private to the sweep:
 * DIR/results.log read back, each cohort's entries replayed to the
 * scheduler in the first run's order (a trial's entries past its last
 * checkpoint dropped: it redoes those epochs), unfinished trials given
 * --resume (or --overwrite when they had no checkpoint), the log rewritten
 * with the kept entries and opened for appending. */
#pragma once

#include "tools/tune_sweep.h"

#include <stddef.h>

typedef struct entry {
    int64_t trial, epoch;
    double value;
} entry;

/* Errors: FORMAT naming the line (not a result of this sweep), IO, NOMEM. */
stk_status tune_read_log(const tune_config *c, int64_t n_trials, entry **out, size_t *n);
/* The epoch of trial t's last checkpoint (0: none). */
int64_t tune_checkpoint_epoch(const tune_trial *t);
/* Cohort [k0, k1)'s entries from *next on, fed to s; kept ones into keep. */
void tune_replay_cohort(const tune_config *c, stk_scheduler *s, tune_trial *trials,
                        const entry *log, size_t n_log, size_t *next, int64_t k0, int64_t k1,
                        const int64_t *ckpt, entry *keep, size_t *n_keep);
/* The same for PBT, round by round (tune/scheduler.h): each epoch's
 * entries recorded, the trials that failed leaving the population where
 * they did, every complete round planned again (tune_pbt_plan: the explore
 * draws in step); a pending trial whose checkpoint is that round's epoch
 * does its part of it again once it runs (redo_*). Errors: NOMEM. */
stk_status tune_replay_pbt(const tune_config *c, stk_scheduler *s, tune_trial *trials,
                           int64_t n_trials, const entry *log, size_t n_log, size_t *next,
                           int64_t k0, int64_t k1, const int64_t *ckpt, entry *keep,
                           size_t *n_keep);
stk_status tune_resume_flags(tune_trial *trials, int64_t n, const int64_t *ckpt);
stk_status tune_rewrite_log(tune_config *c, const entry *keep, size_t n);
