/* The whole run (fit.h): epochs, evaluation, checkpoints, early stopping. */
#include "train/fit.h"
#include "train/snapshot_impl.h"

#include "common/text.h"
#include "engine/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const monitor_names[STK_MONITORS] = {
    "val_loss",   "val_top1",     "val_top5",     "train_loss",
    "train_top1", "ema_val_loss", "ema_val_top1", "ema_val_top5"};

const char *stk_monitor_name(stk_monitor m)
{
    return (int)m >= 0 && m < STK_MONITORS ? monitor_names[m] : NULL;
}

int stk_monitor_parse(const char *name)
{
    for (int i = 0; i < STK_MONITORS; i++)
        if (!strcmp(name, monitor_names[i])) return i;
    return -1;
}

bool stk_monitor_needs_val(stk_monitor m)
{
    return m <= STK_MONITOR_VAL_TOP5 || stk_monitor_is_ema(m);
}

bool stk_monitor_is_ema(stk_monitor m) { return m >= STK_MONITOR_EMA_VAL_LOSS; }

bool stk_monitor_is_loss(stk_monitor m)
{
    return m == STK_MONITOR_VAL_LOSS || m == STK_MONITOR_TRAIN_LOSS ||
           m == STK_MONITOR_EMA_VAL_LOSS;
}

const char *stk_fit_stop_name(stk_fit_stop s)
{
    static const char *const n[] = {"finished",  "early_stop", "stop_after", "callback",
                                    "cancelled", "diverged",   "failed"};
    return (int)s >= 0 && s <= STK_FIT_FAILED ? n[s] : "unknown";
}

stk_fit_options stk_fit_defaults(void)
{
    return (stk_fit_options){.early = {.patience = -1, .monitor = STK_MONITOR_VAL_LOSS},
                             .write = true};
}

/* ---- early stopping (Keras's EarlyStopping) -------------------------------- */

static bool maximise(const stk_early_stop *e)
{
    if (e->mode != STK_MODE_AUTO) return e->mode == STK_MODE_MAX;
    return !stk_monitor_is_loss(e->monitor);
}

double stk_fit_metric(stk_monitor m, const stk_epoch_stats *es, const stk_eval_result *val,
                      const stk_eval_result *val_ema)
{
    switch (m) {
    case STK_MONITOR_VAL_LOSS: return val ? val->loss : NAN;
    case STK_MONITOR_VAL_TOP1: return val ? val->top1 : NAN;
    case STK_MONITOR_VAL_TOP5: return val ? val->top5 : NAN;
    case STK_MONITOR_EMA_VAL_LOSS: return val_ema ? val_ema->loss : NAN;
    case STK_MONITOR_EMA_VAL_TOP1: return val_ema ? val_ema->top1 : NAN;
    case STK_MONITOR_EMA_VAL_TOP5: return val_ema ? val_ema->top5 : NAN;
    case STK_MONITOR_TRAIN_LOSS: return es->loss;
    default: return es->accuracy;
    }
}

/* Better than the best by strictly more than min_delta; a value that is not
 * finite never is; the first finite one always is. */
static bool improves(const stk_early_stop *e, double v, double best)
{
    if (!isfinite(v)) return false;
    if (!isfinite(best)) return true;
    return maximise(e) ? v - e->min_delta > best : v + e->min_delta < best;
}

/* ---- the best epoch's weights (restore_best) -------------------------------- */

/* ---- the run, an epoch at a time ---------------------------------------------- */

struct stk_fit {
    stk_trainer *t;
    stk_fit_options o;
    stk_fit_result out;
    char *path_last, *path_best;
    stk_weights_snapshot best; /* restore_best: the best epoch of this run */
    bool have_best_val;
    int64_t end;  /* the epoch this run stops before (epochs, or stop_after's) */
    bool stopped; /* a stop rule ended it */
};

static bool has_val(const stk_fit_options *o) { return o->val || o->val_elsewhere; }

static stk_status check_options(stk_trainer *t, const stk_fit_options *o)
{
    if (o->epochs < 1)
        return stk_error(STK_ERR_INVALID_ARG, "fit: epochs %lld", (long long)o->epochs);
    const stk_early_stop *e = &o->early;
    if (!stk_monitor_name(e->monitor))
        return stk_error(STK_ERR_INVALID_ARG, "fit: no monitor %d", (int)e->monitor);
    if (!has_val(o) && stk_monitor_needs_val(e->monitor))
        return stk_error(STK_ERR_INVALID_ARG,
                         "--monitor %s needs a validation set (--val); without one: train_loss or "
                         "train_top1",
                         stk_monitor_name(e->monitor));
    if (stk_monitor_is_ema(e->monitor) && !stk_trainer_ema(t))
        return stk_error(
            STK_ERR_INVALID_ARG,
            "--monitor %s: the trainer keeps no moving average of the weights (--ema-decay)",
            stk_monitor_name(e->monitor));
    if (!(e->min_delta >= 0))
        return stk_error(STK_ERR_INVALID_ARG, "--min-delta %g: must be >= 0", e->min_delta);
    if (e->start_from_epoch < 0)
        return stk_error(STK_ERR_INVALID_ARG, "--start-from-epoch %lld: must be >= 0",
                         (long long)e->start_from_epoch);
    return STK_OK;
}

/* Checkpoints after epoch e: last always, best when it improved. */
static stk_status write_checkpoints(stk_fit *f, bool improved)
{
    const stk_fit_options *o = &f->o;
    if (!o->write || !o->run_dir) return STK_OK;
    STK_TRY(stk_trainer_save(f->t, f->path_last, o->n_meta, o->meta_keys, o->meta_values));
    return improved ? stk_trainer_save(f->t, f->path_best, o->n_meta, o->meta_keys, o->meta_values)
                    : STK_OK;
}

void stk_fit_close(stk_fit *f)
{
    if (!f) return;
    stk_weights_snapshot_free(&f->best);
    free(f->path_last);
    free(f->path_best);
    free(f);
}

/* The run folder is made (with its parents) or refused before the first
 * epoch, not found missing when the first checkpoint is written. */
static stk_status make_run_dir(const char *dir)
{
    char path[4096];
    size_t len = strlen(dir);
    if (!len || len >= sizeof path)
        return stk_error(STK_ERR_INVALID_ARG, "fit: run_dir '%s' is empty or too long", dir);
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return stk_error(STK_ERR_IO, "fit: run_dir %s: cannot create %s: %s", dir, path,
                             strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return stk_error(STK_ERR_IO, "fit: run_dir %s: cannot create it: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return stk_error(STK_ERR_INVALID_ARG, "fit: run_dir %s is not a folder", dir);
    if (access(path, W_OK | X_OK) != 0)
        return stk_error(STK_ERR_IO, "fit: run_dir %s: cannot write in it: %s", dir,
                         strerror(errno));
    return STK_OK;
}

stk_status stk_fit_open(stk_trainer *t, const stk_fit_options *o, stk_fit **out)
{
    *out = NULL;
    STK_TRY(check_options(t, o));
    stk_train_position *pos = stk_trainer_position(t);
    if (o->early.restore_best && pos->best_epoch > 0 && !o->run_dir &&
        strcmp(pos->monitor, stk_monitor_name(o->early.monitor)) == 0)
        /* refused before any epoch runs, not after */
        return stk_error(STK_ERR_INVALID_ARG,
                         "fit: restore_best: the best epoch (%lld) ran before this call and there "
                         "is no run_dir to read its weights from",
                         (long long)pos->best_epoch);
    if (o->run_dir && o->write) STK_TRY(make_run_dir(o->run_dir));
    stk_fit *f = calloc(1, sizeof *f);
    if (!f) return stk_error(STK_ERR_NOMEM, "out of memory");
    f->t = t;
    f->o = *o;
    f->out.best_value = NAN;
    f->out.reason = STK_FIT_FINISHED;
    if (o->run_dir && (!(f->path_last = stk_text_printf("%s/last.safetensors", o->run_dir)) ||
                       !(f->path_best = stk_text_printf("%s/best.safetensors", o->run_dir)))) {
        stk_fit_close(f);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    const char *mon = stk_monitor_name(o->early.monitor);
    if (strcmp(pos->monitor, mon)) { /* a new run, or one resumed with another monitor */
        snprintf(pos->monitor, sizeof pos->monitor, "%s", mon);
        pos->best_value = NAN;
        pos->best_epoch = pos->wait = 0;
    }
    f->out.best_epoch = pos->best_epoch;
    f->out.best_value = pos->best_value;
    f->end = o->epochs;
    if (o->stop_after > 0 && pos->epoch + o->stop_after < f->end)
        f->end = pos->epoch + o->stop_after;
    *out = f;
    return STK_OK;
}

int64_t stk_fit_next_epoch(const stk_fit *f)
{
    int64_t e = stk_trainer_position(f->t)->epoch;
    return f->stopped || e >= f->end ? -1 : e;
}

stk_status stk_fit_epoch_done(stk_fit *f, stk_epoch_stats *es, stk_eval_result *val,
                              stk_eval_result *val_ema, bool *stop)
{
    const stk_fit_options *o = &f->o;
    stk_train_position *pos = stk_trainer_position(f->t);
    int64_t e = pos->epoch - 1; /* the epoch that just ran (its finish moved the position on) */
    stk_eval_result none = {0}, none_ema = {0};
    if (!val) val = &none;
    /* the average's evaluation: given, or to come from the rank that ran it */
    bool ema = stk_trainer_ema(f->t) != NULL && (val_ema || o->val_elsewhere);
    if (!val_ema) val_ema = &none_ema;
    stk_fit_epoch fe = {.epoch = e,
                        .train = es,
                        .val = has_val(o) ? val : NULL,
                        .val_ema = has_val(o) && ema ? val_ema : NULL,
                        .confusion = o->val ? o->confusion : NULL};
    if (o->reduce) STK_TRY(o->reduce(o->ctx, &fe));
    const stk_early_stop *early = &o->early;
    fe.monitored = stk_fit_metric(early->monitor, es, fe.val, fe.val_ema);
    /* Keras: epochs before start_from_epoch are not judged at all */
    if (e >= early->start_from_epoch) {
        pos->wait++;
        if ((fe.improved = improves(early, fe.monitored, pos->best_value))) {
            pos->best_value = fe.monitored;
            pos->best_epoch = e + 1;
            pos->wait = 0;
            f->out.best_val = *val;
            f->have_best_val = true;
            if (early->restore_best)
                STK_TRY(stk_weights_snapshot_take(&f->best, stk_trainer_model(f->t)));
        }
    }
    fe.wait = pos->wait;
    bool asked = false;
    if (o->on_epoch) STK_TRY(o->on_epoch(o->ctx, &fe, &asked));
    STK_TRY(write_checkpoints(f, fe.improved));
    stk_fit_result *out = &f->out;
    out->epochs_run++;
    out->stopped_epoch = e + 1;
    out->train = *es;
    out->val = *val;
    out->best_epoch = pos->best_epoch;
    out->best_value = pos->best_value;
    /* Keras: an improving epoch never stops the run (patience 0 included) */
    if (early->patience >= 0 && !fe.improved && pos->wait >= early->patience && e > 0 &&
        e >= early->start_from_epoch) {
        out->reason = STK_FIT_EARLY_STOP;
        f->stopped = true;
    } else if (asked) {
        out->reason = STK_FIT_CALLBACK;
        f->stopped = true;
    }
    *stop = stk_fit_next_epoch(f) < 0;
    return STK_OK;
}

stk_status stk_fit_finish(stk_fit *f, stk_fit_result *out)
{
    if (!f->stopped && f->end < f->o.epochs) f->out.reason = STK_FIT_STOP_AFTER;
    stk_status st = STK_OK;
    stk_train_position *pos = stk_trainer_position(f->t);
    stk_model *m = stk_trainer_model(f->t);
    /* restore_best: the best epoch's weights into the model, and its figures
     * as the result's (after a resume, read back and evaluated again) */
    if (f->o.early.restore_best && pos->best_epoch > 0) {
        if (f->best.host) {
            st = stk_weights_snapshot_restore(&f->best, m);
        } else { /* the best epoch ran before a resume (open checked there is a run_dir) */
            stk_load_report rep;
            st = stk_checkpoint_load(f->path_best, m, NULL, true, &rep);
        }
        if (st == STK_OK && f->o.val && !f->have_best_val)
            st = stk_trainer_evaluate(f->t, f->o.val, NULL, &f->out.best_val);
        if (st == STK_OK && (f->o.val || f->have_best_val)) f->out.val = f->out.best_val;
    }
    *out = f->out;
    return st;
}

/* The reason a run that failed with `st` ended for. */
static stk_fit_stop failure_reason(stk_status st)
{
    return st == STK_ERR_CANCELLED  ? STK_FIT_CANCELLED
           : st == STK_ERR_DIVERGED ? STK_FIT_DIVERGED
                                    : STK_FIT_FAILED;
}

stk_status stk_trainer_fit(stk_trainer *t, const stk_fit_options *o, stk_fit_result *out)
{
    memset(out, 0, sizeof *out);
    out->best_value = NAN;
    out->reason = STK_FIT_FAILED;
    if (!o->train || !o->h2d)
        return stk_error(STK_ERR_INVALID_ARG, "fit: a training loader and its H2D stage");
    stk_fit *f;
    STK_TRY(stk_fit_open(t, o, &f));
    stk_status st = STK_OK;
    for (int64_t e; st == STK_OK && (e = stk_fit_next_epoch(f)) >= 0;) {
        stk_epoch_stats es;
        stk_eval_result val = {0}, val_ema = {0};
        bool stop;
        if (o->epoch_begin && (st = o->epoch_begin(o->ctx, e)) != STK_OK) break;
        if ((st = stk_trainer_train_epoch(t, o->train, o->h2d, e, o->progress, o->ctx, &es)) !=
            STK_OK)
            break;
        if (o->val && (st = stk_trainer_evaluate_per_class(t, o->val, o->eval_label, &val,
                                                           o->confusion)) != STK_OK)
            break;
        if (o->val && stk_trainer_ema(t) &&
            (st = stk_trainer_evaluate_ema(t, o->val, o->eval_label, &val_ema)) != STK_OK)
            break;
        st = stk_fit_epoch_done(f, &es, &val, &val_ema, &stop);
    }
    if (st == STK_OK)
        st = stk_fit_finish(f, out);
    else
        *out = f->out;
    if (st != STK_OK) out->reason = failure_reason(st);
    stk_fit_close(f);
    return st;
}
