/* stoke.evaluate(): `stoke eval` as a Python call (run/evaluate.h, the same
 * library call), its --json figures as a dict; with per_class the class
 * names and the confusion matrix (rows true, columns predicted). The GIL is
 * released while it evaluates. */
#include "module.h"

#include "run/evaluate.h"

#include <math.h>
#include <string.h>

/* The confusion matrix as a list of rows. */
static PyObject *matrix(const uint64_t *c, int classes)
{
    PyObject *rows = PyList_New(classes);
    for (int i = 0; rows && i < classes; i++) {
        PyObject *row = PyList_New(classes);
        for (int j = 0; row && j < classes; j++) {
            PyObject *v = PyLong_FromUnsignedLongLong(c[(size_t)i * (size_t)classes + (size_t)j]);
            if (!v || PyList_SetItem(row, j, v) < 0) Py_CLEAR(row);
        }
        if (!row || PyList_SetItem(rows, i, row) < 0) Py_CLEAR(rows);
    }
    return rows;
}

static PyObject *class_names(const stk_ckpt_desc *d)
{
    if (!d->class_names) Py_RETURN_NONE;
    PyObject *names = PyList_New(d->n_class_names);
    for (int i = 0; names && i < d->n_class_names; i++) {
        PyObject *v = PyUnicode_FromString(d->class_names[i]);
        if (!v || PyList_SetItem(names, i, v) < 0) Py_CLEAR(names);
    }
    return names;
}

static PyObject *report_dict(const stk_eval_report *r, bool per_class)
{
    const stk_eval_result *e = &r->result;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    bool ok = stoke_dict_put(d, "val_loss", PyFloat_FromDouble(e->loss)) &&
              stoke_dict_put(d, "val_top1", PyFloat_FromDouble(e->top1)) &&
              stoke_dict_put(d, "val_top5", PyFloat_FromDouble(e->top5)) &&
              stoke_dict_put(d, "images", PyLong_FromUnsignedLongLong(e->images)) &&
              stoke_dict_put(d, "seconds", PyFloat_FromDouble(e->seconds)) &&
              stoke_dict_put(d, "transform", PyUnicode_FromString(r->transform));
    if (ok && per_class)
        ok = stoke_dict_put(d, "classes", class_names(&r->ckpt)) &&
             stoke_dict_put(d, "confusion", matrix(r->confusion, r->ckpt.cfg.classes));
    if (!ok) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

PyObject *stoke_py_evaluate(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"data",   "checkpoint", "transform", "batch", "workers",
                            "device", "ema",        "per_class", NULL};
    PyObject *data = NULL, *ckpt = NULL, *batch_o = NULL, *workers_o = NULL, *result = NULL;
    const char *transform = NULL, *device = "cpu";
    int ema = 0, per_class = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O&O&zOOspp", names, stoke_path_or_none, &data,
                                     stoke_path_or_none, &ckpt, &transform, &batch_o, &workers_o,
                                     &device, &ema, &per_class))
        return NULL;
    long long batch = 128, workers = 0;
    stk_eval_request q = stk_eval_defaults();
    if ((batch_o && !stoke_int_arg(batch_o, "batch", 1, 65536, &batch)) ||
        (workers_o && !stoke_int_arg(workers_o, "workers", 0, 1024, &workers)))
        goto out;
    if (!data || !ckpt) {
        PyErr_SetString(PyExc_TypeError, "evaluate() needs data= and checkpoint=");
        goto out;
    }
    if (stk_device_spec_parse(device, &q.device) != STK_OK) {
        PyErr_Format(PyExc_ValueError, "device=%s: %s", device, stk_last_error());
        goto out;
    }
    q.data = PyBytes_AsString(data), q.checkpoint = PyBytes_AsString(ckpt);
    q.transform = transform, q.batch = (int)batch, q.workers = (int)workers;
    q.ema = ema, q.confusion = per_class;
    stk_eval_report r;
    stk_status st;
    PyThreadState *ts = PyEval_SaveThread();
    st = stk_evaluate(&q, &r);
    PyEval_RestoreThread(ts);
    if (st != STK_OK) {
        stoke_raise();
        goto out;
    }
    result = report_dict(&r, per_class);
    stk_eval_report_free(&r);
out:
    Py_XDECREF(data);
    Py_XDECREF(ckpt);
    return result;
}
