/* stoke.Loader and its batches: a batch's ring buffer goes back to the
 * loader when the last object viewing it is gone (stoke_module.c's notes). */
#include "objects.h"

#include "augment/transform_spec.h"
#include "common/status.h"
#include "device/copy_engine.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

PyTypeObject *stoke_loader_type, *stoke_batch_type;

/* ---- Batch: one ring buffer, given back when the last view goes ---- */

static void loader_free_if_closing(LoaderObject *l)
{
    if (l->closing && l->outstanding == 0 && l->busy == 0 && l->l) {
        stk_loader *ld = l->l;
        l->l = NULL;
        PyThreadState *ts = PyEval_SaveThread(); /* closing joins the workers */
        stk_loader_close(ld);
        stoke_device_ring_destroy(l->ring);
        l->ring = NULL;
        PyEval_RestoreThread(ts);
    }
}

static void batch_dealloc(PyObject *self_)
{
    BatchObject *self = (BatchObject *)self_;
    LoaderObject *l = self->loader;
    if (l) {
        bool here = l->pid == getpid(); /* in a forked child the ring is the parent's */
        if (here && l->l && self->b) stk_loader_release(l->l, self->b);
        if (here && l->ring && self->slot >= 0)
            stoke_device_ring_release(l->ring, self->slot, self->stream);
        l->outstanding--;
        loader_free_if_closing(l);
        Py_DECREF(l);
    }
    free(self->labels);
    stoke_free_object(self_);
}

static PyType_Slot batch_slots[] = {
    {Py_tp_new, stoke_not_constructible}, {Py_tp_dealloc, batch_dealloc}, {0, NULL}};
PyType_Spec stoke_batch_spec = {"stoke._Batch", sizeof(BatchObject), 0, Py_TPFLAGS_DEFAULT,
                                batch_slots};

static PyObject *batch_views(LoaderObject *l, stk_batch *sb, int slot)
{
    BatchObject *b = PyObject_New(BatchObject, stoke_batch_type);
    if (!b) {
        if (slot >= 0)
            stoke_device_ring_release(l->ring, slot, 1);
        else
            stk_loader_release(l->l, sb);
        return NULL;
    }
    b->loader = l;
    Py_INCREF(l);
    b->b = slot >= 0 ? NULL : sb;
    b->slot = slot;
    b->stream = 1; /* the legacy default stream until a consumer names its own */
    b->labels = NULL;
    l->outstanding++;
    if (slot < 0) { /* int64 labels, as PyTorch's losses take them; the pixels stay in place */
        if (!(b->labels = malloc((size_t)(sb->count ? sb->count : 1) * sizeof(int64_t)))) {
            Py_DECREF(b);
            return PyErr_NoMemory();
        }
        for (int i = 0; i < sb->count; i++) b->labels[i] = sb->labels[i];
    }
    int64_t n = sb->count, h = sb->height, w = sb->width, c = sb->channels;
    int64_t elem = l->f32 ? 4 : 1, sample = (int64_t)sb->sample_bytes / elem;
    int64_t shape[4], strides[4];
    if (!l->f32 && !l->nchw) { /* the ring's own layout: u8 HWC */
        int64_t sh[4] = {n, h, w, c}, st[4] = {sample, w * c, c, 1};
        memcpy(shape, sh, sizeof sh), memcpy(strides, st, sizeof st);
    } else if (!l->f32) { /* u8 HWC seen as NCHW */
        int64_t sh[4] = {n, c, h, w}, st[4] = {sample, 1, w * c, c};
        memcpy(shape, sh, sizeof sh), memcpy(strides, st, sizeof st);
    } else if (l->nchw) { /* the ring's own layout: f32 CHW */
        int64_t sh[4] = {n, c, h, w}, st[4] = {sample, h * w, w, 1};
        memcpy(shape, sh, sizeof sh), memcpy(strides, st, sizeof st);
    } else { /* f32 CHW seen as NHWC */
        int64_t sh[4] = {n, h, w, c}, st[4] = {sample, w, 1, h * w};
        memcpy(shape, sh, sizeof sh), memcpy(strides, st, sizeof st);
    }
    DLDataType px = l->f32 ? (DLDataType){kDLFloat, 32, 1} : (DLDataType){kDLUInt, 8, 1};
    int64_t lshape[1] = {n}, lstride[1] = {1};
    void *pixels = slot >= 0 ? stoke_device_ring_images(l->ring, slot) : sb->data;
    int64_t *lab = slot >= 0 ? stoke_device_ring_labels(l->ring, slot) : b->labels;
    ArrayObject *images = stoke_array_make(b, pixels, 4, shape, strides, px);
    ArrayObject *labels =
        images ? stoke_array_make(b, lab, 1, lshape, lstride, (DLDataType){kDLInt, 64, 1}) : NULL;
    Py_DECREF(b); /* the arrays hold it now */
    if (!labels) {
        Py_XDECREF(images);
        return NULL;
    }
    PyObject *pair = PyTuple_New(2);
    if (!pair) {
        Py_DECREF(images);
        Py_DECREF(labels);
        return NULL;
    }
    PyTuple_SetItem(pair, 0, (PyObject *)images);
    PyTuple_SetItem(pair, 1, (PyObject *)labels);
    return pair;
}

/* ---- Loader ---- */

/* "cpu" (*gpu = -1), "cuda" (0) or "cuda:N"; false with ValueError otherwise. */
static bool parse_device(const char *device, int *gpu)
{
    *gpu = -1;
    if (!strcmp(device, "cpu")) return true;
    if (!strcmp(device, "cuda")) {
        *gpu = 0;
        return true;
    }
    char *end = NULL;
    if (!strncmp(device, "cuda:", 5)) {
        long n = strtol(device + 5, &end, 10);
        if (end != device + 5 && !*end && n >= 0 && n < 1024) {
            *gpu = (int)n;
            return true;
        }
    }
    PyErr_Format(PyExc_ValueError, "device=%s: 'cpu', 'cuda' or 'cuda:N'", device);
    return false;
}

static int loader_init(PyObject *self_, PyObject *args, PyObject *kw)
{
    LoaderObject *self = (LoaderObject *)self_;
    static char *names[] = {"path",     "batch_size", "transform",    "workers",    "shuffle",
                            "seed",     "drop_last",  "rank",         "world_size", "output",
                            "layout",   "prefetch",   "device",       "on_bad",     "order",
                            "cache_mb", "block_mib",  "block_window", "cache_mib",  NULL};
    PyObject *path = NULL; /* bytes: str and os.PathLike accepted */
    const char *transform = NULL, *output = "u8", *layout = "NHWC", *device = "cpu",
               *on_bad = "skip", *order = "random";
    int shuffle = 1, drop_last = 0;
    PyObject *batch_o = NULL, *workers_o = NULL, *seed_o = NULL, *rank_o = NULL, *world_o = NULL,
             *prefetch_o = NULL, *cache_o = NULL, *block_mib_o = NULL, *window_o = NULL,
             *cache_mib_o = NULL; /* cache_mib: the CLI's name; cache_mb: the former one */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|$zOpOpOOssOsssOOOO", names,
                                     PyUnicode_FSConverter, &path, &batch_o, &transform, &workers_o,
                                     &shuffle, &seed_o, &drop_last, &rank_o, &world_o, &output,
                                     &layout, &prefetch_o, &device, &on_bad, &order, &cache_o,
                                     &block_mib_o, &window_o, &cache_mib_o))
        return -1;
    if (cache_o && cache_mib_o) {
        PyErr_SetString(PyExc_TypeError, "cache_mib and cache_mb are one setting: give cache_mib");
        return -1;
    }
    if (cache_mib_o) cache_o = cache_mib_o;
    /* the library's ranges (loader/loader.h), checked before anything is
     * converted: a Python integer never wraps into another value */
    long long batch = 0, workers = 0, seed = 0, rank = 0, world = 1, prefetch = 3, cache_mb = 0,
              block_mib = 8, block_window = 8;
    if (!stoke_int_arg(batch_o, "batch_size", 1, STK_LOADER_MAX_BATCH, &batch) ||
        (workers_o && !stoke_int_arg(workers_o, "workers", 0, STK_LOADER_MAX_WORKERS, &workers)) ||
        (seed_o && !stoke_int_arg(seed_o, "seed", 0, INT64_MAX, &seed)) ||
        (world_o && !stoke_int_arg(world_o, "world_size", 1, STK_LOADER_MAX_WORLD, &world)) ||
        (rank_o && !stoke_int_arg(rank_o, "rank", 0, world - 1, &rank)) ||
        (prefetch_o && !stoke_int_arg(prefetch_o, "prefetch", 1, 64, &prefetch)) ||
        (cache_o && !stoke_int_arg(cache_o, cache_mib_o ? "cache_mib" : "cache_mb", 0,
                                   STK_LOADER_MAX_CACHE_MIB, &cache_mb)) ||
        (block_mib_o && !stoke_int_arg(block_mib_o, "block_mib", 1, 1024, &block_mib)) ||
        (window_o && !stoke_int_arg(window_o, "block_window", 1, 1024, &block_window)))
        goto fail;
    if (self->l) {
        PyErr_SetString(PyExc_RuntimeError, "stoke.Loader: already open");
        goto fail;
    }
    if (strcmp(output, "u8") && strcmp(output, "f32")) {
        PyErr_Format(PyExc_ValueError, "output=%s: 'u8' or 'f32'", output);
        goto fail;
    }
    if (strcmp(layout, "NHWC") && strcmp(layout, "NCHW")) {
        PyErr_Format(PyExc_ValueError, "layout=%s: 'NHWC' or 'NCHW'", layout);
        goto fail;
    }
    if (strcmp(on_bad, "skip") && strcmp(on_bad, "error")) {
        PyErr_Format(PyExc_ValueError, "on_bad=%s: 'skip' or 'error'", on_bad);
        goto fail;
    }
    int read_order = stk_read_order_parse(order);
    if (read_order < 0) {
        PyErr_Format(PyExc_ValueError, "order=%s: 'random', 'block' or 'sequential'", order);
        goto fail;
    }
    int gpu = -1;
    if (!parse_device(device, &gpu)) goto fail;
    if (gpu >= 0 && (prefetch < 1 || prefetch > 32)) { /* the copy engine marks 64 buffers */
        PyErr_Format(PyExc_ValueError, "prefetch=%lld: 1..32 with device=%s", prefetch, device);
        goto fail;
    }
    stk_status st;
    const stk_copy_engine *ce = NULL;
    if (gpu >= 0) { /* the GPU first: the loader's ring is made of its pinned memory */
        PyThreadState *ts = PyEval_SaveThread();
        st = stk_copy_engine_open(STK_DEVICE_CUDA, gpu, &ce);
        PyEval_RestoreThread(ts);
        if (st != STK_OK) {
            PyErr_Format(stoke_error, "device=%s: %s", device, stk_last_error());
            goto fail;
        }
    }
    stk_transform parsed;
    if (transform && stk_transform_parse(transform, &parsed) == STK_OK &&
        stk_transform_has_batch_ops(&parsed)) {
        PyErr_Format(PyExc_ValueError,
                     "transform=%s: erase, mixup and cutmix are batch transforms that stoke "
                     "train applies on the device; with PyTorch, apply torchvision's "
                     "RandomErasing or timm's Mixup to the batches",
                     transform);
        goto fail;
    }
    stk_loader_options o = stk_loader_defaults();
    if (ce) o.host_memory = ce->host_memory;
    o.batch_size = (int)batch;
    if (workers > 0) o.workers = (int)workers;
    o.prefetch = (int)prefetch;
    o.transform = transform;
    o.shuffle = shuffle;
    o.order = (stk_read_order)read_order;
    o.cache_mib = (int)cache_mb;
    o.block_mib = (int)block_mib;
    o.block_window = (int)block_window;
    o.seed = (uint64_t)seed;
    o.drop_last = drop_last;
    o.bad_policy = strcmp(on_bad, "error") ? STK_BAD_SKIP : STK_BAD_ERROR;
    o.rank = (int)rank;
    o.world = (int)world;
    o.format = strcmp(output, "f32") ? STK_PIXELS_U8_HWC : STK_PIXELS_F32_CHW;
    self->f32 = o.format == STK_PIXELS_F32_CHW;
    self->nchw = !strcmp(layout, "NCHW");
    stk_loader *l = NULL;
    stoke_device_ring *ring = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    st = stk_loader_open(PyBytes_AsString(path), &o, &l);
    if (st == STK_OK && ce && (st = stoke_device_ring_create(ce, prefetch, &ring)) != STK_OK)
        stk_loader_close(l);
    PyEval_RestoreThread(ts);
    if (st != STK_OK) {
        stoke_raise();
        goto fail;
    }
    self->l = l;
    self->ring = ring;
    self->gpu = gpu;
    self->pid = getpid();
    Py_DECREF(path);
    return 0;
fail:
    Py_DECREF(path);
    return -1;
}

static bool check_open(LoaderObject *self)
{
    if (!self->l || self->closing) {
        PyErr_SetString(PyExc_ValueError, "stoke.Loader: closed");
        return false;
    }
    if (self->pid != getpid()) {
        /* fork() copies the loader's memory but not its worker threads */
        PyErr_Format(stoke_error,
                     "stoke.Loader: opened in process %ld, used in process %ld (a forked child: "
                     "multiprocessing, a DataLoader worker); its worker threads do not exist "
                     "here: open a new Loader in the child",
                     (long)self->pid, (long)getpid());
        return false;
    }
    return true;
}

/* Only one thread inside the loader at a time (next, load_state_dict):
 * the loader has one consumer. */
static bool enter(LoaderObject *self)
{
    if (!check_open(self)) return false;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "stoke.Loader: another thread is using this loader (one consumer at a "
                        "time)");
        return false;
    }
    self->busy++;
    return true;
}

/* Leave; a close() asked meanwhile happens now. */
static void leave(LoaderObject *self)
{
    self->busy--;
    loader_free_if_closing(self);
}

/* Begin the pass of self->epoch unless one is going on (or was restored). */
static bool begin_pass(LoaderObject *self)
{
    if (self->in_pass) return true;
    stk_status st;
    PyThreadState *ts = PyEval_SaveThread();
    st = stk_loader_start_epoch(self->l, (uint64_t)self->epoch);
    PyEval_RestoreThread(ts);
    if (st != STK_OK) {
        stoke_raise();
        return false;
    }
    self->in_pass = true;
    return true;
}

static PyObject *loader_iter(PyObject *self_)
{
    LoaderObject *self = (LoaderObject *)self_;
    if (!enter(self)) return NULL;
    bool ok = begin_pass(self);
    leave(self);
    if (!ok) return NULL;
    Py_INCREF(self_);
    return self_;
}

static PyObject *next_batch(LoaderObject *self);

static PyObject *loader_next(PyObject *self_)
{
    LoaderObject *self = (LoaderObject *)self_;
    if (!enter(self)) return NULL;
    PyObject *r = next_batch(self);
    leave(self);
    return r;
}

/* The next batch (inside enter/leave: close() from another thread waits). */
static PyObject *next_batch(LoaderObject *self)
{
    if (!begin_pass(self)) return NULL;
    stk_batch *b = NULL;
    stk_status st;
    for (;;) { /* waits of 0.1 s, so that Ctrl-C (KeyboardInterrupt) is seen while waiting */
        PyThreadState *ts = PyEval_SaveThread();
        st = stk_loader_next_wait(self->l, 0.1, &b);
        PyEval_RestoreThread(ts);
        if (st != STK_AGAIN) break;
        if (PyErr_CheckSignals() < 0) return NULL; /* the pass goes on at the next call */
        if (self->closing) {
            PyErr_SetString(PyExc_ValueError, "stoke.Loader: closed by another thread");
            return NULL;
        }
    }
    if (st == STK_END) { /* the pass is over: the next one is the next epoch */
        self->in_pass = false;
        self->epoch++;
        return NULL; /* StopIteration */
    }
    if (st == STK_ERR_INVALID_ARG && strstr(stk_last_error(), "ring buffers are held")) {
        PyErr_Format(stoke_error,
                     "%s (Python: every batch the loader has is still referenced: delete "
                     "arrays and tensors of earlier batches, .clone() what you keep, or open "
                     "the Loader with a larger prefetch=)",
                     stk_last_error());
        return NULL;
    }
    if (st != STK_OK) {
        self->in_pass = false;
        return stoke_raise();
    }
    if (!self->ring) return batch_views(self, b, -1);
    int slot;
    PyThreadState *ts = PyEval_SaveThread(); /* the copy to the GPU is waited for */
    st = stoke_device_ring_fill(self->ring, b, &slot);
    PyEval_RestoreThread(ts);
    if (st != STK_OK) {
        /* the batch goes back unseen: the pass cannot go on past it */
        stk_loader_release(self->l, b);
        self->in_pass = false;
        if (st == STK_ERR_INVALID_ARG)
            return PyErr_Format(stoke_error,
                                "%s (Python: delete tensors of earlier batches, .clone() what "
                                "you keep, or open the Loader with a larger prefetch=)",
                                stk_last_error());
        return stoke_raise();
    }
    PyObject *views = batch_views(self, b, slot);
    stk_loader_release(self->l, b); /* its pixels are on the GPU now */
    return views;
}

static Py_ssize_t loader_len(PyObject *self_)
{
    LoaderObject *self = (LoaderObject *)self_;
    if (!check_open(self)) return -1;
    return (Py_ssize_t)stk_loader_batches(self->l);
}

static PyObject *loader_set_epoch(PyObject *self_, PyObject *arg)
{
    LoaderObject *self = (LoaderObject *)self_;
    long long e = PyLong_AsLongLong(arg);
    if (e == -1 && PyErr_Occurred()) return NULL;
    if (e < 0) {
        PyErr_SetString(PyExc_ValueError, "set_epoch: the epoch must be >= 0");
        return NULL;
    }
    self->epoch = e;
    self->in_pass = false; /* the next iteration starts it from its first batch */
    Py_RETURN_NONE;
}

static PyObject *loader_state_dict(PyObject *self_, PyObject *unused)
{
    (void)unused;
    LoaderObject *self = (LoaderObject *)self_;
    if (!check_open(self)) return NULL;
    stk_loader_position p = stk_loader_position_get(self->l);
    if (!self->in_pass) p = (stk_loader_position){p.seed, (uint64_t)self->epoch, 0};
    return Py_BuildValue("{s:K,s:K,s:K}", "seed", p.seed, "epoch", p.epoch, "cursor", p.cursor);
}

static PyObject *loader_load_state_dict(PyObject *self_, PyObject *d)
{
    LoaderObject *self = (LoaderObject *)self_;
    if (!check_open(self)) return NULL;
    stk_loader_position p = {0};
    const char *keys[3] = {"seed", "epoch", "cursor"};
    uint64_t *vals[3] = {&p.seed, &p.epoch, &p.cursor};
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyMapping_GetItemString(d, keys[i]);
        if (!v) return NULL;
        *vals[i] = PyLong_AsUnsignedLongLong(v);
        Py_DECREF(v);
        if (PyErr_Occurred()) return NULL;
    }
    if (!enter(self)) return NULL;
    stk_status st;
    PyThreadState *ts = PyEval_SaveThread();
    st = stk_loader_restore(self->l, &p);
    PyEval_RestoreThread(ts);
    leave(self);
    if (st != STK_OK) return stoke_raise();
    self->epoch = (int64_t)p.epoch;
    self->in_pass = true; /* the next iteration goes on from the cursor */
    Py_RETURN_NONE;
}

static PyObject *loader_stats(PyObject *self_, void *unused)
{
    (void)unused;
    LoaderObject *self = (LoaderObject *)self_;
    if (!check_open(self)) return NULL;
    stk_loader_stats s;
    stk_loader_stats_get(self->l, &s);
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:i}", "images", s.images, "bad_records",
                         s.bad_records, "bytes_read", s.bytes_read, "wait_s", s.wait_s, "read_s",
                         s.read_s, "decode_s", s.decode_s, "augment_s", s.augment_s, "workers",
                         s.workers);
}

static PyObject *loader_close(PyObject *self_, PyObject *unused)
{
    (void)unused;
    LoaderObject *self = (LoaderObject *)self_;
    if (self->l && self->pid != getpid()) {
        /* a forked child: the workers are the parent's; leave its memory be */
        self->l = NULL;
        self->ring = NULL;
        Py_RETURN_NONE;
    }
    self->closing = true; /* batches still alive keep the ring until they go */
    /* Another thread inside next() sees closing within 0.1 s and leaves;
     * wait for it (the GIL released) so that the loader is closed on return. */
    while (self->busy) {
        Py_BEGIN_ALLOW_THREADS nanosleep(&(struct timespec){0, 1000000}, NULL);
        Py_END_ALLOW_THREADS
    }
    loader_free_if_closing(self);
    Py_RETURN_NONE;
}

static PyObject *loader_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *loader_exit(PyObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = loader_close(self, NULL);
    Py_XDECREF(r);
    Py_RETURN_FALSE;
}

static void loader_dealloc(PyObject *self_)
{
    LoaderObject *self = (LoaderObject *)self_;
    if (self->l && self->pid == getpid()) { /* no batch is alive: each holds a reference */
        stk_loader_close(self->l);
        stoke_device_ring_destroy(self->ring);
    }
    /* in a forked child the loader's threads are the parent's: its memory
     * is left as it is (freeing would join threads that do not exist here) */
    self->l = NULL;
    self->ring = NULL;
    stoke_free_object(self_);
}

static PyMethodDef loader_methods[] = {
    {"set_epoch", loader_set_epoch, METH_O,
     "set_epoch($self, epoch, /)\n--\n\nThe next iteration runs `epoch` from its first batch "
     "(its order and augmentation are functions of (seed, epoch))."},
    {"state_dict", loader_state_dict, METH_NOARGS,
     "state_dict($self, /)\n--\n\n{'seed', 'epoch', 'cursor'}: where the loader is (mid-epoch "
     "too)."},
    {"load_state_dict", loader_load_state_dict, METH_O,
     "load_state_dict($self, state, /)\n--\n\nThe next iteration goes on with the batches after "
     "the state's cursor."},
    {"close", loader_close, METH_NOARGS,
     "close($self, /)\n--\n\nStop the workers (once the batches still referenced are gone); "
     "waits for another thread inside next()."},
    {"__enter__", loader_enter, METH_NOARGS, "__enter__($self, /)\n--\n\n"},
    {"__exit__", loader_exit, METH_VARARGS, "__exit__($self, *args)\n--\n\nclose()."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef loader_getset[] = {
    {"stats", loader_stats, NULL,
     "this epoch's figures: images, bad_records, bytes_read, wait_s (the consumer's wait), "
     "read_s/decode_s/augment_s (summed over workers), workers",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot loader_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, loader_init},
    {Py_tp_dealloc, loader_dealloc},
    {Py_tp_iter, loader_iter},
    {Py_tp_iternext, loader_next},
    {Py_sq_length, loader_len},
    {Py_mp_length, loader_len},
    {Py_tp_methods, loader_methods},
    {Py_tp_getset, loader_getset},
    {Py_tp_doc,
     "Loader(path, batch_size, *, transform=None, workers=0, shuffle=True, seed=0, "
     "drop_last=False, rank=0, world_size=1, output='u8', layout='NHWC', prefetch=3, "
     "device='cpu', on_bad='skip', order='random', cache_mb=0, block_mib=8, block_window=8, "
     "cache_mib=0)\n--\n\n"
     "workers 0: one per core; output 'u8' or 'f32' (normalised); layout 'NHWC' or 'NCHW'; "
     "order 'random' (a permutation per epoch), 'block' (FFCV's quasi-random order: 8 MiB blocks "
     "of the file permuted, 8 shuffled together; block_mib, block_window) or 'sequential'; "
     "cache_mib (the former cache_mb): the file's first MiB kept in memory for the loader's life, "
     "never evicted (for "
     "files larger than memory, whose reads then go around the page cache); "
     "device 'cpu', 'cuda' or 'cuda:N'; on_bad 'skip' or 'error'. Iterating yields "
     "(images, labels): "
     "stoke.Array views of the loader's batch ring (DLPack), images u8 (or f32, normalised) and "
     "labels int64 (PyTorch's label type: F.cross_entropy takes them as they are). Each iteration "
     "is one epoch; the next one is the next epoch unless "
     "set_epoch() says otherwise. With device='cuda' the batches are copied to the GPU (through "
     "pinned memory, on a copy stream) into prefetch device buffers, each held by its views; "
     "DLPack's stream argument names the consumer's stream, whose queued work a released buffer "
     "waits for before it is refilled. A bad record (damaged JPEG, CRC mismatch) is replaced by "
     "the "
     "next record of the epoch with a warning on stderr and counted in stats (on_bad='skip', as "
     "`stoke train` and `stoke bench`), or raises StokeError naming it (on_bad='error')."},
    {0, NULL}};

PyType_Spec stoke_loader_spec = {"stoke.Loader", sizeof(LoaderObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, loader_slots};
