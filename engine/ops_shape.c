/* cat and the input op. */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"

#include <string.h>

static stk_status cat_backward(stk_node *n, stk_tensor *g, stk_tensor **gin)
{
    int d = (int)n->iv[0];
    int64_t start = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        int64_t len = n->inputs[i]->shape[d];
        if (eng_node_needs_grad(n, i)) {
            stk_tensor *slice;
            stk_status st = eng_narrow_raw(g, d, start, len, &slice);
            if (st != STK_OK) return st;
            st = eng_tensor_contiguous_raw(slice, &gin[i]);
            stk_tensor_release(slice);
            if (st != STK_OK) return st;
        }
        start += len;
    }
    return STK_OK;
}

stk_status stk_cat(int n, stk_tensor *const *xs, int dim, stk_tensor **out)
{
    if (n < 1) return stk_error(STK_ERR_INVALID_ARG, "cat: no tensors");
    stk_tensor *x0 = xs[0];
    int d = eng_dim_index(dim, x0->ndim);
    if (d < 0)
        return stk_error(STK_ERR_INVALID_ARG, "cat: dim %d is invalid for %s", dim,
                         stk_tensor_shape_str(x0));
    int64_t shape[STK_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[d] = 0;
    stk_status st;
    for (int i = 0; i < n; i++) {
        stk_tensor *x = xs[i];
        if ((st = eng_check_f32("cat", x, "every input")) != STK_OK) return st;
        if ((st = eng_check_same_device("cat", x0, x)) != STK_OK) return st;
        bool ok = x->ndim == x0->ndim;
        for (int k = 0; ok && k < x->ndim; k++)
            if (k != d && x->shape[k] != x0->shape[k]) ok = false;
        if (!ok) {
            char s[128];
            snprintf(s, sizeof s, "%s", stk_tensor_shape_str(x0));
            return stk_error(STK_ERR_INVALID_ARG,
                             "cat: input %d %s does not match input 0 %s outside dim %d", i,
                             stk_tensor_shape_str(x), s, d);
        }
        shape[d] += x->shape[d];
    }
    stk_tensor *y;
    if ((st = eng_tensor_new(x0->storage->device, STK_F32, x0->ndim, shape, false, &y)) != STK_OK)
        return st;
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        stk_tensor *slice;
        if ((st = eng_narrow_raw(y, d, start, xs[i]->shape[d], &slice)) != STK_OK) goto fail;
        st = stk_tensor_copy(slice, xs[i]);
        stk_tensor_release(slice);
        if (st != STK_OK) goto fail;
        start += xs[i]->shape[d];
    }
    stk_node *node;
    if ((st = eng_node_attach(y, "cat", cat_backward, n, xs, &node)) != STK_OK) goto fail;
    if (node) node->iv[0] = d;
    *out = eng_tensor_track(y);
    return STK_OK;
fail:
    stk_tensor_release(y);
    return st;
}

stk_status stk_input_u8_nhwc(stk_tensor *x, const float *mean, const float *std, stk_tensor **out)
{
    if (x->dtype != STK_U8 || x->ndim != 4 || x->shape[3] < 1 || x->shape[3] > 16)
        return stk_error(STK_ERR_INVALID_ARG,
                         "input: pixels %s %s must be u8 [N, H, W, C] with 1..16 channels",
                         stk_tensor_shape_str(x), stk_dtype_name(x->dtype));
    for (int64_t c = 0; c < x->shape[3]; c++)
        if (!(std[c] > 0.f))
            return stk_error(STK_ERR_INVALID_ARG, "input: std of channel %lld is %g (must be > 0)",
                             (long long)c, (double)std[c]);
    const stk_backend *be;
    stk_status st = eng_backend_of(x, &be);
    if (st != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) return st;
    int64_t shape[4] = {x->shape[0], x->shape[3], x->shape[1], x->shape[2]};
    if ((st = eng_tensor_new(x->storage->device, STK_F32, 4, shape, false, &y)) == STK_OK) {
        be->input_u8_nhwc(x->shape[0], x->shape[1], x->shape[2], x->shape[3],
                          (const uint8_t *)tensor_ptr(xc), mean, std, tensor_f32(y));
        *out = eng_tensor_track(y);
    }
    stk_tensor_release(xc);
    return st;
}

stk_status stk_batch_regions(stk_tensor *x, const stk_batch_region *regions, stk_tensor **out)
{
    stk_status st;
    if ((st = eng_check_f32("batch_regions", x, "the batch")) != STK_OK) return st;
    if (x->ndim != 4)
        return stk_error(STK_ERR_INVALID_ARG, "batch_regions: the batch %s must be [N, C, H, W]",
                         stk_tensor_shape_str(x));
    int64_t n = x->shape[0], h = x->shape[2], w = x->shape[3];
    for (int64_t i = 0; i < n; i++) {
        const stk_batch_region *r = &regions[i];
        if (r->partner < 0 || r->partner >= n || r->y0 < 0 || r->x0 < 0 || r->y1 > h || r->x1 > w)
            return stk_error(STK_ERR_INVALID_ARG,
                             "batch_regions: sample %lld's region [%d, %d) x [%d, %d) (partner "
                             "%d) leaves the %lldx%lld batch of %lld",
                             (long long)i, r->y0, r->y1, r->x0, r->x1, r->partner, (long long)h,
                             (long long)w, (long long)n);
    }
    const stk_backend *be;
    if ((st = eng_backend_of(x, &be)) != STK_OK) return st;
    stk_tensor *xc = NULL, *y = NULL;
    if ((st = eng_tensor_contiguous_raw(x, &xc)) != STK_OK) return st;
    if ((st = eng_tensor_new_like(x, false, &y)) == STK_OK &&
        (st = be->batch_regions(n, x->shape[1], h, w, tensor_f32(xc), regions, tensor_f32(y))) ==
            STK_OK)
        *out = eng_tensor_track(y);
    else
        stk_tensor_release(y);
    stk_tensor_release(xc);
    return st;
}
