/* Trial schedulers with Ray Tune's semantics: which trials go on after each
 * reported result. The caller reports every trial's result after each of
 * its epochs (t = epochs done, Ray's training_iteration) and obeys.
 *
 *     stk_sched_options o = stk_sched_defaults(STK_SCHED_ASHA);
 *     o.maximise = true;  o.max_t = 20;
 *     stk_scheduler *s;
 *     STK_TRY(stk_scheduler_create(&o, &s));
 *     stk_scheduler_add(s, trial);                       // before its first result
 *     if (stk_scheduler_result(s, trial, t, val_top1) == STK_DECISION_STOP) ...
 *     stk_scheduler_complete(s, trial, t, val_top1);     // it ended on its own
 *     stk_scheduler_destroy(s);
 *
 * FIFO: never stops a trial (it runs to max_t or its own early stopping).
 *
 * ASHA (Ray's AsyncHyperBandScheduler): each bracket s has rungs at
 * grace * rf^(k+s) for k below int(log(max_t/grace)/log(rf) - s + 1). When a
 * trial's t reaches the highest rung it has not reported at, the cutoff is
 * the (1 - 1/rf) quantile (linear interpolation, NaNs ignored) of the
 * results recorded at that rung so far; the trial stops when its result is
 * below it (above, when minimising), and its result is recorded there
 * either way. A trial at t >= max_t stops (it is done). A trial's bracket is
 * drawn at add time with probability proportional to e^(rungs): bracket 0
 * whenever brackets is 1.
 *
 * Median stopping (Ray's MedianStoppingRule with time_attr = epochs,
 * min_time_slice 0, hard stop): from t >= grace on, a trial stops when its
 * best result so far is worse than the median, over the other trials that
 * have reported at t or later (at least min_samples of them), of their mean
 * result over grace <= t' <= t (a NaN on either side stops it, as in Ray).
 * Ray may pause a trial when there are too few samples and others are
 * pending; Stoke never pauses (it goes on, as Ray does with none pending).
 *
 * PBT (Ray's PopulationBasedTraining with synch=True): a trial's result
 * at t, when t is perturbation_interval past its last perturbation, is
 * recorded as its score (stk_scheduler_pbt_result). Once every live trial
 * (added, not ended) has a score at the sync time (perturbation_interval,
 * then each interval on), stk_scheduler_pbt_round ranks the scored live
 * trials (stable by score, so ties keep the id order; no quantiles below 2
 * trials; each quantile ceil(n * quantile), at most half) and answers one
 * step per live trial in Ray's order: the top quantile first (each saves its
 * state), then the others in id order, then the bottom quantile (each
 * clones a top trial drawn at random: it loads the state that trial saved
 * in this round and explores from its values, stk_space_explore). Ray's
 * burn-in is 0. Why synchronous: Stoke's population steps in lockstep on
 * one shared stream, so every trial reaches the sync time in the same
 * round; a clone then copies a state of its own epoch and the population
 * stays in step (Ray's asynchronous mode would send it back to the epoch
 * of the clone's last save, to decode and train alone).
 *
 * ASHA and PBT compare rewards as Ray does, value * (maximise ? 1 : -1); the
 * median rule the raw values with max or min.
 * Not thread-safe: one thread reports.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_sched_kind {
    STK_SCHED_FIFO,
    STK_SCHED_ASHA,
    STK_SCHED_MEDIAN,
    STK_SCHED_PBT,
} stk_sched_kind;

typedef struct stk_sched_options {
    stk_sched_kind kind;
    bool maximise;
    int64_t max_t;                 /* epochs */
    int64_t grace;                 /* ASHA's first rung, median's grace period (epochs) */
    double reduction;              /* ASHA: rf > 1 */
    int brackets;                  /* ASHA: >= 1 */
    int min_samples;               /* median: other trials needed to decide */
    int64_t perturbation_interval; /* PBT: epochs between a trial's perturbations */
    double quantile;               /* PBT: the bottom and top fraction, in (0, 0.5] */
    uint64_t seed;                 /* ASHA's bracket draws, PBT's choice of a trial to clone */
} stk_sched_options;

/* Ray's defaults: grace 1, reduction 4, brackets 1, min_samples 3, max_t 100,
 * perturbation interval 1 (epochs), quantile 0.25. */
stk_sched_options stk_sched_defaults(stk_sched_kind kind);

/* "fifo", "asha", "median", "pbt"; -1 for another name. */
int stk_sched_parse(const char *name);
const char *stk_sched_name(stk_sched_kind k);

typedef enum stk_decision { STK_DECISION_CONTINUE, STK_DECISION_STOP } stk_decision;

typedef struct stk_scheduler stk_scheduler;

/* Errors: INVALID_ARG naming the flag (--grace < 1, --reduction <= 1,
 * --brackets < 1 or more than the rungs allow, --epochs < 1). */
stk_status stk_scheduler_create(const stk_sched_options *o, stk_scheduler **out);
void stk_scheduler_destroy(stk_scheduler *s);

/* A trial (its id, 0-based, any order) before its first result.
 * Errors: NOMEM. */
stk_status stk_scheduler_add(stk_scheduler *s, int64_t trial);

/* Its result after epoch t (1-based). NaN is a result like Ray's (ignored
 * by ASHA's quantile, never better than a cutoff). */
stk_decision stk_scheduler_result(stk_scheduler *s, int64_t trial, int64_t t, double value);

/* It ended on its own (early stopping, an error with a last result): its
 * last result is recorded where Ray records it (ASHA: as a result). */
void stk_scheduler_complete(stk_scheduler *s, int64_t trial, int64_t t, double value);

/* It failed (no result): PBT leaves it out of the ranking. */
void stk_scheduler_remove(stk_scheduler *s, int64_t trial);

/* PBT: a result (stk_scheduler_result gives CONTINUE for PBT). */
void stk_scheduler_pbt_result(stk_scheduler *s, int64_t trial, int64_t t, double value);

/* One trial's part of a PBT perturbation. */
typedef struct stk_pbt_step {
    int64_t trial;
    bool save;     /* keep this trial's state now: it may be cloned */
    int64_t clone; /* >= 0: load that trial's state saved in this round, explore from its values */
} stk_pbt_step;

/* The perturbation, once every live trial has reached the sync time:
 * *n_steps steps (0: not yet; steps has room for every trial added), done
 * in their order. Errors: NOMEM. */
stk_status stk_scheduler_pbt_round(stk_scheduler *s, stk_pbt_step *steps, int64_t *n_steps);

/* ASHA: the rung milestones of bracket b, highest first (n of them). */
int stk_scheduler_rungs(const stk_scheduler *s, int bracket, int64_t *milestones, int max);

#ifdef __cplusplus
}
#endif
