/* `stoke tune`'s sweep (tune_sweep.h): cohorts of trials on shared streams. */
#include "tools/tune_sweep.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/rng.h"
#include "runlog/tb_hparams.h"
#include "common/fs.h"
#include "common/text.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* Seconds since the epoch (TensorBoard's times). */
static double stk_wall_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

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

/* ---- a running trial ------------------------------------------------------------ */

typedef struct live {
    const tune_config *c;
    stk_scheduler *s;
    stk_tfevents *hparams; /* its HParams session (NULL without TensorBoard) */
    tune_trial *t;
    tune_trial *all; /* every trial, for trials.csv */
    int64_t n_all;
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
    if (L->hparams) {
        stk_tb_hparams_session_end(
            L->hparams, status == TRIAL_ERROR ? STK_TB_SESSION_FAILURE : STK_TB_SESSION_SUCCESS,
            stk_wall_seconds());
        stk_tfevents_close(L->hparams);
        L->hparams = NULL;
    }
    if (status == TRIAL_ERROR && L->s) stk_scheduler_remove(L->s, t->id);
    t->seconds += stk_clock_sec() - L->t0;
    L->running = L->active = false;
    if (tune_write_trials(c, L->all, L->n_all) != STK_OK) /* a kill now keeps this trial's end */
        stk_log_warn("%s", stk_last_error());
    char st[32], best[32];
    tune_status_text(t, st);
    snprintf(best, sizeof best, "%.4g", t->best_value);
    say(c->lines,
        "trial %04" PRId64 " %s after %" PRId64 " epoch%s: best %s %s (epoch %" PRId64 ")%s%s\n",
        t->id, st, t->epochs_run, t->epochs_run == 1 ? "" : "s", stk_monitor_name(c->metric),
        isnan(t->best_value) ? "-" : best, t->best_epoch, error ? ": " : "", error ? error : "");
}

/* fit's on_epoch: the run's record (metrics.csv, TensorBoard) as stoke
 * train keeps it, then the epoch's result in DIR/results.log, before the
 * epoch's checkpoint is written (so a resume that finds the entry without
 * the checkpoint drops it, and the epoch is redone and reported again). */
static stk_status trial_on_epoch(void *ctx, const stk_fit_epoch *e, bool *stop)
{
    live *L = ctx;
    STK_TRY(train_on_epoch(&L->p, e, stop));
    const tune_config *c = L->c;
    double v = stk_fit_metric(c->metric, e->train, e->val);
    if (c->results) {
        fprintf(c->results, "%" PRId64 " %" PRId64 " %.17g\n", L->t->id, e->epoch + 1, v);
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

stk_status tune_hparams_experiment(const tune_config *c, bool val)
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
static stk_status hparams_start(const tune_config *c, live *L)
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
        end_trial(c, L, done >= c->epochs ? TRIAL_COMPLETED : TRIAL_EARLY_STOPPED, NULL);
        return true;
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
    (*c->epochs_done)++;
    if (stop) { /* its own end: the last epoch, or early stopping */
        stk_scheduler_complete(s, t->id, epoch, v);
        end_trial(c, L, epoch >= c->epochs ? TRIAL_COMPLETED : TRIAL_EARLY_STOPPED, NULL);
    } else if (c->sched.kind == STK_SCHED_PBT) {
        stk_pbt_step step;
        stk_scheduler_pbt(s, t->id, epoch, v, &step);
        stk_status st = step.save ? tune_pbt_save(c, t, L->r.trainer, epoch) : STK_OK;
        if (st == STK_OK && step.clone >= 0) {
            st = tune_pbt_clone(c, t, L->r.trainer, &L->all[step.clone], epoch);
            t->epochs_run = stk_trainer_position(L->r.trainer)->epoch; /* the clone's */
        }
        if (st != STK_OK) trial_failed(c, L);
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
        for (int i = 0; i < n && st == STK_OK; i++) {
            if (g[i].active) st = epoch_done(c, s, &g[i]);
            if (st == STK_OK && c->stop_after > 0 && *c->epochs_done >= c->stop_after)
                st = STK_ERR_CANCELLED; /* as if killed here: the rest of the epoch is redone */
        }
        if (st != STK_OK) break;
    }
    /* borrowers first: the owner's loaders go last */
    for (int i = 0; i < n; i++) {
        if (g[i].running) { /* interrupted: it stays PENDING, its last checkpoint kept */
            stk_fit_close(g[i].fit);
            g[i].fit = NULL;
            g[i].running = false;
        }
        stk_tfevents_close(g[i].hparams); /* a session that did not end: no end summary */
        g[i].hparams = NULL;
        if (&g[i] != owner && g[i].r.trainer) train_close(&g[i].r);
    }
    train_close(&owner->r);
    return st;
}

/* One cohort's pending trials, in groups of the same data flags. */
static stk_status run_cohort(const tune_config *c, stk_scheduler *s, tune_trial **cohort, int n,
                             tune_trial *trials, int64_t n_trials)
{
    live *all = calloc((size_t)n, sizeof *all);
    train_args *args = calloc((size_t)n, sizeof *args);
    bool *done = calloc((size_t)n, sizeof *done);
    stk_status st = all && args && done ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; st == STK_OK && i < n; i++) {
        all[i] = (live){.c = c, .s = s, .t = cohort[i], .all = trials, .n_all = n_trials};
        if (train_parse_flags(cohort[i]->argc, cohort[i]->argv, &args[i]) >= 0)
            st = stk_error(STK_ERR_INVALID_ARG, "trial %" PRId64 ": flags refused", cohort[i]->id);
        else
            free(args[i].out_buf);
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

/* ---- resuming: the first run's results, replayed ---------------------------------- */

typedef struct entry {
    int64_t trial, epoch;
    double value;
} entry;

/* DIR/results.log's entries, in order. */
static stk_status read_log(const tune_config *c, int64_t n_trials, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char path[1100];
    snprintf(path, sizeof path, "%s/results.log", c->out);
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? STK_OK : stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 0, line = 0;
    entry e;
    char buf[128];
    stk_status st = STK_OK;
    while (st == STK_OK && fgets(buf, sizeof buf, f)) {
        line++;
        char v[64];
        if (sscanf(buf, "%" SCNd64 " %" SCNd64 " %63s", &e.trial, &e.epoch, v) != 3 ||
            e.trial < 0 || e.trial >= n_trials || e.epoch < 1 || e.epoch > c->epochs ||
            (*n && e.trial / c->concurrent < (*out)[*n - 1].trial / c->concurrent)) {
            st = stk_error(STK_ERR_FORMAT,
                           "%s line %zu: not a result of this sweep (TRIAL EPOCH VALUE, trials "
                           "0..%" PRId64 " in cohort order, epochs 1..%" PRId64 ")",
                           path, line, n_trials - 1, c->epochs);
            break;
        }
        e.value = strtod(v, NULL);
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            entry *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                st = stk_error(STK_ERR_NOMEM, "out of memory");
                break;
            }
            *out = p;
        }
        (*out)[(*n)++] = e;
    }
    fclose(f);
    return st;
}

/* The epoch of trial t's last checkpoint (0: none). */
static int64_t checkpoint_epoch(const tune_trial *t)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/last.safetensors", t->out);
    stk_train_position pos;
    return stk_train_position_read(path, &pos) == STK_OK ? pos.epoch : 0;
}

static stk_status add_flag(tune_trial *t, const char *flag)
{
    char **a = realloc(t->argv, (size_t)(t->argc + 2) * sizeof *a);
    if (!a) return stk_error(STK_ERR_NOMEM, "out of memory");
    t->argv = a;
    if (!(a[t->argc] = strdup(flag))) return stk_error(STK_ERR_NOMEM, "out of memory");
    a[++t->argc] = NULL;
    return STK_OK;
}

/* Feed cohort [k0, k1)'s entries (from *next on) to the scheduler as the
 * first run did; pending trials learn their figures, and a decision the
 * first run made but had not written (a stop) takes effect. Kept entries
 * are collected in keep (rewritten into results.log). */
static void replay_cohort(const tune_config *c, stk_scheduler *s, tune_trial *trials,
                          const entry *log, size_t n_log, size_t *next, int64_t k0, int64_t k1,
                          const int64_t *ckpt, entry *keep, size_t *n_keep)
{
    size_t from = *next, to = from;
    while (to < n_log && log[to].trial >= k0 && log[to].trial < k1) to++;
    *next = to;
    for (size_t i = from; i < to; i++) {
        const entry *e = &log[i];
        tune_trial *t = &trials[e->trial];
        if (t->status == TRIAL_PENDING && e->epoch > ckpt[e->trial]) continue; /* redone */
        bool last = true; /* its last kept entry */
        for (size_t j = i + 1; j < to && last; j++)
            last = !(log[j].trial == e->trial &&
                     (t->status != TRIAL_PENDING || log[j].epoch <= ckpt[e->trial]));
        keep[(*n_keep)++] = *e;
        bool ended_itself = t->status == TRIAL_COMPLETED || t->status == TRIAL_EARLY_STOPPED ||
                            (t->status == TRIAL_PENDING && e->epoch >= c->epochs);
        if (last && ended_itself) {
            stk_scheduler_complete(s, t->id, e->epoch, e->value);
            continue;
        }
        stk_decision d = stk_scheduler_result(s, t->id, e->epoch, e->value);
        if (t->status != TRIAL_PENDING) continue;
        t->epochs_run = e->epoch;
        if (isfinite(e->value) &&
            (isnan(t->best_value) ||
             (c->maximise ? e->value > t->best_value : e->value < t->best_value))) {
            t->best_value = e->value;
            t->best_epoch = e->epoch;
        }
        if (last && d == STK_DECISION_STOP) { /* stopped, then killed before trials.csv */
            t->status = TRIAL_STOPPED;
            t->stopped_at = e->epoch;
        }
    }
}

/* Before resuming: each pending trial continues from its checkpoint, or
 * starts over in its folder. */
static stk_status resume_flags(tune_trial *trials, int64_t n, const int64_t *ckpt)
{
    for (int64_t i = 0; i < n; i++) {
        tune_trial *t = &trials[i];
        if (t->status != TRIAL_PENDING) continue;
        if (ckpt[i] > 0)
            STK_TRY(add_flag(t, "--resume"));
        else if (access(t->out, F_OK) == 0)
            STK_TRY(add_flag(t, "--overwrite"));
    }
    return STK_OK;
}

/* results.log holding the kept entries only, then open for appending. */
static stk_status rewrite_log(tune_config *c, const entry *keep, size_t n)
{
    char path[1100], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/results.log", c->out);
    FILE *m = open_memstream(&text, &len);
    if (!m) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        fprintf(m, "%" PRId64 " %" PRId64 " %.17g\n", keep[i].trial, keep[i].epoch, keep[i].value);
    fclose(m);
    stk_file_part part = {text, len};
    stk_status st = stk_file_write_atomic(path, &part, 1);
    free(text);
    return st;
}

stk_status tune_open_log(tune_config *c)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/results.log", c->out);
    if (!(c->results = fopen(path, "a")))
        return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    return STK_OK;
}

stk_status tune_run(tune_config *c, tune_trial *trials, int64_t n, bool replay)
{
    int64_t epochs_done = 0;
    c->epochs_done = &epochs_done;
    stk_rng explore;
    stk_rng_init(&explore, (uint64_t)c->seed ^ 0x6578706c6f726521ull, 0, 0);
    c->explore = &explore;
    stk_scheduler *s;
    STK_TRY(stk_scheduler_create(&c->sched, &s));
    entry *log = NULL, *keep = NULL;
    size_t n_log = 0, n_keep = 0, next = 0;
    int64_t *ckpt = calloc((size_t)n, sizeof *ckpt);
    tune_trial **cohort = calloc((size_t)c->concurrent, sizeof *cohort);
    stk_status st = cohort && ckpt ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK && replay) {
        st = read_log(c, n, &log, &n_log);
        if (st == STK_OK && !(keep = malloc((n_log ? n_log : 1) * sizeof *keep)))
            st = stk_error(STK_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; st == STK_OK && i < n; i++)
            if (trials[i].status == TRIAL_PENDING) ckpt[i] = checkpoint_epoch(&trials[i]);
    }
    for (int64_t k0 = 0; st == STK_OK && k0 < n; k0 += c->concurrent) {
        int64_t k1 = k0 + c->concurrent < n ? k0 + c->concurrent : n;
        /* every trial joins the scheduler in id order, ended ones too (its draws) */
        for (int64_t i = k0; st == STK_OK && i < k1; i++) st = stk_scheduler_add(s, i);
        if (st == STK_OK && replay)
            replay_cohort(c, s, trials, log, n_log, &next, k0, k1, ckpt, keep, &n_keep);
        if (st == STK_OK && replay && next == n_log) { /* the replay is over: append from here */
            if ((st = resume_flags(trials, n, ckpt)) == STK_OK &&
                (st = rewrite_log(c, keep, n_keep)) == STK_OK)
                st = tune_open_log(c);
            replay = false;
        }
        int k = 0;
        for (int64_t i = k0; i < k1; i++)
            if (trials[i].status == TRIAL_PENDING) cohort[k++] = &trials[i];
        if (st == STK_OK && k) st = run_cohort(c, s, cohort, k, trials, n);
        if (st == STK_OK) st = tune_write_results(c, trials, n);
    }
    free(log);
    free(keep);
    free(ckpt);
    free(cohort);
    stk_scheduler_destroy(s);
    return st;
}
