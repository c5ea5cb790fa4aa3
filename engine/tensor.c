/* Tensor creation, reference counting, host copies and printing. Views are
 * in views.c, the autograd bookkeeping in autograd.c. */
#include "engine/tensor_impl.h"

#include "engine/autograd_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *stk_dtype_name(stk_dtype dt)
{
    static const char *name[] = {"f32", "f16", "bf16", "i32", "u8"};
    return (unsigned)dt < 5 ? name[dt] : "unknown";
}

int64_t eng_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

bool eng_shape_equal(const stk_tensor *a, const stk_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

int eng_dim_index(int d, int ndim)
{
    if (d < 0) d += ndim;
    return d >= 0 && d < ndim ? d : -1;
}

stk_status eng_check_f32(const char *op, const stk_tensor *t, const char *what)
{
    if (t->dtype != STK_F32)
        return stk_error(STK_ERR_INVALID_ARG, "%s: %s must be f32, got %s", op, what,
                         stk_dtype_name(t->dtype));
    return STK_OK;
}

stk_status eng_check_same_device(const char *op, const stk_tensor *a, const stk_tensor *b)
{
    if (a->storage->device != b->storage->device)
        return stk_error(STK_ERR_INVALID_ARG, "%s: tensors on different devices (%s and %s)", op,
                         stk_device_name(a->storage->device), stk_device_name(b->storage->device));
    return STK_OK;
}

stk_status eng_backend_of(const stk_tensor *t, const stk_backend **be)
{
    return stk_backend_get(t->storage->device, be);
}

static stk_status check_shape(int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > STK_MAX_DIMS)
        return stk_error(STK_ERR_INVALID_ARG, "tensor rank %d is outside 0..%d", ndim,
                         STK_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return stk_error(STK_ERR_INVALID_ARG, "tensor size %lld in dimension %d is negative",
                             (long long)shape[d], d);
    return STK_OK;
}

/* A contiguous tensor and its storage record (data not yet set): what
 * eng_tensor_new and stk_tensor_wrap share. */
static stk_status tensor_shell(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape,
                               stk_tensor **out)
{
    *out = NULL;
    stk_status st = check_shape(ndim, shape);
    if (st != STK_OK) return st;
    stk_tensor *t = calloc(1, sizeof *t);
    stk_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        return stk_error(STK_ERR_NOMEM, "no memory for a tensor");
    }
    s->bytes = (size_t)eng_shape_numel(ndim, shape) * stk_dtype_size(dt);
    s->device = dev;
    s->refs = 1;
    t->refs = 1;
    t->ndim = ndim;
    t->dtype = dt;
    t->storage = s;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->strides[d] = stride;
        stride *= shape[d];
    }
    *out = t;
    return STK_OK;
}

stk_status eng_tensor_new(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape, bool zero,
                          stk_tensor **out)
{
    stk_tensor *t;
    stk_status st = tensor_shell(dev, dt, ndim, shape, &t);
    if (st != STK_OK) return st;
    stk_storage *s = t->storage;
    if ((st = stk_device_alloc(dev, s->bytes, &s->data)) != STK_OK) {
        free(s);
        free(t);
        if (st == STK_ERR_NOMEM) { /* say what holds the memory */
            char live[512];
            eng_live_describe(dev, live, sizeof live);
            return stk_error(st, "%s%s", stk_last_error(), live);
        }
        return st;
    }
    s->dtype = dt;
    s->ndim = ndim;
    if (ndim)
        memcpy(s->shape, shape, (size_t)ndim * sizeof *shape); /* scalars: shape may be NULL */
    eng_live_add(s);
    if (zero && s->bytes) {
        const stk_backend *be;
        if ((st = stk_backend_get(dev, &be)) != STK_OK) {
            stk_tensor_release(t);
            return st;
        }
        be->fill(dt, s->data, eng_shape_numel(ndim, shape), 0.0);
    }
    *out = t;
    return STK_OK;
}

stk_status eng_tensor_new_like(const stk_tensor *t, bool zero, stk_tensor **out)
{
    return eng_tensor_new(t->storage->device, t->dtype, t->ndim, t->shape, zero, out);
}

stk_status eng_tensor_alias(const stk_tensor *t, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset, stk_tensor **out)
{
    *out = NULL;
    stk_tensor *v = calloc(1, sizeof *v);
    if (!v) return stk_error(STK_ERR_NOMEM, "no memory for a tensor view");
    v->refs = 1;
    v->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        v->shape[d] = shape[d];
        v->strides[d] = strides[d];
    }
    v->offset = offset;
    v->dtype = t->dtype;
    v->storage = t->storage;
    t->storage->refs++;
    *out = v;
    return STK_OK;
}

stk_status eng_tensor_contiguous_raw(stk_tensor *t, stk_tensor **out)
{
    if (stk_tensor_is_contiguous(t)) {
        stk_tensor_retain(t);
        *out = t;
        return STK_OK;
    }
    stk_status st = eng_tensor_new_like(t, false, out);
    if (st != STK_OK) return st;
    return stk_tensor_copy(*out, t);
}

stk_status stk_tensor_zeros_on(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape,
                               stk_tensor **out)
{
    stk_status st = eng_tensor_new(dev, dt, ndim, shape, true, out);
    if (st == STK_OK) eng_tensor_track(*out);
    return st;
}

stk_status stk_tensor_zeros(stk_dtype dt, int ndim, const int64_t *shape, stk_tensor **out)
{
    return stk_tensor_zeros_on(STK_DEVICE_CPU, dt, ndim, shape, out);
}

stk_status stk_tensor_from_host(stk_dtype dt, int ndim, const int64_t *shape, const void *data,
                                stk_tensor **out)
{
    stk_status st = eng_tensor_new(STK_DEVICE_CPU, dt, ndim, shape, false, out);
    if (st != STK_OK) return st;
    memcpy((*out)->storage->data, data, (*out)->storage->bytes);
    eng_tensor_track(*out);
    return STK_OK;
}

stk_status stk_tensor_wrap(stk_device dev, stk_dtype dt, int ndim, const int64_t *shape, void *data,
                           stk_tensor **out)
{
    stk_status st = tensor_shell(dev, dt, ndim, shape, out);
    if (st != STK_OK) return st;
    (*out)->storage->data = data;
    (*out)->storage->borrowed = true;
    eng_tensor_track(*out);
    return STK_OK;
}

stk_status stk_tensor_scalar(float value, stk_tensor **out)
{
    return stk_tensor_from_host(STK_F32, 0, NULL, &value, out);
}

static stk_status copy_across_devices(stk_tensor *dst, const stk_tensor *src);

/* The strides of a contiguous tensor of t's shape. */
static void row_major_strides(const stk_tensor *t, int64_t *strides)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= t->shape[d];
    }
}

stk_status stk_tensor_to_host(const stk_tensor *t, void *dst, size_t bytes)
{
    int64_t numel = stk_tensor_numel(t);
    size_t need = (size_t)numel * stk_dtype_size(t->dtype);
    if (bytes < need)
        return stk_error(STK_ERR_INVALID_ARG, "to_host: %zu bytes given, %s %s tensor needs %zu",
                         bytes, stk_tensor_shape_str(t), stk_dtype_name(t->dtype), need);
    if (t->storage->device != STK_DEVICE_CPU) { /* contiguous on the device, then across */
        const stk_backend *be;
        stk_tensor *c;
        stk_status st;
        if ((st = eng_backend_of(t, &be)) != STK_OK ||
            (st = eng_tensor_contiguous_raw((stk_tensor *)t, &c)) != STK_OK)
            return st;
        st = be->to_host(dst, tensor_ptr(c), need);
        stk_tensor_release(c);
        return st;
    }
    int64_t strides[STK_MAX_DIMS];
    row_major_strides(t, strides);
    const stk_backend *be;
    stk_status st = eng_backend_of(t, &be);
    if (st != STK_OK) return st;
    be->copy_strided(stk_dtype_size(t->dtype), t->ndim, t->shape, dst, strides, tensor_ptr(t),
                     t->strides);
    return STK_OK;
}

stk_status stk_tensor_copy_from_host(stk_tensor *t, const void *src, size_t bytes)
{
    int64_t numel = stk_tensor_numel(t);
    size_t need = (size_t)numel * stk_dtype_size(t->dtype);
    if (bytes != need)
        return stk_error(STK_ERR_INVALID_ARG, "copy_from_host: %zu bytes given, %s %s needs %zu",
                         bytes, stk_tensor_shape_str(t), stk_dtype_name(t->dtype), need);
    int64_t strides[STK_MAX_DIMS];
    row_major_strides(t, strides);
    const stk_backend *be;
    stk_status st = eng_backend_of(t, &be);
    if (st != STK_OK) return st;
    if (t->storage->device != STK_DEVICE_CPU && stk_tensor_is_contiguous(t))
        return be->from_host(tensor_ptr(t), src, need);
    if (t->storage->device != STK_DEVICE_CPU) { /* strided: through a host tensor */
        stk_tensor *host;
        if ((st = eng_tensor_new(STK_DEVICE_CPU, t->dtype, t->ndim, t->shape, false, &host)) !=
            STK_OK)
            return st;
        memcpy(tensor_ptr(host), src, need);
        st = copy_across_devices(t, host);
        stk_tensor_release(host);
        return st;
    }
    be->copy_strided(stk_dtype_size(t->dtype), t->ndim, t->shape, tensor_ptr(t), t->strides, src,
                     strides);
    return STK_OK;
}

stk_status stk_tensor_fill(stk_tensor *t, double value)
{
    const stk_backend *be;
    stk_status st = eng_backend_of(t, &be);
    if (st != STK_OK) return st;
    if (stk_tensor_is_contiguous(t)) {
        be->fill(t->dtype, tensor_ptr(t), stk_tensor_numel(t), value);
        return STK_OK;
    }
    stk_tensor *tmp;
    if ((st = eng_tensor_new_like(t, false, &tmp)) != STK_OK) return st;
    be->fill(t->dtype, tensor_ptr(tmp), stk_tensor_numel(t), value);
    st = stk_tensor_copy(t, tmp);
    stk_tensor_release(tmp);
    return st;
}

static stk_status to_dtype_raw(const stk_tensor *t, stk_dtype dt, stk_tensor **out);

/* dst (any device) = src (another device): src is made contiguous in dst's
 * dtype on its own device, its bytes cross through the host, and land in dst
 * (through a contiguous temporary when dst is strided). */
static stk_status copy_across_devices(stk_tensor *dst, const stk_tensor *src)
{
    const stk_backend *bs, *bd;
    stk_status st;
    if ((st = eng_backend_of(src, &bs)) != STK_OK || (st = eng_backend_of(dst, &bd)) != STK_OK)
        return st;
    stk_tensor *c = NULL, *landing = NULL;
    void *bounce = NULL;
    st = src->dtype == dst->dtype ? eng_tensor_contiguous_raw((stk_tensor *)src, &c)
                                  : to_dtype_raw(src, dst->dtype, &c);
    if (st != STK_OK) return st;
    if (stk_tensor_is_contiguous(dst)) {
        landing = dst;
        stk_tensor_retain(dst);
    } else if ((st = eng_tensor_new(dst->storage->device, dst->dtype, dst->ndim, dst->shape, false,
                                    &landing)) != STK_OK) {
        goto out;
    }
    size_t bytes = (size_t)stk_tensor_numel(dst) * stk_dtype_size(dst->dtype);
    if (src->storage->device == STK_DEVICE_CPU) {
        st = bd->from_host(tensor_ptr(landing), tensor_ptr(c), bytes);
    } else if (dst->storage->device == STK_DEVICE_CPU) {
        st = bs->to_host(tensor_ptr(landing), tensor_ptr(c), bytes);
    } else if (!(bounce = malloc(bytes ? bytes : 1))) {
        st = stk_error(STK_ERR_NOMEM, "copy: no host memory for %zu bytes", bytes);
    } else if ((st = bs->to_host(bounce, tensor_ptr(c), bytes)) == STK_OK) {
        st = bd->from_host(tensor_ptr(landing), bounce, bytes);
    }
    if (st == STK_OK && landing != dst)
        bd->copy_strided(stk_dtype_size(dst->dtype), dst->ndim, dst->shape, tensor_ptr(dst),
                         dst->strides, tensor_ptr(landing), landing->strides);
out:
    free(bounce);
    stk_tensor_release(c);
    stk_tensor_release(landing);
    return st;
}

stk_status stk_tensor_copy(stk_tensor *dst, const stk_tensor *src)
{
    if (!eng_shape_equal(dst, src)) {
        char a[128];
        snprintf(a, sizeof a, "%s", stk_tensor_shape_str(dst));
        return stk_error(STK_ERR_INVALID_ARG, "copy: shapes differ (%s and %s)", a,
                         stk_tensor_shape_str(src));
    }
    stk_status st;
    if (dst->storage->device != src->storage->device) return copy_across_devices(dst, src);
    const stk_backend *be;
    if ((st = eng_backend_of(dst, &be)) != STK_OK) return st;
    if (dst->dtype == src->dtype) {
        be->copy_strided(stk_dtype_size(dst->dtype), dst->ndim, dst->shape, tensor_ptr(dst),
                         dst->strides, tensor_ptr(src), src->strides);
        return STK_OK;
    }
    /* Different dtypes: convert a contiguous copy of src, then copy into dst. */
    stk_tensor *c = NULL, *conv = NULL;
    if ((st = eng_tensor_contiguous_raw((stk_tensor *)src, &c)) != STK_OK) return st;
    if ((st = eng_tensor_new(dst->storage->device, dst->dtype, dst->ndim, dst->shape, false,
                             &conv)) == STK_OK) {
        be->convert(dst->dtype, tensor_ptr(conv), src->dtype, tensor_ptr(c), stk_tensor_numel(src));
        be->copy_strided(stk_dtype_size(dst->dtype), dst->ndim, dst->shape, tensor_ptr(dst),
                         dst->strides, tensor_ptr(conv), conv->strides);
    }
    stk_tensor_release(c);
    stk_tensor_release(conv);
    return st;
}

void stk_tensor_retain(stk_tensor *t)
{
    if (t) t->refs++;
}

void stk_tensor_release(stk_tensor *t)
{
    if (!t || --t->refs > 0) return;
    eng_node_release(t->grad_fn);
    stk_tensor_release(t->grad);
    stk_storage *s = t->storage;
    if (s && --s->refs == 0) {
        if (!s->borrowed) {
            eng_live_remove(s);
            stk_device_free(s->device, s->data, s->bytes);
        }
        free(s);
    }
    free(t);
}

int stk_tensor_ndim(const stk_tensor *t) { return t->ndim; }

int64_t stk_tensor_dim(const stk_tensor *t, int d)
{
    d = eng_dim_index(d, t->ndim);
    return d < 0 ? 0 : t->shape[d];
}

int64_t stk_tensor_stride(const stk_tensor *t, int d)
{
    d = eng_dim_index(d, t->ndim);
    return d < 0 ? 0 : t->strides[d];
}

int64_t stk_tensor_numel(const stk_tensor *t) { return eng_shape_numel(t->ndim, t->shape); }
stk_dtype stk_tensor_dtype(const stk_tensor *t) { return t->dtype; }
stk_device stk_tensor_device(const stk_tensor *t) { return t->storage->device; }

bool stk_tensor_is_contiguous(const stk_tensor *t)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != s) return false;
        s *= t->shape[d];
    }
    return true;
}

void *stk_tensor_data(const stk_tensor *t)
{
    return t->storage->device == STK_DEVICE_CPU ? tensor_ptr(t) : NULL;
}

void *stk_tensor_device_data(const stk_tensor *t) { return tensor_ptr(t); }

const char *stk_tensor_shape_str(const stk_tensor *t)
{
    static _Thread_local char buf[160];
    int n = snprintf(buf, sizeof buf, "[");
    for (int d = 0; d < t->ndim; d++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", d ? ", " : "",
                      (long long)t->shape[d]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]");
    return buf;
}

float stk_tensor_item(const stk_tensor *t)
{
    float v = 0.f;
    if (stk_tensor_numel(t) != 1 || t->dtype != STK_F32) return v;
    if (t->storage->device == STK_DEVICE_CPU) return *tensor_f32(t);
    /* a device scalar: waits for the queued work; NaN if it failed */
    return stk_tensor_to_host(t, &v, sizeof v) == STK_OK ? v : NAN;
}

stk_status stk_tensor_to_device(const stk_tensor *t, stk_device dev, stk_tensor **out)
{
    stk_status st = eng_tensor_new(dev, t->dtype, t->ndim, t->shape, false, out);
    if (st != STK_OK) return st;
    if ((st = stk_tensor_copy(*out, t)) != STK_OK) {
        stk_tensor_release(*out);
        *out = NULL;
        return st;
    }
    eng_tensor_track(*out);
    return STK_OK;
}

stk_status stk_tensor_move_to(stk_tensor *t, stk_device dev)
{
    if (t->storage->device == dev) return STK_OK;
    if (t->storage->refs != 1 || t->storage->borrowed || !stk_tensor_is_contiguous(t) ||
        t->offset != 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "move_to %s: only a tensor that owns its contiguous storage can move "
                         "(this %s one is a view or shared)",
                         stk_device_name(dev), stk_tensor_shape_str(t));
    stk_tensor *moved;
    stk_status st = eng_tensor_new(dev, t->dtype, t->ndim, t->shape, false, &moved);
    if (st != STK_OK) return st;
    if ((st = stk_tensor_copy(moved, t)) != STK_OK) {
        stk_tensor_release(moved);
        return st;
    }
    /* swap the storages: t keeps its identity (modules and optimizers hold it) */
    stk_storage *old = t->storage;
    t->storage = moved->storage;
    moved->storage = old;
    stk_tensor_release(moved);
    stk_tensor_zero_grad(t);
    return STK_OK;
}

void stk_tensor_set_requires_grad(stk_tensor *t, bool on) { t->requires_grad = on; }
bool stk_tensor_requires_grad(const stk_tensor *t) { return t->requires_grad; }
stk_tensor *stk_tensor_grad(const stk_tensor *t) { return t->grad; }

void stk_tensor_zero_grad(stk_tensor *t)
{
    stk_tensor_release(t->grad);
    t->grad = NULL;
}

stk_status stk_tensor_ensure_grad(stk_tensor *t)
{
    if (t->grad || !t->requires_grad) return STK_OK;
    stk_tensor *g;
    STK_TRY(eng_tensor_new(t->storage->device, t->dtype, t->ndim, t->shape, true, &g));
    t->grad = g;
    return STK_OK;
}

void stk_tensor_print(const stk_tensor *t, FILE *f)
{
    fprintf(f, "tensor %s %s on %s%s%s", stk_tensor_shape_str(t), stk_dtype_name(t->dtype),
            stk_device_name(t->storage->device), t->requires_grad ? ", requires_grad" : "",
            t->grad_fn ? ", from " : "");
    if (t->grad_fn) fprintf(f, "%s", eng_node_name(t->grad_fn));
    int64_t n = stk_tensor_numel(t);
    if (t->storage->device != STK_DEVICE_CPU || n == 0) {
        fprintf(f, "\n");
        return;
    }
    stk_tensor *f32 = NULL;
    if (to_dtype_raw(t, STK_F32, &f32) != STK_OK) {
        fprintf(f, " (values unavailable: %s)\n", stk_last_error());
        return;
    }
    const float *v = tensor_f32(f32);
    fprintf(f, "\n  [");
    for (int64_t i = 0; i < n && i < 16; i++) fprintf(f, "%s%.6g", i ? ", " : "", v[i]);
    fprintf(f, "%s]\n", n > 16 ? ", ..." : "");
    stk_tensor_release(f32);
}

static stk_status to_dtype_raw(const stk_tensor *t, stk_dtype dt, stk_tensor **out)
{
    stk_status st = eng_tensor_new(t->storage->device, dt, t->ndim, t->shape, false, out);
    if (st != STK_OK) return st;
    if ((st = stk_tensor_copy(*out, t)) != STK_OK) {
        stk_tensor_release(*out);
        *out = NULL;
        return st;
    }
    return STK_OK;
}

stk_status stk_tensor_to_dtype(const stk_tensor *t, stk_dtype dt, stk_tensor **out)
{
    stk_status st = to_dtype_raw(t, dt, out);
    if (st == STK_OK) eng_tensor_track(*out);
    return st;
}
