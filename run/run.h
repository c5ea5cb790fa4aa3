/* A training run as a library: from its settings (run_settings.h) to a
 * trainer fitted over its epochs, as `stoke train` and Python's
 * stoke.train run it. Opening a run makes the device, the data and its
 * transforms, the model (--init, --freeze), the loaders, the ranks'
 * agreement on the settings (under a launcher), the run folder (its lock,
 * and the rule that a used one is never silently overwritten), --resume
 * and the run's record (metrics.csv, steps.csv, TensorBoard). The run
 * prints nothing (but stk_log's notes): the caller hears of it through
 * hooks, and stops it through a flag of its own.
 *
 *     stk_run r;
 *     stk_run_init(&r, &settings, &(stk_run_hooks){.on_epoch = show, .cancel = &stop});
 *     stk_run_result res;
 *     stk_status st = stk_run_start(&r);          // opens everything, up to the first epoch
 *     if (st == STK_OK) st = stk_run_fit(&r, &res);
 *     if (st != STK_OK) { report(stk_last_error()); stk_run_stop_ranks(&r); }
 *     stk_run_close(&r);
 */
#pragma once

#include "run/run_settings.h"
#include "run/run_state.h"
#include "train/fit.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A run of settings s (checked: stk_run_settings_check), which it takes
 * over (it frees what s owns), heard through hooks h (NULL: none). Opens
 * nothing. */
void stk_run_init(stk_run *r, const stk_run_settings *s, const stk_run_hooks *h);
/* Open the run: the job of ranks (a world of one without a launcher), the
 * CPU threads, --trace, and stk_run_setup. Errors name the setting or file. */
stk_status stk_run_start(stk_run *r);
/* Everything up to the first epoch, on r->comm, r->rank and r->world as
 * set (stoke tune's trials: a world of one). */
stk_status stk_run_setup(stk_run *r);
/* Fit the epochs left (none when --resume finds it done), into *res.
 * STK_ERR_CANCELLED when the hooks' flag stopped it; STK_ERR_DIVERGED
 * names --lr and the checkpoint kept. */
stk_status stk_run_fit(stk_run *r, stk_run_result *res);
/* stk_trainer_fit's options for the run: its loaders, checkpoints and
 * metadata, early stopping, and the run's own callbacks over the hooks
 * (ctx r). One epoch at a time (stk_fit_open) for stoke tune. */
stk_fit_options stk_run_fit_options(stk_run *r);
/* fit's on_epoch for the run (ctx r): the means, metrics.csv and
 * TensorBoard, then the hooks' on_epoch. */
stk_status stk_run_epoch_done(void *r, const stk_fit_epoch *e, bool *stop);
/* After an error, under a launcher: the other ranks are stopped now rather
 * than left waiting in a collective (unless every rank failed alike). Call
 * it once the error is reported: it may not return. */
void stk_run_stop_ranks(stk_run *r);
/* Free what the run made (any part of it); then, with --trace, write its
 * file (every traced thread is joined by then: r->trace says how it went);
 * then the settings' own and the job of ranks stk_run_start opened. */
void stk_run_close(stk_run *r);

#ifdef __cplusplus
}
#endif
