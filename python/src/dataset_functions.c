/* stoke.pack() and stoke.info(): thin calls of the library (the same
 * stk_pack_job_run and stk_dataset_open as `stoke pack` / `stoke info`), the
 * CLI's errors raised as StokeError with the same messages.
 *
 * A pack runs on a thread of its own while the caller waits in 0.1 s steps
 * with the GIL released, so Ctrl-C raises KeyboardInterrupt: the pack is
 * cancelled between chunks, waited for, and nothing is left at OUT. */
#include "module.h"

#include "common/status.h"
#include "pack/pack_job.h"
#include "storage/dataset.h"

#include <stdint.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static const char *bytes_or_null(PyObject *b) { return b ? PyBytes_AsString(b) : NULL; }

/* ---- pack ---- */

typedef struct pack_thread {
    stk_pack_request req;
    stk_pack_summary sum;
    stk_encoding enc;
    stk_status st;
    char *error; /* the pack thread's message, carried to the caller */
    volatile sig_atomic_t cancel;
} pack_thread;

static void *pack_main(void *arg)
{
    pack_thread *t = arg;
    t->st = stk_pack_job_run(&t->req, &t->sum, &t->enc);
    t->error = t->st != STK_OK ? strdup(stk_last_error()) : NULL;
    return NULL;
}

static PyObject *summary_dict(const pack_thread *t)
{
    const stk_pack_summary *s = &t->sum;
    double rate = s->seconds > 0 ? (double)s->records / s->seconds : 0;
    PyObject *d = Py_BuildValue(
        "{s:K,s:I,s:K,s:K,s:K,s:i,s:d,s:d}", "records", (unsigned long long)s->records, "classes",
        s->classes, "skipped", (unsigned long long)s->skipped, "bytes_in",
        (unsigned long long)s->bytes_in, "bytes_out", (unsigned long long)s->bytes_out, "shards",
        s->shards, "seconds", s->seconds, "images_per_sec", rate);
    if (!d || t->enc != STK_ENCODING_JPEG) return d;
    for (int i = 0; i < STK_PACK_ACTIONS; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(s->actions[i]);
        if (!v || PyDict_SetItemString(d, stk_pack_action_names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *run_pack(pack_thread *t)
{
    bool interrupted;
    if (!stoke_wait_for_thread(pack_main, t, &t->cancel, &interrupted)) return NULL;
    PyObject *result = NULL;
    if (interrupted) {
        /* the KeyboardInterrupt (or the handler's exception) is set */
    } else if (t->st != STK_OK) {
        PyErr_SetString(stoke_error, t->error ? t->error : "pack failed");
    } else {
        result = summary_dict(t);
    }
    free(t->error);
    return result;
}

static PyObject *py_pack(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *names[] = {"src",      "out",        "labels",   "kind",    "split",
                            "classes",  "workers",    "shuffle",  "seed",    "skip_bad",
                            "validate", "max_pixels", "max_side", "quality", "progress",
                            "restart",  "shard_size", "store",    NULL};
    PyObject *src = NULL, *out = NULL, *labels = NULL, *classes = NULL, *result = NULL;
    const char *kind = NULL, *split = NULL, *store = NULL;
    int shuffle = 0, skip_bad = 0, validate = 1, progress = 0;
    PyObject *workers_o = NULL, *seed_o = NULL, *max_pixels_o = NULL, *max_side_o = NULL,
             *quality_o = NULL, *restart_o = NULL, *shard_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "O&O&|$O&zzO&OpOppOOOpOOz", names, PyUnicode_FSConverter, &src,
            PyUnicode_FSConverter, &out, stoke_path_or_none, &labels, &kind, &split,
            stoke_path_or_none, &classes, &workers_o, &shuffle, &seed_o, &skip_bad, &validate,
            &max_pixels_o, &max_side_o, &quality_o, &progress, &restart_o, &shard_o, &store))
        goto fail;
    /* the CLI's ranges; 0 workers: one per core, max_side 0 or None: no limit */
    long long workers = 0, seed = 0, max_pixels = 64000000, max_side = 0, quality = 90,
              restart = STK_PACK_DEFAULT_RESTART, shard_size = 0;
    if ((workers_o && !stoke_int_arg(workers_o, "workers", 0, 1024, &workers)) ||
        (seed_o && !stoke_int_arg(seed_o, "seed", 0, INT64_MAX, &seed)) ||
        (max_pixels_o && !stoke_int_arg(max_pixels_o, "max_pixels", 1, INT64_MAX, &max_pixels)) ||
        (max_side_o && max_side_o != Py_None &&
         !stoke_int_arg(max_side_o, "max_side", 0, 65500, &max_side)) ||
        (quality_o && !stoke_int_arg(quality_o, "quality", 1, 100, &quality)) ||
        (restart_o && !stoke_int_arg(restart_o, "restart", 0, 64, &restart)) ||
        (shard_o && shard_o != Py_None &&
         !stoke_int_arg(shard_o, "shard_size", 1 << 20, 1LL << 40, &shard_size)))
        goto fail;
    pack_thread *t = calloc(1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        goto fail;
    }
    t->req = stk_pack_request_defaults();
    t->req.src = bytes_or_null(src);
    t->req.out = bytes_or_null(out);
    t->req.labels = bytes_or_null(labels);
    t->req.from = kind;
    t->req.split = split;
    t->req.classes = bytes_or_null(classes);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->req.workers = workers > 0 ? (int)workers : (int)(cores > 0 ? cores : 1);
    t->req.shuffle = shuffle;
    t->req.seed = (uint64_t)seed;
    t->req.skip_bad = skip_bad;
    t->req.validate = validate;
    t->req.max_pixels = (uint64_t)max_pixels;
    t->req.max_side = (uint32_t)max_side;
    t->req.quality = (int)quality;
    t->req.restart_mcus = (int)restart;
    t->req.shard_bytes = (uint64_t)shard_size;
    t->req.store = store;
    t->req.progress = progress ? stderr : NULL;
    t->req.cancel = &t->cancel;
    result = run_pack(t);
    free(t);
fail:
    Py_XDECREF(src);
    Py_XDECREF(out);
    Py_XDECREF(labels);
    Py_XDECREF(classes);
    return result;
}

/* ---- info ---- */

static PyObject *triple(const double *v, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (!f || PyList_SetItem(l, i, f) < 0) {
            Py_DECREF(l);
            return NULL;
        }
    }
    return l;
}

static PyObject *classes_list(const stk_meta *m)
{
    PyObject *l = PyList_New(m->num_classes);
    for (uint32_t i = 0; l && i < m->num_classes; i++) {
        /* names come from the file: invalid UTF-8 is replaced, never an error */
        PyObject *name = PyUnicode_DecodeUTF8(m->class_names[i],
                                              (Py_ssize_t)strlen(m->class_names[i]), "replace");
        PyObject *c = name ? Py_BuildValue("{s:N,s:K}", "name", name, "count",
                                           (unsigned long long)m->class_counts[i])
                           : NULL;
        if (!c || PyList_SetItem(l, i, c) < 0) {
            Py_DECREF(l);
            return NULL;
        }
    }
    return l;
}

static PyObject *text(const char *s)
{
    return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0, "replace");
}

static PyObject *info_dict(PyObject *path, const stk_meta *m, uint64_t file_bytes)
{
    PyObject *d = PyDict_New();
    bool ok =
        d && stoke_dict_put(d, "path", PyUnicode_DecodeFSDefault(PyBytes_AsString(path))) &&
        stoke_dict_put(d, "version", PyLong_FromUnsignedLong(m->version)) &&
        stoke_dict_put(d, "records", PyLong_FromUnsignedLongLong(m->count)) &&
        stoke_dict_put(d, "encoding", PyUnicode_FromString(stk_encoding_name(m->encoding))) &&
        stoke_dict_put(d, "channels", PyLong_FromLong(m->channels)) &&
        stoke_dict_put(d, "file_bytes", PyLong_FromUnsignedLongLong(file_bytes)) &&
        stoke_dict_put(d, "width",
                       Py_BuildValue("{s:I,s:I}", "min", m->min_width, "max", m->max_width)) &&
        stoke_dict_put(d, "height",
                       Py_BuildValue("{s:I,s:I}", "min", m->min_height, "max", m->max_height)) &&
        stoke_dict_put(d, "classes", classes_list(m)) &&
        stoke_dict_put(d, "source", text(m->source)) &&
        stoke_dict_put(d, "packed_with", text(m->packed_with));
    if (ok && m->has_stats)
        ok = stoke_dict_put(d, "mean", triple(m->mean, m->channels)) &&
             stoke_dict_put(d, "std", triple(m->std, m->channels));
    if (!ok) Py_CLEAR(d);
    return d;
}

static PyObject *py_info(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *path = NULL;
    if (!PyUnicode_FSConverter(arg, &path)) return NULL;
    stk_dataset *ds = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    stk_status st = stk_dataset_open(PyBytes_AsString(path), &ds);
    PyEval_RestoreThread(ts);
    PyObject *d =
        st ? stoke_raise() : info_dict(path, stk_dataset_meta(ds), stk_dataset_file_size(ds));
    if (ds) stk_dataset_close(ds);
    Py_DECREF(path);
    return d;
}

PyMethodDef stoke_dataset_functions[] = {
    {"pack", (PyCFunction)(void (*)(void))py_pack, METH_VARARGS | METH_KEYWORDS,
     "pack(src, out, *, labels=None, kind=None, split=None, classes=None, workers=0,\n"
     "     shuffle=False, seed=0, skip_bad=False, validate=True, max_pixels=64000000,\n"
     "     max_side=0, quality=90, progress=False, restart=4, shard_size=None, store=None)\n"
     "--\n\n"
     "Pack an image dataset into one .stoke file, as `stoke pack` (see `stoke pack --help`);\n"
     "shard_size (bytes, 1 MiB..1 TiB): shards and their list, as --shard-size; store\n"
     "'jpeg' or 'raw' (lossless RGB pixels), as --store (None: jpeg for folders and lists).\n"
     "kind is --from (imagefolder, list, idx, cifar10; None: guessed from src), workers 0\n"
     "means one per core. Returns the summary `stoke pack --json` prints. Errors raise\n"
     "StokeError with the CLI's message; Ctrl-C stops the pack and leaves nothing at out."},
    {"info", py_info, METH_O,
     "info(path, /)\n--\n\n"
     "What a .stoke file holds: the keys of `stoke info --json` (records, encoding,\n"
     "channels, width/height min and max, classes [{name, count}], mean, std, ...).\n"
     "The whole file structure is checked on open, as by the CLI."},
    {NULL, NULL, 0, NULL}};
