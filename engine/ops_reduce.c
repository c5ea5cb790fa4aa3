/* sum and mean over dimensions. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <string.h>

/* Gradient: gout (with the reduced dims restored as size 1) broadcast back
 * to the input's shape, times the scale (1 for sum, 1/count for mean). */
static stk_status reduce_backward(stk_node *n, stk_tensor *gout, stk_tensor **gin)
{
    stk_tensor *x = n->inputs[0];
    int64_t keep[STK_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) keep[d] = (n->iv[0] >> d) & 1 ? 1 : x->shape[d];
    stk_tensor *g = NULL, *e = NULL;
    stk_status st = eng_reshape_raw(gout, x->ndim, keep, &g);
    if (st == STK_OK && (st = eng_expand_raw(g, x->ndim, x->shape, &e)) == STK_OK) {
        if ((st = eng_node_grad_like(n, 0, false, &gin[0])) == STK_OK)
            st = stk_tensor_copy(gin[0], e);
        if (st == STK_OK && n->fv[0] != 1.0) {
            const stk_backend *be;
            if ((st = eng_backend_of(x, &be)) == STK_OK)
                be->unary(STK_UNARY_MUL_SCALAR, stk_tensor_numel(x), tensor_f32(gin[0]),
                          tensor_f32(gin[0]), (float)n->fv[0]);
        }
    }
    stk_tensor_release(g);
    stk_tensor_release(e);
    return st;
}

static stk_status reduce_op(const char *name, stk_tensor *x, int ndims, const int *dims,
                            bool keepdim, bool mean, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32(name, x, "the input")) != STK_OK) return st;
    int64_t mask = 0;
    if (ndims == 0) mask = (1 << x->ndim) - 1;
    for (int i = 0; i < ndims; i++) {
        int d = eng_dim_index(dims[i], x->ndim);
        if (d < 0)
            return stk_error(STK_ERR_INVALID_ARG, "%s: dim %d is invalid for %s", name, dims[i],
                             stk_tensor_shape_str(x));
        mask |= (int64_t)1 << d;
    }
    int64_t keep[STK_MAX_DIMS], shape[STK_MAX_DIMS], count = 1;
    int k = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool r = (mask >> d) & 1;
        keep[d] = r ? 1 : x->shape[d];
        if (r) count *= x->shape[d];
        if (!r || keepdim) shape[k++] = keep[d];
    }
    const stk_backend *be;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) return st;
    if ((st = eng_tensor_new(x->storage->device, STK_F32, k, shape, false, &y)) != STK_OK) {
        stk_tensor_release(xc);
        return st;
    }
    int64_t ys[STK_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        ys[d] = keep[d] == 1 ? 0 : s;
        s *= keep[d];
    }
    be->sum_to(x->ndim, x->shape, tensor_f32(xc), ys, tensor_f32(y), stk_tensor_numel(y));
    float scale = mean ? (count ? 1.f / (float)count : 0.f) : 1.f;
    if (mean)
        be->unary(STK_UNARY_MUL_SCALAR, stk_tensor_numel(y), tensor_f32(y), tensor_f32(y), scale);
    stk_tensor_release(xc);
    stk_node *n;
    if ((st = eng_node_attach(y, name, reduce_backward, 1, &x, &n)) != STK_OK) {
        stk_tensor_release(y);
        return st;
    }
    if (n) {
        n->iv[0] = mask;
        n->fv[0] = scale;
    }
    *out = eng_tensor_track(y);
    return STK_OK;
}

stk_status stk_sum(stk_tensor *x, int ndims, const int *dims, bool keepdim, stk_tensor **out)
{
    return reduce_op("sum", x, ndims, dims, keepdim, false, out);
}

stk_status stk_mean(stk_tensor *x, int ndims, const int *dims, bool keepdim, stk_tensor **out)
{
    return reduce_op("mean", x, ndims, dims, keepdim, true, out);
}
