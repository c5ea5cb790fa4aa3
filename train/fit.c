/* The whole run (fit.h): epochs, evaluation, checkpoints, early stopping. */
#include "train/fit.h"

#include "common/text.h"
#include "engine/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const monitor_names[STK_MONITORS] = {"val_loss", "val_top1", "val_top5",
                                                        "train_loss", "train_top1"};

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
    return e->monitor != STK_MONITOR_VAL_LOSS && e->monitor != STK_MONITOR_TRAIN_LOSS;
}

static double monitored(stk_monitor m, const stk_epoch_stats *es, const stk_eval_result *val)
{
    switch (m) {
    case STK_MONITOR_VAL_LOSS: return val ? val->loss : NAN;
    case STK_MONITOR_VAL_TOP1: return val ? val->top1 : NAN;
    case STK_MONITOR_VAL_TOP5: return val ? val->top5 : NAN;
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

typedef struct snapshot {
    void **host; /* per parameter (buffers included): its bytes */
    int n;
} snapshot;

static size_t param_bytes(const stk_tensor *t)
{
    return (size_t)stk_tensor_numel(t) * stk_dtype_size(stk_tensor_dtype(t));
}

static stk_status snapshot_take(snapshot *s, stk_model *m)
{
    if (!s->host) {
        s->n = stk_model_param_count(m);
        if (!(s->host = calloc((size_t)(s->n ? s->n : 1), sizeof *s->host)))
            return stk_error(STK_ERR_NOMEM, "no memory for the best epoch's weights");
    }
    for (int i = 0; i < s->n; i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        size_t bytes = param_bytes(t);
        if (!s->host[i] && !(s->host[i] = malloc(bytes ? bytes : 1)))
            return stk_error(STK_ERR_NOMEM, "no memory for the best epoch's weights");
        STK_TRY(stk_tensor_to_host(t, s->host[i], bytes));
    }
    return STK_OK;
}

static stk_status snapshot_restore(const snapshot *s, stk_model *m)
{
    for (int i = 0; i < s->n; i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        STK_TRY(stk_tensor_copy_from_host(t, s->host[i], param_bytes(t)));
    }
    return STK_OK;
}

static void snapshot_free(snapshot *s)
{
    for (int i = 0; s->host && i < s->n; i++) free(s->host[i]);
    free(s->host);
}

/* ---- the loop ---------------------------------------------------------------- */

typedef struct fit_run {
    stk_trainer *t;
    const stk_fit_options *o;
    stk_fit_result *out;
    char *path_last, *path_best;
    snapshot best; /* restore_best: the best epoch of this call */
    bool have_best_val;
} fit_run;

static bool has_val(const stk_fit_options *o) { return o->val || o->val_elsewhere; }

static stk_status check_options(const stk_fit_options *o)
{
    if (!o->train || !o->h2d)
        return stk_error(STK_ERR_INVALID_ARG, "fit: a training loader and its H2D stage");
    if (o->epochs < 1) return stk_error(STK_ERR_INVALID_ARG, "fit: epochs %lld", (long long)o->epochs);
    const stk_early_stop *e = &o->early;
    if (!stk_monitor_name(e->monitor))
        return stk_error(STK_ERR_INVALID_ARG, "fit: no monitor %d", (int)e->monitor);
    if (!has_val(o) && e->monitor <= STK_MONITOR_VAL_TOP5)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--monitor %s needs a validation set (--val); without one: train_loss or "
                         "train_top1",
                         stk_monitor_name(e->monitor));
    if (!(e->min_delta >= 0))
        return stk_error(STK_ERR_INVALID_ARG, "--min-delta %g: must be >= 0", e->min_delta);
    if (e->start_from_epoch < 0)
        return stk_error(STK_ERR_INVALID_ARG, "--start-from-epoch %lld: must be >= 0",
                         (long long)e->start_from_epoch);
    return STK_OK;
}

/* Checkpoints after epoch e: last always, best when it improved. */
static stk_status write_checkpoints(fit_run *r, bool improved)
{
    const stk_fit_options *o = r->o;
    if (!o->write || !o->run_dir) return STK_OK;
    STK_TRY(stk_trainer_save(r->t, r->path_last, o->n_meta, o->meta_keys, o->meta_values));
    return improved ? stk_trainer_save(r->t, r->path_best, o->n_meta, o->meta_keys, o->meta_values)
                    : STK_OK;
}

/* One epoch: train, evaluate, reduce, judge, report, checkpoint. *stop:
 * the run ends here (reason set). */
static stk_status run_epoch(fit_run *r, int64_t e, bool *stop)
{
    const stk_fit_options *o = r->o;
    stk_train_position *pos = stk_trainer_position(r->t);
    stk_epoch_stats es;
    stk_eval_result val = {0};
    if (o->epoch_begin) STK_TRY(o->epoch_begin(o->ctx, e));
    STK_TRY(stk_trainer_train_epoch(r->t, o->train, o->h2d, e, o->progress, o->ctx, &es));
    if (o->val) STK_TRY(stk_trainer_evaluate(r->t, o->val, o->eval_label, &val));
    stk_fit_epoch fe = {.epoch = e, .train = &es, .val = has_val(o) ? &val : NULL};
    if (o->reduce) STK_TRY(o->reduce(o->ctx, &fe));
    const stk_early_stop *early = &o->early;
    fe.monitored = monitored(early->monitor, &es, fe.val);
    /* Keras: epochs before start_from_epoch are not judged at all */
    if (e >= early->start_from_epoch) {
        pos->wait++;
        if ((fe.improved = improves(early, fe.monitored, pos->best_value))) {
            pos->best_value = fe.monitored;
            pos->best_epoch = e + 1;
            pos->wait = 0;
            r->out->best_val = val;
            r->have_best_val = true;
            if (early->restore_best) STK_TRY(snapshot_take(&r->best, stk_trainer_model(r->t)));
        }
    }
    fe.wait = pos->wait;
    bool asked = false;
    if (o->on_epoch) STK_TRY(o->on_epoch(o->ctx, &fe, &asked));
    STK_TRY(write_checkpoints(r, fe.improved));
    stk_fit_result *out = r->out;
    out->epochs_run++;
    out->stopped_epoch = e + 1;
    out->train = es;
    out->val = val;
    out->best_epoch = pos->best_epoch;
    out->best_value = pos->best_value;
    /* Keras: an improving epoch never stops the run (patience 0 included) */
    if (early->patience >= 0 && !fe.improved && pos->wait >= early->patience && e > 0 &&
        e >= early->start_from_epoch) {
        out->reason = STK_FIT_EARLY_STOP;
        *stop = true;
    } else if (asked) {
        out->reason = STK_FIT_CALLBACK;
        *stop = true;
    }
    return STK_OK;
}

/* restore_best: the best epoch's weights into the model, and its figures
 * as the result's (after a resume, read back and evaluated again). */
static stk_status restore_best(fit_run *r)
{
    stk_train_position *pos = stk_trainer_position(r->t);
    stk_model *m = stk_trainer_model(r->t);
    if (pos->best_epoch == 0) return STK_OK;
    if (r->best.host) {
        STK_TRY(snapshot_restore(&r->best, m));
    } else { /* the best epoch ran before a resume (fit_loop checked there is a run_dir) */
        stk_load_report rep;
        STK_TRY(stk_checkpoint_load(r->path_best, m, NULL, true, &rep));
    }
    if (!r->o->val) return STK_OK;
    if (!r->have_best_val) STK_TRY(stk_trainer_evaluate(r->t, r->o->val, NULL, &r->out->best_val));
    r->out->val = r->out->best_val;
    return STK_OK;
}

static stk_status fit_loop(fit_run *r)
{
    const stk_fit_options *o = r->o;
    stk_train_position *pos = stk_trainer_position(r->t);
    const char *mon = stk_monitor_name(o->early.monitor);
    if (strcmp(pos->monitor, mon)) { /* a new run, or one resumed with another monitor */
        snprintf(pos->monitor, sizeof pos->monitor, "%s", mon);
        pos->best_value = NAN;
        pos->best_epoch = pos->wait = 0;
    }
    if (o->early.restore_best && pos->best_epoch > 0 && !o->run_dir)
        /* refused before any epoch runs, not after */
        return stk_error(STK_ERR_INVALID_ARG,
                         "fit: restore_best: the best epoch (%lld) ran before this call and there "
                         "is no run_dir to read its weights from",
                         (long long)pos->best_epoch);
    r->out->best_epoch = pos->best_epoch;
    r->out->best_value = pos->best_value;
    if (o->run_dir && (!(r->path_last = stk_text_printf("%s/last.safetensors", o->run_dir)) ||
                       !(r->path_best = stk_text_printf("%s/best.safetensors", o->run_dir))))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    int64_t end = o->epochs;
    if (o->stop_after > 0 && pos->epoch + o->stop_after < end) end = pos->epoch + o->stop_after;
    r->out->reason = STK_FIT_FINISHED;
    bool stop = false;
    for (int64_t e = pos->epoch; e < end && !stop; e++) STK_TRY(run_epoch(r, e, &stop));
    if (!stop && end < o->epochs) r->out->reason = STK_FIT_STOP_AFTER;
    return o->early.restore_best ? restore_best(r) : STK_OK;
}

stk_status stk_trainer_fit(stk_trainer *t, const stk_fit_options *o, stk_fit_result *out)
{
    memset(out, 0, sizeof *out);
    out->best_value = NAN;
    out->reason = STK_FIT_FAILED;
    STK_TRY(check_options(o));
    fit_run r = {.t = t, .o = o, .out = out};
    stk_status st = fit_loop(&r);
    if (st == STK_ERR_CANCELLED) out->reason = STK_FIT_CANCELLED;
    else if (st == STK_ERR_DIVERGED) out->reason = STK_FIT_DIVERGED;
    else if (st != STK_OK) out->reason = STK_FIT_FAILED;
    snapshot_free(&r.best);
    free(r.path_last);
    free(r.path_best);
    return st;
}
