/* stoke tune: a hyperparameter search whose trials share one decoded,
 * augmented stream: the command line over tune/session.h (its flags are
 * stk_tune_flags; every other flag is `stoke train`'s, fixed for all
 * trials). */
#include "tools/cli.h"
#include "tools/config_file.h"
#include "tools/flags.h"
#include "tools/train_flags.h"
#include "tune/session.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const stk_cli cli = {
    .cmd = "tune",
    .usage =
        "stoke tune --data TRAIN.stoke [--val VAL.stoke] --model M --space SPEC\n"
        "       [--samples N] [--scheduler fifo|asha|median|pbt] [--metric NAME] [--epochs MAX_T]\n"
        "       [--concurrent K] [--seed S] [--out DIR] [any stoke train flag]",
    .about = "Search hyperparameters: trials drawn from --space (Ray Tune's distributions),\n"
             "each a `stoke train` run with those values and every other flag given here,\n"
             "a scheduler stopping the unpromising ones after each epoch. Up to --concurrent\n"
             "trials run side by side on ONE stream: each image is read, decoded and\n"
             "augmented once per epoch for all of them (trials whose values change --batch\n"
             "or --transform share a stream with the trials of the same values, one such\n"
             "group after another). A trial's numbers do not depend on its neighbours:\n"
             "every trial runs with the sweep's --seed, so trials.csv's `command` column\n"
             "(stoke train with the trial's flags) reproduces its metrics.csv exactly.\n",
    .flags = stk_tune_flags,
    .notes = "Writes DIR/trials.csv (trial, status: COMPLETED, STOPPED@EPOCH by the\n"
             "scheduler, EARLY_STOPPED by --early-stop, ERROR with the reason; the values;\n"
             "best metric and epoch; epochs run; seconds; the reproducing command),\n"
             "DIR/best.json (trial, params, metric, checkpoint, command), DIR/best.safetensors\n"
             "and DIR/trials/ID/ (params.json and the run as stoke train writes it:\n"
             "metrics.csv, checkpoints, TensorBoard). A trial that fails (a diverged loss,\n"
             "...) ends as ERROR and the sweep goes on. Trials start in cohorts of\n"
             "--concurrent: a trial a scheduler stops frees its share of the compute, and\n"
             "the next cohort starts when the whole cohort has ended (cohort k is always\n"
             "trials k*K.. (k+1)*K-1). Ctrl-C stops after the current step (exit 130), a\n"
             "kill anywhere; `stoke tune --resume --out DIR` continues either: ended\n"
             "trials stay, the others continue from their last checkpoint, and the\n"
             "scheduler replays DIR/results.log, so the sweep ends with the trials.csv an\n"
             "uninterrupted one writes. The same --seed gives the same trials.csv (the\n"
             "seconds column aside).\n"
             "Under mpirun -np R the ranks share each cohort's trials (trial i on rank\n"
             "i mod R), rank 0 schedules with every rank's results and writes DIR (on a\n"
             "filesystem every rank sees): the same trials.csv as one process. Each rank\n"
             "logs its results in DIR/results.rankR.log; --resume (on any number of ranks)\n"
             "merges them.\n"
             "Example:\n"
             "  stoke tune --data train.stoke --val test.stoke --model mlp --epochs 8 \\\n"
             "    --space 'lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.99)' \\\n"
             "    --samples 8 --scheduler asha --concurrent 4\n",
    .max_args = 0};

/* Run the opened sweep and print its summary; the exit code. */
static int run_sweep(stk_tune_session *s)
{
    stk_tune_config *c = &s->c;
    stk_cli_catch_interrupt();
    stk_status st = stk_tune_session_run(s);
    if (st != STK_ERR_CANCELLED && st != STK_OK) {
        if (c->world > 1) /* a rank that fails stops the job rather than leave the others waiting */
            fprintf(stderr, "stoke: rank %d of %d: %s\n", c->rank, c->world, stk_last_error());
        stk_tune_session_stop_ranks(s);
        return stk_cli_fail();
    }
    if (c->rank != 0) /* (--stop-after ends every rank alike: exit 0) */
        return st == STK_ERR_CANCELLED && stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_OK;
    stk_tune_print_summary(c, s->trials, s->n, s->a.json ? stdout : c->lines, s->a.json,
                           s->seconds);
    if (st == STK_ERR_CANCELLED) {
        fprintf(stderr, "stoke: %s; continue with: stoke tune --resume --out %s\n",
                stk_cli_interrupted ? "interrupted" : "stopped after --stop-after", c->out);
        return stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_OK;
    }
    int64_t failed = 0;
    for (int64_t i = 0; i < s->n; i++) failed += s->trials[i].status == STK_TRIAL_ERROR;
    if (failed < s->n) return STK_EXIT_OK;
    fprintf(stderr, "stoke: every trial failed (trials.csv: error)\n");
    return STK_EXIT_ERROR;
}

static bool known_flag(const char *key)
{
    return strcmp(key, "config") && (stk_cli_find(&cli, key) || stk_cli_find(train_cli, key));
}

static int tune_main(int argc, char **argv)
{
    char **cfg = NULL;
    int n_cfg = 0;
    int rc = stk_config_expand("tune", "stoke tune or stoke train", argc, argv, known_flag, &cfg,
                               &n_cfg);
    if (rc >= 0) return rc;
    if (cfg) argc = n_cfg, argv = cfg;
    if (getenv("STOKE_PARSE_ONLY")) { /* (flags.h) */
        rc = stk_tune_check_flags(argc, argv) == STK_OK
                 ? STK_EXIT_OK
                 : stk_cli_usage("tune", "%s", stk_last_error());
        stk_config_free(cfg, n_cfg);
        return rc;
    }
    stk_tune_session s;
    stk_tune_hooks hooks = {.lines = stdout, .cancel = &stk_cli_interrupted};
    if (stk_tune_session_open(&s, argc, argv, &hooks) != STK_OK)
        rc = s.usage ? stk_cli_usage("tune", "%s", stk_last_error()) : stk_cli_fail();
    else
        rc = run_sweep(&s);
    stk_tune_session_close(&s);
    stk_config_free(cfg, n_cfg);
    return rc;
}

const stk_command stk_cmd_tune = {"tune", "search hyperparameters, the trials sharing one stream",
                                  &cli, tune_main};
