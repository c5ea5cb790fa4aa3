/* The objects of stoke._stoke (private to python/src): Loader (loader.c),
 * its batches, and the Arrays viewing them (array.c). */
#pragma once

#include "module.h"

#include "device_ring.h"
#include "dlpack.h"

#include "loader/loader.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    PyObject_HEAD stk_loader *l;
    int64_t epoch;   /* the epoch the next pass runs */
    bool in_pass;    /* start_epoch (or restore) done, the pass not ended */
    bool nchw, f32;  /* the Arrays' layout and the ring's pixel format */
    int outstanding; /* batches alive */
    bool closing;    /* close() asked while batches were alive */
    /* device="cuda[:N]": the ring of device buffers (it holds the copy engine) */
    stoke_device_ring *ring;
    int gpu;
    int busy;  /* calls inside the loader with the GIL released (next, restore) */
    pid_t pid; /* the process that opened it: a forked child cannot use it */
} LoaderObject;

typedef struct {
    PyObject_HEAD LoaderObject *loader; /* strong reference: the ring lives while a batch does */
    stk_batch *b;                       /* the host batch viewed (NULL for a device batch) */
    int slot;                           /* the device ring's slot viewed (-1 for a host batch) */
    uintptr_t stream; /* the consumer's stream last given to __dlpack__ (1: legacy default) */
    int64_t *labels;  /* a host batch's labels widened to int64 (owned; NULL on a device) */
} BatchObject;

typedef struct {
    PyObject_HEAD BatchObject *batch; /* strong reference */
    void *data;
    int ndim;
    int64_t shape[4], strides[4]; /* strides in elements */
    DLDataType dtype;
} ArrayObject;

/* The heap types, made by PyInit__stoke from the specs below. */
extern PyTypeObject *stoke_loader_type, *stoke_batch_type, *stoke_array_type;
extern PyType_Spec stoke_loader_spec, stoke_batch_spec, stoke_array_spec;

/* An Array viewing data of batch b (a new reference to b; NULL: an
 * exception is set). strides in elements (array.c). */
ArrayObject *stoke_array_make(BatchObject *b, void *data, int ndim, const int64_t *shape,
                              const int64_t *strides, DLDataType dtype);
