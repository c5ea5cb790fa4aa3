/* The parts of a sweep's session (session.h) the files of tune/ share:
 * the flags (session_flags.c) and the folder (session_folder.c). */
#pragma once

#include "tune/session.h"

/* argv split: tune's flags (and anything unknown: its parser names it)
 * into mine, stoke train's into theirs (each with room for argc + 1 and
 * NULL-terminated; mine[0] is argv[0]). */
void tune_split_flags(int argc, char **argv, char **mine, int *n_mine, char **theirs,
                      int *n_theirs);

/* tune's flags into c (the space, the metric, the scheduler, the counts),
 * with train's fixed flags `theirs`. Errors: INVALID_ARG naming the flag. */
stk_status tune_configure(stk_tune_settings *a, stk_tune_config *c, char **theirs, int n_theirs);

/* runs/tune-N, a fresh N (owned), or NULL out of memory. */
char *tune_default_out(void);

/* Under a launcher, before anything is written: every rank was given the
 * same flags (a fingerprint of argv). */
stk_status tune_ranks_agree(stk_tune_config *c, int argc, char **argv);

/* A new sweep's folder: rank 0 makes DIR and DIR/trials (refused when DIR
 * holds something) and writes sweep.txt; every rank hears the outcome. */
stk_status tune_make_folder(stk_tune_config *c, int argc, char **argv);

/* DIR held by this sweep while it runs (fds: closed by the caller). */
stk_status tune_lock_folder(stk_tune_config *c, int fds[2]);
