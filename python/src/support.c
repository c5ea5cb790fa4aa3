/* What every file of stoke._stoke uses (module.h): StokeError, the
 * argument converters, freeing an instance of a heap type. */
#include "module.h"

#include "common/status.h"

#include <stdbool.h>

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
