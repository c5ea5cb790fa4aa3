/* How much memory a training run will need, found before it starts by
 * measuring rather than by a formula: a forward and backward at batches of
 * 1 and 2, at the run's image size, on the model itself (in eval mode, so
 * batch norm's statistics do not move; the gradients dropped afterwards),
 * give the caching allocator's peak as fixed + batch x per image. Add the
 * optimizer's state (one or two copies of the trainable weights) and the
 * loader's ring, and compare with what the machine or its memory cgroup
 * allows (common/memory_budget.h). `stoke train` warns before the first
 * step when a run would not fit, with a batch that would.
 *
 *     stk_memory_estimate e;
 *     STK_TRY(stk_estimate_training_memory(model, &oc, channels, size, &e));
 *     uint64_t need = stk_memory_estimate_at(&e, batch) + ring_bytes;
 */
#pragma once

#include "engine/nn.h"
#include "engine/optim.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_memory_estimate {
    uint64_t fixed;     /* bytes whatever the batch: weights, gradients, optimizer state */
    uint64_t per_image; /* bytes per image of the batch: activations and their gradients */
} stk_memory_estimate;

/* The model must be on its device; it is left as it was (mode, weights,
 * buffers, no gradients). Errors: the engine's (a model too large for even
 * a batch of 2: NOMEM). */
stk_status stk_estimate_training_memory(stk_model *m, const stk_optim_config *oc, int channels,
                                        int size, stk_memory_estimate *out);

/* fixed + batch x per_image. */
uint64_t stk_memory_estimate_at(const stk_memory_estimate *e, int64_t batch);
/* The largest batch that needs at most `bytes` (0: not even 1). */
int64_t stk_memory_estimate_batch(const stk_memory_estimate *e, uint64_t bytes);

#ifdef __cplusplus
}
#endif
