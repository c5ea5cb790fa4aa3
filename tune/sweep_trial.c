/* One running trial of `stoke tune` (stk_tune_trial.h). */
#include "tune/sweep_trial_impl.h"

#include "common/clock.h"
#include "common/log.h"
#include "runlog/tb_hparams.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* Seconds since the epoch (TensorBoard's times). */
static double stk_wall_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

void tune_trial_end(live *L, stk_trial_status status, const char *error)
{
    stk_tune_trial *t = L->t;
    if (L->fit) {
        stk_fit_result res;
        if (status != STK_TRIAL_ERROR && stk_fit_finish(L->fit, &res) != STK_OK) {
            status = STK_TRIAL_ERROR;
            error = stk_last_error();
            L->failed = true;
        }
        stk_fit_close(L->fit);
        L->fit = NULL;
    }
    t->status = status;
    if (error) snprintf(t->error, sizeof t->error, "%s", error);
    if (L->hparams) {
        stk_tb_hparams_session_end(
            L->hparams, status == STK_TRIAL_ERROR ? STK_TB_SESSION_FAILURE : STK_TB_SESSION_SUCCESS,
            stk_wall_seconds());
        stk_tfevents_close(L->hparams);
        L->hparams = NULL;
    }
    t->seconds += stk_clock_sec() - L->t0;
    L->running = L->active = false;
}

void tune_announce(const stk_tune_config *c, stk_tune_trial *trials, int64_t n, stk_tune_trial *t)
{
    t->announced = true;
    if (c->rank != 0) return;
    if (stk_tune_write_trials(c, trials, n) != STK_OK) /* a kill now keeps this trial's end */
        stk_log_warn("%s", stk_last_error());
    char st[32], best[32];
    stk_tune_status_text(t, st);
    snprintf(best, sizeof best, "%.4g", t->best_value);
    bool err = t->status == STK_TRIAL_ERROR;
    /* the sweep so far: trials ended, stopped, and the best of them */
    int64_t ended = 0, stopped = 0;
    const stk_tune_trial *top = NULL;
    for (int64_t i = 0; i < n; i++) {
        const stk_tune_trial *u = &trials[i];
        if (u->status == STK_TRIAL_PENDING || !u->announced) continue;
        ended++;
        stopped += u->status == STK_TRIAL_STOPPED;
        if (!isnan(u->best_value) && (!top || (c->maximise ? u->best_value > top->best_value
                                                           : u->best_value < top->best_value)))
            top = u;
    }
    char so_far[160];
    if (top)
        snprintf(so_far, sizeof so_far,
                 " [%" PRId64 "/%" PRId64 " ended, %" PRId64 " stopped; best so far %04" PRId64
                 ": %.4g]",
                 ended, n, stopped, top->id, top->best_value);
    else
        snprintf(so_far, sizeof so_far, " [%" PRId64 "/%" PRId64 " ended]", ended, n);
    if (c->lines)
        fprintf(c->lines,
                "trial %04" PRId64 " %s after %" PRId64 " epoch%s: best %s %s (epoch %" PRId64
                ")%s%s%s\n",
                t->id, st, t->epochs_run, t->epochs_run == 1 ? "" : "s",
                stk_monitor_name(c->metric), isnan(t->best_value) ? "-" : best, t->best_epoch,
                err ? ": " : "", err ? t->error : "", so_far);
    if (c->trial_end) c->trial_end(c->trial_end_ctx, c, t);
}

/* fit's on_epoch: the run's record (metrics.csv, TensorBoard) as stoke
 * train keeps it, then the epoch's result in DIR/results.log (this rank's
 * results.rankR.log under a launcher) with the number of the exchange it
 * goes to, before the epoch's checkpoint is written (so a resume that
 * finds the entry without the checkpoint drops it, and the epoch is redone
 * and reported again). */
static stk_status trial_on_epoch(void *ctx, const stk_fit_epoch *e, bool *stop)
{
    live *L = ctx;
    STK_TRY(stk_run_epoch_done(&L->r, e, stop));
    const stk_tune_config *c = L->c;
    double v = stk_fit_metric(c->metric, e->train, e->val, e->val_ema);
    if (c->results) {
        fprintf(c->results, "%" PRId64 " %" PRId64 " %.17g %" PRId64 "\n", L->t->id, e->epoch + 1,
                v, *c->settle);
        if (fflush(c->results) != 0)
            return stk_error(STK_ERR_IO, "%s/results.log: %s", c->out, strerror(errno));
    }
    return STK_OK;
}

/* The space's keys as HParams columns: numbers when every value is one. */
static void hparam_columns(const stk_space *sp, stk_tb_hparam *hp)
{
    for (int k = 0; k < sp->n; k++) {
        const stk_space_key *key = &sp->keys[k];
        bool numeric = key->dist != STK_DIST_CHOICE && key->dist != STK_DIST_GRID;
        if (!numeric) {
            numeric = true;
            for (int i = 0; i < key->n_values; i++) {
                char *end;
                strtod(key->values[i], &end);
                numeric &= *key->values[i] && !*end;
            }
        }
        hp[k] = (stk_tb_hparam){key->name, numeric};
    }
}

stk_status stk_tune_hparams_experiment(const stk_tune_config *c, bool val)
{
    stk_tb_hparam hp[STK_SPACE_MAX_KEYS];
    hparam_columns(&c->space, hp);
    const char *metrics[] = {"epoch/val_top1", "epoch/val_loss", "epoch/train_loss",
                             "epoch/train_acc"};
    stk_tfevents *w;
    STK_TRY(stk_tfevents_open(c->out, &w));
    stk_status st =
        stk_tb_hparams_experiment(w, hp, c->space.n, val ? metrics : metrics + 2, val ? 4 : 2);
    stk_tfevents_close(w);
    return st;
}

/* The trial's HParams session: a writer of its own in its run folder. */
static stk_status hparams_start(const stk_tune_config *c, live *L)
{
    stk_tb_hparam hp[STK_SPACE_MAX_KEYS];
    hparam_columns(&c->space, hp);
    const char *values[STK_SPACE_MAX_KEYS];
    for (int k = 0; k < L->t->params.n; k++) values[k] = L->t->params.value[k];
    char group[16];
    snprintf(group, sizeof group, "%04" PRId64, L->t->id);
    STK_TRY(stk_tfevents_open(L->t->out, &L->hparams));
    STK_TRY(stk_tb_hparams_session_start(L->hparams, hp, values, L->t->params.n, group,
                                         stk_wall_seconds()));
    return stk_tfevents_flush(L->hparams);
}

/* Set a trial up as `stoke train` would, on the owner's data when there is
 * one. Failure ends the trial (ERROR). */
bool tune_trial_start(live *L, const live *owner)
{
    const stk_tune_config *c = L->c;
    memset(&L->r, 0, sizeof L->r);
    L->t0 = stk_clock_sec();
    stk_tune_trial *t = L->t;
    if (stk_run_settings_from_args(&L->r.a, t->argc, t->argv) !=
        STK_OK) { /* checked in tune_prepare */
        L->failed = true;
        tune_trial_end(L, STK_TRIAL_ERROR, "its flags were refused");
        return false;
    }
    if (owner) {
        L->r.borrowed_data = true;
        L->r.loader = owner->r.loader;
        L->r.val_loader = owner->r.val_loader;
        L->r.h2d = owner->r.h2d;
    }
    L->r.world = 1;
    stk_status st = stk_run_setup(&L->r);
    /* (the values it started with: a clone's later values are in its pbt.csv) */
    if (st == STK_OK && !t->cloned && stk_tune_write_params(t) != STK_OK) st = STK_ERR_IO;
    /* resumed after a PBT clone: its values are the explored ones (a clone
     * still to be loaded again sets them itself) */
    if (st == STK_OK && t->cloned && !t->redo_load)
        st = stk_tune_pbt_set_values(L->r.trainer, &t->params);
    if (st == STK_OK) {
        stk_fit_options o = stk_run_fit_options(&L->r);
        o.train = NULL, o.h2d = NULL, o.val = NULL;
        o.epoch_begin = NULL;                 /* the sweep runs the epochs */
        o.val_elsewhere = L->r.a.val != NULL; /* the sweep evaluates it */
        o.progress = NULL, o.eval_label = NULL;
        o.reduce = NULL; /* one process */
        o.on_epoch = trial_on_epoch, o.ctx = L;
        st = stk_fit_open(L->r.trainer, &o, &L->fit);
    }
    if (st == STK_OK && !L->r.a.no_tensorboard) st = hparams_start(c, L);
    if (st == STK_OK && stk_fit_next_epoch(L->fit) < 0) {
        /* resumed after its last epoch ran, before trials.csv said so */
        int64_t done = stk_trainer_position(L->r.trainer)->epoch;
        t->epochs_run = done;
        L->running = true;
        tune_trial_end(L, done >= c->epochs ? STK_TRIAL_COMPLETED : STK_TRIAL_EARLY_STOPPED, NULL);
        L->failed = true; /* not a failure, but its end is owed to the others */
        return true;
    }
    if (st != STK_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", stk_last_error());
        stk_run_close(&L->r);
        memset(&L->r, 0, sizeof L->r);
        L->failed = true;
        tune_trial_end(L, STK_TRIAL_ERROR, why);
        return false;
    }
    L->running = true;
    return true;
}

void stk_tune_trial_note(const stk_tune_config *c, stk_tune_trial *t, int64_t epoch, double v)
{
    t->epochs_run = epoch;
    if (isfinite(v) &&
        (isnan(t->best_value) || (c->maximise ? v > t->best_value : v < t->best_value))) {
        t->best_value = v;
        t->best_epoch = epoch;
    }
}

void tune_trial_failed(live *L)
{
    char why[512];
    snprintf(why, sizeof why, "%s", stk_last_error());
    L->failed = true;
    tune_trial_end(L, STK_TRIAL_ERROR, why);
}

/* The figures every rank keeps of a trial, into r. */
static void report_figures(const stk_tune_trial *t, tune_report *r)
{
    r->trial = t->id;
    r->epochs_run = t->epochs_run;
    r->best_epoch = t->best_epoch;
    r->best_value = t->best_value;
    r->seconds = t->seconds;
}

void tune_trial_error_report(live *L, tune_report *r)
{
    stk_tune_trial *t = L->t;
    memset(r, 0, sizeof *r);
    report_figures(t, r);
    r->epoch = t->epochs_run;
    r->value = NAN;
    /* a resumed trial found already ended is owed an ENDED report */
    r->kind = t->status == STK_TRIAL_ERROR ? REPORT_ERROR : REPORT_ENDED;
    r->status = t->status;
    snprintf(r->error, sizeof r->error, "%s", t->error);
    L->failed = false;
}

bool tune_trial_epoch(live *L, tune_report *r)
{
    const stk_tune_config *c = L->c;
    stk_tune_trial *t = L->t;
    stk_epoch_stats es;
    stk_eval_result val = {0};
    stk_trainer_epoch_finish(L->r.trainer, stk_trainer_position(L->r.trainer)->epoch, &L->er, &es);
    bool have_val = L->r.val_loader != NULL;
    if (have_val) stk_trainer_eval_finish(L->r.trainer, &L->ev, &val);
    bool stop;
    if (stk_fit_epoch_done(L->fit, &es, have_val ? &val : NULL, NULL, &stop) != STK_OK) {
        tune_trial_failed(L);
        return false;
    }
    int64_t epoch = stk_trainer_position(L->r.trainer)->epoch; /* done, counted from 1 */
    double v = stk_fit_metric(c->metric, &es, have_val ? &val : NULL, NULL);
    stk_tune_trial_note(c, t, epoch, v);
    memset(r, 0, sizeof *r);
    r->epoch = epoch;
    r->value = v;
    r->kind = REPORT_RESULT;
    if (stop) { /* its own end: the last epoch, or early stopping */
        r->kind = REPORT_ENDED;
        r->status = epoch >= c->epochs ? STK_TRIAL_COMPLETED : STK_TRIAL_EARLY_STOPPED;
        tune_trial_end(L, (stk_trial_status)r->status, NULL);
    }
    report_figures(t, r);
    return true;
}

void tune_trial_close(live *L, bool closes_data)
{
    if (L->running) { /* interrupted: it stays PENDING, its last checkpoint kept */
        stk_fit_close(L->fit);
        L->fit = NULL;
        L->running = false;
    }
    stk_tfevents_close(L->hparams); /* a session that did not end: no end summary */
    L->hparams = NULL;
    if (L->r.trainer || closes_data) {
        if (!closes_data) L->r.borrowed_data = true;
        stk_run_close(&L->r);
        memset(&L->r, 0, sizeof L->r);
    }
}
