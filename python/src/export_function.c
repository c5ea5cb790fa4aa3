/* stoke.export(): `stoke export` as a Python call (run/export.h, the same
 * library call), its --json summary as a dict. The GIL is released while
 * it writes. */
#include "module.h"

#include "run/export.h"

#include <string.h>

/* A name of `names` (NULL-terminated) into *out; false with ValueError. */
static bool choice(const char *arg, const char *value, const char *const *names, int *out)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], value)) {
            *out = i;
            return true;
        }
    PyErr_Format(PyExc_ValueError, "%s=%s: expected %s or %s", arg, value, names[0], names[1]);
    return false;
}

PyObject *stoke_py_export(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"checkpoint", "out", "format", "opset", "fold", "input", "ema", NULL};
    PyObject *ckpt = NULL, *out = NULL, *opset_o = NULL, *result = NULL;
    const char *format = "onnx", *input = "f32-nchw";
    int fold = 1, ema = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$O&sOpsp", names, PyUnicode_FSConverter, &ckpt,
                                     stoke_path_or_none, &out, &format, &opset_o, &fold, &input,
                                     &ema))
        return NULL;
    stk_export_request q = stk_export_defaults();
    long long opset = 0;
    int f = 0, in = 0;
    if ((opset_o && opset_o != Py_None && !stoke_int_arg(opset_o, "opset", 13, 17, &opset)) ||
        !choice("format", format, stk_export_formats, &f) ||
        !choice("input", input, stk_export_inputs, &in))
        goto out;
    q.checkpoint = PyBytes_AsString(ckpt), q.out = out ? PyBytes_AsString(out) : NULL;
    q.format = (stk_export_format)f, q.opset = (int)opset, q.fold = fold;
    q.input = (stk_onnx_input)in, q.ema = ema;
    stk_export_report r;
    PyThreadState *ts = PyEval_SaveThread();
    stk_status st = stk_export(&q, &r);
    PyEval_RestoreThread(ts);
    if (st != STK_OK)
        stoke_raise();
    else
        result = Py_BuildValue("{s:O&,s:s,s:i,s:L,s:s}", "out", PyUnicode_DecodeFSDefault, r.out,
                               "format", stk_export_formats[f], "tensors", r.tensors, "bytes",
                               (long long)r.bytes, "source_sha256", r.sha256);
    stk_export_report_free(&r);
out:
    Py_XDECREF(ckpt);
    Py_XDECREF(out);
    return result;
}
