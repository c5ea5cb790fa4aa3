/* stoke train: the settings parsed (train_settings.c), the run set up
 * (train_setup.c), the fit call (train/fit.h), and the printing
 * (train_print.c). */
#include "common/clock.h"
#include "common/thread_pool.h"
#include "kernels/backend.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/train_print.h"
#include "tools/train_setup.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

stk_fit_options train_fit_options(run_state *r, train_printer *p)
{
    const train_args *a = &r->a;
    stk_fit_options o = stk_fit_defaults();
    o.train = r->loader, o.h2d = r->h2d, o.val = r->val_loader;
    o.val_elsewhere = a->val && r->rank != 0;
    o.epochs = a->epochs, o.stop_after = a->stop_after;
    o.run_dir = a->out, o.write = r->rank == 0;
    o.n_meta = r->n_meta, o.meta_keys = r->meta_keys, o.meta_values = r->meta_values;
    o.early = (stk_early_stop){.patience = (int)a->early_stop,
                               .monitor = (stk_monitor)stk_monitor_parse(a->monitor),
                               .min_delta = a->min_delta,
                               .mode = (stk_mode)a->mode,
                               .start_from_epoch = a->start_from_epoch,
                               .restore_best = a->restore_best};
    o.confusion = r->confusion;
    o.epoch_begin = train_epoch_begin, o.progress = train_progress, o.reduce = train_reduce;
    o.on_epoch = train_on_epoch, o.ctx = p;
    o.eval_label = r->rank == 0 ? "eval" : NULL;
    return o;
}

static int train_main(int argc, char **argv)
{
    run_state r;
    memset(&r, 0, sizeof r);
    int rc = train_parse_flags(argc, argv, &r.a);
    if (rc >= 0) return rc;
    train_args *a = &r.a;
    if (a->print_config) {
        train_print_config(stdout, &train_settings_cli, a);
        train_close(&r);
        return STK_EXIT_OK;
    }
    stk_cli_catch_interrupt();
    stk_cpu_set_threads((int)a->threads);
    if (stk_comm_open((double)a->dist_timeout, &r.comm) != STK_OK) {
        train_close(&r);
        return stk_cli_fail();
    }
    r.rank = stk_comm_rank(r.comm);
    r.world = stk_comm_world(r.comm);
    if (a->trace) { /* before the loader's threads start: they name themselves */
        stk_trace_start(&a->trace_opts);
        stk_trace_thread_name("main (steps)");
    }
    if (train_setup(&r) != STK_OK) return train_fail(&r);
    train_printer p = {.r = &r, .lines = r.rank ? NULL : a->json ? stderr : stdout};
    int64_t start = stk_trainer_position(r.trainer)->epoch;
    train_print_start(&p, start);
    const stk_pipeline *pipe = stk_trainer_pipeline(r.trainer);
    char stages[1024];
    double t0 = stk_clock_sec();
    stk_fit_options o = train_fit_options(&r, &p);
    stk_fit_result f = {.best_value = NAN};
    stk_status st = start < a->epochs ? stk_trainer_fit(r.trainer, &o, &f) : STK_OK;
    if (st == STK_OK && pipe && a->pipeline > 1 && !a->split_after && start < a->epochs)
        say(p.lines, "pipeline stages (balanced by measured forward time): %s\n",
            stk_pipeline_describe(pipe, stages, sizeof stages));
    if (st == STK_ERR_DIVERGED)
        stk_error(st,
                  "%s; lower --lr (now %g) or add --warmup-epochs; the last good checkpoint is "
                  "kept in %s",
                  stk_last_error(), a->lr, a->out);
    if (st != STK_OK) return train_fail(&r);
    train_print_summary(&p, &f, start, stk_clock_sec() - t0);
    train_close(&r);
    train_finish_trace(&r);
    stk_comm_close(r.comm);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_train = {"train", "train a model on a packed dataset",
                                   &train_settings_cli, train_main};
