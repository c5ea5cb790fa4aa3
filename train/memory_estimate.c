/* A training run's memory, measured on batches of 1 and 2 (memory_estimate.h). */
#include "train/memory_estimate.h"

#include "engine/autograd.h"
#include "engine/ops.h"

#include <stdlib.h>

/* The allocator's peak over a forward and backward of `batch` random images
 * above what was allocated before, in bytes. */
static stk_status peak_of_step(stk_model *m, stk_device dev, int channels, int size, int batch,
                               uint64_t *out)
{
    stk_mem_stats before, after;
    stk_device_mem_stats(dev, &before);
    stk_device_reset_peak(dev);
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    int64_t shape[4] = {batch, channels, size, size}, n = batch;
    stk_tensor *x, *y, *logits, *loss;
    stk_status st = stk_tensor_zeros_on(dev, STK_F32, 4, shape, &x);
    if (st == STK_OK) st = stk_tensor_zeros_on(dev, STK_I32, 1, &n, &y);
    if (st == STK_OK) st = stk_model_forward(m, x, &logits);
    if (st == STK_OK) st = stk_cross_entropy(logits, y, 0.f, &loss);
    if (st == STK_OK) st = stk_backward(loss, NULL, false);
    stk_scope_end(s);
    for (int i = 0; i < stk_model_param_count(m); i++)
        stk_tensor_zero_grad(stk_model_param(m, i)->value);
    stk_device_mem_stats(dev, &after);
    *out = after.peak_allocated > before.allocated ? after.peak_allocated - before.allocated : 0;
    return st;
}

stk_status stk_estimate_training_memory(stk_model *m, const stk_optim_config *oc, int channels,
                                        int size, stk_memory_estimate *out)
{
    *out = (stk_memory_estimate){0};
    stk_device dev = stk_tensor_device(stk_model_param(m, 0)->value);
    bool training = stk_model_is_training(m);
    stk_model_train(m, false); /* batch norm's running statistics stay as they are */
    uint64_t p1 = 0, p2 = 0;
    stk_status st = peak_of_step(m, dev, channels, size, 1, &p1);
    if (st == STK_OK) st = peak_of_step(m, dev, channels, size, 2, &p2);
    stk_model_train(m, training);
    STK_TRY(st);
    stk_mem_stats now;
    stk_device_mem_stats(dev, &now);
    uint64_t per = p2 > p1 ? p2 - p1 : 0, weights = 0;
    for (int i = 0; i < stk_model_param_count(m); i++) {
        const stk_param *p = stk_model_param(m, i);
        if (!p->is_buffer && stk_tensor_requires_grad(p->value))
            weights += (uint64_t)stk_tensor_numel(p->value) * 4;
    }
    int copies = oc->kind == STK_OPTIM_SGD ? (oc->momentum > 0 ? 1 : 0) : 2; /* momentum; m, v */
    out->per_image = per;
    out->fixed = now.allocated + (p1 > per ? p1 - per : 0) + (uint64_t)copies * weights;
    return STK_OK;
}

uint64_t stk_memory_estimate_at(const stk_memory_estimate *e, int64_t batch)
{
    return e->fixed + (uint64_t)batch * e->per_image;
}

int64_t stk_memory_estimate_batch(const stk_memory_estimate *e, uint64_t bytes)
{
    if (bytes <= e->fixed || !e->per_image) return bytes > e->fixed ? INT64_MAX : 0;
    return (int64_t)((bytes - e->fixed) / e->per_image);
}
