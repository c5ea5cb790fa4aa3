/* stoke.tune(): a sweep through the library (tune/session.h), the same
 * calls as `stoke tune`, so the same folder (trials.csv, best.json,
 * best.safetensors, sweep.txt, trials/ID/) and the same trials.
 *
 * The keywords are stoke tune's flags and stoke train's (fixed for all
 * trials), by name with '_' for '-': a switch takes a bool (False leaves it
 * out), a repeatable flag a list, the others a str, int, float or path;
 * None leaves the default. space is a dict {key: "loguniform(1e-3,0.3)"},
 * a str of entries or a list of them. They become the argument vector
 * `stoke tune` would be given, parsed by the session. The sweep runs on a
 * thread of its own (as stoke.train's run): Ctrl-C raises
 * KeyboardInterrupt after the current step with trials.csv written, and
 * resume=True (with out=) continues it. on_trial(trial) is called (with the
 * GIL, on the sweep's thread) as each trial ends; True stops the sweep the
 * same way (the result's "complete" is False), an exception stops it and
 * is raised. */
#include "module.h"

#include "tune/session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct tune_thread {
    int argc;
    char **argv; /* owned, with their texts */
    stk_tune_session s;
    bool usage;       /* open failed on the flags: ValueError */
    char *error;      /* the sweep thread's message, carried to the caller */
    PyObject *result; /* built on the sweep's thread (with the GIL) before the session closes */
    volatile sig_atomic_t cancel;
    bool stopped_by_callback;
    PyObject *on_trial;                      /* borrowed: the caller's frame holds it */
    PyObject *exc_type, *exc_value, *exc_tb; /* what on_trial raised, or building the result */
} tune_thread;

/* A trial's value as the space drew it: an int or float when it reads as
 * one, else the text (a choice's name). */
static PyObject *param_value(const char *text)
{
    char *end;
    errno = 0;
    long long i = strtoll(text, &end, 10);
    if (*text && !*end && !errno) return PyLong_FromLongLong(i);
    double d = strtod(text, &end);
    if (*text && !*end) return PyFloat_FromDouble(d);
    return PyUnicode_DecodeFSDefault(text);
}

static PyObject *text_or_none(const char *s)
{
    if (!s || !*s) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(s);
}

static PyObject *none(void)
{
    Py_INCREF(Py_None);
    return Py_None;
}

/* A trial's values by key. */
static PyObject *params_dict(const stk_tune_trial *t)
{
    PyObject *params = PyDict_New();
    for (int k = 0; params && k < t->params.n; k++)
        if (!stoke_dict_put(params, t->params.key[k], param_value(t->params.value[k])))
            Py_CLEAR(params);
    return params;
}

/* One trial as trials.csv has it. */
static PyObject *trial_dict(const stk_tune_trial *t)
{
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    char id[16], st[32];
    snprintf(id, sizeof id, "%04lld", (long long)t->id);
    stk_tune_status_text(t, st);
    bool ok =
        stoke_dict_put(d, "trial", PyUnicode_FromString(id)) &&
        stoke_dict_put(d, "status", PyUnicode_FromString(st)) &&
        stoke_dict_put(d, "params", params_dict(t)) &&
        stoke_dict_put(d, "best_value", stoke_number(t->best_value)) &&
        stoke_dict_put(d, "best_epoch", PyLong_FromLongLong(t->best_epoch)) &&
        stoke_dict_put(d, "epochs", PyLong_FromLongLong(t->epochs_run)) &&
        stoke_dict_put(d, "seconds", PyFloat_FromDouble(t->seconds)) &&
        stoke_dict_put(d, "error", text_or_none(t->status == STK_TRIAL_ERROR ? t->error : NULL)) &&
        stoke_dict_put(d, "out", PyUnicode_DecodeFSDefault(t->out)) &&
        stoke_dict_put(d, "command", text_or_none(t->cloned ? NULL : t->command));
    if (!ok) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* Every trial, in id order. */
static PyObject *trial_list(const stk_tune_session *s)
{
    PyObject *list = PyList_New(0);
    for (int64_t i = 0; list && i < s->n; i++) {
        PyObject *t = trial_dict(&s->trials[i]);
        if (!t || PyList_Append(list, t) != 0) Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

/* The sweep's result: `stoke tune --json`'s fields, the best trial and
 * every trial. */
static PyObject *result_dict(const stk_tune_session *s, bool complete)
{
    const stk_tune_config *c = &s->c;
    int64_t counts[5] = {0};
    for (int64_t i = 0; i < s->n; i++) counts[s->trials[i].status]++;
    const stk_tune_trial *b = stk_tune_best(c, s->trials, s->n);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    char best_key[48], id[16];
    snprintf(best_key, sizeof best_key, "best_%s", stk_monitor_name(c->metric));
    if (b) snprintf(id, sizeof id, "%04lld", (long long)b->id);
    bool ok =
        stoke_dict_put(d, "trials", PyLong_FromLongLong(s->n)) &&
        stoke_dict_put(d, "completed", PyLong_FromLongLong(counts[STK_TRIAL_COMPLETED])) &&
        stoke_dict_put(d, "stopped", PyLong_FromLongLong(counts[STK_TRIAL_STOPPED])) &&
        stoke_dict_put(d, "early_stopped", PyLong_FromLongLong(counts[STK_TRIAL_EARLY_STOPPED])) &&
        stoke_dict_put(d, "errors", PyLong_FromLongLong(counts[STK_TRIAL_ERROR])) &&
        stoke_dict_put(d, "seconds", PyFloat_FromDouble(s->seconds)) &&
        stoke_dict_put(d, "best_trial", b ? PyUnicode_FromString(id) : none()) &&
        stoke_dict_put(d, best_key, stoke_number(b ? b->best_value : NAN)) &&
        stoke_dict_put(d, "metric", PyUnicode_FromString(stk_monitor_name(c->metric))) &&
        stoke_dict_put(d, "mode", PyUnicode_FromString(c->maximise ? "max" : "min")) &&
        stoke_dict_put(d, "complete", PyBool_FromLong(complete)) &&
        stoke_dict_put(d, "best", b ? trial_dict(b) : none()) &&
        stoke_dict_put(d, "results", trial_list(s)) &&
        stoke_dict_put(d, "out", PyUnicode_DecodeFSDefault(c->out));
    if (!ok) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The sweep's hook: on_trial(trial), with the GIL. */
static void call_on_trial(void *ctx, const stk_tune_config *c, const stk_tune_trial *tr)
{
    (void)c;
    tune_thread *t = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *d = trial_dict(tr),
             *got = d ? PyObject_CallFunctionObjArgs(t->on_trial, d, NULL) : NULL;
    Py_XDECREF(d);
    int truth = got ? PyObject_IsTrue(got) : -1;
    Py_XDECREF(got);
    if (truth < 0 && !t->exc_type) /* it raised: the sweep stops, and the caller raises it */
        PyErr_Fetch(&t->exc_type, &t->exc_value, &t->exc_tb);
    if (truth != 0) {
        t->stopped_by_callback = truth == 1;
        t->cancel = 1;
    }
    PyGILState_Release(g);
}

static void *tune_main(void *arg)
{
    tune_thread *t = arg;
    stk_tune_hooks hooks = {
        .cancel = &t->cancel, .trial_end = t->on_trial ? call_on_trial : NULL, .ctx = t};
    stk_status st = stk_tune_session_open(&t->s, t->argc, t->argv, &hooks);
    bool opened = st == STK_OK;
    if (opened) st = stk_tune_session_run(&t->s);
    if (st != STK_OK && !(opened && st == STK_ERR_CANCELLED)) {
        t->usage = !opened && t->s.usage;
        t->error = strdup(stk_last_error());
        if (opened) stk_tune_session_stop_ranks(&t->s);
    } else {
        PyGILState_STATE g = PyGILState_Ensure();
        t->result = result_dict(&t->s, st == STK_OK);
        if (!t->result && !t->exc_type) PyErr_Fetch(&t->exc_type, &t->exc_value, &t->exc_tb);
        PyGILState_Release(g);
    }
    stk_tune_session_close(&t->s);
    return NULL;
}

/* ---- the keywords as stoke tune's argument vector ---------------------------------- */

static bool push(tune_thread *t, const char *text)
{
    char **v = realloc(t->argv, (size_t)(t->argc + 2) * sizeof *v);
    if (!v) return false;
    t->argv = v;
    if (!(v[t->argc] = strdup(text))) return false;
    v[++t->argc] = NULL;
    return true;
}

/* "--flag" and the value's text (none for a switch given True). */
static bool push_flag(tune_thread *t, const char *flag, const char *name, PyObject *v)
{
    if (PyBool_Check(v)) return v == Py_False || push(t, flag) || (PyErr_NoMemory(), false);
    PyObject *text = stoke_setting_text(name, v);
    if (!text) return false;
    bool ok = push(t, flag) && push(t, PyBytes_AsString(text));
    Py_DECREF(text);
    if (!ok) PyErr_NoMemory();
    return ok;
}

/* space: {key: "dist(args)"}, "key=dist(args) ...", or a list of those. */
static bool push_space(tune_thread *t, PyObject *v)
{
    if (!PyDict_Check(v)) {
        if (!PyList_Check(v) && !PyTuple_Check(v)) return push_flag(t, "--space", "space", v);
        for (Py_ssize_t i = 0; i < PySequence_Size(v); i++) {
            PyObject *item = PySequence_GetItem(v, i);
            bool ok = item && push_flag(t, "--space", "space", item);
            Py_XDECREF(item);
            if (!ok) return false;
        }
        return true;
    }
    PyObject *key, *dist;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &key, &dist)) {
        PyObject *entry = PyUnicode_FromFormat("%S=%S", key, dist);
        bool ok = entry && push_flag(t, "--space", "space", entry);
        Py_XDECREF(entry);
        if (!ok) return false;
    }
    return true;
}

/* Whether flag --name is stoke tune's or stoke train's; ValueError
 * otherwise (with a did-you-mean), and for the command line's own. */
static bool known(const char *key, const char *name)
{
    size_t len = strlen(name);
    const stk_flag *f = stk_flag_find(stk_tune_flags, name, len);
    const stk_flag *r = f ? NULL : stk_run_setting_find(name);
    if (!strcmp(name, "json") || !strcmp(name, "config") || (r && (r->set & STK_SET_FRONT))) {
        PyErr_Format(PyExc_ValueError, "'%s' is stoke tune's command line, not a setting", key);
        return false;
    }
    if (f || r) return true;
    const char *hint = stk_flag_closest(stk_tune_flags, name, len);
    if (!hint) hint = stk_flag_closest(stk_run_flags, name, len);
    if (hint)
        PyErr_Format(PyExc_ValueError, "'%s': no such setting (did you mean %s?)", key, hint);
    else
        PyErr_Format(PyExc_ValueError, "'%s': no such setting", key);
    return false;
}

static bool read_keywords(tune_thread *t, PyObject *kw)
{
    if (!push(t, "tune")) return PyErr_NoMemory(), false;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        PyObject *key_bytes = PyUnicode_AsUTF8String(key);
        if (!key_bytes) return false;
        char k[64], flag[72];
        snprintf(k, sizeof k, "%s", PyBytes_AsString(key_bytes));
        Py_DECREF(key_bytes);
        if (!strcmp(k, "on_trial") || value == Py_None) continue;
        snprintf(flag, sizeof flag, "--%s", k);
        for (char *c = flag + 2; *c; c++)
            if (*c == '_') *c = '-';
        if (!known(k, flag + 2)) return false;
        bool ok = true;
        if (!strcmp(k, "space")) {
            ok = push_space(t, value);
        } else if (PyList_Check(value) || PyTuple_Check(value)) {
            for (Py_ssize_t i = 0; ok && i < PySequence_Size(value); i++) {
                PyObject *item = PySequence_GetItem(value, i);
                ok = item && push_flag(t, flag, k, item);
                Py_XDECREF(item);
            }
        } else {
            ok = push_flag(t, flag, k, value);
        }
        if (!ok) return false;
    }
    return true;
}

static void free_argv(tune_thread *t)
{
    for (int i = 0; i < t->argc; i++) free(t->argv[i]);
    free(t->argv);
}

PyObject *stoke_py_tune(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    if (PyTuple_Size(args) != 0)
        return PyErr_Format(PyExc_TypeError,
                            "tune() takes keyword arguments only (data=..., model=..., "
                            "space=..., and stoke tune's and stoke train's settings)");
    PyObject *on_trial = kw ? PyDict_GetItemString(kw, "on_trial") : NULL;
    if (on_trial == Py_None) on_trial = NULL;
    if (on_trial && !PyCallable_Check(on_trial))
        return PyErr_Format(PyExc_TypeError, "on_trial: expected a callable");
    tune_thread *t = calloc(1, sizeof *t);
    if (!t) return PyErr_NoMemory();
    t->on_trial = on_trial;
    PyObject *result = NULL;
    bool interrupted = false;
    if (read_keywords(t, kw) && stoke_wait_for_thread(tune_main, t, &t->cancel, &interrupted)) {
        if (interrupted) { /* the KeyboardInterrupt (or the handler's exception) is set */
            Py_XDECREF(t->result);
            Py_XDECREF(t->exc_type);
            Py_XDECREF(t->exc_value);
            Py_XDECREF(t->exc_tb);
        } else if (t->exc_type) {
            Py_XDECREF(t->result);
            PyErr_Restore(t->exc_type, t->exc_value, t->exc_tb);
        } else if (t->error) {
            PyErr_SetString(t->usage ? PyExc_ValueError : stoke_error, t->error);
        } else {
            result = t->result;
        }
    }
    free(t->error);
    free_argv(t);
    free(t);
    return result;
}
