/* Autocast scope and dynamic loss scaling (amp.h). */
#include "engine/amp.h"

#include "engine/ops.h"
#include "engine/ops_impl.h"

static _Thread_local int amp_depth;

void stk_amp_begin(void) { amp_depth++; }

void stk_amp_end(void)
{
    if (amp_depth > 0) amp_depth--;
}

bool stk_amp_active(void) { return amp_depth > 0; }

bool amp_f16(const stk_backend *be) { return amp_depth > 0 && be->gemm_batched_f16; }

stk_status amp_half_copy(const stk_backend *be, const stk_tensor *t, stk_tensor **out)
{
    stk_status st = tensor_new(stk_tensor_device(t), STK_F16, t->ndim, t->shape, false, out);
    if (st == STK_OK)
        be->convert(STK_F16, tensor_ptr(*out), STK_F32, tensor_ptr(t), stk_tensor_numel(t));
    return st;
}

void stk_amp_scaler_init(stk_amp_scaler *s)
{
    *s = (stk_amp_scaler){.scale = 65536.f, .growth_interval = 2000};
}

stk_status stk_amp_scale_loss(const stk_amp_scaler *s, stk_tensor *loss, stk_tensor **out)
{
    return stk_mul_scalar(loss, s->scale, out);
}

stk_status stk_amp_step(stk_amp_scaler *s, stk_model *m, stk_optim *opt, bool *stepped)
{
    *stepped = false;
    int np = stk_model_param_count(m);
    stk_tensor *flag = NULL;
    const stk_backend *be = NULL;
    stk_status st = STK_OK;
    float inv = 1.f / s->scale;
    for (int i = 0; i < np && st == STK_OK; i++) {
        stk_tensor *p = stk_model_param(m, i)->value, *g = stk_tensor_grad(p);
        if (!g) continue;
        if (!flag) {
            if ((st = backend_of(g, &be)) != STK_OK ||
                (st = tensor_new(stk_tensor_device(g), STK_I32, 0, NULL, true, &flag)) != STK_OK)
                break;
        }
        be->amp_unscale(stk_tensor_numel(g), tensor_f32(g), inv, (int32_t *)tensor_ptr(flag));
    }
    int32_t found = 0;
    if (st == STK_OK && flag) st = stk_tensor_to_host(flag, &found, sizeof found);
    stk_tensor_release(flag);
    if (st != STK_OK) return st;
    if (found) { /* overflow: drop this step's gradients, lower the scale */
        for (int i = 0; i < np; i++) stk_tensor_zero_grad(stk_model_param(m, i)->value);
        s->scale *= 0.5f;
        s->good_steps = 0;
        s->skipped++;
        return STK_OK;
    }
    if ((st = stk_optim_step(opt)) != STK_OK) return st;
    *stepped = true;
    if (++s->good_steps >= s->growth_interval) {
        s->scale *= 2.f;
        s->good_steps = 0;
    }
    return STK_OK;
}
