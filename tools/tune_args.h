/* `stoke tune`'s argument vector before its flags are parsed
 * (tune_args.c): --config FILE expanded in place (tune_config.h), and the
 * flags that make a sweep kept in DIR/sweep.txt for --resume. */
#pragma once

#include "common/status.h"
#include "tools/tune_config.h"

/* argv with every --config FILE's flags before its own (files in the order
 * given), owned: *eff, *n_eff; or *eff NULL when there is none. -1 to go on,
 * or the exit code (printed). */
int tune_expand_config(int argc, char **argv, config_known known, char ***eff, int *n_eff);

/* DIR/sweep.txt: argv's flags but those of one call (--resume, --json,
 * --stop-after N, --out DIR), escaped so that any value round-trips. */
stk_status tune_save_flags(const char *out, int argc, char **argv);

/* --resume: the flags of the sweep in --out (owned: *eff, *n_eff): read from
 * DIR/sweep.txt when argv gives --out alone, else argv's once checked to be
 * the same; --out is always argv's (a copy of a sweep resumes in the copy). -1 to go on, or the
 * exit code of a usage error (printed). */
int tune_resume_argv(int argc, char **argv, char ***eff, int *n_eff);

/* NULL is a no-op. */
void tune_free_flags(char **v, int n);
