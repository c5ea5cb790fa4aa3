/* What every file of stoke._stoke uses (module.h): StokeError, the
 * argument converters, freeing an instance of a heap type. */
#include "module.h"

#include "common/status.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

PyObject *stoke_error;

PyObject *stoke_raise(void)
{
    PyErr_SetString(stoke_error, stk_last_error());
    return NULL;
}

int stoke_path_or_none(PyObject *arg, void *out)
{
    if (arg == Py_None) {
        *(PyObject **)out = NULL;
        return 1;
    }
    return PyUnicode_FSConverter(arg, out);
}

bool stoke_int_arg(PyObject *v, const char *name, long long lo, long long hi, long long *out)
{
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s=%R: expected an integer", name, v);
        return false;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return false;
    if (overflow || x < lo || x > hi) {
        PyErr_Format(PyExc_ValueError, "%s=%R: expected an integer in %lld..%lld", name, v, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

void stoke_free_object(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp); /* heap types: each instance holds its type */
}

/* Arrays and batches come from a Loader only: built directly they would view
 * nothing (and stable-ABI heap types inherit object's tp_new). */
PyObject *stoke_not_constructible(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    PyObject *name = PyObject_GetAttrString((PyObject *)type, "__name__");
    PyErr_Format(PyExc_TypeError,
                 "stoke.%S cannot be created directly: iterate a stoke.Loader to get batches",
                 name ? name : Py_None);
    Py_XDECREF(name);
    return NULL;
}

bool stoke_dict_put(PyObject *d, const char *key, PyObject *v)
{
    bool ok = v && PyDict_SetItemString(d, key, v) == 0;
    Py_XDECREF(v);
    return ok;
}

typedef struct waited {
    void *(*fn)(void *);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} waited;

static void *waited_main(void *p)
{
    waited *w = p;
    w->fn(w->arg);
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Wait up to 0.1 s for the thread's work to end; true when it has. */
static bool wait_a_little(waited *w)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) break;
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

bool stoke_wait_for_thread(void *(*fn)(void *), void *arg, volatile sig_atomic_t *cancel,
                           bool *interrupted)
{
    waited w = {.fn = fn, .arg = arg};
    *interrupted = false;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t th;
    int e = pthread_create(&th, NULL, waited_main, &w);
    if (e != 0) {
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
        PyErr_Format(stoke_error, "cannot start a thread: %s", strerror(e));
        return false;
    }
    for (;;) {
        PyThreadState *ts = PyEval_SaveThread();
        bool done = wait_a_little(&w);
        PyEval_RestoreThread(ts);
        if (done) break;
        if (!*interrupted && PyErr_CheckSignals() < 0) {
            *interrupted = true; /* keep the exception; stop the work and wait for it */
            *cancel = 1;
        }
    }
    pthread_join(th, NULL);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return true;
}

/* The text a setting is given as, as bytes: a bool "yes"/"no", a str or
 * path as itself (the file system's encoding), an int or float as Python
 * writes it (repr: exact). NULL with an exception set. */
PyObject *stoke_setting_text(const char *name, PyObject *v)
{
    PyObject *str = NULL;
    if (PyBool_Check(v))
        str = PyUnicode_FromString(v == Py_True ? "yes" : "no");
    else if (PyLong_Check(v) || PyFloat_Check(v))
        str = PyObject_Repr(v);
    else if (PyUnicode_Check(v) || PyBytes_Check(v) || PyObject_HasAttrString(v, "__fspath__"))
        str = PyOS_FSPath(v);
    else
        return PyErr_Format(PyExc_TypeError, "%s: expected a str, int, float, bool or path", name);
    if (!str) return NULL;
    if (PyBytes_Check(str)) return str;
    PyObject *b = PyUnicode_EncodeFSDefault(str);
    Py_DECREF(str);
    return b;
}

PyObject *stoke_number(double v)
{
    if (isnan(v)) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}
