/* The moving average of the weights (ema.h). */
#include "train/ema.h"

#include "engine/autograd.h"
#include "engine/ops.h"

#include <math.h>
#include <stdlib.h>

struct stk_ema {
    int n;
    stk_tensor **avg;
    bool *is_buffer;
    float decay;
    bool warmup;
    int64_t updates;
};

/* A tensor like t (shape, dtype, device) holding t's values, owned by the
 * caller even inside a step scope (made in a scope of its own, retained). */
static stk_status copy_of(stk_tensor *t, stk_tensor **out)
{
    int64_t shape[STK_MAX_DIMS];
    int nd = stk_tensor_ndim(t);
    for (int d = 0; d < nd; d++) shape[d] = stk_tensor_dim(t, d);
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_status st = stk_tensor_zeros_on(stk_tensor_device(t), stk_tensor_dtype(t), nd, shape, out);
    if (st == STK_OK) st = stk_tensor_copy(*out, t);
    if (st == STK_OK) stk_tensor_retain(*out);
    stk_scope_end(s);
    if (st != STK_OK) *out = NULL;
    return st;
}

stk_status stk_ema_create(int n, stk_tensor *const *values, const bool *is_buffer, float decay,
                          bool warmup, stk_ema **out)
{
    *out = NULL;
    if (!(decay > 0.f && decay < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "EMA: decay %g is not in (0, 1)", (double)decay);
    stk_ema *e = calloc(1, sizeof *e);
    if (!e || !(e->avg = calloc((size_t)(n ? n : 1), sizeof *e->avg)) ||
        !(e->is_buffer = calloc((size_t)(n ? n : 1), sizeof *e->is_buffer))) {
        stk_ema_destroy(e);
        return stk_error(STK_ERR_NOMEM, "no memory for a moving average of %d tensors", n);
    }
    e->n = n, e->decay = decay, e->warmup = warmup;
    for (int i = 0; i < n; i++) {
        e->is_buffer[i] = is_buffer[i];
        stk_status st = copy_of(values[i], &e->avg[i]);
        if (st != STK_OK) {
            stk_ema_destroy(e);
            return st;
        }
    }
    *out = e;
    return STK_OK;
}

void stk_ema_destroy(stk_ema *e)
{
    if (!e) return;
    for (int i = 0; e->avg && i < e->n; i++) stk_tensor_release(e->avg[i]);
    free(e->avg);
    free(e->is_buffer);
    free(e);
}

float stk_ema_decay_at(const stk_ema *e, int64_t k)
{
    if (!e->warmup) return e->decay;
    int64_t t = k - 1; /* ModelEmaV3: step - update_after_step - 1, then 0 -> a copy */
    if (t <= 0) return 0.f;
    double d = 1.0 - pow(1.0 + (double)t, -2.0 / 3.0);
    return d < e->decay ? (float)d : e->decay;
}

stk_status stk_ema_update(stk_ema *e, stk_tensor *const *values)
{
    float d = stk_ema_decay_at(e, e->updates + 1);
    for (int i = 0; i < e->n; i++)
        if (e->is_buffer[i] || stk_tensor_dtype(values[i]) != STK_F32)
            STK_TRY(stk_tensor_copy(e->avg[i], values[i]));
        else
            STK_TRY(stk_axpby_inplace(1.f - d, values[i], d, e->avg[i]));
    e->updates++;
    return STK_OK;
}

stk_status stk_ema_swap(stk_ema *e, stk_tensor *const *values)
{
    for (int i = 0; i < e->n; i++) {
        stk_tensor *held;
        STK_TRY(copy_of(values[i], &held));
        stk_status st = stk_tensor_copy(values[i], e->avg[i]);
        if (st == STK_OK) st = stk_tensor_copy(e->avg[i], held);
        stk_tensor_release(held);
        STK_TRY(st);
    }
    return STK_OK;
}

stk_tensor *const *stk_ema_tensors(const stk_ema *e) { return e->avg; }
int64_t stk_ema_updates(const stk_ema *e) { return e->updates; }
void stk_ema_set_updates(stk_ema *e, int64_t updates) { e->updates = updates; }
float stk_ema_decay(const stk_ema *e) { return e->decay; }
bool stk_ema_warmup(const stk_ema *e) { return e->warmup; }
