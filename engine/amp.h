/* Mixed precision (--amp) on the GPU: autocast and dynamic loss scaling.
 *
 *     stk_amp_scaler sc;
 *     stk_amp_scaler_init(&sc);
 *     stk_amp_begin();                      // matmuls and convolutions in f16
 *     forward -> loss;
 *     stk_tensor *scaled;
 *     stk_amp_scale_loss(&sc, loss, &scaled);
 *     stk_backward(scaled, NULL, false);    // backward ops keep the forward's precision
 *     stk_amp_end();
 *     bool stepped;
 *     stk_amp_step(&sc, model, opt, &stepped);  // unscale, skip on inf/NaN, adapt the scale
 *
 * Autocast: inside begin/end, matmul/linear and conv2d on a backend with f16
 * kernels (CUDA) convert their operands to f16 and compute with f32
 * accumulation (tensor cores); their results, and every tensor the engine
 * keeps (weights, activations, gradients, optimizer state), stay f32: the
 * master weights are f32. Other ops and the CPU backend are unaffected.
 *
 * Loss scaling (as torch.cuda.amp.GradScaler): the loss is multiplied by
 * `scale` before backward so small f16 gradients do not flush to zero;
 * stk_amp_step divides the gradients by it, and if any is inf or NaN skips
 * the optimizer step and halves the scale, else steps and doubles the scale
 * after `growth_interval` good steps in a row.
 */
#pragma once

#include "engine/nn.h"
#include "engine/optim.h"
#include "engine/tensor.h"

#include <stdbool.h>

void stk_amp_begin(void);
void stk_amp_end(void);
/* Inside begin/end on this thread. */
bool stk_amp_active(void);

typedef struct stk_amp_scaler {
    float scale;         /* starts at 65536 */
    int growth_interval; /* 2000 */
    int good_steps;      /* finite steps since the last change */
    int64_t skipped;     /* steps skipped for inf/NaN gradients */
} stk_amp_scaler;

void stk_amp_scaler_init(stk_amp_scaler *s);

/* loss * scale, differentiable. */
stk_status stk_amp_scale_loss(const stk_amp_scaler *s, stk_tensor *loss, stk_tensor **out);

/* Unscale m's gradients; step `opt` unless one is not finite (then the
 * gradients are dropped); update the scale. Reads one flag back from the
 * device (waits for the backward). */
stk_status stk_amp_step(stk_amp_scaler *s, stk_model *m, stk_optim *opt, bool *stepped);
