/* stoke train's command line: its table (the run's settings with the
 * command's texts) and the parse that lr-find's and tune's trials share. */
#pragma once

#include "run/run_settings.h"
#include "tools/flags.h"

/* stoke train's flags: stk_run_flags with the usage, about and notes. */
extern const stk_cli train_settings_cli;

/* Parse `stoke train`'s flags (argv[0] is the command's name; --config
 * FILE's first) into *a with its defaults and the checks across settings;
 * returns -1 to go on, or the exit code of a usage error (printed, and
 * nothing left to free). */
int train_parse_flags(int argc, char **argv, stk_run_settings *a);
/* The same, as a pointer for stk_cli_find. */
extern const stk_cli *const train_cli;
