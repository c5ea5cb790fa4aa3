/* Dynamic loss scaling for mixed precision (as torch.cuda.amp.GradScaler):
 * the loss is multiplied by `scale` before backward so that small f16
 * gradients do not flush to zero; after backward the gradients are divided
 * by it, and if any is inf or NaN the optimizer step is skipped and the
 * scale halved, else the optimizer steps and the scale doubles after
 * `growth_interval` good steps in a row. The trainer drives it under
 * --amp; autocast itself is engine/autocast.h.
 *
 *     stk_loss_scaler sc;
 *     stk_loss_scaler_init(&sc);
 *     stk_tensor *scaled;
 *     STK_TRY(stk_loss_scaler_scale(&sc, loss, &scaled));
 *     STK_TRY(stk_backward(scaled, NULL, false));
 *     bool stepped;
 *     STK_TRY(stk_loss_scaler_step(&sc, model, opt, &stepped));
 */
#pragma once

#include "engine/nn.h"
#include "engine/optim.h"
#include "engine/tensor.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_loss_scaler {
    float scale;         /* starts at 65536 */
    int growth_interval; /* 2000 */
    int good_steps;      /* finite steps since the last change */
    int64_t skipped;     /* steps skipped for inf/NaN gradients */
} stk_loss_scaler;

void stk_loss_scaler_init(stk_loss_scaler *s);

/* loss * scale, differentiable (owned by the step scope). */
stk_status stk_loss_scaler_scale(const stk_loss_scaler *s, stk_tensor *loss, stk_tensor **out);

/* Unscale m's gradients; step `opt` unless one is not finite (then the
 * gradients are dropped); update the scale. Reads one flag back from the
 * device (waits for the backward). The same in two halves, for work on the
 * unscaled gradients in between (clipping: PyTorch's scaler.unscale_,
 * clip_grad_norm_, scaler.step): unscale, then update. */
stk_status stk_loss_scaler_step(stk_loss_scaler *s, stk_model *m, stk_optim *opt, bool *stepped);
stk_status stk_loss_scaler_unscale(stk_loss_scaler *s, stk_model *m, bool *finite);
stk_status stk_loss_scaler_update(stk_loss_scaler *s, stk_model *m, stk_optim *opt, bool finite,
                                  bool *stepped);

#ifdef __cplusplus
}
#endif
