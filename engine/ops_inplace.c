/* In-place, untracked ops on the training state (ops.h): the gradient
 * clipping of torch.nn.utils (a global L2 norm, a clamp over a list of
 * tensors) and the moving average of the weights (axpby). */
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/ops_impl.h"
#include "kernels/scalar_math.h"

#include <math.h>
#include <stdio.h>

/* The tensors' device and backend (from the first non-NULL one), each
 * checked: f32, contiguous, all on that device. *first NULL: none given. */
static stk_status check_list(const char *op, int n, stk_tensor *const *ts, stk_tensor **first,
                             const stk_backend **be)
{
    *first = NULL;
    for (int i = 0; i < n; i++) {
        stk_tensor *t = ts[i];
        if (!t) continue;
        STK_TRY(eng_check_f32(op, t, "a tensor"));
        if (!stk_tensor_is_contiguous(t))
            return stk_error(STK_ERR_INVALID_ARG, "%s: tensor %d is not contiguous", op, i);
        if (!*first) {
            *first = t;
            STK_TRY(eng_backend_of(t, be));
        } else {
            STK_TRY(eng_check_same_device(op, *first, t));
        }
    }
    return STK_OK;
}

stk_status stk_global_norm(int n, stk_tensor *const *ts, float *norm)
{
    *norm = 0.f;
    stk_tensor *first, *lanes = NULL, *total = NULL;
    const stk_backend *be = NULL;
    STK_TRY(check_list("global_norm", n, ts, &first, &be));
    if (!first) return STK_OK;
    int64_t shape[1] = {STK_NORM_LANES};
    stk_status st = eng_tensor_new(stk_tensor_device(first), STK_F32, 1, shape, true, &lanes);
    for (int i = 0; i < n && st == STK_OK; i++)
        if (ts[i]) be->sum_squares(stk_tensor_numel(ts[i]), tensor_f32(ts[i]), tensor_f32(lanes));
    float sum = 0.f;
    stk_scope *scope = NULL; /* owns the sum, whether or not the caller has a scope */
    if (st == STK_OK) st = stk_scope_begin(&scope);
    if (st == STK_OK) st = stk_sum(lanes, 0, NULL, false, &total);
    if (st == STK_OK) st = stk_tensor_to_host(total, &sum, sizeof sum);
    stk_scope_end(scope);
    stk_tensor_release(lanes);
    if (st == STK_OK) *norm = sqrtf(sum);
    return st;
}

stk_status stk_clamp_inplace(int n, stk_tensor *const *ts, float lo, float hi)
{
    if (!(lo <= hi))
        return stk_error(STK_ERR_INVALID_ARG, "clamp: the range [%g, %g] is empty", (double)lo,
                         (double)hi);
    stk_tensor *first;
    const stk_backend *be = NULL;
    STK_TRY(check_list("clamp", n, ts, &first, &be));
    for (int i = 0; i < n; i++)
        if (ts[i]) be->clamp(stk_tensor_numel(ts[i]), tensor_f32(ts[i]), lo, hi);
    return STK_OK;
}

stk_status stk_clip_grad_norm(int n, stk_tensor *const *grads, float max_norm, float *total_norm)
{
    if (!(max_norm > 0) || !isfinite(max_norm))
        return stk_error(STK_ERR_INVALID_ARG,
                         "clip_grad_norm: max_norm %g is not a positive number", (double)max_norm);
    float norm;
    STK_TRY(stk_global_norm(n, grads, &norm));
    if (total_norm) *total_norm = norm;
    float coef = max_norm / (norm + 1e-6f); /* torch's clip_coef, clamped to 1 */
    /* x 1 changes nothing; a NaN norm leaves them as they are (not NaN, as
     * torch makes them: the optimizer step then fails as diverged either way) */
    if (!(coef < 1.f)) return STK_OK;
    bool finite;
    return stk_scale_check_finite(n, grads, coef, &finite);
}

stk_status stk_clip_grad_value(int n, stk_tensor *const *grads, float clip_value)
{
    if (!(clip_value > 0) || !isfinite(clip_value))
        return stk_error(STK_ERR_INVALID_ARG,
                         "clip_grad_value: clip_value %g is not a positive number",
                         (double)clip_value);
    return stk_clamp_inplace(n, grads, -clip_value, clip_value);
}

stk_status stk_axpby_inplace(float a, const stk_tensor *x, float b, stk_tensor *y)
{
    stk_tensor *both[2] = {(stk_tensor *)x, y}, *first;
    const stk_backend *be = NULL;
    STK_TRY(check_list("axpby", 2, both, &first, &be));
    if (stk_tensor_numel(x) != stk_tensor_numel(y) || stk_tensor_ndim(x) != stk_tensor_ndim(y)) {
        char xs[128]; /* the shape text is one buffer per thread */
        snprintf(xs, sizeof xs, "%s", stk_tensor_shape_str(x));
        return stk_error(STK_ERR_INVALID_ARG, "axpby: shapes %s and %s differ", xs,
                         stk_tensor_shape_str(y));
    }
    be->axpby(stk_tensor_numel(y), a, tensor_f32(x), b, tensor_f32(y));
    return STK_OK;
}
