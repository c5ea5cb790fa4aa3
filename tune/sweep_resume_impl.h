/* Resuming a `stoke tune` sweep (tune_resume.c), private to the sweep:
 * DIR/results.log (or under a launcher each rank's results.rankR.log) read
 * back and put in the order the scheduler took the entries in (by the
 * exchange they preceded, then trial), each cohort's entries replayed to
 * the scheduler (a trial's entries past its last checkpoint dropped: it
 * redoes those epochs), unfinished trials given --resume (or --overwrite
 * when they had no checkpoint). The logs are only ever appended to. */
#pragma once

#include "tune/sweep.h"

#include <stddef.h>

typedef struct entry {
    int64_t trial, epoch;
    double value;
    int64_t settle; /* the exchange it preceded (-1: a log from before settles) */
    size_t order;   /* its place in the files read */
} entry;

/* The entries the scheduler took, in its order (an epoch written again by
 * a later run replaces the earlier entry; an ended trial's entries past its
 * epochs_run go); *next_settle: the number of this run's first exchange.
 * Errors: FORMAT naming the file and line (not a result of this sweep),
 * IO, NOMEM. */
stk_status tune_read_log(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n_trials,
                         entry **out, size_t *n, int64_t *next_settle);
/* The epoch of trial t's last checkpoint (0: none). */
int64_t tune_checkpoint_epoch(const stk_tune_trial *t);
/* Cohort [k0, k1)'s entries from *next on, fed to s. */
void tune_replay_cohort(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                        const entry *log, size_t n_log, size_t *next, int64_t k0, int64_t k1,
                        const int64_t *ckpt);
/* The same for PBT, round by round (tune/scheduler.h): each epoch's
 * entries recorded, the trials that failed leaving the population where
 * they did, every complete round planned again (tune_pbt_plan: the explore
 * draws in step); a pending trial whose checkpoint is that round's epoch
 * does its part of it again once it runs (redo_*). Errors: NOMEM. */
stk_status tune_replay_pbt(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                           int64_t n_trials, const entry *log, size_t n_log, size_t *next,
                           int64_t k0, int64_t k1, const int64_t *ckpt);
stk_status tune_resume_flags(stk_tune_trial *trials, int64_t n, const int64_t *ckpt);
