/* stoke.Array: a DLPack view of a batch (__dlpack__ / __dlpack_device__:
 * the versioned 1.x capsule when the consumer asks for max_version >=
 * (1, 0), the legacy one otherwise). Each export holds a reference to its
 * Array, so to the batch, until the consumer's deleter runs. */
#include "objects.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *stoke_array_type;

/* What a DLPack export holds: the managed tensor, its shape and strides, and
 * a reference to the Array (so the batch) until the consumer's deleter. */
typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned v;
    } m;
    int64_t shape[4], strides[4];
    PyObject *owner;
} export_t;

static void export_free(export_t *e)
{
    PyGILState_STATE g = PyGILState_Ensure(); /* deleters may run on any thread */
    Py_XDECREF(e->owner);
    free(e);
    PyGILState_Release(g);
}

static void delete_legacy(DLManagedTensor *m) { export_free(m->manager_ctx); }
static void delete_versioned(DLManagedTensorVersioned *m) { export_free(m->manager_ctx); }

/* A capsule nobody consumed (still under its first name) frees its export. */
static void capsule_legacy(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        m->deleter(m);
    }
}

static void capsule_versioned(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        m->deleter(m);
    }
}

static PyObject *array_dlpack(PyObject *self_, PyObject *args, PyObject *kw)
{
    ArrayObject *self = (ArrayObject *)self_;
    static char *names[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", names, &stream, &max_version, &dl_device,
                                     &copy))
        return NULL;
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError,
                        "stoke.Array: copy=True is not supported (the point is not to copy); "
                        "copy the imported tensor instead");
        return NULL;
    }
    BatchObject *b = self->batch;
    DLDevice dev = b->slot >= 0 ? (DLDevice){kDLCUDA, b->loader->gpu} : (DLDevice){kDLCPU, 0};
    if (dl_device != Py_None) {
        long type = -1, id = -1;
        if (!PyTuple_Check(dl_device)) {
            PyErr_Format(PyExc_TypeError, "__dlpack__: dl_device=%R: expected a (type, id) tuple",
                         dl_device);
            return NULL;
        }
        if (!PyArg_ParseTuple(dl_device, "ll", &type, &id)) return NULL;
        if (type != dev.device_type || id != dev.device_id) {
            PyErr_Format(PyExc_BufferError, "stoke.Array: the data is on %s %d, not (%ld, %ld)",
                         dev.device_type == kDLCUDA ? "GPU" : "the CPU", dev.device_id, type, id);
            return NULL;
        }
    }
    if (dev.device_type == kDLCUDA && stream != Py_None) {
        /* The data is complete on return (the copy was waited for). The stream
         * is where the consumer's work on it is queued: the buffer is not
         * refilled before that work has run (device_ring.h). -1: no sync asked. */
        long long sv = PyLong_AsLongLong(stream);
        if (sv == -1 && PyErr_Occurred()) return NULL;
        if (sv == 0) {
            PyErr_SetString(PyExc_ValueError,
                            "__dlpack__: stream 0 is ambiguous for CUDA (DLPack)");
            return NULL;
        }
        if (sv > 0) b->stream = (uintptr_t)sv;
    }
    bool versioned = false;
    if (max_version != Py_None) {
        long major = 0, minor = 0;
        if (!PyTuple_Check(max_version)) {
            PyErr_Format(PyExc_TypeError,
                         "__dlpack__: max_version=%R: expected a (major, minor) tuple",
                         max_version);
            return NULL;
        }
        if (!PyArg_ParseTuple(max_version, "ll", &major, &minor)) return NULL;
        versioned = major >= 1;
    }
    export_t *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    memcpy(e->shape, self->shape, sizeof e->shape);
    memcpy(e->strides, self->strides, sizeof e->strides);
    DLTensor t = {.data = self->data,
                  .device = dev,
                  .ndim = self->ndim,
                  .dtype = self->dtype,
                  .shape = e->shape,
                  .strides = e->strides,
                  .byte_offset = 0};
    e->owner = self_;
    Py_INCREF(self_);
    PyObject *cap;
    if (versioned) {
        e->m.v = (DLManagedTensorVersioned){.version = {STK_DLPACK_MAJOR, STK_DLPACK_MINOR},
                                            .manager_ctx = e,
                                            .deleter = delete_versioned,
                                            .flags = 0,
                                            .dl_tensor = t};
        cap = PyCapsule_New(&e->m.v, "dltensor_versioned", capsule_versioned);
    } else {
        e->m.legacy = (DLManagedTensor){.dl_tensor = t, .manager_ctx = e, .deleter = delete_legacy};
        cap = PyCapsule_New(&e->m.legacy, "dltensor", capsule_legacy);
    }
    if (!cap) export_free(e);
    return cap;
}

static PyObject *array_dlpack_device(PyObject *self_, PyObject *unused)
{
    (void)unused;
    BatchObject *b = ((ArrayObject *)self_)->batch;
    if (b->slot >= 0) return Py_BuildValue("(ii)", kDLCUDA, b->loader->gpu);
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

static PyObject *array_shape(PyObject *self_, void *unused)
{
    (void)unused;
    ArrayObject *self = (ArrayObject *)self_;
    PyObject *t = PyTuple_New(self->ndim);
    for (int i = 0; t && i < self->ndim; i++)
        PyTuple_SetItem(t, i, PyLong_FromLongLong(self->shape[i]));
    return t;
}

static PyObject *array_dtype(PyObject *self_, void *unused)
{
    (void)unused;
    ArrayObject *self = (ArrayObject *)self_;
    const char *n = self->dtype.code == kDLFloat ? "float32"
                    : self->dtype.code == kDLInt ? "int64"
                                                 : "uint8";
    return PyUnicode_FromString(n);
}

static PyObject *array_data_ptr(PyObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(((ArrayObject *)self)->data);
}

static void array_dealloc(PyObject *self)
{
    Py_XDECREF(((ArrayObject *)self)->batch);
    stoke_free_object(self);
}

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule viewing this array (versioned when max_version >= (1, 0))."},
    {"__dlpack_device__", array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(1, 0): CPU memory; (2, N): GPU N (device='cuda:N')."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef array_getset[] = {
    {"shape", array_shape, NULL, "the shape (a tuple)", NULL},
    {"dtype", array_dtype, NULL, "'uint8' or 'float32' (images), 'int64' (labels)", NULL},
    {"data_ptr", array_data_ptr, NULL,
     "the address of the first element (in the host ring, or device memory)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot array_slots[] = {
    {Py_tp_new, stoke_not_constructible},
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_methods, array_methods},
    {Py_tp_getset, array_getset},
    {Py_tp_doc, "A batch's images or labels, viewed in place (DLPack: torch.from_dlpack, "
                "numpy.from_dlpack)."},
    {0, NULL}};

PyType_Spec stoke_array_spec = {"stoke.Array", sizeof(ArrayObject), 0, Py_TPFLAGS_DEFAULT,
                                array_slots};

ArrayObject *stoke_array_make(BatchObject *b, void *data, int ndim, const int64_t *shape,
                              const int64_t *strides, DLDataType dt)
{
    ArrayObject *a = PyObject_New(ArrayObject, stoke_array_type);
    if (!a) return NULL;
    a->batch = b;
    Py_INCREF(b);
    a->data = data;
    a->ndim = ndim;
    memset(a->shape, 0, sizeof a->shape);
    memset(a->strides, 0, sizeof a->strides);
    memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(a->strides, strides, (size_t)ndim * sizeof *strides);
    a->dtype = dt;
    return a;
}

/* (images, labels) viewing host batch sb, or (slot >= 0) its copy in the
 * device ring's slot; the caller releases sb then. */
