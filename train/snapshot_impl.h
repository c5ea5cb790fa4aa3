/* A model's tensors (buffers included) copied to host memory and back:
 * stk_trainer_fit's best epoch (restore_best) and stk_lr_find's "leave the
 * model as it was". Private to train/. */
#pragma once

#include "engine/nn.h"

typedef struct stk_weights_snapshot {
    void **host; /* per parameter, its bytes */
    int n;
} stk_weights_snapshot;

/* Copy m's tensors into s (its buffers kept for the next take). Errors:
 * NOMEM, a device copy's. */
stk_status stk_weights_snapshot_take(stk_weights_snapshot *s, stk_model *m);
/* Copy them back into m (the same model a take read). */
stk_status stk_weights_snapshot_restore(const stk_weights_snapshot *s, stk_model *m);
void stk_weights_snapshot_free(stk_weights_snapshot *s);
