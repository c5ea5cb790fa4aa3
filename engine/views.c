/* Views (share storage) and copies, with their backward functions. */
#include "engine/autograd.h"
#include "engine/autograd_impl.h"
#include "engine/ops_impl.h"

#include <string.h>

/* PyTorch's rule (computeStride in ATen): a view exists when every run of
 * old dimensions that the new shape merges or splits is laid out
 * contiguously. Returns false when it does not. */
static bool view_strides(const stk_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    if (stk_tensor_numel(t) == 0 || t->ndim == 0) {
        int64_t s = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            strides[d] = s;
            s *= shape[d] ? shape[d] : 1;
        }
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = t->strides[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tensor_numel *= t->shape[td];
        if (td == 0 || (t->shape[td - 1] != 1 && t->strides[td - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (td > 0) {
                chunk_base = t->strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* Resolve one -1 and check the element count. */
static stk_status infer_shape(const char *op, const stk_tensor *t, int ndim, const int64_t *in,
                              int64_t *shape)
{
    if (ndim < 0 || ndim > STK_MAX_DIMS)
        return stk_error(STK_ERR_INVALID_ARG, "%s: rank %d is outside 0..%d", op, ndim,
                         STK_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = in[d];
        if (in[d] == -1) {
            if (infer >= 0)
                return stk_error(STK_ERR_INVALID_ARG, "%s: only one size may be -1", op);
            infer = d;
        } else if (in[d] < 0) {
            return stk_error(STK_ERR_INVALID_ARG, "%s: size %lld is negative", op,
                             (long long)in[d]);
        } else if (__builtin_mul_overflow(known, in[d], &known)) {
            return stk_error(STK_ERR_INVALID_ARG, "%s: a shape of more than 2^63 elements", op);
        }
    }
    int64_t numel = stk_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s: cannot infer the -1 size of %s for %lld elements", op,
                             stk_tensor_shape_str(t), (long long)numel);
        shape[infer] = numel / known;
        known *= shape[infer];
    }
    if (known != numel)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: shape with %lld elements is invalid for %s (%lld elements)", op,
                         (long long)known, stk_tensor_shape_str(t), (long long)numel);
    return STK_OK;
}

/* Gradient of any reshaping view: gout reshaped to the input's shape. */
static stk_status reshape_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    return eng_reshape_raw(gout, n->inputs[0]->ndim, n->inputs[0]->shape, &gin[0]);
}

stk_status eng_reshape_raw(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out)
{
    int64_t strides[STK_MAX_DIMS];
    if (view_strides(t, ndim, shape, strides))
        return eng_tensor_alias(t, ndim, shape, strides, t->offset, out);
    stk_tensor *c;
    stk_status st = eng_tensor_contiguous_raw(t, &c);
    if (st != STK_OK) return st;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
    st = eng_tensor_alias(c, ndim, shape, strides, c->offset, out);
    stk_tensor_release(c);
    return st;
}

/* Finish a view op: attach its node and hand the result to the scope. */
static stk_status finish(stk_tensor *in, stk_tensor *v, const char *name, stk_backward_fn fn,
                         stk_node **node, stk_tensor **out)
{
    stk_node *n;
    stk_status st = eng_node_attach(v, name, fn, 1, &in, &n);
    if (st != STK_OK) {
        stk_tensor_release(v);
        return st;
    }
    if (node) *node = n;
    *out = eng_tensor_track(v);
    return STK_OK;
}

stk_status stk_view(stk_tensor *t, int ndim, const int64_t *shape_in, stk_tensor **out)
{
    int64_t shape[STK_MAX_DIMS], strides[STK_MAX_DIMS];
    stk_status st = infer_shape("view", t, ndim, shape_in, shape);
    if (st != STK_OK) return st;
    if (!view_strides(t, ndim, shape, strides))
        return stk_error(STK_ERR_INVALID_ARG,
                         "view: the strides of %s cannot express the new shape (the tensor is "
                         "not contiguous there); use reshape, which copies",
                         stk_tensor_shape_str(t));
    stk_tensor *v;
    if ((st = eng_tensor_alias(t, ndim, shape, strides, t->offset, &v)) != STK_OK) return st;
    return finish(t, v, "view", reshape_backward, NULL, out);
}

stk_status stk_reshape(stk_tensor *t, int ndim, const int64_t *shape_in, stk_tensor **out)
{
    int64_t shape[STK_MAX_DIMS];
    stk_status st = infer_shape("reshape", t, ndim, shape_in, shape);
    if (st != STK_OK) return st;
    stk_tensor *v;
    if ((st = eng_reshape_raw(t, ndim, shape, &v)) != STK_OK) return st;
    return finish(t, v, "reshape", reshape_backward, NULL, out);
}

stk_status stk_flatten(stk_tensor *t, int start, int end, stk_tensor **out)
{
    int nd = t->ndim ? t->ndim : 1;
    int s = eng_dim_index(start, nd), e = eng_dim_index(end, nd);
    if (s < 0 || e < 0 || s > e)
        return stk_error(STK_ERR_INVALID_ARG, "flatten: dims %d..%d are invalid for %s", start, end,
                         stk_tensor_shape_str(t));
    if (t->ndim == 0) {
        int64_t one = 1;
        return stk_reshape(t, 1, &one, out);
    }
    int64_t shape[STK_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < s; d++) shape[k++] = t->shape[d];
    int64_t m = 1;
    for (int d = s; d <= e; d++) m *= t->shape[d];
    shape[k++] = m;
    for (int d = e + 1; d < t->ndim; d++) shape[k++] = t->shape[d];
    return stk_reshape(t, k, shape, out);
}

static stk_status permute_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    int inv[STK_MAX_DIMS];
    for (int d = 0; d < gout->ndim; d++) inv[n->iv[d]] = d;
    return eng_permute_raw(gout, inv, &gin[0]);
}

stk_status eng_permute_raw(stk_tensor *t, const int *dims, stk_tensor **out)
{
    int64_t shape[STK_MAX_DIMS], strides[STK_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->shape[dims[d]];
        strides[d] = t->strides[dims[d]];
    }
    return eng_tensor_alias(t, t->ndim, shape, strides, t->offset, out);
}

stk_status stk_permute(stk_tensor *t, const int *dims_in, stk_tensor **out)
{
    int dims[STK_MAX_DIMS];
    bool seen[STK_MAX_DIMS] = {false};
    for (int d = 0; d < t->ndim; d++) {
        int k = eng_dim_index(dims_in[d], t->ndim);
        if (k < 0 || seen[k])
            return stk_error(STK_ERR_INVALID_ARG, "permute: dims are not a permutation of 0..%d",
                             t->ndim - 1);
        seen[k] = true;
        dims[d] = k;
    }
    stk_tensor *v;
    stk_status st = eng_permute_raw(t, dims, &v);
    if (st != STK_OK) return st;
    stk_node *n = NULL;
    if ((st = finish(t, v, "permute", permute_backward, &n, out)) != STK_OK) return st;
    if (n)
        for (int d = 0; d < t->ndim; d++) n->iv[d] = dims[d];
    return STK_OK;
}

stk_status stk_transpose(stk_tensor *t, int d0, int d1, stk_tensor **out)
{
    int a = eng_dim_index(d0, t->ndim), b = eng_dim_index(d1, t->ndim);
    if (a < 0 || b < 0)
        return stk_error(STK_ERR_INVALID_ARG, "transpose: dims %d, %d are invalid for %s", d0, d1,
                         stk_tensor_shape_str(t));
    int dims[STK_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) dims[d] = d;
    dims[a] = b;
    dims[b] = a;
    return stk_permute(t, dims, out);
}

stk_status stk_squeeze(stk_tensor *t, int dim, stk_tensor **out)
{
    int d = eng_dim_index(dim, t->ndim);
    if (d < 0)
        return stk_error(STK_ERR_INVALID_ARG, "squeeze: dim %d is invalid for %s", dim,
                         stk_tensor_shape_str(t));
    int64_t shape[STK_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d || t->shape[i] != 1) shape[k++] = t->shape[i];
    return stk_view(t, k, shape, out);
}

stk_status stk_unsqueeze(stk_tensor *t, int dim, stk_tensor **out)
{
    int d = eng_dim_index(dim, t->ndim + 1);
    if (d < 0 || t->ndim >= STK_MAX_DIMS)
        return stk_error(STK_ERR_INVALID_ARG, "unsqueeze: dim %d is invalid for %s", dim,
                         stk_tensor_shape_str(t));
    int64_t shape[STK_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= t->ndim; i++) {
        if (i == d) shape[k++] = 1;
        if (i < t->ndim) shape[k++] = t->shape[i];
    }
    return stk_view(t, k, shape, out);
}

static stk_status narrow_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    stk_status st = eng_node_grad_like(n, 0, true, &gin[0]);
    if (st != STK_OK) return st;
    stk_tensor *slice;
    int d = (int)n->iv[0];
    if ((st = eng_narrow_raw(gin[0], d, n->iv[1], n->iv[2], &slice)) != STK_OK) return st;
    st = stk_tensor_copy(slice, gout);
    stk_tensor_release(slice);
    return st;
}

stk_status eng_narrow_raw(stk_tensor *t, int d, int64_t start, int64_t length, stk_tensor **out)
{
    int64_t shape[STK_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[d] = length;
    return eng_tensor_alias(t, t->ndim, shape, t->strides, t->offset + start * t->strides[d], out);
}

stk_status stk_narrow(stk_tensor *t, int dim, int64_t start, int64_t length, stk_tensor **out)
{
    int d = eng_dim_index(dim, t->ndim);
    if (d < 0)
        return stk_error(STK_ERR_INVALID_ARG, "narrow: dim %d is invalid for %s", dim,
                         stk_tensor_shape_str(t));
    if (start < 0) start += t->shape[d];
    if (start < 0 || length < 0 || start + length > t->shape[d])
        return stk_error(STK_ERR_INVALID_ARG, "narrow: [%lld, %lld) is outside dim %d of %s",
                         (long long)start, (long long)(start + length), d, stk_tensor_shape_str(t));
    stk_tensor *v;
    stk_status st = eng_narrow_raw(t, d, start, length, &v);
    if (st != STK_OK) return st;
    stk_node *n = NULL;
    if ((st = finish(t, v, "narrow", narrow_backward, &n, out)) != STK_OK) return st;
    if (n) {
        n->iv[0] = d;
        n->iv[1] = start;
        n->iv[2] = length;
    }
    return STK_OK;
}

static stk_status expand_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    return eng_sum_to_like(gout, n->inputs[0], &gin[0]);
}

stk_status eng_expand_raw(stk_tensor *t, int ndim, const int64_t *shape, stk_tensor **out)
{
    int64_t strides[STK_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int td = d - lead;
        if (td < 0)
            strides[d] = 0;
        else if (t->shape[td] == shape[d])
            strides[d] = t->strides[td];
        else
            strides[d] = 0; /* size 1 stretched */
    }
    return eng_tensor_alias(t, ndim, shape, strides, t->offset, out);
}

stk_status stk_expand(stk_tensor *t, int ndim, const int64_t *shape_in, stk_tensor **out)
{
    if (ndim < t->ndim || ndim > STK_MAX_DIMS)
        return stk_error(STK_ERR_INVALID_ARG, "expand: rank %d is smaller than %s's", ndim,
                         stk_tensor_shape_str(t));
    int64_t shape[STK_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int td = d - lead;
        int64_t want = shape_in[d];
        if (want == -1) {
            if (td < 0)
                return stk_error(STK_ERR_INVALID_ARG, "expand: -1 is not allowed for a new dim");
            want = t->shape[td];
        }
        if (td >= 0 && t->shape[td] != want && t->shape[td] != 1)
            return stk_error(STK_ERR_INVALID_ARG,
                             "expand: size %lld of %s cannot be expanded to %lld in dim %d",
                             (long long)t->shape[td], stk_tensor_shape_str(t), (long long)want, d);
        shape[d] = want;
    }
    stk_tensor *v;
    stk_status st = eng_expand_raw(t, ndim, shape, &v);
    if (st != STK_OK) return st;
    return finish(t, v, "expand", expand_backward, NULL, out);
}

static stk_status identity_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    (void)n;
    stk_tensor_retain(gout);
    gin[0] = gout;
    return STK_OK;
}

stk_status stk_contiguous(stk_tensor *t, stk_tensor **out)
{
    if (stk_tensor_is_contiguous(t)) {
        /* t itself: inside a scope the scope takes a reference of its own. */
        stk_tensor_retain(t);
        *out = eng_tensor_track(t);
        return STK_OK;
    }
    return stk_clone(t, out);
}

stk_status stk_clone(stk_tensor *t, stk_tensor **out)
{
    stk_tensor *c;
    stk_status st = eng_tensor_new_like(t, false, &c);
    if (st != STK_OK) return st;
    if ((st = stk_tensor_copy(c, t)) != STK_OK) {
        stk_tensor_release(c);
        return st;
    }
    return finish(t, c, "clone", identity_backward, NULL, out);
}

stk_status stk_detach(stk_tensor *t, stk_tensor **out)
{
    stk_tensor *v;
    stk_status st = eng_tensor_alias(t, t->ndim, t->shape, t->strides, t->offset, &v);
    if (st != STK_OK) return st;
    *out = eng_tensor_track(v);
    return STK_OK;
}
