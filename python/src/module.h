/* What the files of stoke._stoke share. */
#pragma once

#define Py_LIMITED_API 0x03090000
#include <Python.h>

/* stoke.StokeError: every error the library reports, with its message
 * (this and the helpers below: support.c). */
extern PyObject *stoke_error;

/* Raise StokeError with this thread's stk_last_error(); returns NULL. */
PyObject *stoke_raise(void);

/* PyArg converter ("O&"): str, bytes or os.PathLike to a bytes object
 * (PyUnicode_FSConverter), None to NULL. Release with Py_XDECREF. */
int stoke_path_or_none(PyObject *arg, void *out);

/* An integer argument in lo..hi into *out; otherwise false with ValueError
 * "NAME=V: expected an integer in LO..HI" (the CLI's words and ranges),
 * Python integers too large for any C type included, or TypeError when v
 * is not an integer. */
#include <stdbool.h>
bool stoke_int_arg(PyObject *v, const char *name, long long lo, long long hi, long long *out);

/* A figure as Python has it: NaN (no such figure) as None. */
PyObject *stoke_number(double v);

/* A dict item that steals v; false (exception set) on failure. */
bool stoke_dict_put(PyObject *d, const char *key, PyObject *v);

/* fn(arg) on a thread of its own while the caller waits with the GIL
 * released, in 0.1 s steps, so that Ctrl-C reaches Python: when a signal
 * handler raises (KeyboardInterrupt), *cancel is set, fn is waited for, and
 * *interrupted is true with the exception kept. false (exception set): the
 * thread could not start. (stoke.pack, stoke.train) */
#include <signal.h>
bool stoke_wait_for_thread(void *(*fn)(void *), void *arg, volatile sig_atomic_t *cancel,
                           bool *interrupted);

/* The text a setting is given as, as bytes: a bool "yes"/"no", a str or
 * path as itself (the file system's encoding), an int or float as Python
 * writes it (repr: exact). NULL with TypeError naming `name` for another
 * type. (stoke.train, stoke.tune) */
PyObject *stoke_setting_text(const char *name, PyObject *v);

/* tp_free of an instance of a heap type, then the type's reference. */
void stoke_free_object(PyObject *self);
/* tp_new of types made only by the library (Arrays, batches): TypeError. */
PyObject *stoke_not_constructible(PyTypeObject *type, PyObject *args, PyObject *kw);

/* The module's functions over datasets: pack(), info() (dataset_functions.c). */
extern PyMethodDef stoke_dataset_functions[];
/* stoke._stoke_run's functions (run_module.c): train() (run_functions.c)
 * evaluate(), export() and predict() (evaluate_function.c,
 * export_function.c, predict_function.c). */
PyObject *stoke_py_train(PyObject *self, PyObject *args, PyObject *kw);
PyObject *stoke_py_evaluate(PyObject *self, PyObject *args, PyObject *kw);
PyObject *stoke_py_export(PyObject *self, PyObject *args, PyObject *kw);
PyObject *stoke_py_predict(PyObject *self, PyObject *args, PyObject *kw);
/* tune() (tune_function.c) */
PyObject *stoke_py_tune(PyObject *self, PyObject *args, PyObject *kw);
