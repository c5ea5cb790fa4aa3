/* What `stoke train` prints as the run goes: the run's hooks (run/run.h)
 * that cmd_train.c hands it, the first lines and the summary. Rank 0
 * speaks for the job: `lines` is NULL on the other ranks.
 */
#pragma once

#include "common/progress.h"
#include "run/run.h"

#include <stdio.h>

typedef struct train_printer {
    stk_run *r;
    FILE *lines; /* the epoch lines: stdout, stderr under --json, NULL on ranks > 0 */
    stk_progress bar;
    bool warned_eval; /* the warning of a validation loss far above training's was given */
} train_printer;

/* fprintf, except to NULL */
void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The run's hooks (ctx: the printer; Ctrl-C is the CLI's flag): the
 * progress bar, the epoch line, the notices. */
stk_run_hooks train_hooks(train_printer *p);

/* The run's first lines: what it trains (or that it is trained), the
 * dropped images, the parameters, the memory, the pipeline and the ranks.
 * start: the epochs already done. */
void train_print_start(train_printer *p, int64_t start);

/* The model's parameter count: total, trainable, frozen; with per_module
 * (under --freeze) a line per top-level module (conv1, layer1, fc, ...). */
void train_print_params(FILE *f, const stk_model *m, bool per_module);

/* What the run will need (the measured estimate and the loader's ring)
 * against what the machine or its memory cgroup allows, and a warning with
 * a batch that fits when it exceeds it (the CPU; a GPU's memory is its own). */
void train_print_memory(FILE *f, const stk_run *r);
/* A note when drop_last leaves out more than 5% of --data each epoch. */
void train_print_dropped(FILE *f, const stk_run *r);

/* The last lines (or --json's object), the data-parallel, memory and amp notes. */
void train_print_summary(train_printer *p, const stk_run_result *res);

/* --print-config: every setting of c's table that a's run has (defaults
 * resolved), as TOML that --config reads back, a heading per section. */
struct stk_cli;
void train_print_config(FILE *f, const struct stk_cli *c, const stk_run_settings *a);
