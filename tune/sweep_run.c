/* Running a `stoke tune` sweep (tune_sweep.h): cohorts of trials on shared streams,
 * shared between the ranks of a job, and the scheduler's decisions. */
#include "tune/sweep.h"

#include "common/clock.h"
#include "common/rng.h"
#include "tune/sweep_resume_impl.h"
#include "tune/sweep_trial_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data of a group: the same loader flags (batch, read order and its blocks, cache,
 * transforms). */
static bool same_data(const stk_run_settings *a, const stk_run_settings *b)
{
    return a->batch == b->batch && a->order == b->order && a->block_mib == b->block_mib &&
           a->block_window == b->block_window && a->cache_mb == b->cache_mb &&
           !strcmp(a->transform ? a->transform : "", b->transform ? b->transform : "") &&
           !strcmp(a->val_transform ? a->val_transform : "",
                   b->val_transform ? b->val_transform : "");
}

/* One epoch of every active trial of the group over the owner's stream. */
static stk_status train_epoch(live *g, int n, const live *owner, int64_t e)
{
    STK_TRY(stk_h2d_drain(owner->r.h2d));
    STK_TRY(stk_loader_start_epoch(owner->r.loader, (uint64_t)e));
    for (int i = 0; i < n; i++)
        if (g[i].active) stk_trainer_epoch_start(g[i].r.trainer, &g[i].er);
    stk_status st;
    for (;;) {
        double w0 = stk_clock_sec();
        stk_device_batch *b;
        st = stk_h2d_next(owner->r.h2d, &b);
        if (st == STK_END) break;
        if (st != STK_OK) return st;
        double waited = stk_clock_sec() - w0;
        for (int i = 0; i < n; i++)
            if (g[i].active &&
                stk_trainer_epoch_step(g[i].r.trainer, &g[i].er, b, waited) != STK_OK)
                tune_trial_failed(&g[i]);
        stk_h2d_release(owner->r.h2d, b);
        if (owner->c->cancel && *owner->c->cancel) return stk_error(STK_ERR_CANCELLED, "interrupted");
    }
    return STK_OK;
}

/* The validation pass of every active trial over one stream. */
static stk_status evaluate(live *g, int n, const live *owner)
{
    if (!owner->r.val_loader) return STK_OK;
    stk_h2d *h;
    STK_TRY(stk_h2d_open(owner->r.val_loader, owner->r.ce, &h));
    stk_status st = stk_loader_start_epoch(owner->r.val_loader, 0);
    for (int i = 0; i < n; i++)
        if (g[i].active) stk_trainer_eval_start(g[i].r.trainer, &g[i].ev);
    stk_device_batch *b;
    while (st == STK_OK && (st = stk_h2d_next(h, &b)) == STK_OK) {
        for (int i = 0; i < n; i++)
            if (g[i].active && stk_trainer_eval_batch(g[i].r.trainer, &g[i].ev, b) != STK_OK)
                tune_trial_failed(&g[i]);
        stk_h2d_release(h, b);
        if (owner->c->cancel && *owner->c->cancel) st = stk_error(STK_ERR_CANCELLED, "interrupted");
    }
    stk_h2d_close(h);
    return st == STK_END ? STK_OK : st;
}

/* ---- what every rank learns, and the scheduler's decisions ------------------------- */

/* Every rank's reports (each at most cap), merged in trial order. With one
 * rank, the reports as they are. */
static stk_status exchange(const stk_tune_config *c, const tune_report *mine, int n_mine, int cap,
                           tune_report **all, int *n_all)
{
    size_t slot = sizeof(int64_t) + (size_t)cap * sizeof(tune_report);
    uint8_t *send = calloc(1, slot), *recv = calloc((size_t)c->world, slot);
    *all = malloc((size_t)(c->world * cap + 1) * sizeof **all);
    stk_status st = send && recv && *all ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) {
        int64_t n = n_mine;
        memcpy(send, &n, sizeof n);
        memcpy(send + sizeof n, mine, (size_t)n_mine * sizeof *mine);
        st = c->world > 1 ? stk_comm_allgather(c->comm, send, slot, recv) : STK_OK;
        if (c->world == 1) memcpy(recv, send, slot);
    }
    *n_all = 0;
    for (int r = 0; st == STK_OK && r < c->world; r++) {
        int64_t n;
        memcpy(&n, recv + (size_t)r * slot, sizeof n);
        memcpy(*all + *n_all, recv + (size_t)r * slot + sizeof n, (size_t)n * sizeof **all);
        *n_all += (int)n;
    }
    for (int i = 1; i < *n_all; i++) /* insertion sort by trial: few reports */
        for (int j = i; j > 0 && (*all)[j - 1].trial > (*all)[j].trial; j--) {
            tune_report x = (*all)[j];
            (*all)[j] = (*all)[j - 1];
            (*all)[j - 1] = x;
        }
    free(send);
    free(recv);
    return st;
}

/* The smallest of every rank's x (INT64_MAX: none anywhere). */
static stk_status global_min(const stk_tune_config *c, int64_t x, int64_t *out)
{
    *out = x;
    if (c->world == 1) return STK_OK;
    int64_t *all = malloc((size_t)c->world * sizeof *all);
    if (!all) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_comm_allgather(c->comm, &x, sizeof x, all);
    for (int r = 0; st == STK_OK && r < c->world; r++)
        if (all[r] < *out) *out = all[r];
    free(all);
    return st;
}

/* This rank's trial of the cohort with that id, or NULL (another rank's). */
static live *find(live *g, int n, int64_t trial)
{
    for (int i = 0; i < n; i++)
        if (g[i].t->id == trial) return &g[i];
    return NULL;
}

/* One report, on every rank in the same order: the scheduler's bookkeeping
 * and decision, acted on by the trial's owner (L; NULL on the others, which
 * keep the trial's figures and status for trials.csv). */
static void apply(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                  int64_t n_trials, live *L, const tune_report *r)
{
    stk_tune_trial *t = &trials[r->trial];
    if (!L) {
        t->epochs_run = r->epochs_run;
        t->best_epoch = r->best_epoch;
        t->best_value = r->best_value;
        t->seconds = r->seconds;
    }
    if (r->kind == REPORT_ERROR) {
        stk_scheduler_remove(s, t->id);
        t->status = STK_TRIAL_ERROR;
        snprintf(t->error, sizeof t->error, "%s", r->error);
        tune_announce(c, trials, n_trials, t);
        return;
    }
    if (r->kind == REPORT_ENDED) {
        if (r->epoch > 0) stk_scheduler_complete(s, t->id, r->epoch, r->value);
        t->status = (stk_trial_status)r->status;
        tune_announce(c, trials, n_trials, t);
        return;
    }
    if (c->sched.kind == STK_SCHED_PBT) { /* recorded; the round comes once all have reported */
        stk_scheduler_pbt_result(s, t->id, r->epoch, r->value);
        return;
    }
    if (stk_scheduler_result(s, t->id, r->epoch, r->value) == STK_DECISION_STOP) {
        t->stopped_at = r->epoch;
        if (L) tune_trial_end(L, STK_TRIAL_STOPPED, NULL);
        t->status = STK_TRIAL_STOPPED;
        tune_announce(c, trials, n_trials, t);
    }
}

/* A PBT round's part of this rank's trials: every save, then (once every
 * rank's saves are written) every load. A trial whose part fails ends as
 * ERROR (reported with the next exchange). */
static stk_status pbt_act(const stk_tune_config *c, stk_tune_trial *trials, live *g, int n,
                          const stk_pbt_step *steps, int64_t k, int64_t epoch)
{
    for (int64_t i = 0; i < k; i++) {
        live *L = steps[i].save ? find(g, n, steps[i].trial) : NULL;
        if (L && L->running && stk_tune_pbt_save(c, L->t, L->r.trainer, epoch) != STK_OK)
            tune_trial_failed(L);
    }
    int64_t any;
    STK_TRY(global_min(c, 0, &any)); /* a barrier: the saves are on disk */
    for (int64_t i = 0; i < k; i++) {
        live *L = steps[i].clone >= 0 ? find(g, n, steps[i].trial) : NULL;
        if (L && L->running &&
            stk_tune_pbt_load(c, L->t, L->r.trainer, &trials[steps[i].clone], epoch) != STK_OK)
            tune_trial_failed(L);
    }
    return STK_OK;
}

/* PBT: the round, once every live trial has reported at the sync time. */
static stk_status pbt_round(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                            int64_t n_trials, live *g, int n)
{
    stk_pbt_step *steps = malloc((size_t)n_trials * sizeof *steps);
    if (!steps) return stk_error(STK_ERR_NOMEM, "out of memory");
    int64_t k;
    stk_status st = stk_scheduler_pbt_round(s, steps, &k);
    if (st == STK_OK && k) {
        int64_t epoch = trials[steps[0].trial].epochs_run; /* the population's, in step */
        stk_tune_pbt_plan(c, trials, steps, k, epoch);
        st = pbt_act(c, trials, g, n, steps, k, epoch);
    }
    free(steps);
    return st;
}

/* PBT, resumed: the round parts of the cohort's trials that stopped before
 * doing them (tune_replay_pbt), saves before loads as in the round. */
static stk_status pbt_redo(const stk_tune_config *c, stk_tune_trial *trials, int64_t n_trials,
                           live *g, int n)
{
    stk_pbt_step *steps = malloc((size_t)(2 * n_trials) * sizeof *steps);
    if (!steps) return stk_error(STK_ERR_NOMEM, "out of memory");
    int64_t k = 0, epoch = 0;
    for (int64_t i = 0; i < n_trials; i++) { /* every rank alike: the replay's */
        stk_tune_trial *t = &trials[i];
        if (!t->redo_epoch) continue;
        epoch = t->redo_epoch;
        if (t->redo_save) steps[k++] = (stk_pbt_step){t->id, true, -1};
        if (t->redo_load) steps[k++] = (stk_pbt_step){t->id, false, t->redo_src};
        t->redo_epoch = 0;
    }
    stk_status st = k ? pbt_act(c, trials, g, n, steps, k, epoch) : STK_OK;
    free(steps);
    return st;
}

/* This rank's owed reports (trials that failed or were found ended) and
 * the epoch's reports, exchanged and applied. *stopped: --stop-after hit. */
static stk_status settle(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                         int64_t n_trials, live *g, int n, int cap, bool epoch_done, bool *stopped)
{
    tune_report *mine = calloc((size_t)(n ? n : 1), sizeof *mine), *all = NULL;
    if (!mine) return stk_error(STK_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (epoch_done && g[i].active && tune_trial_epoch(&g[i], &mine[k]))
            k++;
        else if (g[i].failed)
            tune_trial_error_report(&g[i], &mine[k++]);
    }
    int n_all;
    stk_status st = exchange(c, mine, k, cap, &all, &n_all);
    for (int i = 0; st == STK_OK && i < n_all && !*stopped; i++) {
        apply(c, s, trials, n_trials, find(g, n, all[i].trial), &all[i]);
        if (all[i].kind != REPORT_ERROR && all[i].epoch > 0) (*c->epochs_done)++;
        *stopped = c->stop_after > 0 && *c->epochs_done >= c->stop_after;
    }
    /* PBT's round (not when --stop-after ended this call first: as if killed before it) */
    if (st == STK_OK && epoch_done && !*stopped && c->sched.kind == STK_SCHED_PBT)
        st = pbt_round(c, s, trials, n_trials, g, n);
    (*c->settle)++; /* (the number the next exchange's log entries carry) */
    free(mine);
    free(all);
    return st;
}

/* A group of this rank's trials on one stream, epoch by epoch, in step with
 * the other ranks' groups, until every rank's have ended. */
static stk_status run_group(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                            int64_t n_trials, live *g, int n, int cap)
{
    live *data = NULL;
    for (int i = 0; i < n; i++)
        if (tune_trial_start(&g[i], data) && !data && g[i].running) data = &g[i];
    bool stopped = false;
    stk_status st = STK_OK;
    if (c->sched.kind == STK_SCHED_PBT) st = pbt_redo(c, trials, n_trials, g, n);
    if (st == STK_OK) st = settle(c, s, trials, n_trials, g, n, cap, false, &stopped);
    while (st == STK_OK && !stopped) {
        int64_t mine = INT64_MAX, e;
        for (int i = 0; i < n; i++) {
            int64_t next = g[i].running ? stk_fit_next_epoch(g[i].fit) : -1;
            if (next >= 0 && next < mine) mine = next;
        }
        if ((st = global_min(c, mine, &e)) != STK_OK || e == INT64_MAX) break;
        for (int i = 0; i < n; i++) g[i].active = g[i].running && stk_fit_next_epoch(g[i].fit) == e;
        if (mine == e && (st = train_epoch(g, n, data, e)) == STK_OK) st = evaluate(g, n, data);
        if (st != STK_OK) break;
        st = settle(c, s, trials, n_trials, g, n, cap, true, &stopped);
    }
    if (st == STK_OK && stopped) st = STK_ERR_CANCELLED; /* as if killed here */
    for (int i = 0; i < n; i++) /* the data's owner last: its loaders go with it */
        if (&g[i] != data) tune_trial_close(&g[i], false);
    if (data) tune_trial_close(data, true);
    return st;
}

/* One cohort: its pending trials in groups of the same data flags, one
 * group after another (in the order of their first trials); each rank runs
 * its share of each group (cohort trial i on rank i mod world), in step
 * with the others, an empty share too. */
static stk_status run_cohort(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial **cohort,
                             int n, stk_tune_trial *trials, int64_t n_trials)
{
    stk_run_settings *args = calloc((size_t)(n ? n : 1), sizeof *args);
    bool *done = calloc((size_t)(n ? n : 1), sizeof *done);
    live *g = calloc((size_t)(n ? n : 1), sizeof *g);
    stk_status st = args && done && g ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; st == STK_OK && i < n; i++) { /* every rank knows every trial's data flags */
        if (stk_run_settings_from_args(&args[i], cohort[i]->argc, cohort[i]->argv) != STK_OK)
            st = stk_error_prefix(STK_ERR_INVALID_ARG, "trial %" PRId64 ": flags refused",
                                  cohort[i]->id);
        else
            stk_run_settings_free(&args[i]);
    }
    for (int i = 0; st == STK_OK && i < n; i++) {
        if (done[i]) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_data(&args[i], &args[j])) {
                done[j] = true;
                if (j % c->world == c->rank) g[m++] = (live){.c = c, .t = cohort[j]};
            }
        st = run_group(c, s, trials, n_trials, g, m, n);
    }
    free(args);
    free(done);
    free(g);
    return st;
}

stk_status stk_tune_run(stk_tune_config *c, stk_tune_trial *trials, int64_t n, bool replay)
{
    int64_t epochs_done = 0;
    c->epochs_done = &epochs_done;
    stk_rng explore;
    stk_rng_init(&explore, (uint64_t)c->seed ^ 0x6578706c6f726521ull, 0, 0);
    c->explore = &explore;
    stk_scheduler *s;
    STK_TRY(stk_scheduler_create(&c->sched, &s));
    entry *log = NULL;
    size_t n_log = 0, next = 0;
    int64_t settles = 0; /* this run's exchanges so far, counted on from the logs' */
    c->settle = &settles;
    int64_t *ckpt = calloc((size_t)n, sizeof *ckpt);
    stk_tune_trial **cohort = calloc((size_t)c->concurrent, sizeof *cohort);
    stk_status st = cohort && ckpt ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK && replay) {
        st = tune_read_log(c, trials, n, &log, &n_log, &settles);
        for (int64_t i = 0; st == STK_OK && i < n; i++)
            if (trials[i].status == STK_TRIAL_PENDING) ckpt[i] = tune_checkpoint_epoch(&trials[i]);
    }
    for (int64_t k0 = 0; st == STK_OK && k0 < n; k0 += c->concurrent) {
        int64_t k1 = k0 + c->concurrent < n ? k0 + c->concurrent : n;
        /* every trial joins the scheduler in id order, ended ones too (its draws) */
        for (int64_t i = k0; st == STK_OK && i < k1; i++) st = stk_scheduler_add(s, i);
        if (st == STK_OK && replay && c->sched.kind == STK_SCHED_PBT)
            st = tune_replay_pbt(c, s, trials, n, log, n_log, &next, k0, k1, ckpt);
        else if (st == STK_OK && replay)
            tune_replay_cohort(c, s, trials, log, n_log, &next, k0, k1, ckpt);
        if (st == STK_OK && replay && next == n_log) { /* the replay is over: append from here */
            if ((st = tune_resume_flags(trials, n, ckpt)) == STK_OK) st = stk_tune_open_log(c);
            replay = false;
        }
        int k = 0;
        for (int64_t i = k0; i < k1; i++)
            if (trials[i].status == STK_TRIAL_PENDING) cohort[k++] = &trials[i];
        if (st == STK_OK && k) st = run_cohort(c, s, cohort, k, trials, n);
        if (st == STK_OK && c->rank == 0) st = stk_tune_write_results(c, trials, n);
    }
    free(log);
    free(ckpt);
    free(cohort);
    stk_scheduler_destroy(s);
    return st;
}
