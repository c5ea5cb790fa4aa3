/* stoke tune: a hyperparameter search whose trials share one decoded,
 * augmented stream (tune/sweep.h); the flags here, every other flag is
 * `stoke train`'s, fixed for all trials. */
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/fs.h"
#include "kernels/backend.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/train_flags.h"
#include "tools/train_print.h"
#include "tools/tune_args.h"
#include "tune/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tune_args {
    const char *space[32];
    int n_space;
    int64_t samples, epochs, concurrent, seed, grace, brackets, min_samples, stop_after,
        perturbation_interval;
    double reduction, quantile, resample_probability;
    int scheduler, mode;
    const char *metric, *out, *config;
    bool json, resume;
} tune_args;

static const char *const schedulers[] = {"fifo", "asha", "median", "pbt", NULL};
static const char *const modes[] = {"auto", "min", "max", NULL};

static const stk_flag flags[] = {
    STK_FLAG_SECTION("the search"),
    STK_FLAG_TEXT(tune_args, config, "config", "FILE",
                  "a .json object or .toml file of flags (keys without --; a list\n"
                  "repeats a flag; true a flag alone), read before the command line's;\n"
                  "repeatable: the files in order, a later one's flag after an earlier's"),
    STK_FLAG_LIST(tune_args, space, n_space, "space", "SPEC",
                  "KEY=DIST(ARGS) entries (repeatable; ';' or spaces between\n"
                  "entries): uniform(lo,hi), quniform(lo,hi,q), loguniform(lo,hi),\n"
                  "qloguniform(lo,hi,q), randint(lo,hi), choice(a,b,...), grid(a,b,...)\n"
                  "(cartesian, each point --samples times); KEY is a stoke train flag\n"
                  "(lr, momentum, wd, batch, optimizer, schedule, label-smoothing,\n"
                  "warmup-epochs, transform, model, ...); 'a,b' quotes a value with commas"),
    STK_FLAG_INT(tune_args, samples, "samples", "N", 1, STK_SPACE_MAX_TRIALS,
                 "trials drawn from the space (times the grid's points), default 1;\n"
                 "a sweep holds at most 10000 trials"),
    STK_FLAG_INT(tune_args, epochs, "epochs", "MAX_T", 1, 100000,
                 "epochs of a trial that is not stopped, default 10"),
    STK_FLAG_INT(tune_args, concurrent, "concurrent", "K", 1, 1024,
                 "trials run side by side on one stream, default 4"),
    STK_FLAG_INT(tune_args, seed, "seed", "S", 0, INT64_MAX,
                 "draws the trials, and every trial's --seed (data order,\n"
                 "augmentation, initialisation), default 0"),
    STK_FLAG_TEXT(tune_args, metric, "metric", "NAME",
                  "what the scheduler and the ranking compare: val_top1 (default with\n"
                  "--val), val_top5, val_loss, train_top1 (default without), train_loss"),
    STK_FLAG_CHOICE(tune_args, mode, "mode", "MODE", modes,
                    "max or min; default auto: min for losses, max for accuracies"),
    STK_FLAG_SECTION("scheduler"),
    STK_FLAG_CHOICE(tune_args, scheduler, "scheduler", "NAME", schedulers,
                    "fifo (every trial runs to the end), asha (Ray's\n"
                    "AsyncHyperBandScheduler), median (Ray's MedianStoppingRule), pbt\n"
                    "(Ray's PopulationBasedTraining, synchronous: the whole population\n"
                    "at once, --concurrent >= trials, ranked each interval once all\n"
                    "have reported; keys lr, momentum, wd, label-smoothing);\n"
                    "default fifo"),
    STK_FLAG_INT(tune_args, grace, "grace", "G", 1, 100000,
                 "asha: the first rung; median: epochs before a trial can stop;\n"
                 "default 1"),
    STK_FLAG_NUMBER(tune_args, reduction, "reduction", "ETA", 1.0001, 1000,
                    "asha: rungs at G * ETA^k, the top 1/ETA go on; default 4"),
    STK_FLAG_INT(tune_args, brackets, "brackets", "B", 1, 16, "asha: brackets, default 1"),
    STK_FLAG_INT(tune_args, min_samples, "min-samples", "N", 1, 100000,
                 "median: other trials needed to decide, default 3"),
    STK_FLAG_INT(tune_args, perturbation_interval, "perturbation-interval", "P", 1, 100000,
                 "pbt: epochs between a trial's perturbations, default 1"),
    STK_FLAG_NUMBER(tune_args, quantile, "quantile", "Q", 0.0001, 0.5,
                    "pbt: the bottom Q clone the top Q, default 0.25"),
    STK_FLAG_NUMBER(tune_args, resample_probability, "resample-probability", "R", 0, 1,
                    "pbt: a value is drawn anew with probability R, else perturbed\n"
                    "(x1.2 or x0.8; a choice moves to a neighbour); default 0.25"),
    STK_FLAG_SECTION("output"),
    STK_FLAG_TEXT(tune_args, out, "out", "DIR",
                  "the sweep's folder (default runs/tune-N, a fresh N): trials.csv,\n"
                  "best.json, best.safetensors, trials/ID/ (each trial's run)"),
    STK_FLAG_INT(tune_args, stop_after, "stop-after", "N", 1, INT64_MAX,
                 "end this call once N trial epochs have run (exit 0); --resume goes on"),
    STK_FLAG_BOOL(tune_args, resume, "resume",
                  "continue the sweep in --out (after Ctrl-C or a kill): its trials that\n"
                  "ended stay, the others continue from their last checkpoint, the\n"
                  "scheduler replays results.log; give --resume --out DIR alone (the\n"
                  "flags are in DIR/sweep.txt) or with the same flags"),
    STK_FLAG_JSON(tune_args, json, "one JSON object on stdout at the end (progress on stderr)"),
    STK_FLAG_END};

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
    .flags = flags,
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

/* Flags stoke tune owns, or that make no sense per trial (the moving
 * average and the per-class figures: tune's trials share one evaluation
 * stream that evaluates the raw weights alone): STK_SET_NO_TRIAL in
 * train's table. */
static bool train_flag_refused(const char *name)
{
    const stk_flag *f = stk_cli_find(train_cli, name);
    return f && (f->set & STK_SET_NO_TRIAL);
}

/* The keys a space may set: STK_SET_TUNE in train's table (its flags with a
 * value, but not the data, the run's bookkeeping or the machine). */
static bool key_allowed(const char *key)
{
    const stk_flag *f = stk_cli_find(train_cli, key);
    return f && (f->set & STK_SET_TUNE);
}

/* Split argv: tune's flags (and anything unknown: its parser names it) into
 * mine, stoke train's into theirs. */
static void split_flags(int argc, char **argv, char **mine, int *n_mine, char **theirs,
                        int *n_theirs)
{
    *n_mine = *n_theirs = 0;
    mine[(*n_mine)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char name[64] = "";
        if (!strncmp(a, "--", 2) && a[2]) {
            size_t len = strcspn(a + 2, "=");
            snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), a + 2);
        }
        const stk_flag *f = *name ? stk_cli_find(&cli, name) : NULL;
        const stk_flag *t = *name && !f ? stk_cli_find(train_cli, name) : NULL;
        bool value = !strchr(a, '=') && i + 1 < argc;
        if (t && !train_flag_refused(name)) {
            theirs[(*n_theirs)++] = argv[i];
            if (value && t->kind != STK_FLAG_KIND_BOOL) theirs[(*n_theirs)++] = argv[++i];
        } else {
            mine[(*n_mine)++] = argv[i];
            if (f && value && f->kind != STK_FLAG_KIND_BOOL) mine[(*n_mine)++] = argv[++i];
        }
    }
    mine[*n_mine] = theirs[*n_theirs] = NULL;
}

/* runs/tune-N, a fresh N */
static char *default_out(void)
{
    int highest = 0;
    DIR *d = opendir("runs");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "tune-", 5) && atoi(e->d_name + 5) > highest)
            highest = atoi(e->d_name + 5);
    if (d) closedir(d);
    char buf[32];
    snprintf(buf, sizeof buf, "runs/tune-%d", highest + 1);
    return strdup(buf);
}

/* DIR and DIR/trials, refused when DIR already holds something */
static stk_status make_out(const char *out)
{
    char path[1100];
    if (stk_make_dirs(out) != 0) return stk_error(STK_ERR_IO, "--out %s: %s", out, strerror(errno));
    DIR *d = opendir(out);
    if (!d) return stk_error(STK_ERR_IO, "--out %s: %s", out, strerror(errno));
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(d))) entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    if (entries)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--out %s already holds something: choose another --out", out);
    snprintf(path, sizeof path, "%s/trials", out);
    if (mkdir(path, 0755) != 0) return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    return STK_OK;
}

/* tune's flags into c (space, scheduler, metric); returns -1 to go on, or
 * the exit code of a usage error. */
static int configure(tune_args *a, stk_tune_config *c, char **theirs, int n_theirs)
{
    for (int i = 0; i < a->n_space; i++)
        if (stk_space_parse(&c->space, a->space[i]) != STK_OK)
            return stk_cli_usage("tune", "%s", stk_last_error());
    if (!c->space.n)
        return stk_cli_usage("tune", "--space is required, e.g. --space 'lr=loguniform(1e-3,0.3)'");
    bool has_val = false;
    for (int i = 0; i < n_theirs; i++)
        has_val |= !strncmp(theirs[i], "--val", 5) && (theirs[i][5] == '\0' || theirs[i][5] == '=');
    for (int k = 0; k < c->space.n; k++) {
        const char *key = c->space.keys[k].name;
        if (!key_allowed(key))
            return stk_cli_usage("tune",
                                 "--space %s: not a stoke train flag a trial can vary (lr, "
                                 "momentum, wd, batch, optimizer, schedule, label-smoothing, ...)",
                                 key);
        for (int i = 0; i < n_theirs; i++) {
            size_t len = strlen(key);
            if (!strncmp(theirs[i], "--", 2) && !strncmp(theirs[i] + 2, key, len) &&
                (theirs[i][2 + len] == '\0' || theirs[i][2 + len] == '='))
                return stk_cli_usage("tune", "--space %s: also given as --%s; give it one way", key,
                                     key);
        }
    }
    if (!a->metric) a->metric = has_val ? "val_top1" : "train_top1";
    int m = stk_monitor_parse(a->metric);
    if (m < 0 || stk_monitor_is_ema((stk_monitor)m) ||
        (stk_monitor_needs_val((stk_monitor)m) && !has_val))
        return stk_cli_usage("tune", "--metric %s: %s", a->metric,
                             m < 0 || stk_monitor_is_ema((stk_monitor)m)
                                 ? "val_top1, val_top5, val_loss, train_top1 or train_loss"
                                 : "needs --val (without it: train_top1 or train_loss)");
    c->metric = (stk_monitor)m;
    c->maximise =
        a->mode == STK_MODE_AUTO ? !stk_monitor_is_loss((stk_monitor)m) : a->mode == STK_MODE_MAX;
    c->sched = stk_sched_defaults((stk_sched_kind)a->scheduler);
    c->sched.maximise = c->maximise;
    c->sched.max_t = a->epochs;
    c->sched.grace = a->grace;
    c->sched.reduction = a->reduction;
    c->sched.brackets = (int)a->brackets;
    c->sched.min_samples = (int)a->min_samples;
    c->sched.perturbation_interval = a->perturbation_interval;
    c->sched.quantile = a->quantile;
    c->resample_probability = a->resample_probability;
    if (stk_space_trials(&c->space, a->samples) < 0) {
        double points = 1;
        for (int k = 0; k < c->space.n; k++)
            if (c->space.keys[k].dist == STK_DIST_GRID) points *= c->space.keys[k].n_values;
        return stk_cli_usage("tune",
                             "--samples %" PRId64 " times the grid's %.0f points is more than "
                             "%d trials, the most a sweep holds",
                             a->samples, points, STK_SPACE_MAX_TRIALS);
    }
    if (a->scheduler == STK_SCHED_PBT) {
        for (int k = 0; k < c->space.n; k++)
            if (!stk_tune_pbt_key(c->space.keys[k].name))
                return stk_cli_usage("tune",
                                     "--scheduler pbt: --space %s: PBT changes values while a "
                                     "trial runs: lr, momentum, wd or label-smoothing",
                                     c->space.keys[k].name);
        int64_t n = stk_space_trials(&c->space, a->samples);
        if (a->concurrent < n)
            return stk_cli_usage("tune",
                                 "--scheduler pbt: the population (%" PRId64
                                 " trials) runs at once: give --concurrent %" PRId64,
                                 n, n);
    }
    c->sched.seed = (uint64_t)a->seed;
    stk_scheduler *s;
    if (stk_scheduler_create(&c->sched, &s) != STK_OK)
        return stk_cli_usage("tune", "%s", stk_last_error());
    stk_scheduler_destroy(s);
    c->samples = a->samples, c->epochs = a->epochs, c->concurrent = a->concurrent;
    c->seed = a->seed;
    c->stop_after = a->stop_after;
    c->train_argv = theirs, c->train_argc = n_theirs;
    c->lines = a->json ? stderr : stdout;
    c->cancel = &stk_cli_interrupted;
    return -1;
}

/* ---- the command ----------------------------------------------------------------- */

/* Under a launcher, before anything is written: every rank runs the same
 * sweep (a fingerprint of their flags). */
static stk_status ranks_agree(stk_tune_config *c, int argc, char **argv)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 1; i < argc; i++) h = stk_fnv1a64(h, argv[i], strlen(argv[i]) + 1);
    uint64_t *all = calloc((size_t)c->world, sizeof *all);
    if (!all) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_comm_allgather(c->comm, &h, sizeof h, all);
    for (int r = 1; st == STK_OK && r < c->world; r++)
        if (all[r] != all[0])
            st = stk_error(STK_ERR_INVALID_ARG,
                           "rank %d was given other stoke tune flags than rank 0: every rank "
                           "must run the same sweep",
                           r);
    free(all);
    return st;
}

/* Rank 0's folder exists (made = its outcome there) before any rank writes
 * a trial's. */
static stk_status folder_made(stk_tune_config *c, stk_status made)
{
    int32_t ok = made == STK_OK;
    stk_status st = stk_comm_broadcast(c->comm, &ok, sizeof ok, 0);
    if (st == STK_OK && !ok)
        st = c->rank ? stk_error(STK_ERR_IO, "rank 0 could not make --out %s", c->out) : made;
    return st;
}

/* The sweep's folder is this process's while it runs: rank 0 holds DIR
 * exclusively and every rank holds DIR/trials shared, so a second `stoke
 * tune` on DIR (a --resume while the sweep runs, or a new job while ranks of
 * a killed one live on) is refused before it reads or writes anything.
 * fds[0..1] are closed by the caller (the locks go with them). */
static stk_status lock_sweep(stk_tune_config *c, int fds[2])
{
    char trials[1100];
    snprintf(trials, sizeof trials, "%s/trials", c->out);
    stk_status st = STK_OK;
    if (c->rank == 0 && (st = stk_dir_lock(c->out, &fds[0])) == STK_OK &&
        (st = stk_dir_lock(trials, &fds[1])) == STK_OK && flock(fds[1], LOCK_SH) != 0)
        st = stk_error(STK_ERR_IO, "%s: cannot lock: %s", trials, strerror(errno));
    if (st != STK_OK) st = stk_error(st, "--out: %s", stk_last_error());
    if (c->world == 1) return st;
    /* the others take their shares once rank 0 has made its check */
    int32_t ok0 = st == STK_OK;
    STK_TRY(stk_comm_broadcast(c->comm, &ok0, sizeof ok0, 0));
    if (!ok0)
        return c->rank ? stk_error(STK_ERR_BUSY, "--out %s: rank 0 could not lock it", c->out) : st;
    if (c->rank != 0 && (st = stk_dir_lock_shared(trials, &fds[1])) != STK_OK)
        st = stk_error(st, "--out: %s", stk_last_error());
    /* every rank's outcome (a sum of failures), so none goes on alone */
    float failed = st != STK_OK;
    stk_status ag = stk_comm_allreduce_sum(c->comm, &failed, 1);
    if (ag != STK_OK) return ag;
    if (st == STK_OK && failed > 0)
        st = stk_error(STK_ERR_BUSY, "--out %s: %.0f rank(s) could not lock it", c->out, failed);
    return st;
}

static int run_sweep(tune_args *a, stk_tune_config *c, stk_tune_trial *trials, int64_t n,
                     bool resume)
{
    stk_run_settings first;
    train_parse_flags(trials[0].argc, trials[0].argv, &first);
    free(first.out_buf);
    stk_cpu_set_threads((int)first.threads);
    stk_cli_catch_interrupt();
    if (resume && stk_tune_read_trials(c, trials, n) != STK_OK) return stk_cli_fail();
    /* results.log (results.rankR.log under a launcher), for --resume */
    if (!resume && stk_tune_open_log(c) != STK_OK) return stk_cli_fail();
    if (!resume && c->rank == 0 && !first.no_tensorboard &&
        stk_tune_hparams_experiment(c, first.val != NULL) != STK_OK)
        return stk_cli_fail();
    int64_t ended = 0;
    for (int64_t i = 0; i < n; i++) ended += trials[i].status != STK_TRIAL_PENDING;
    say(c->lines,
        "tune: %" PRId64 " trials, %" PRId64 " side by side on one stream, %s, %s (%s), "
        "up to %" PRId64 " epochs, into %s%s\n",
        n, c->concurrent < n ? c->concurrent : n, stk_sched_name(c->sched.kind),
        stk_monitor_name(c->metric), c->maximise ? "max" : "min", c->epochs, c->out,
        resume ? " (resumed)" : "");
    if (resume) say(c->lines, "resume: %" PRId64 " trials had ended\n", ended);
    double t0 = stk_clock_sec();
    stk_status st = stk_tune_run(c, trials, n, resume);
    if (c->results) fclose(c->results);
    c->results = NULL;
    if (st != STK_ERR_CANCELLED && st != STK_OK) {
        if (c->world > 1) /* a rank that fails stops the job rather than leave the others waiting */
            fprintf(stderr, "stoke: rank %d of %d: %s\n", c->rank, c->world, stk_last_error());
        if (c->world > 1) stk_comm_abort(c->comm, STK_EXIT_ERROR);
        return stk_cli_fail();
    }
    if (c->rank != 0) /* (--stop-after ends every rank alike: exit 0) */
        return st == STK_ERR_CANCELLED && stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_OK;
    if (st == STK_ERR_CANCELLED && stk_tune_write_trials(c, trials, n) != STK_OK)
        fprintf(stderr, "stoke: %s\n", stk_last_error());
    stk_tune_print_summary(c, trials, n, a->json ? stdout : c->lines, a->json,
                           stk_clock_sec() - t0);
    if (st == STK_ERR_CANCELLED) {
        fprintf(stderr, "stoke: %s; continue with: stoke tune --resume --out %s\n",
                stk_cli_interrupted ? "interrupted" : "stopped after --stop-after", c->out);
        return stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_OK;
    }
    int64_t failed = 0;
    for (int64_t i = 0; i < n; i++) failed += trials[i].status == STK_TRIAL_ERROR;
    if (failed < n) return STK_EXIT_OK;
    fprintf(stderr, "stoke: every trial failed (trials.csv: error)\n");
    return STK_EXIT_ERROR;
}

static int tune_with_flags(int argc, char **argv);

static bool known_flag(const char *key)
{
    return strcmp(key, "config") && (stk_cli_find(&cli, key) || stk_cli_find(train_cli, key));
}

static int tune_main(int argc, char **argv)
{
    char **cfg = NULL;
    int n_cfg = 0;
    int crc = stk_config_expand("tune", "stoke tune or stoke train", argc, argv, known_flag, &cfg,
                                &n_cfg);
    if (crc >= 0) return crc;
    if (cfg) argc = n_cfg, argv = cfg;
    int rc = tune_with_flags(argc, argv);
    stk_config_free(cfg, n_cfg);
    return rc;
}

static int tune_with_flags(int argc, char **argv)
{
    bool resume = false;
    for (int i = 1; i < argc; i++) resume |= !strcmp(argv[i], "--resume");
    char **eff = NULL;
    int n_eff = 0;
    if (resume) {
        int rc = tune_resume_argv(argc, argv, &eff, &n_eff);
        if (rc >= 0) return rc;
        argc = n_eff, argv = eff;
    }
    char **mine = calloc((size_t)argc + 1, sizeof *mine),
         **theirs = calloc((size_t)argc + 1, sizeof *theirs);
    if (!mine || !theirs) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        free(mine), free(theirs);
        stk_config_free(eff, n_eff);
        return stk_cli_fail();
    }
    int n_mine, n_theirs;
    split_flags(argc, argv, mine, &n_mine, theirs, &n_theirs);
    tune_args a = {.samples = 1,
                   .epochs = 10,
                   .concurrent = 4,
                   .grace = 1,
                   .brackets = 1,
                   .min_samples = 3,
                   .reduction = 4,
                   .perturbation_interval = 1,
                   .quantile = 0.25,
                   .resample_probability = 0.25};
    stk_tune_config c = {0};
    stk_tune_trial *trials = NULL;
    int64_t n = 0;
    char *out_buf = NULL;
    int locks[2] = {-1, -1};
    char **pos;
    int n_pos, rc = stk_cli_parse(&cli, &a, n_mine, mine, &pos, &n_pos);
    if (rc < 0) rc = configure(&a, &c, theirs, n_theirs);
    if (rc < 0 && !a.out && !(a.out = out_buf = default_out())) rc = stk_cli_fail();
    c.out = a.out;
    if (rc < 0) {
        n = stk_space_trials(&c.space, c.samples);
        if (!(trials = calloc((size_t)n, sizeof *trials))) {
            stk_error(STK_ERR_NOMEM, "out of memory for %" PRId64 " trials", n);
            rc = stk_cli_fail();
        }
    }
    if (rc < 0 && stk_tune_prepare(&c, trials, n) != STK_OK)
        rc = stk_cli_usage("tune", "%s", stk_last_error());
    if (rc < 0 && stk_comm_open(300, &c.comm) != STK_OK) rc = stk_cli_fail();
    if (rc < 0) {
        c.rank = stk_comm_rank(c.comm);
        c.world = stk_comm_world(c.comm);
        if (c.rank) c.lines = NULL; /* rank 0 speaks for the job */
    }
    if (rc < 0 && c.world > 1 && ranks_agree(&c, argc, argv) != STK_OK) rc = stk_cli_fail();
    if (rc < 0) {
        stk_status made = STK_OK;
        if (c.rank == 0 && !resume && (made = make_out(c.out)) == STK_OK)
            made = tune_save_flags(c.out, argc, argv);
        if (c.world > 1) made = folder_made(&c, made);
        if (made != STK_OK || lock_sweep(&c, locks) != STK_OK) rc = stk_cli_fail();
    }
    if (rc < 0) rc = run_sweep(&a, &c, trials, n, resume);
    stk_tune_trials_free(trials, n);
    stk_space_free(&c.space);
    free(out_buf);
    free(mine);
    free(theirs);
    stk_config_free(eff, n_eff);
    stk_comm_close(c.comm);
    for (int i = 0; i < 2; i++)
        if (locks[i] >= 0) close(locks[i]);
    return rc;
}

const stk_command stk_cmd_tune = {"tune", "search hyperparameters, the trials sharing one stream",
                                  &cli, tune_main};
