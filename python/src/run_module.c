/* stoke._stoke_run: a whole training run from Python (run_functions.c), a
 * checkpoint's evaluation, export and predictions (evaluate_function.c,
 * export_function.c, predict_function.c) and a sweep (tune_function.c); a module of its own
 * beside stoke._stoke because it links the engine (the CPU math: oneDNN,
 * OpenMP) that the loader does not: `import stoke` and its Loader stay
 * free of them (ctest's loader_links_no_math), and stoke.train,
 * evaluate, export and predict import this module on their first call. Its errors are the
 * loader's StokeError, taken from stoke._stoke. */
#include "module.h"

static PyMethodDef functions[] = {
    {"train", (PyCFunction)(void (*)(void))stoke_py_train, METH_VARARGS | METH_KEYWORDS,
     "train(*, data, model, val=None, epochs=None, on_epoch=None, **settings) -> dict\n\n"
     "Train a model as `stoke train` does (the same library calls, run folder and\n"
     "metrics), with stoke train's settings by name ('_' for '-'). Returns the run's\n"
     "figures (--json's fields). on_epoch(metrics) after each epoch: True stops."},
    {"evaluate", (PyCFunction)(void (*)(void))stoke_py_evaluate, METH_VARARGS | METH_KEYWORDS,
     "evaluate(*, data, checkpoint, transform=None, batch=128, workers=0, device='cpu',\n"
     "         ema=False, per_class=False) -> dict\n\n"
     "Evaluate a checkpoint as `stoke eval` does: val_loss, val_top1, val_top5, images,\n"
     "seconds, transform; with per_class the class names and the confusion matrix."},
    {"export", (PyCFunction)(void (*)(void))stoke_py_export, METH_VARARGS | METH_KEYWORDS,
     "export(checkpoint, *, out=None, format='onnx', opset=None, fold=True,\n"
     "       input='f32-nchw', ema=False) -> dict\n\n"
     "Export a checkpoint's model as `stoke export` does (ONNX for inference, or the\n"
     "weights alone as PyTorch's state dict): out, format, tensors, bytes, source_sha256."},
    {"predict", (PyCFunction)(void (*)(void))stoke_py_predict, METH_VARARGS | METH_KEYWORDS,
     "predict(checkpoint, inputs, *, transform=None, top_k=5, batch=128, workers=0) -> list\n\n"
     "Classify images as `stoke predict --json` does: for each image, in input order,\n"
     "{path, top: [{class, index, probability}]}, or {path, error} when unreadable."},
    {"tune", (PyCFunction)(void (*)(void))stoke_py_tune, METH_VARARGS | METH_KEYWORDS,
     "tune(*, data, model, space, val=None, samples=None, scheduler=None, metric=None,\n"
     "     epochs=None, concurrent=None, out=None, resume=False, on_trial=None,\n"
     "     **settings) -> dict\n\n"
     "Search hyperparameters as `stoke tune` does (the same library calls, folder and\n"
     "trials), with stoke tune's and stoke train's flags by name ('_' for '-'); space\n"
     "a dict {key: 'loguniform(1e-3,0.3)'}. Returns --json's fields, 'best' and every\n"
     "trial ('results'). on_trial(trial) as each trial ends: True stops the sweep."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stoke_run",
                                    "Stoke's training runs from Python", -1, functions};

PyMODINIT_FUNC PyInit__stoke_run(void)
{
    PyObject *loader = PyImport_ImportModule("stoke._stoke");
    if (!loader) return NULL;
    stoke_error = PyObject_GetAttrString(loader, "StokeError"); /* held for good */
    Py_DECREF(loader);
    if (!stoke_error) return NULL;
    return PyModule_Create(&module);
}
