/* stoke.train(): a whole run through the library (run/run.h), the same
 * calls as `stoke train`, so the same run folder (metrics.csv, steps.csv,
 * checkpoints, TensorBoard) and the same figures.
 *
 * The settings are stoke train's, by name with '_' for '-' (run_settings.h's
 * table): a switch takes a bool, a repeatable setting (freeze) a str or a
 * list of them, the others a str, int or float; None leaves the default.
 * The run is opened, fitted and closed on a thread of its own while the
 * caller waits in 0.1 s steps with the GIL released, so Ctrl-C raises
 * KeyboardInterrupt: the run stops after the current step, keeping the last
 * completed epoch's checkpoint. on_epoch(metrics) is called (with the GIL,
 * on the run's thread) after each epoch's row is written; True stops the
 * run, an exception stops it and is raised. */
#include "module.h"

#include "run/run.h"

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct run_thread {
    stk_run r;
    stk_run_result res;
    stk_status st;
    char *error;                 /* the run thread's message, carried to the caller */
    char monitor[32], out[4096]; /* the settings' (freed when the run closes) */
    volatile sig_atomic_t cancel;
    PyObject *on_epoch;                      /* borrowed: the caller's frame holds it */
    PyObject *exc_type, *exc_value, *exc_tb; /* what on_epoch raised */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} run_thread;

/* The epoch's figures under metrics.csv's names (epoch counted from 1). */
static PyObject *epoch_dict(const stk_run_epoch *re)
{
    const stk_fit_epoch *e = re->fit;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    bool ok = stoke_dict_put(d, "epoch", PyLong_FromLongLong(e->epoch + 1)) &&
              stoke_dict_put(d, "step", PyLong_FromLongLong(re->step)) &&
              stoke_dict_put(d, "lr", PyFloat_FromDouble(re->lr)) &&
              stoke_dict_put(d, "train_loss", stoke_number(e->train->loss)) &&
              stoke_dict_put(d, "train_acc", stoke_number(e->train->accuracy)) &&
              stoke_dict_put(d, "val_loss", stoke_number(e->val ? e->val->loss : NAN)) &&
              stoke_dict_put(d, "val_top1", stoke_number(e->val ? e->val->top1 : NAN)) &&
              stoke_dict_put(d, "val_top5", stoke_number(e->val ? e->val->top5 : NAN)) &&
              stoke_dict_put(d, "images_per_sec", stoke_number(e->train->images_per_sec)) &&
              stoke_dict_put(d, "stall_pct", stoke_number(e->train->stall_pct)) &&
              stoke_dict_put(d, "seconds", stoke_number(e->train->seconds)) &&
              stoke_dict_put(d, "improved", PyBool_FromLong(e->improved));
    if (ok && e->val_ema)
        ok = stoke_dict_put(d, "ema_val_loss", stoke_number(e->val_ema->loss)) &&
             stoke_dict_put(d, "ema_val_top1", stoke_number(e->val_ema->top1)) &&
             stoke_dict_put(d, "ema_val_top5", stoke_number(e->val_ema->top5));
    if (!ok) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The run's hook: on_epoch(metrics), with the GIL. */
static stk_status call_on_epoch(void *ctx, const stk_run_epoch *re, bool *stop)
{
    run_thread *t = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *d = epoch_dict(re),
             *got = d ? PyObject_CallFunctionObjArgs(t->on_epoch, d, NULL) : NULL;
    Py_XDECREF(d);
    int truth = got ? PyObject_IsTrue(got) : -1;
    Py_XDECREF(got);
    stk_status st = STK_OK;
    if (truth < 0) { /* it raised: the run stops, and the caller raises it */
        PyErr_Fetch(&t->exc_type, &t->exc_value, &t->exc_tb);
        st = stk_error(STK_ERR_CANCELLED, "on_epoch raised an exception");
    } else {
        *stop = truth == 1;
    }
    PyGILState_Release(g);
    return st;
}

static void *run_main(void *arg)
{
    run_thread *t = arg;
    stk_status st = stk_run_start(&t->r);
    if (st == STK_OK) st = stk_run_fit(&t->r, &t->res);
    char *err = st != STK_OK ? strdup(stk_last_error()) : NULL;
    if (st != STK_OK) stk_run_stop_ranks(&t->r);
    snprintf(t->monitor, sizeof t->monitor, "%s", t->r.a.monitor ? t->r.a.monitor : "");
    snprintf(t->out, sizeof t->out, "%s", t->r.a.out ? t->r.a.out : "");
    stk_run_close(&t->r);
    t->st = st;
    t->error = err;
    return NULL;
}

/* The run's result: `stoke train --json`'s fields and the run folder. */
static PyObject *result_dict(const run_thread *t)
{
    const stk_run_result *res = &t->res;
    const stk_fit_result *f = &res->fit;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    bool ok =
        stoke_dict_put(d, "params", PyLong_FromLongLong(res->params)) &&
        stoke_dict_put(d, "params_trainable", PyLong_FromLongLong(res->params_trainable)) &&
        stoke_dict_put(d, "epochs", PyLong_FromLongLong(res->epochs)) &&
        stoke_dict_put(d, "val_top1", stoke_number(f->val.top1)) &&
        stoke_dict_put(d, "val_top5", stoke_number(f->val.top5)) &&
        stoke_dict_put(d, "val_loss", stoke_number(f->val.loss)) &&
        stoke_dict_put(d, "train_images_per_sec", stoke_number(res->images_per_sec)) &&
        stoke_dict_put(d, "stall_pct", stoke_number(res->stall_pct)) &&
        stoke_dict_put(d, "seconds", stoke_number(res->seconds)) &&
        stoke_dict_put(d, "peak_rss_mb", stoke_number(res->peak_rss_mb)) &&
        stoke_dict_put(d, "ranks", PyLong_FromLong(res->ranks)) &&
        stoke_dict_put(d, "stopped_epoch", PyLong_FromLongLong(f->stopped_epoch)) &&
        stoke_dict_put(d, "best_epoch", PyLong_FromLongLong(f->best_epoch)) &&
        stoke_dict_put(d, "monitor", PyUnicode_FromString(t->monitor)) &&
        stoke_dict_put(d, "best_value", stoke_number(f->best_value)) &&
        stoke_dict_put(d, "stop_reason", PyUnicode_FromString(stk_fit_stop_name(f->reason))) &&
        stoke_dict_put(d, "out", PyUnicode_DecodeFSDefault(t->out));
    if (!ok) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* One setting into s; false with an exception set. */
static bool set_one(stk_run_settings *s, const char *name, PyObject *v)
{
    PyObject *text = stoke_setting_text(name, v);
    if (!text) return false;
    bool ok = stk_run_setting_set(s, name, PyBytes_AsString(text)) == STK_OK;
    if (!ok) PyErr_SetString(PyExc_ValueError, stk_last_error());
    Py_DECREF(text);
    return ok;
}

/* The keywords into s: names checked against the table (a front end's own,
 * like json or config, refused), lists for repeatable settings. */
static bool read_settings(stk_run_settings *s, PyObject *kw)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        PyObject *key_bytes = PyUnicode_AsUTF8String(key);
        if (!key_bytes) return false;
        char name[64];
        snprintf(name, sizeof name, "%s", PyBytes_AsString(key_bytes));
        Py_DECREF(key_bytes);
        if (!strcmp(name, "on_epoch") || value == Py_None) continue;
        const stk_flag *f = stk_run_setting_find(name);
        if (f && (f->set & STK_SET_FRONT)) {
            PyErr_Format(PyExc_ValueError,
                         "'%s' is stoke train's command line, not a setting of the run", name);
            return false;
        }
        if (f && f->kind == STK_FLAG_KIND_LIST && (PyList_Check(value) || PyTuple_Check(value))) {
            bool ok = true;
            for (Py_ssize_t i = 0; ok && i < PySequence_Size(value); i++) {
                PyObject *item = PySequence_GetItem(value, i);
                ok = item && set_one(s, name, item);
                Py_XDECREF(item);
            }
            if (!ok) return false;
        } else if (!set_one(s, name, value)) {
            return false;
        }
    }
    if (stk_run_settings_check(s) != STK_OK) {
        PyErr_SetString(PyExc_ValueError, stk_last_error());
        return false;
    }
    return true;
}

static PyObject *run_and_wait(run_thread *t)
{
    bool interrupted;
    if (!stoke_wait_for_thread(run_main, t, &t->cancel, &interrupted)) {
        stk_run_close(&t->r);
        return NULL;
    }
    PyObject *result = NULL;
    if (interrupted) {
        /* the KeyboardInterrupt (or the handler's exception) is set */
        Py_XDECREF(t->exc_type);
        Py_XDECREF(t->exc_value);
        Py_XDECREF(t->exc_tb);
    } else if (t->exc_type) {
        PyErr_Restore(t->exc_type, t->exc_value, t->exc_tb);
    } else if (t->st != STK_OK) {
        PyErr_SetString(stoke_error, t->error ? t->error : "train failed");
    } else {
        result = result_dict(t);
    }
    free(t->error);
    return result;
}

PyObject *stoke_py_train(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    if (PyTuple_Size(args) != 0)
        return PyErr_Format(PyExc_TypeError, "train() takes keyword arguments only "
                                             "(data=..., model=..., and stoke train's settings)");
    PyObject *on_epoch = kw ? PyDict_GetItemString(kw, "on_epoch") : NULL;
    if (on_epoch == Py_None) on_epoch = NULL;
    if (on_epoch && !PyCallable_Check(on_epoch))
        return PyErr_Format(PyExc_TypeError, "on_epoch: expected a callable");
    stk_run_settings s;
    if (stk_run_settings_init(&s) != STK_OK) return stoke_raise();
    if (!read_settings(&s, kw)) {
        stk_run_settings_free(&s);
        return NULL;
    }
    run_thread *t = calloc(1, sizeof *t);
    if (!t) {
        stk_run_settings_free(&s);
        return PyErr_NoMemory();
    }
    t->on_epoch = on_epoch;
    stk_run_hooks hooks = {
        .on_epoch = on_epoch ? call_on_epoch : NULL, .ctx = t, .cancel = &t->cancel};
    stk_run_init(&t->r, &s, &hooks); /* the run owns the settings now */
    PyObject *result = run_and_wait(t);
    free(t);
    return result;
}
