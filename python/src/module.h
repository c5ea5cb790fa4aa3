/* What the files of stoke._stoke share. */
#pragma once

#define Py_LIMITED_API 0x03090000
#include <Python.h>

/* stoke.StokeError: every error the library reports, with its message. */
extern PyObject *stoke_error;

/* Raise StokeError with this thread's stk_last_error(); returns NULL. */
PyObject *stoke_raise(void);

/* PyArg converter ("O&"): str, bytes or os.PathLike to a bytes object
 * (PyUnicode_FSConverter), None to NULL. Release with Py_XDECREF. */
int stoke_path_or_none(PyObject *arg, void *out);

/* The module's functions over datasets: pack(), info() (dataset_functions.c). */
extern PyMethodDef stoke_dataset_functions[];
