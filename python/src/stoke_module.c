/* stoke._stoke: Stoke's loader for Python loops (the stable ABI, 3.9+).
 *
 * A Loader iterates (images, labels) pairs of Array objects viewing the
 * loader's batch ring without a copy; each implements the DLPack protocol
 * (__dlpack__ / __dlpack_device__: the versioned 1.x capsule when the
 * consumer asks for max_version >= (1, 0), the legacy one otherwise), so
 * torch.from_dlpack and numpy.from_dlpack take them as they are.
 *
 * Lifetime: a batch's ring buffer goes back to the loader when the last
 * object viewing it is gone: both Arrays, and every tensor made from them
 * (each DLPack export holds a reference to its Array until the consumer's
 * deleter runs). A held batch is never overwritten (loader/loader.h); while
 * the consumer holds every buffer of the ring (prefetch of them) the next
 * batch cannot be made and next() raises StokeError saying so. The loader's
 * workers never touch Python; next() releases the GIL while it waits.
 *
 * device="cuda[:N]": each host batch is copied into a ring of prefetch
 * device buffers (device_ring.h) and given back to the loader at once; the
 * Arrays view the device buffer (kDLCUDA), held the same way.
 */
#include "objects.h"

/* ---- the module ---- */

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stoke",
                                    "Stoke's loader for Python training loops", -1,
                                    stoke_dataset_functions};

PyMODINIT_FUNC PyInit__stoke(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    stoke_error = PyErr_NewException("stoke.StokeError", PyExc_RuntimeError, NULL);
    stoke_loader_type = (PyTypeObject *)PyType_FromSpec(&stoke_loader_spec);
    stoke_batch_type = (PyTypeObject *)PyType_FromSpec(&stoke_batch_spec);
    stoke_array_type = (PyTypeObject *)PyType_FromSpec(&stoke_array_spec);
    if (!stoke_error || !stoke_loader_type || !stoke_batch_type || !stoke_array_type ||
        PyModule_AddObject(m, "StokeError", stoke_error) < 0 ||
        PyModule_AddObject(m, "Loader", (PyObject *)stoke_loader_type) < 0 ||
        PyModule_AddObject(m, "Array", (PyObject *)stoke_array_type) < 0 ||
        PyModule_AddStringConstant(m, "__version__", STOKE_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(stoke_error); /* the module holds one reference, the C code another */
    Py_INCREF(stoke_loader_type);
    Py_INCREF(stoke_array_type);
    return m;
}
