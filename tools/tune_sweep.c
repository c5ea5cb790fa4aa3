/* `stoke tune`'s sweep (tune_sweep.h): cohorts of trials on shared streams. */
#include "tools/tune_sweep.h"

#include "common/clock.h"
#include "common/text.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the trials' flags ----------------------------------------------------------- */

static bool push_arg(tune_trial *t, int *cap, const char *s)
{
    if (t->argc + 1 >= *cap) {
        int c = *cap ? 2 * *cap : 32;
        char **a = realloc(t->argv, (size_t)c * sizeof *a);
        if (!a) return false;
        t->argv = a;
        *cap = c;
    }
    if (!(t->argv[t->argc] = strdup(s))) return false;
    t->argv[++t->argc] = NULL;
    return true;
}

/* s quoted for a POSIX shell when it needs to be */
static char *shell_word(const char *s)
{
    if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "-_./:=,+%@") == strlen(s))
        return strdup(s);
    size_t n = 3;
    for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q) return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            memcpy(o, "'\\''", 4), o += 4;
        else
            *o++ = *p;
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* "stoke train ..." with every flag but --out (a fresh run folder) */
static char *command_of(const tune_trial *t)
{
    char *cmd = strdup("stoke train");
    for (int i = 1; cmd && i < t->argc; i++) {
        if (!strcmp(t->argv[i], "--out")) {
            i++;
            continue;
        }
        char *w = shell_word(t->argv[i]);
        char *next = w ? stk_text_printf("%s %s", cmd, w) : NULL;
        free(w);
        free(cmd);
        cmd = next;
    }
    return cmd;
}

static stk_status trial_flags(const tune_config *c, tune_trial *t)
{
    int cap = 0;
    char num[3][32];
    snprintf(num[0], sizeof num[0], "%" PRId64, c->epochs);
    snprintf(num[1], sizeof num[1], "%" PRId64, c->seed);
    if (!push_arg(t, &cap, "train")) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->train_argc; i++)
        if (!push_arg(t, &cap, c->train_argv[i])) return stk_error(STK_ERR_NOMEM, "out of memory");
    const char *fixed[] = {"--epochs", num[0], "--seed", num[1], "--out", t->out};
    for (int i = 0; i < 6; i++)
        if (!push_arg(t, &cap, fixed[i])) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->params.n; k++) {
        const stk_flag *f = stk_cli_find(train_cli, t->params.key[k]);
        char flag[80];
        snprintf(flag, sizeof flag, "--%s", t->params.key[k]);
        if (f && f->kind == STK_FLAG_KIND_BOOL) { /* true: the flag; false: nothing */
            if (!strcmp(t->params.value[k], "true") && !push_arg(t, &cap, flag))
                return stk_error(STK_ERR_NOMEM, "out of memory");
            continue;
        }
        if (!push_arg(t, &cap, flag) || !push_arg(t, &cap, t->params.value[k]))
            return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    if (!(t->command = command_of(t))) return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

stk_status tune_prepare(const tune_config *c, tune_trial *trials, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        tune_trial *t = &trials[i];
        t->id = i;
        t->best_value = NAN;
        stk_space_draw(&c->space, (uint64_t)c->seed, i, &t->params);
        snprintf(t->out, sizeof t->out, "%s/trials/%04" PRId64, c->out, i);
        STK_TRY(trial_flags(c, t));
        /* train's own checks on this trial's values, before anything runs */
        train_args a;
        if (train_parse_flags(t->argc, t->argv, &a) >= 0) {
            char vals[512] = "";
            for (int k = 0; k < t->params.n; k++) {
                size_t used = strlen(vals);
                snprintf(vals + used, sizeof vals - used, "%s%s=%s", k ? " " : "", t->params.key[k],
                         t->params.value[k]);
            }
            return stk_error(STK_ERR_INVALID_ARG,
                             "trial %" PRId64 " (%s): stoke train refuses these values (above); "
                             "narrow --space",
                             i, vals);
        }
        free(a.out_buf);
    }
    return STK_OK;
}

void tune_trials_free(tune_trial *trials, int64_t n)
{
    for (int64_t i = 0; trials && i < n; i++) {
        for (int k = 0; k < trials[i].argc; k++) free(trials[i].argv[k]);
        free(trials[i].argv);
        free(trials[i].command);
    }
    free(trials);
}

void tune_status_text(const tune_trial *t, char buf[32])
{
    static const char *const names[] = {"PENDING", "COMPLETED", "STOPPED", "EARLY_STOPPED",
                                        "ERROR"};
    if (t->status == TRIAL_STOPPED)
        snprintf(buf, 32, "STOPPED@%" PRId64, t->stopped_at);
    else
        snprintf(buf, 32, "%s", names[t->status]);
}

/* ---- a running trial ------------------------------------------------------------ */

typedef struct live {
    tune_trial *t;
    run_state r;
    train_printer p;
    stk_fit *fit;
    stk_epoch_run er;
    stk_eval_run ev;
    bool running; /* set up, not ended */
    bool active;  /* in this epoch */
    double t0;
} live;

/* The trial ends (any status): its run is finished and closed. */
static void end_trial(const tune_config *c, live *L, trial_status status, const char *error)
{
    tune_trial *t = L->t;
    if (L->fit) {
        stk_fit_result res;
        if (status != TRIAL_ERROR && stk_fit_finish(L->fit, &res) != STK_OK) {
            status = TRIAL_ERROR;
            error = stk_last_error();
        }
        stk_fit_close(L->fit);
        L->fit = NULL;
    }
    t->status = status;
    if (error) snprintf(t->error, sizeof t->error, "%s", error);
    t->seconds += stk_clock_sec() - L->t0;
    L->running = L->active = false;
    char st[32], best[32];
    tune_status_text(t, st);
    snprintf(best, sizeof best, "%.4g", t->best_value);
    say(c->lines,
        "trial %04" PRId64 " %s after %" PRId64 " epoch%s: best %s %s (epoch %" PRId64 ")%s%s\n",
        t->id, st, t->epochs_run, t->epochs_run == 1 ? "" : "s", stk_monitor_name(c->metric),
        isnan(t->best_value) ? "-" : best, t->best_epoch, error ? ": " : "", error ? error : "");
}

/* Set a trial up as `stoke train` would, on the owner's data when there is
 * one. Failure ends the trial (ERROR). */
static bool start_trial(const tune_config *c, live *L, const live *owner)
{
    memset(&L->r, 0, sizeof L->r);
    L->t0 = stk_clock_sec();
    tune_trial *t = L->t;
    if (train_parse_flags(t->argc, t->argv, &L->r.a) >= 0) { /* checked in tune_prepare */
        end_trial(c, L, TRIAL_ERROR, "its flags were refused");
        return false;
    }
    if (owner) {
        L->r.borrowed_data = true;
        L->r.loader = owner->r.loader;
        L->r.val_loader = owner->r.val_loader;
        L->r.h2d = owner->r.h2d;
    }
    L->r.world = 1;
    stk_status st = train_setup(&L->r);
    if (st == STK_OK && tune_write_params(t) != STK_OK) st = STK_ERR_IO;
    if (st == STK_OK) {
        L->p = (train_printer){.r = &L->r, .lines = NULL};
        stk_fit_options o = train_fit_options(&L->r, &L->p);
        o.train = NULL, o.h2d = NULL, o.val = NULL;
        o.val_elsewhere = L->r.a.val != NULL; /* the sweep evaluates it */
        o.progress = NULL, o.eval_label = NULL;
        st = stk_fit_open(L->r.trainer, &o, &L->fit);
    }
    if (st != STK_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", stk_last_error());
        train_close(&L->r);
        end_trial(c, L, TRIAL_ERROR, why);
        return false;
    }
    L->running = true;
    return true;
}

/* The data of a group: the same loader flags. */
static bool same_data(const train_args *a, const train_args *b)
{
    return a->batch == b->batch &&
           !strcmp(a->transform ? a->transform : "", b->transform ? b->transform : "") &&
           !strcmp(a->val_transform ? a->val_transform : "",
                   b->val_transform ? b->val_transform : "");
}

/* A failure of one trial's step or evaluation: that trial ends. */
static void trial_failed(const tune_config *c, live *L)
{
    char why[512];
    snprintf(why, sizeof why, "%s", stk_last_error());
    end_trial(c, L, TRIAL_ERROR, why);
}

/* One epoch of every active trial of the group over the owner's stream. */
static stk_status train_epoch(const tune_config *c, live *g, int n, const live *owner, int64_t e)
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
                trial_failed(c, &g[i]);
        stk_h2d_release(owner->r.h2d, b);
        if (stk_cli_interrupted) return stk_error(STK_ERR_CANCELLED, "interrupted");
    }
    return STK_OK;
}

/* The validation pass of every active trial over one stream. */
static stk_status evaluate(const tune_config *c, live *g, int n, const live *owner)
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
                trial_failed(c, &g[i]);
        stk_h2d_release(h, b);
        if (stk_cli_interrupted) st = stk_error(STK_ERR_CANCELLED, "interrupted");
    }
    stk_h2d_close(h);
    return st == STK_END ? STK_OK : st;
}

/* After an epoch: the trial's fit judges it (checkpoints, metrics.csv), the
 * scheduler decides. */
static stk_status epoch_done(const tune_config *c, stk_scheduler *s, live *L)
{
    tune_trial *t = L->t;
    stk_epoch_stats es;
    stk_eval_result val = {0};
    stk_trainer_epoch_finish(L->r.trainer, stk_trainer_position(L->r.trainer)->epoch, &L->er, &es);
    bool have_val = L->r.val_loader != NULL;
    if (have_val) stk_trainer_eval_finish(L->r.trainer, &L->ev, &val);
    bool stop;
    if (stk_fit_epoch_done(L->fit, &es, have_val ? &val : NULL, &stop) != STK_OK) {
        trial_failed(c, L);
        return STK_OK;
    }
    int64_t epoch = stk_trainer_position(L->r.trainer)->epoch; /* done, counted from 1 */
    t->epochs_run = epoch;
    double v = stk_fit_metric(c->metric, &es, have_val ? &val : NULL);
    if (isfinite(v) &&
        (isnan(t->best_value) || (c->maximise ? v > t->best_value : v < t->best_value))) {
        t->best_value = v;
        t->best_epoch = epoch;
    }
    if (stop) { /* its own end: the last epoch, or early stopping */
        stk_scheduler_complete(s, t->id, epoch, v);
        end_trial(c, L, epoch >= c->epochs ? TRIAL_COMPLETED : TRIAL_EARLY_STOPPED, NULL);
    } else if (stk_scheduler_result(s, t->id, epoch, v) == STK_DECISION_STOP) {
        t->stopped_at = epoch;
        end_trial(c, L, TRIAL_STOPPED, NULL);
    }
    return STK_OK;
}

/* A group of trials on one stream, epoch by epoch until all have ended. */
static stk_status run_group(const tune_config *c, stk_scheduler *s, live *g, int n)
{
    live *owner = NULL;
    for (int i = 0; i < n; i++)
        if (start_trial(c, &g[i], owner) && !owner) owner = &g[i];
    if (!owner) return STK_OK;
    stk_status st = STK_OK;
    for (;;) {
        int64_t e = -1;
        for (int i = 0; i < n; i++) {
            int64_t next = g[i].running ? stk_fit_next_epoch(g[i].fit) : -1;
            g[i].active = false;
            if (next >= 0 && (e < 0 || next < e)) e = next;
        }
        if (e < 0) break;
        for (int i = 0; i < n; i++) g[i].active = g[i].running && stk_fit_next_epoch(g[i].fit) == e;
        if ((st = train_epoch(c, g, n, owner, e)) != STK_OK) break;
        if ((st = evaluate(c, g, n, owner)) != STK_OK) break;
        for (int i = 0; i < n; i++)
            if (g[i].active) STK_TRY(epoch_done(c, s, &g[i]));
    }
    /* borrowers first: the owner's loaders go last */
    for (int i = 0; i < n; i++) {
        if (g[i].running) { /* interrupted: it stays PENDING, its last checkpoint kept */
            stk_fit_close(g[i].fit);
            g[i].fit = NULL;
            g[i].running = false;
        }
        if (&g[i] != owner && g[i].r.trainer) train_close(&g[i].r);
    }
    train_close(&owner->r);
    return st;
}

/* One cohort: its trials, in groups of the same data flags. */
static stk_status run_cohort(const tune_config *c, stk_scheduler *s, tune_trial **cohort, int n)
{
    live *all = calloc((size_t)n, sizeof *all);
    train_args *args = calloc((size_t)n, sizeof *args);
    bool *done = calloc((size_t)n, sizeof *done);
    stk_status st = all && args && done ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; st == STK_OK && i < n; i++) {
        all[i].t = cohort[i];
        if (train_parse_flags(cohort[i]->argc, cohort[i]->argv, &args[i]) >= 0)
            st = stk_error(STK_ERR_INVALID_ARG, "trial %" PRId64 ": flags refused", cohort[i]->id);
        else
            free(args[i].out_buf);
        if (st == STK_OK) st = stk_scheduler_add(s, cohort[i]->id);
    }
    for (int i = 0; st == STK_OK && i < n; i++) {
        if (done[i]) continue;
        live *g = calloc((size_t)n, sizeof *g);
        if (!g) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            break;
        }
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_data(&args[i], &args[j])) {
                g[m++] = all[j];
                done[j] = true;
            }
        st = run_group(c, s, g, m);
        free(g);
    }
    free(all);
    free(args);
    free(done);
    return st;
}

stk_status tune_run(const tune_config *c, tune_trial *trials, int64_t n)
{
    stk_scheduler *s;
    STK_TRY(stk_scheduler_create(&c->sched, &s));
    tune_trial **cohort = calloc((size_t)c->concurrent, sizeof *cohort);
    stk_status st = cohort ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int64_t next = 0; st == STK_OK && next < n;) {
        int k = 0;
        for (; next < n && k < c->concurrent; next++)
            if (trials[next].status == TRIAL_PENDING) cohort[k++] = &trials[next];
        if (k) st = run_cohort(c, s, cohort, k);
        if (st == STK_OK) st = tune_write_results(c, trials, n);
    }
    free(cohort);
    stk_scheduler_destroy(s);
    return st;
}
