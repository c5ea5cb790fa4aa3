/* stoke train: the settings parsed (train_flags.c), the run opened and
 * fitted by the library (run/run.h), and the printing (train_print.c). */
#include "common/clock.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/train_flags.h"
#include "tools/train_print.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* The error that ends the run: printed (naming the rank under a launcher),
 * then every other rank is stopped rather than left waiting in a
 * collective. */
static void train_fail(stk_run *r)
{
    if (r->world > 1) {
        fprintf(stderr, "stoke: rank %d of %d: %s\n", r->rank, r->world, stk_last_error());
        fflush(stderr);
        stk_run_stop_ranks(r);
    } else {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
    }
}

/* --trace's file, written as the run closed. */
static void print_trace(const stk_run *r)
{
    if (r->trace.written)
        fprintf(stderr,
                "trace: %llu events from %llu threads over %.2f s in %s%s (open in "
                "https://ui.perfetto.dev)\n",
                (unsigned long long)r->trace.summary.events,
                (unsigned long long)r->trace.summary.threads, r->trace.summary.seconds,
                r->trace.path,
                r->trace.summary.dropped ? " (some dropped: a thread's buffer was full)" : "");
    else if (r->trace.error[0])
        fprintf(stderr, "stoke: %s\n", r->trace.error);
}

static int train_main(int argc, char **argv)
{
    stk_run_settings s;
    int rc = train_parse_flags(argc, argv, &s);
    if (rc >= 0) return rc;
    if (s.print_config) {
        train_print_config(stdout, &train_settings_cli, &s);
        stk_run_settings_free(&s);
        return STK_EXIT_OK;
    }
    stk_cli_catch_interrupt();
    stk_run r;
    train_printer p = {.r = &r};
    stk_run_hooks hooks = train_hooks(&p);
    stk_run_init(&r, &s, &hooks);
    stk_status st = stk_run_start(&r);
    p.lines = r.rank ? NULL : r.a.json ? stderr : stdout;
    stk_run_result res;
    if (st == STK_OK) {
        int64_t start = stk_trainer_position(r.trainer)->epoch;
        train_print_start(&p, start);
        st = stk_run_fit(&r, &res);
        const stk_pipeline *pipe = stk_trainer_pipeline(r.trainer);
        char stages[1024];
        if (st == STK_OK && pipe && r.a.pipeline > 1 && !r.a.split_after && start < r.a.epochs)
            say(p.lines, "pipeline stages (balanced by measured forward time): %s\n",
                stk_pipeline_describe(pipe, stages, sizeof stages));
    }
    if (st == STK_OK)
        train_print_summary(&p, &res);
    else
        train_fail(&r);
    stk_run_close(&r);
    print_trace(&r); /* after an error too: what led to it is worth seeing */
    if (st == STK_OK) return STK_EXIT_OK;
    return stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_ERROR;
}

const stk_command stk_cmd_train = {"train", "train a model on a packed dataset",
                                   &train_settings_cli, train_main};
