/* Data-parallel runs (run_ranks.c): the ranks' agreement on the settings
 * before the first step, then the gradient buckets, sync batch norm and
 * the pipeline's buffer averaging attached to the trainer (distributed/). */
#pragma once

#include "run/run_state.h"

/* Compare every STK_SET_RANKS setting (some resolved), the image size and
 * per_epoch, the steps of an epoch, across the ranks, then attach the
 * data-parallel hooks (r->ddp). */
stk_status run_attach_ranks(stk_run *r, int64_t per_epoch);
