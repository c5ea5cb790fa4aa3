/* Checkpoints on top of safetensors.c: the mapping between a model (and
 * optimizer) and the named tensors of a file. */
#include "engine/checkpoint.h"

#include "common/fs.h"

#include "storage/safetensors.h"
#include "engine/nn_impl.h"
#include "engine/onnx_graph.h"
#include "engine/tensor_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPTIM_PREFIX "optim."
/* A model imported from ONNX: the file itself, as U8 bytes, so that the
 * checkpoint needs nothing else (stk_checkpoint_onnx_file). */
#define ONNX_TENSOR STK_CHECKPOINT_ONNX_TENSOR
#define EMA_PREFIX   STK_CHECKPOINT_EMA_PREFIX

static bool is_counter(const stk_tensor *t) { return stk_tensor_dtype(t) == STK_I32; }

/* The host bytes of v: v's own for a contiguous CPU tensor, else a host copy
 * kept in *staged (released by the caller). */
static stk_status host_bytes(stk_tensor *v, stk_tensor **staged, const void **out)
{
    *staged = NULL;
    if (stk_tensor_is_contiguous(v) && stk_tensor_device(v) == STK_DEVICE_CPU) {
        *out = stk_tensor_data(v);
        return STK_OK;
    }
    stk_status st = eng_tensor_new(STK_DEVICE_CPU, v->dtype, v->ndim, v->shape, false, staged);
    if (st == STK_OK && (st = stk_tensor_copy(*staged, v)) != STK_OK) {
        stk_tensor_release(*staged);
        *staged = NULL;
    }
    *out = *staged ? stk_tensor_data(*staged) : NULL;
    return st;
}

/* The model's tensors (and opt's state) with Stoke's metadata; weights:
 * PyTorch's "format": "pt" instead of Stoke's format and version. */
static stk_status save(const char *path, const stk_model *m, const stk_optim *opt, bool weights,
                       stk_tensor *const *ema, int n_meta, const char *const *keys,
                       const char *const *values)
{
    int np = stk_model_param_count(m), no = opt ? stk_optim_state_count(opt) : 0;
    int ne = ema ? np : 0, total = 2 * np + no + 1;
    stk_st_tensor *t = calloc((size_t)total + 1, sizeof *t);
    int64_t *counters = calloc(2 * (size_t)np + 1, sizeof *counters);
    stk_tensor **staged = calloc((size_t)total + 1, sizeof *staged); /* host copies */
    char **onames = calloc((size_t)(no + ne) + 1, sizeof *onames);
    const char **mk = calloc((size_t)n_meta + 12, sizeof *mk),
               **mv = calloc((size_t)n_meta + 12, sizeof *mv);
    char num[8][32], *graph = NULL;
    stk_status st = STK_OK;
    if (!t || !counters || !staged || !onames || !mk || !mv) {
        st = stk_error(STK_ERR_NOMEM, "%s: no memory", path);
        goto out;
    }
    int n = 0;
    for (int i = 0; i < np; i++) {
        const stk_param *p = stk_model_param(m, i);
        stk_tensor *v = p->value;
        const void *bytes;
        if ((st = host_bytes(v, &staged[n], &bytes)) != STK_OK) {
            stk_error_prefix(st, "%s: %s", path, p->name);
            goto out;
        }
        if (is_counter(v)) { /* num_batches_tracked: PyTorch keeps an int64 */
            counters[i] = *(const int32_t *)bytes;
            t[n++] = (stk_st_tensor){p->name, STK_ST_I64, 0, NULL, &counters[i], 8};
        } else {
            t[n++] = (stk_st_tensor){p->name,  STK_ST_F32, stk_tensor_ndim(v),
                                     v->shape, bytes,      (size_t)stk_tensor_numel(v) * 4};
        }
    }
    for (int i = 0; i < no; i++) {
        stk_tensor *v = stk_optim_state_tensor(opt, i);
        if (!v) continue; /* before the first step */
        const char *sn = stk_optim_state_name(opt, i);
        size_t len = strlen(OPTIM_PREFIX) + strlen(sn) + 1;
        if (!(onames[i] = malloc(len))) {
            st = stk_error(STK_ERR_NOMEM, "%s: no memory", path);
            goto out;
        }
        snprintf(onames[i], len, OPTIM_PREFIX "%s", sn);
        const void *bytes;
        if ((st = host_bytes(v, &staged[n], &bytes)) != STK_OK) {
            stk_error_prefix(st, "%s: %s", path, onames[i]);
            goto out;
        }
        t[n++] = (stk_st_tensor){onames[i], STK_ST_F32, stk_tensor_ndim(v),
                                 v->shape,  bytes,      (size_t)stk_tensor_numel(v) * 4};
    }
    for (int i = 0; i < ne; i++) { /* the moving average, named after its parameter */
        const char *pn = stk_model_param(m, i)->name;
        stk_tensor *v = ema[i];
        char **name = &onames[no + i];
        size_t len = strlen(EMA_PREFIX) + strlen(pn) + 1;
        if (!(*name = malloc(len))) {
            st = stk_error(STK_ERR_NOMEM, "%s: no memory", path);
            goto out;
        }
        snprintf(*name, len, EMA_PREFIX "%s", pn);
        const void *bytes;
        if ((st = host_bytes(v, &staged[n], &bytes)) != STK_OK) {
            stk_error_prefix(st, "%s: %s", path, *name);
            goto out;
        }
        if (is_counter(v)) {
            counters[np + i] = *(const int32_t *)bytes;
            t[n++] = (stk_st_tensor){*name, STK_ST_I64, 0, NULL, &counters[np + i], 8};
        } else {
            t[n++] = (stk_st_tensor){*name,    STK_ST_F32, stk_tensor_ndim(v),
                                     v->shape, bytes,      (size_t)stk_tensor_numel(v) * 4};
        }
    }
    const void *onnx;
    size_t onnx_len;
    if (!weights && stk_model_onnx_file(m, &onnx, &onnx_len)) {
        int64_t *len = &counters[2 * np];
        *len = (int64_t)onnx_len;
        t[n++] = (stk_st_tensor){ONNX_TENSOR, STK_ST_U8, 1, len, onnx, onnx_len};
    }
    const stk_model_config *c = stk_model_get_config(m);
    int k = 0;
    mk[k] = "format", mv[k++] = weights ? "pt" : STK_CHECKPOINT_FORMAT;
    snprintf(num[0], sizeof num[0], "%d", STK_CHECKPOINT_VERSION);
    if (!weights) mk[k] = "format_version", mv[k++] = num[0];
    mk[k] = "model", mv[k++] = stk_model_name(m);
    snprintf(num[1], sizeof num[1], "%d", c->in_channels);
    mk[k] = "in_channels", mv[k++] = num[1];
    snprintf(num[2], sizeof num[2], "%d", c->classes);
    mk[k] = "classes", mv[k++] = num[2];
    snprintf(num[3], sizeof num[3], "%d", c->image_size);
    mk[k] = "image_size", mv[k++] = num[3];
    if (opt) {
        mk[k] = "optimizer", mv[k++] = stk_optim_kind_name(stk_optim_get_config(opt)->kind);
        snprintf(num[4], sizeof num[4], "%.9g", (double)stk_optim_lr(opt));
        mk[k] = "lr", mv[k++] = num[4];
        snprintf(num[5], sizeof num[5], "%lld", (long long)stk_optim_steps(opt));
        mk[k] = "optimizer_steps", mv[k++] = num[5];
    }
    /* a model built from modules describes itself (stk_model_from_description) */
    if (stk_model_is_custom(m)) {
        if ((st = stk_model_describe(m, &graph)) != STK_OK) goto out;
        mk[k] = "model_graph", mv[k++] = graph;
    }
    for (int i = 0; i < n_meta; i++) mk[k] = keys[i], mv[k++] = values[i];
    st = stk_safetensors_write(path, n, t, k, mk, mv);
out:
    if (staged)
        for (int i = 0; i < total; i++) stk_tensor_release(staged[i]);
    free(staged);
    if (onames)
        for (int i = 0; i < no + ne; i++) free(onames[i]);
    free(onames);
    free(t);
    free(counters);
    free(mk);
    free(mv);
    free(graph);
    return st;
}

stk_status stk_checkpoint_save(const char *path, const stk_model *m, const stk_optim *opt,
                               int n_meta, const char *const *keys, const char *const *values)
{
    return save(path, m, opt, false, NULL, n_meta, keys, values);
}

stk_status stk_checkpoint_save_with_ema(const char *path, const stk_model *m, const stk_optim *opt,
                                        stk_tensor *const *ema, int n_meta, const char *const *keys,
                                        const char *const *values)
{
    return save(path, m, opt, false, ema, n_meta, keys, values);
}

stk_status stk_checkpoint_save_weights(const char *path, const stk_model *m, int n_meta,
                                       const char *const *keys, const char *const *values)
{
    return save(path, m, NULL, true, NULL, n_meta, keys, values);
}

static void report_add(stk_load_report *r, const char *fmt, ...)
{
    size_t len = strlen(r->text);
    if (len + 80 >= sizeof r->text) {
        if (!strstr(r->text, "...")) snprintf(r->text + len, sizeof r->text - len, "\n  ...");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text + len, sizeof r->text - len, fmt, ap);
    va_end(ap);
}

/* Does file entry e fit tensor v (same shape, a dtype we can convert)? */
static bool fits(const stk_st_entry *e, const stk_tensor *v, char *why, size_t n)
{
    bool counter = is_counter(v);
    if (counter ? (e->dtype != STK_ST_I64 && e->dtype != STK_ST_I32) : e->dtype != STK_ST_F32) {
        snprintf(why, n, "dtype %s, model has %s", stk_st_dtype_name(e->dtype),
                 counter ? "I64" : "F32");
        return false;
    }
    bool same = e->ndim == stk_tensor_ndim(v);
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == stk_tensor_dim(v, d);
    if (!same) {
        char fs[128];
        int k = snprintf(fs, sizeof fs, "[");
        for (int d = 0; d < e->ndim && k < 100; d++)
            k += snprintf(fs + k, sizeof fs - (size_t)k, "%s%lld", d ? ", " : "",
                          (long long)e->shape[d]);
        snprintf(fs + k, sizeof fs - (size_t)k, "]");
        snprintf(why, n, "shape %s in the file, %s in the model", fs, stk_tensor_shape_str(v));
        return false;
    }
    return true;
}

/* Counters (num_batches_tracked) stay on the CPU; other tensors may be on a GPU. */
static stk_status copy_in(const stk_safetensors *f, const stk_st_entry *e, stk_tensor *v)
{
    const void *src = stk_safetensors_data(f, e);
    if (is_counter(v)) {
        int64_t c = 0;
        if (e->dtype == STK_ST_I64) {
            memcpy(&c, src, 8);
        } else {
            int32_t c32;
            memcpy(&c32, src, 4);
            c = c32;
        }
        *(int32_t *)stk_tensor_data(v) = (int32_t)(c > INT32_MAX ? INT32_MAX : c);
        return STK_OK;
    }
    size_t bytes = (size_t)stk_tensor_numel(v) * 4;
    if (stk_tensor_device(v) != STK_DEVICE_CPU) return stk_tensor_copy_from_host(v, src, bytes);
    memcpy(stk_tensor_data(v), src, bytes); /* src may be unaligned */
    return STK_OK;
}

/* v is exactly the decimal digits of `want` ("1x", "+1", " 1" are not). */
static bool version_is(const char *v, int want)
{
    char digits[16];
    snprintf(digits, sizeof digits, "%d", want);
    return !strcmp(v, digits);
}

stk_status stk_checkpoint_load(const char *path, stk_model *m, stk_optim *opt, bool strict,
                               stk_load_report *r)
{
    memset(r, 0, sizeof *r);
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(path, &f);
    if (st != STK_OK) return st;
    const char *fmt = stk_safetensors_meta(f, "format");
    const char *ver = stk_safetensors_meta(f, "format_version");
    const char *model = stk_safetensors_meta(f, "model");
    char why[256];
    /* "pt": a PyTorch state dict (safetensors.torch.save_file's, stoke
     * export's weights): weights to start from, not a run to resume */
    bool state_dict = fmt && !strcmp(fmt, "pt");
    if (fmt && strcmp(fmt, STK_CHECKPOINT_FORMAT) && !(state_dict && !strict)) {
        st = stk_error(STK_ERR_FORMAT, "%s: format '%s' is not a Stoke checkpoint", path, fmt);
        goto out;
    }
    if (ver && !version_is(ver, STK_CHECKPOINT_VERSION)) {
        char shown[64];
        st = stk_error(STK_ERR_FORMAT,
                       "%s: checkpoint format version '%s'; this Stoke reads version %d", path,
                       stk_printable(ver, shown, sizeof shown), STK_CHECKPOINT_VERSION);
        goto out;
    }
    if (strict && model && strcmp(model, stk_model_name(m))) {
        st = stk_error(STK_ERR_FORMAT, "%s: the checkpoint holds a %s model, not %s", path, model,
                       stk_model_name(m));
        goto out;
    }
    /* Pass 1: check everything; pass 2: copy. A strict failure changes nothing. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < stk_model_param_count(m); i++) {
            const stk_param *p = stk_model_param(m, i);
            const stk_st_entry *e = stk_safetensors_find(f, p->name);
            if (!e) {
                if (strict) {
                    st = stk_error(STK_ERR_FORMAT, "%s: tensor %s is missing", path, p->name);
                    goto out;
                }
                if (pass) {
                    r->missing++;
                    report_add(r, "\n  missing: %s", p->name);
                }
                continue;
            }
            if (!fits(e, p->value, why, sizeof why)) {
                if (strict) {
                    st = stk_error(STK_ERR_FORMAT, "%s: tensor %s: %s", path, p->name, why);
                    goto out;
                }
                if (pass) {
                    r->mismatched++;
                    report_add(r, "\n  not loaded: %s (%s)", p->name, why);
                }
                continue;
            }
            if (pass) {
                if ((st = copy_in(f, e, p->value)) != STK_OK) {
                    stk_error_prefix(st, "%s: tensor %s", path, p->name);
                    goto out;
                }
                r->loaded++;
            }
        }
        for (int i = 0; i < f->n; i++) {
            const char *name = f->entries[i].name;
            if (!strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) ||
                !strncmp(name, EMA_PREFIX, strlen(EMA_PREFIX)) || !strcmp(name, ONNX_TENSOR) ||
                stk_model_find(m, name))
                continue;
            if (strict) {
                st = stk_error(STK_ERR_FORMAT, "%s: tensor %s is not in a %s model", path, name,
                               stk_model_name(m));
                goto out;
            }
            if (pass) {
                r->unexpected++;
                report_add(r, "\n  unexpected: %s", name);
            }
        }
        /* optimizer state: all of it or none */
        int no = opt ? stk_optim_state_count(opt) : 0, have = 0;
        for (int i = 0; i < no; i++) {
            char name[300];
            snprintf(name, sizeof name, OPTIM_PREFIX "%s", stk_optim_state_name(opt, i));
            const stk_st_entry *e = stk_safetensors_find(f, name);
            if (!e) continue;
            have++;
            if (pass == 0) { /* checked before anything is copied */
                if (!fits(e, stk_optim_state_param(opt, i), why, sizeof why)) {
                    st = stk_error(STK_ERR_FORMAT, "%s: optimizer state %s: %s", path, name, why);
                    goto out;
                }
                continue;
            }
            int64_t shape[STK_MAX_DIMS];
            for (int d = 0; d < e->ndim && d < STK_MAX_DIMS; d++) shape[d] = e->shape[d];
            stk_tensor *tmp;
            if (e->dtype != STK_ST_F32 || e->ndim > STK_MAX_DIMS ||
                (st = eng_tensor_new(STK_DEVICE_CPU, STK_F32, e->ndim, shape, false, &tmp)) !=
                    STK_OK) {
                if (st == STK_OK)
                    st = stk_error(STK_ERR_FORMAT, "%s: optimizer state %s is not F32", path, name);
                goto out;
            }
            memcpy(stk_tensor_data(tmp), stk_safetensors_data(f, e), e->end - e->begin);
            st = stk_optim_state_set(opt, i, tmp);
            stk_tensor_release(tmp);
            if (st != STK_OK) goto out;
        }
        if (pass && have) {
            const char *steps = stk_safetensors_meta(f, "optimizer_steps");
            if (steps) stk_optim_set_steps(opt, atoll(steps));
            r->optimizer = true;
        }
    }
    char head[160];
    snprintf(head, sizeof head,
             "%s: loaded %d tensors; %d missing, %d unexpected, %d not matching%s", path, r->loaded,
             r->missing, r->unexpected, r->mismatched,
             r->optimizer ? "; optimizer state restored" : "");
    size_t hl = strlen(head), tl = strlen(r->text);
    if (hl + tl + 1 <= sizeof r->text) {
        memmove(r->text + hl, r->text, tl + 1);
        memcpy(r->text, head, hl);
    }
out:
    stk_safetensors_free(f);
    return st;
}

/* One tensor's dimension against what the metadata implies. */
static stk_status expect_dim(const stk_safetensors *f, const char *tensor, int ndim, int dim,
                             int64_t want, const char *why)
{
    const stk_st_entry *e = stk_safetensors_find(f, tensor);
    if (!e)
        return stk_error(STK_ERR_FORMAT, "%s: no tensor %s (a checkpoint of another model?)",
                         f->path, tensor);
    if (e->ndim != ndim || e->shape[dim] != want)
        return stk_error(STK_ERR_FORMAT,
                         "%s: its metadata (%s) gives %s dimension %d the size %lld, the tensor "
                         "has %lld in %d dimensions: the metadata does not match the tensors",
                         f->path, why, tensor, dim, (long long)want,
                         e->ndim > dim ? (long long)e->shape[dim] : -1LL, e->ndim);
    return STK_OK;
}

stk_status stk_checkpoint_check_config(const stk_safetensors *f, const stk_model_config *cfg)
{
    /* a described model is checked tensor by tensor when it is built and loaded */
    if (stk_safetensors_meta(f, "model_graph") || stk_safetensors_find(f, ONNX_TENSOR))
        return STK_OK;
    char why[96];
    const char *first, *classifier;
    eng_model_io_tensors(cfg->name, &first, &classifier);
    if (cfg->name && !strcmp(cfg->name, "mlp")) {
        snprintf(why, sizeof why, "in_channels %d, image_size %d", cfg->in_channels,
                 cfg->image_size);
        STK_TRY(expect_dim(f, first, 2, 1,
                           (int64_t)cfg->in_channels * cfg->image_size * cfg->image_size, why));
    } else {
        snprintf(why, sizeof why, "in_channels %d", cfg->in_channels);
        STK_TRY(expect_dim(f, first, 4, 1, cfg->in_channels, why));
    }
    snprintf(why, sizeof why, "classes %d", cfg->classes);
    return expect_dim(f, classifier, 2, 0, cfg->classes, why);
}
bool stk_checkpoint_has_ema(const char *path)
{
    stk_safetensors *f;
    if (stk_safetensors_read(path, &f) != STK_OK) return false;
    bool found = false;
    for (int i = 0; i < f->n && !found; i++)
        found = !strncmp(f->entries[i].name, EMA_PREFIX, strlen(EMA_PREFIX));
    stk_safetensors_free(f);
    return found;
}

stk_status stk_checkpoint_load_ema(const char *path, const stk_model *m, stk_tensor *const *into)
{
    stk_safetensors *f;
    STK_TRY(stk_safetensors_read(path, &f));
    stk_status st = STK_OK;
    char name[300], why[256];
    for (int pass = 0; pass < 2 && st == STK_OK; pass++) /* check all, then copy */
        for (int i = 0; i < stk_model_param_count(m) && st == STK_OK; i++) {
            snprintf(name, sizeof name, EMA_PREFIX "%s", stk_model_param(m, i)->name);
            const stk_st_entry *e = stk_safetensors_find(f, name);
            if (!e)
                st = stk_error(STK_ERR_FORMAT, "%s: tensor %s is missing (no moving average?)",
                               path, name);
            else if (!fits(e, into[i], why, sizeof why))
                st = stk_error(STK_ERR_FORMAT, "%s: tensor %s: %s", path, name, why);
            else if (pass && (st = copy_in(f, e, into[i])) != STK_OK)
                stk_error_prefix(st, "%s: tensor %s", path, name);
        }
    stk_safetensors_free(f);
    return st;
}
