/* `stoke tune`'s argument vector before its flags are parsed
 * (tune_args.c): --config FILE expanded in place (config_file.h), and the
 * flags that make a sweep kept in DIR/sweep.txt for --resume. */
#pragma once

#include "common/status.h"
#include "tools/config_file.h"

/* DIR/sweep.txt: argv's flags but those of one call (--resume, --json,
 * --stop-after N, --out DIR), escaped so that any value round-trips. */
stk_status tune_save_flags(const char *out, int argc, char **argv);

/* --resume: the flags of the sweep in --out (owned: *eff, *n_eff): read from
 * DIR/sweep.txt when argv gives --out alone, else argv's once checked to be
 * the same; --out is always argv's (a copy of a sweep resumes in the copy). -1 to go on, or the
 * exit code of a usage error (printed). */
int tune_resume_argv(int argc, char **argv, char ***eff, int *n_eff);
