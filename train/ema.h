/* An exponential moving average of the weights, as timm's ModelEmaV2 keeps
 * it: after each optimizer step every parameter's average becomes
 *     ema = decay * ema + (1 - decay) * param
 * and each buffer (batch norm's running statistics, its counter) is copied
 * (timm's exclude_buffers). With warm-up (ModelEmaV3's use_warmup,
 * warmup_gamma 1, warmup_power 2/3) the k-th update (from 1) uses
 *     decay_k = min(decay, 1 - k^(-2/3)),  0 at k = 1 (a copy),
 * so early averages do not drag on the random initialisation. The average
 * starts as a copy of the weights. The trainer keeps one (--ema DECAY) and
 * evaluates it beside the raw weights; checkpoints hold it as "ema." tensors.
 *
 *     stk_ema *e;
 *     STK_TRY(stk_ema_create(n, values, is_buffer, 0.999f, false, &e));
 *     ... each optimizer step ... STK_TRY(stk_ema_update(e, values));
 *     STK_TRY(stk_ema_swap(e, values));   // the average into the model (and back)
 */
#pragma once

#include "engine/tensor.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_ema stk_ema;

/* An average of the n tensors values[i] (is_buffer[i]: copied, not
 * averaged), on their devices. Errors: INVALID_ARG (decay not in (0, 1)),
 * NOMEM. */
stk_status stk_ema_create(int n, stk_tensor *const *values, const bool *is_buffer, float decay,
                          bool warmup, stk_ema **out);
void stk_ema_destroy(stk_ema *e);

/* The decay of update k (counted from 1). */
float stk_ema_decay_at(const stk_ema *e, int64_t k);
/* One update from the current values (after an optimizer step). */
stk_status stk_ema_update(stk_ema *e, stk_tensor *const *values);
/* Exchange the average with the values (twice: back as they were). */
stk_status stk_ema_swap(stk_ema *e, stk_tensor *const *values);

/* The average's tensors (n, in the values' order), for checkpoints; updates
 * so far (set it when the tensors are read back from a checkpoint). */
stk_tensor *const *stk_ema_tensors(const stk_ema *e);
int64_t stk_ema_updates(const stk_ema *e);
void stk_ema_set_updates(stk_ema *e, int64_t updates);
float stk_ema_decay(const stk_ema *e);
bool stk_ema_warmup(const stk_ema *e);

#ifdef __cplusplus
}
#endif
