/* A run's folder (run_folder.c): made, locked (one writer at a time, the
 * lock gone with the process) and claimed (a used one is refused unless
 * --resume, or cleared by --overwrite). */
#pragma once

#include "run/run_state.h"

/* Make RUNDIR (and its parents), lock it and claim it (rank 0, which alone
 * writes it). */
stk_status run_prepare_folder(stk_run *r);
