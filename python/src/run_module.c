/* stoke._stoke_run: a whole training run from Python (run_functions.c),
 * a module of its own beside stoke._stoke because it links the engine (the
 * CPU math: oneDNN, OpenMP) that the loader does not: `import stoke` and
 * its Loader stay free of them (ctest's loader_links_no_math), and
 * stoke.train imports this module on its first call. Its errors are the
 * loader's StokeError, taken from stoke._stoke. */
#include "module.h"

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stoke_run",
                                    "Stoke's training runs from Python", -1, stoke_run_functions};

PyMODINIT_FUNC PyInit__stoke_run(void)
{
    PyObject *loader = PyImport_ImportModule("stoke._stoke");
    if (!loader) return NULL;
    stoke_error = PyObject_GetAttrString(loader, "StokeError"); /* held for good */
    Py_DECREF(loader);
    if (!stoke_error) return NULL;
    return PyModule_Create(&module);
}
