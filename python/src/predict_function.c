/* stoke.predict(): `stoke predict --json` as a Python call (run/predict.h,
 * the same library call): a list in input order, each image's path with
 * its top classes, or with the reason it could not be read. The GIL is
 * released while images are decoded and forwarded; Ctrl-C stops after
 * the current image and raises KeyboardInterrupt. */
#include "module.h"

#include "run/predict.h"

#include <stdlib.h>
#include <string.h>

typedef struct gather {
    PyObject *list;
    bool failed; /* an exception is set (KeyboardInterrupt, or no memory) */
} gather;

/* Append d (stolen) to the list; with the GIL. */
static stk_status append(gather *g, PyObject *d)
{
    if (!d || PyList_Append(g->list, d) < 0 || PyErr_CheckSignals() < 0) g->failed = true;
    Py_XDECREF(d);
    return g->failed ? stk_error(STK_ERR_CANCELLED, "stopped from Python") : STK_OK;
}

static stk_status on_image(void *ctx, const stk_prediction *p)
{
    gather *g = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    PyObject *top = PyList_New(p->k);
    for (int t = 0; top && t < p->k; t++) {
        PyObject *c = Py_BuildValue("{s:s,s:i,s:d}", "class", p->name[t], "index", p->index[t],
                                    "probability", p->probability[t]);
        if (!c || PyList_SetItem(top, t, c) < 0) Py_CLEAR(top);
    }
    PyObject *d =
        top ? Py_BuildValue("{s:O&,s:N}", "path", PyUnicode_DecodeFSDefault, p->path, "top", top)
            : NULL;
    stk_status st = append(g, d);
    PyGILState_Release(gs);
    return st;
}

static void on_skip(void *ctx, const char *path, const char *why)
{
    gather *g = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    if (!g->failed)
        append(g,
               Py_BuildValue("{s:O&,s:s}", "path", PyUnicode_DecodeFSDefault, path, "error", why));
    PyGILState_Release(gs);
}

/* A str, bytes or path, or a list of them, as file system paths (bytes). */
static PyObject *paths(PyObject *inputs)
{
    bool one = PyUnicode_Check(inputs) || PyBytes_Check(inputs) ||
               PyObject_HasAttrString(inputs, "__fspath__");
    PyObject *seq = one ? PyTuple_Pack(1, inputs) : PySequence_Tuple(inputs);
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GetItem(seq, i), &b) || PyTuple_SetItem(out, i, b) < 0)
            Py_CLEAR(out);
    }
    Py_DECREF(seq);
    return out;
}

PyObject *stoke_py_predict(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"checkpoint", "inputs", "transform", "top_k", "batch", "workers", NULL};
    PyObject *ckpt = NULL, *inputs = NULL, *top_o = NULL, *batch_o = NULL, *workers_o = NULL;
    const char *transform = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|$zOOO", names, PyUnicode_FSConverter, &ckpt,
                                     &inputs, &transform, &top_o, &batch_o, &workers_o))
        return NULL;
    PyObject *in = NULL, *result = NULL;
    const char **list = NULL;
    long long top_k = 5, batch = 128, workers = 0;
    gather g = {0};
    if ((top_o && !stoke_int_arg(top_o, "top_k", 1, 1000, &top_k)) ||
        (batch_o && !stoke_int_arg(batch_o, "batch", 1, 4096, &batch)) ||
        (workers_o && !stoke_int_arg(workers_o, "workers", 0, 1024, &workers)) ||
        !(in = paths(inputs)))
        goto out;
    Py_ssize_t n = PyTuple_Size(in);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "inputs: at least one image, folder or dataset");
        goto out;
    }
    if (!(list = calloc((size_t)n, sizeof *list)) || !(g.list = PyList_New(0))) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) list[i] = PyBytes_AsString(PyTuple_GetItem(in, i));
    stk_predict_request q = stk_predict_defaults();
    q.checkpoint = PyBytes_AsString(ckpt), q.inputs = list, q.n_inputs = (int)n;
    q.transform = transform, q.top_k = (int)top_k, q.batch = (int)batch, q.workers = (int)workers;
    q.hooks = (stk_predict_hooks){.on_image = on_image, .on_skip = on_skip, .ctx = &g};
    stk_predict_summary s;
    PyThreadState *ts = PyEval_SaveThread();
    stk_status st = stk_predict(&q, &s);
    PyEval_RestoreThread(ts);
    if (g.failed) {
        /* the exception is set */
    } else if (st != STK_OK) {
        stoke_raise();
    } else {
        result = g.list;
        g.list = NULL;
    }
out:
    Py_XDECREF(g.list);
    free(list);
    Py_XDECREF(in);
    Py_XDECREF(ckpt);
    return result;
}
