/* stoke tune's own flags (session.h) and what they make of a sweep's
 * configuration (tune_configure): the space, the metric, the scheduler; a
 * command line split between them and stoke train's (tune_split_flags). */
#include "tune/session_impl.h"

#include <inttypes.h>
#include <string.h>

static const char *const schedulers[] = {"fifo", "asha", "median", "pbt", NULL};
static const char *const modes[] = {"auto", "min", "max", NULL};

const stk_flag stk_tune_flags[] = {
    STK_FLAG_SECTION("the search"),
    STK_FLAG_TEXT(stk_tune_settings, config, "config", "FILE",
                  "a .json object or .toml file of flags (keys without --; a list\n"
                  "repeats a flag; true a flag alone), read before the command line's;\n"
                  "repeatable: the files in order, a later one's flag after an earlier's"),
    STK_FLAG_LIST(stk_tune_settings, space, n_space, "space", "SPEC",
                  "KEY=DIST(ARGS) entries (repeatable; ';' or spaces between\n"
                  "entries): uniform(lo,hi), quniform(lo,hi,q), loguniform(lo,hi),\n"
                  "qloguniform(lo,hi,q), randint(lo,hi), choice(a,b,...), grid(a,b,...)\n"
                  "(cartesian, each point --samples times); KEY is a stoke train flag\n"
                  "(lr, momentum, wd, batch, optimizer, schedule, label-smoothing,\n"
                  "warmup-epochs, transform, model, ...); 'a,b' quotes a value with commas"),
    STK_FLAG_INT(stk_tune_settings, samples, "samples", "N", 1, STK_SPACE_MAX_TRIALS,
                 "trials drawn from the space (times the grid's points), default 1;\n"
                 "a sweep holds at most 10000 trials",
                 .def = "1"),
    STK_FLAG_INT(stk_tune_settings, epochs, "epochs", "MAX_T", 1, 100000,
                 "epochs of a trial that is not stopped, default 10", .def = "10"),
    STK_FLAG_INT(stk_tune_settings, concurrent, "concurrent", "K", 1, 1024,
                 "trials run side by side on one stream, default 4", .def = "4"),
    STK_FLAG_INT(stk_tune_settings, seed, "seed", "S", 0, INT64_MAX,
                 "draws the trials, and every trial's --seed (data order,\n"
                 "augmentation, initialisation), default 0"),
    STK_FLAG_TEXT(stk_tune_settings, metric, "metric", "NAME",
                  "what the scheduler and the ranking compare: val_top1 (default with\n"
                  "--val), val_top5, val_loss, train_top1 (default without), train_loss"),
    STK_FLAG_CHOICE(stk_tune_settings, mode, "mode", "MODE", modes,
                    "max or min; default auto: min for losses, max for accuracies"),
    STK_FLAG_SECTION("scheduler"),
    STK_FLAG_CHOICE(stk_tune_settings, scheduler, "scheduler", "NAME", schedulers,
                    "fifo (every trial runs to the end), asha (Ray's\n"
                    "AsyncHyperBandScheduler), median (Ray's MedianStoppingRule), pbt\n"
                    "(Ray's PopulationBasedTraining, synchronous: the whole population\n"
                    "at once, --concurrent >= trials, ranked each interval once all\n"
                    "have reported; keys lr, momentum, wd, label-smoothing);\n"
                    "default fifo"),
    STK_FLAG_INT(stk_tune_settings, grace, "grace", "G", 1, 100000,
                 "asha: the first rung; median: epochs before a trial can stop;\n"
                 "default 1",
                 .def = "1"),
    STK_FLAG_NUMBER(stk_tune_settings, reduction, "reduction", "ETA", 1.0001, 1000,
                    "asha: rungs at G * ETA^k, the top 1/ETA go on; default 4", .def = "4"),
    STK_FLAG_INT(stk_tune_settings, brackets, "brackets", "B", 1, 16, "asha: brackets, default 1",
                 .def = "1"),
    STK_FLAG_INT(stk_tune_settings, min_samples, "min-samples", "N", 1, 100000,
                 "median: other trials needed to decide, default 3", .def = "3"),
    STK_FLAG_INT(stk_tune_settings, perturbation_interval, "perturbation-interval", "P", 1, 100000,
                 "pbt: epochs between a trial's perturbations, default 1", .def = "1"),
    STK_FLAG_NUMBER(stk_tune_settings, quantile, "quantile", "Q", 0.0001, 0.5,
                    "pbt: the bottom Q clone the top Q, default 0.25", .def = "0.25"),
    STK_FLAG_NUMBER(stk_tune_settings, resample_probability, "resample-probability", "R", 0, 1,
                    "pbt: a value is drawn anew with probability R, else perturbed\n"
                    "(x1.2 or x0.8; a choice moves to a neighbour); default 0.25",
                    .def = "0.25"),
    STK_FLAG_SECTION("output"),
    STK_FLAG_TEXT(stk_tune_settings, out, "out", "DIR",
                  "the sweep's folder (default runs/tune-N, a fresh N): trials.csv,\n"
                  "best.json, best.safetensors, trials/ID/ (each trial's run)",
                  .letter = 'o'),
    STK_FLAG_INT(stk_tune_settings, stop_after, "stop-after", "N", 1, INT64_MAX,
                 "end this call once N trial epochs have run (exit 0); --resume goes on"),
    STK_FLAG_BOOL(stk_tune_settings, resume, "resume",
                  "continue the sweep in --out (after Ctrl-C or a kill): its trials that\n"
                  "ended stay, the others continue from their last checkpoint, the\n"
                  "scheduler replays results.log; give --resume --out DIR alone (the\n"
                  "flags are in DIR/sweep.txt) or with the same flags; --resume DIR is\n"
                  "--resume --out DIR",
                  .arg = "[DIR]"),
    STK_FLAG_JSON(stk_tune_settings, json,
                  "one JSON object on stdout at the end (progress on stderr)"),
    STK_FLAG_END};

/* Flags stoke tune owns, or that make no sense per trial (the moving
 * average and the per-class figures: tune's trials share one evaluation
 * stream that evaluates the raw weights alone): STK_SET_NO_TRIAL in
 * train's table. */
static bool train_flag_refused(const char *name)
{
    const stk_flag *f = stk_run_setting_find(name);
    return f && (f->set & STK_SET_NO_TRIAL);
}

/* The keys a space may set: STK_SET_TUNE in train's table (its flags with a
 * value, but not the data, the run's bookkeeping or the machine). */
static bool key_allowed(const char *key)
{
    const stk_flag *f = stk_run_setting_find(key);
    return f && (f->set & STK_SET_TUNE);
}

/* Split argv: tune's flags (and anything unknown: its parser names it) into
 * mine, stoke train's into theirs. */
void tune_split_flags(int argc, char **argv, char **mine, int *n_mine, char **theirs, int *n_theirs)
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
        const stk_flag *f = *name ? stk_flag_find(stk_tune_flags, name, strlen(name)) : NULL;
        const stk_flag *t = *name && !f ? stk_run_setting_find(name) : NULL;
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

/* Whether --NAME (or --NAME=...) is among argv[0..n). */
static bool given(char **argv, int n, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < n; i++)
        if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, len) &&
            (argv[i][2 + len] == '\0' || argv[i][2 + len] == '='))
            return true;
    return false;
}

/* The space's keys: train's flags a trial may vary, given one way. */
static stk_status check_keys(const stk_tune_config *c, char **theirs, int n_theirs)
{
    if (!c->space.n)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--space is required, e.g. --space 'lr=loguniform(1e-3,0.3)'");
    for (int k = 0; k < c->space.n; k++) {
        const char *key = c->space.keys[k].name;
        if (!key_allowed(key))
            return stk_error(STK_ERR_INVALID_ARG,
                             "--space %s: not a stoke train flag a trial can vary (lr, "
                             "momentum, wd, batch, optimizer, schedule, label-smoothing, ...)",
                             key);
        if (given(theirs, n_theirs, key))
            return stk_error(STK_ERR_INVALID_ARG, "--space %s: also given as --%s; give it one way",
                             key, key);
    }
    return STK_OK;
}

/* --metric and --mode */
static stk_status set_metric(stk_tune_settings *a, stk_tune_config *c, bool has_val)
{
    if (!a->metric) a->metric = has_val ? "val_top1" : "train_top1";
    int m = stk_monitor_parse(a->metric);
    if (m < 0 || stk_monitor_is_ema((stk_monitor)m) ||
        (stk_monitor_needs_val((stk_monitor)m) && !has_val))
        return stk_error(STK_ERR_INVALID_ARG, "--metric %s: %s", a->metric,
                         m < 0 || stk_monitor_is_ema((stk_monitor)m)
                             ? "val_top1, val_top5, val_loss, train_top1 or train_loss"
                             : "needs --val (without it: train_top1 or train_loss)");
    c->metric = (stk_monitor)m;
    c->maximise =
        a->mode == STK_MODE_AUTO ? !stk_monitor_is_loss((stk_monitor)m) : a->mode == STK_MODE_MAX;
    return STK_OK;
}

/* The number of trials, and PBT's conditions on the space and --concurrent. */
static stk_status check_trials(const stk_tune_settings *a, const stk_tune_config *c)
{
    if (stk_space_trials(&c->space, a->samples) < 0) {
        double points = 1;
        for (int k = 0; k < c->space.n; k++)
            if (c->space.keys[k].dist == STK_DIST_GRID) points *= c->space.keys[k].n_values;
        return stk_error(STK_ERR_INVALID_ARG,
                         "--samples %" PRId64 " times the grid's %.0f points is more than "
                         "%d trials, the most a sweep holds",
                         a->samples, points, STK_SPACE_MAX_TRIALS);
    }
    if (a->scheduler != STK_SCHED_PBT) return STK_OK;
    for (int k = 0; k < c->space.n; k++)
        if (!stk_tune_pbt_key(c->space.keys[k].name))
            return stk_error(STK_ERR_INVALID_ARG,
                             "--scheduler pbt: --space %s: PBT changes values while a "
                             "trial runs: lr, momentum, wd or label-smoothing",
                             c->space.keys[k].name);
    int64_t n = stk_space_trials(&c->space, a->samples);
    if (a->concurrent < n)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--scheduler pbt: the population (%" PRId64
                         " trials) runs at once: give --concurrent %" PRId64,
                         n, n);
    return STK_OK;
}

stk_status tune_configure(stk_tune_settings *a, stk_tune_config *c, char **theirs, int n_theirs)
{
    for (int i = 0; i < a->n_space; i++) STK_TRY(stk_space_parse(&c->space, a->space[i]));
    STK_TRY(check_keys(c, theirs, n_theirs));
    STK_TRY(set_metric(a, c, given(theirs, n_theirs, "val")));
    c->sched = stk_sched_defaults((stk_sched_kind)a->scheduler);
    c->sched.maximise = c->maximise;
    c->sched.max_t = a->epochs;
    c->sched.grace = a->grace;
    c->sched.reduction = a->reduction;
    c->sched.brackets = (int)a->brackets;
    c->sched.min_samples = (int)a->min_samples;
    c->sched.perturbation_interval = a->perturbation_interval;
    c->sched.quantile = a->quantile;
    c->sched.seed = (uint64_t)a->seed;
    c->resample_probability = a->resample_probability;
    STK_TRY(check_trials(a, c));
    stk_scheduler *s; /* its own checks of the options */
    STK_TRY(stk_scheduler_create(&c->sched, &s));
    stk_scheduler_destroy(s);
    c->samples = a->samples, c->epochs = a->epochs, c->concurrent = a->concurrent;
    c->seed = a->seed;
    c->stop_after = a->stop_after;
    c->train_argv = theirs, c->train_argc = n_theirs;
    return STK_OK;
}
