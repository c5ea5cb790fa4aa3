/* Dynamic loss scaling (loss_scaler.h). */
#include "train/loss_scaler.h"

#include "engine/ops.h"

#include <stdlib.h>

void stk_loss_scaler_init(stk_loss_scaler *s)
{
    *s = (stk_loss_scaler){.scale = 65536.f, .growth_interval = 2000};
}

stk_status stk_loss_scaler_scale(const stk_loss_scaler *s, stk_tensor *loss, stk_tensor **out)
{
    return stk_mul_scalar(loss, s->scale, out);
}

stk_status stk_loss_scaler_unscale(stk_loss_scaler *s, stk_model *m, bool *finite)
{
    *finite = false;
    int np = stk_model_param_count(m);
    /* once per step: no heap allocation for models up to 256 tensors (resnet18: 122) */
    stk_tensor *small[256] = {0}, **grads = small;
    if (np > 256 && !(grads = calloc((size_t)np, sizeof *grads)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < np; i++) grads[i] = stk_tensor_grad(stk_model_param(m, i)->value);
    stk_status st = stk_scale_check_finite(np, grads, 1.f / s->scale, finite);
    if (grads != small) free(grads);
    return st;
}

stk_status stk_loss_scaler_update(stk_loss_scaler *s, stk_model *m, stk_optim *opt, bool finite,
                                  bool *stepped)
{
    *stepped = false;
    if (!finite) { /* overflow: drop this step's gradients, lower the scale */
        for (int i = 0; i < stk_model_param_count(m); i++)
            stk_tensor_zero_grad(stk_model_param(m, i)->value);
        s->scale *= 0.5f;
        s->good_steps = 0;
        s->skipped++;
        return STK_OK;
    }
    STK_TRY(stk_optim_step(opt));
    *stepped = true;
    if (++s->good_steps >= s->growth_interval) {
        s->scale *= 2.f;
        s->good_steps = 0;
    }
    return STK_OK;
}

stk_status stk_loss_scaler_step(stk_loss_scaler *s, stk_model *m, stk_optim *opt, bool *stepped)
{
    *stepped = false;
    bool finite;
    STK_TRY(stk_loss_scaler_unscale(s, m, &finite));
    return stk_loss_scaler_update(s, m, opt, finite, stepped);
}
