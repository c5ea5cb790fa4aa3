/* A run's checkpoint metadata and --resume (run_resume.c): what every
 * checkpoint records beside the trainer's position (the transforms, the
 * data and its fingerprint, the ranks and batch, STK_SET_RESUME's
 * settings, the class names), and a resume's checks against it. */
#pragma once

#include "run/run_state.h"
#include "storage/dataset.h"

/* The run's metadata into r->meta_keys/meta_values (m: --data's). */
stk_status run_checkpoint_metadata(stk_run *r, const stk_meta *m);
/* --resume: the same settings and records as the saved run, its position
 * restored, rescaled to this world and batch (a notice through the hooks). */
stk_status run_resume_from(stk_run *r);
