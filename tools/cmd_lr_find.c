/* stoke lr-find: the learning-rate range test (train/lr_find.h) on a
 * training set with the run's augmentation, its suggestions and a plot. */
#include "common/json.h"
#include "common/progress.h"
#include "common/text.h"
#include "common/thread_pool.h"
#include "engine/checkpoint.h"
#include "engine/onnx_graph.h"
#include "kernels/backend.h"
#include "runlog/svg_chart.h"
#include "storage/dataset.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/plot.h"
#include "run/run.h"
#include "tools/train_flags.h"
#include "train/device.h"
#include "train/inputs.h"
#include "train/lr_find.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The run's settings are stoke train's (its table, tools/train_setup.h):
 * the same names, ranges, defaults and help; the sweep's are its own. */
typedef struct lr_find_args {
    stk_run_settings run;
    const char *out;
    int64_t steps;
    double start, end, smooth, stop_factor;
    bool json;
} lr_find_args;

/* stoke train's flags that prepare the run lr-find measures. */
static const char *const borrowed[] = {
    "data",     "model", "transform",       "norm", "init", "batch", "optimizer", "momentum",
    "nesterov", "wd",    "label-smoothing", "seed", NULL};
static const char *const borrowed_machine[] = {"workers", "threads", "device", NULL};

#define T lr_find_args
static const stk_flag sweep_flags[] = {
    STK_FLAG_SECTION("the sweep"),
    STK_FLAG_NUMBER(T, start, "start", "LR", 1e-12, 1e6, "the first learning rate, default 1e-7",
                    .def = "1e-7"),
    STK_FLAG_NUMBER(T, end, "end", "LR", 1e-12, 1e6, "the last learning rate, default 10",
                    .def = "10"),
    STK_FLAG_INT(T, steps, "steps", "N", 3, 100000,
                 "steps from --start to --end, exponentially spaced (default 100,\n"
                 "at least 3: the suggestion needs them; more than an epoch goes on\n"
                 "into the next)",
                 .def = "100"),
    STK_FLAG_NUMBER(T, smooth, "smooth", "BETA", 0, 0.9999,
                    "the loss's moving average, bias-corrected (default 0.98, as fastai)",
                    .def = "0.98"),
    STK_FLAG_NUMBER(T, stop_factor, "stop-factor", "F", 1.0001, 1e6,
                    "stop once the smoothed loss exceeds F x its minimum (default 4)", .def = "4"),
    STK_FLAG_SECTION("machine and output"),
    STK_FLAG_END};
static const stk_flag output_flags[] = {
    STK_FLAG_TEXT(T, out, "out", "FILE",
                  "the plot: FILE.svg (default lr-find.svg) or FILE.png (rasterised\n"
                  "by rsvg-convert)",
                  .def = "lr-find.svg", .letter = 'o'),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout (keys: steps, diverged, steepest,\n"
                  "min_over_10, min_lr, min_loss, plot, lr, loss, smooth)"),
    STK_FLAG_END};
#undef T

static stk_flag flags[48];

/* The table, put together before main (and main.c's --help) runs. */
__attribute__((constructor)) static void build_flags(void)
{
    const int cap = (int)(sizeof flags / sizeof flags[0]);
    const size_t run = offsetof(lr_find_args, run);
    int n = 0;
    flags[n++] = (stk_flag)STK_FLAG_SECTION("the run it prepares (stoke train's flags)");
    n = stk_cli_borrow(flags, n, cap, train_cli, borrowed, run);
    n = stk_cli_append(flags, n, cap, sweep_flags);
    n = stk_cli_borrow(flags, n, cap, train_cli, borrowed_machine, run);
    n = stk_cli_append(flags, n, cap, output_flags);
    flags[n] = (stk_flag)STK_FLAG_END;
}

static const stk_cli cli = {
    .cmd = "lr-find",
    .usage = "stoke lr-find --data TRAIN.stoke --model NAME [OPTIONS]",
    .about = "The learning-rate range test (Leslie Smith; fastai's lr_find): train up to --steps\n"
             "steps on the training data, with its augmentation, while the learning rate grows\n"
             "exponentially from --start to --end; smooth the loss; stop once it exceeds\n"
             "--stop-factor times its minimum. Suggests a learning rate: where the smoothed\n"
             "loss falls fastest (steepest descent) and a tenth of the rate at its minimum.\n"
             "Nothing is saved but the plot: the model starts fresh (or from --init) and\n"
             "its weights are thrown away.\n",
    .flags = flags,
    .max_args = 0};

/* The smoothed loss against log10(lr), the suggestions as vertical marks. */
static stk_status plot(const lr_find_args *a, const stk_lr_sweep *s, const stk_lr_suggestion *g)
{
    double *x = malloc((size_t)(s->n ? s->n : 1) * sizeof *x), lo = INFINITY, hi = -INFINITY;
    if (!x) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n; i++) {
        x[i] = log10(s->lr[i]);
        if (isfinite(s->smooth[i])) lo = fmin(lo, s->smooth[i]), hi = fmax(hi, s->smooth[i]);
    }
    stk_series loss = {x, s->smooth, (size_t)s->n};
    double mx[2][2], my[2] = {lo, hi};
    stk_series marks[2];
    const double at[2] = {g->steepest, g->min_over_10};
    stk_chart_line lines[3] = {{&loss, "#1f77b4", false}};
    int n = 1;
    for (int k = 0; k < 2; k++)
        if (isfinite(at[k]) && isfinite(lo)) {
            mx[k][0] = mx[k][1] = log10(at[k]);
            marks[k] = (stk_series){mx[k], my, 2};
            lines[n++] = (stk_chart_line){&marks[k], k ? "#2ca02c" : "#d62728", k == 1};
        }
    stk_svg *svg;
    stk_status st = stk_svg_begin(800, 520, &svg);
    if (st != STK_OK) {
        free(x);
        return st;
    }
    char text[256];
    snprintf(text, sizeof text, "lr-find: %s on %s", a->run.model, a->run.data);
    stk_svg_text(svg, 400, 24, 16, "middle", text);
    stk_svg_panel(svg, (stk_rect){70, 60, 700, 360}, "smoothed training loss",
                  "log10(learning rate)", lines, n);
    snprintf(text, sizeof text, "steepest descent: %.3g", g->steepest);
    stk_svg_swatch(svg, 90, 470, "#d62728", false);
    stk_svg_text(svg, 120, 474, 13, "start", text);
    snprintf(text, sizeof text, "minimum / 10: %.3g", g->min_over_10);
    stk_svg_swatch(svg, 400, 470, "#2ca02c", true);
    stk_svg_text(svg, 430, 474, 13, "start", text);
    char *doc;
    size_t len;
    st = stk_svg_end(svg, &doc, &len);
    free(x);
    if (st != STK_OK) return st;
    st = plot_save(a->out, doc, len);
    free(doc);
    return st;
}

typedef struct progress_ctx {
    stk_progress bar;
} progress_ctx;

static stk_status on_step(void *ctx, const stk_lr_sweep *s)
{
    progress_ctx *p = ctx;
    stk_progress_update(&p->bar, (uint64_t)s->n);
    if (stk_cli_interrupted) return stk_error(STK_ERR_CANCELLED, "interrupted");
    return STK_OK;
}

/* x with 9 significant digits (learning rates span many decades), or null. */
static const char *num(double x, char buf[32])
{
    if (!isfinite(x)) return "null";
    snprintf(buf, 32, "%.9g", x);
    return buf;
}

static void print_json(const lr_find_args *a, const stk_lr_sweep *s, const stk_lr_suggestion *g)
{
    char j[4][32];
    printf("{\"steps\": %d, \"diverged\": %s, \"steepest\": %s, \"min_over_10\": %s, "
           "\"min_lr\": %s, \"min_loss\": %s, \"plot\": ",
           s->n, s->diverged ? "true" : "false", num(g->steepest, j[0]), num(g->min_over_10, j[1]),
           num(g->min_at >= 0 ? s->lr[g->min_at] : NAN, j[2]), num(s->best, j[3]));
    stk_json_write_string(stdout, a->out);
    const double *cols[3] = {s->lr, s->loss, s->smooth};
    const char *names[3] = {"lr", "loss", "smooth"};
    for (int c = 0; c < 3; c++) {
        printf(", \"%s\": [", names[c]);
        for (int i = 0; i < s->n; i++) printf("%s%s", i ? ", " : "", num(cols[c][i], j[0]));
        printf("]");
    }
    printf("}\n");
}

/* Model (fresh, or --init's weights) on the device; loader and H2D stage. */
static stk_status prepare(const lr_find_args *a, const stk_copy_engine *ce, stk_trainer_config *tc,
                          stk_model **model, stk_loader **l, stk_h2d **h, char **transform)
{
    stk_dataset *ds;
    STK_TRY(stk_dataset_open(a->run.data, &ds));
    const stk_meta *m = stk_dataset_meta(ds);
    char deflt[64];
    stk_loader_default_transform(m, deflt, sizeof deflt);
    int size = 0;
    stk_status st = STK_OK;
    if (!(*transform = strdup(a->run.transform ? a->run.transform : deflt)))
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) st = stk_train_check_transform(m, "--transform", *transform, true, &size);
    *tc = stk_trainer_defaults();
    tc->copy_engine = ce;
    tc->label_smoothing = (float)a->run.smoothing;
    tc->seed = a->run.seed;
    if (st == STK_OK) st = stk_train_batch_mix(*transform, 1.0, 0, &tc->mix);
    if (st == STK_OK)
        st = stk_train_normalisation(m, a->run.data, a->run.norm, *transform, tc->mean, tc->std);
    stk_model_config cfg = {.name = a->run.model,
                            .in_channels = m->channels,
                            .classes = (int)m->num_classes,
                            .image_size = size,
                            .seed = (uint64_t)a->run.seed};
    stk_dataset_close(ds);
    if (st == STK_OK)
        st = stk_run_model_is_onnx(a->run.model)
                 ? stk_model_from_onnx_file(a->run.model, &cfg, model)
                 : stk_model_create(&cfg, model);
    if (st == STK_OK && a->run.init) {
        stk_load_report rep;
        if ((st = stk_checkpoint_load(a->run.init, *model, NULL, false, &rep)) == STK_OK &&
            rep.loaded == 0)
            st = stk_error(STK_ERR_INVALID_ARG, "--init %s: no tensor matches a %s model",
                           a->run.init, a->run.model);
    }
    if (st == STK_OK) st = stk_model_to(*model, a->run.device.kind);
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = (int)a->run.batch;
    o.workers = (int)a->run.workers;
    o.seed = (uint64_t)a->run.seed;
    o.drop_last = true;
    o.transform = *transform;
    o.host_memory = ce->host_memory;
    if (st == STK_OK) st = stk_loader_open(a->run.data, &o, l);
    if (st == STK_OK && stk_loader_batches(*l) == 0)
        st = stk_error(STK_ERR_INVALID_ARG, "%s: fewer images than one batch of %lld", a->run.data,
                       (long long)a->run.batch);
    if (st == STK_OK) st = stk_h2d_open(*l, ce, h);
    return st;
}

static int lr_find_main(int argc, char **argv)
{
    lr_find_args a = {0};
    int rc = stk_cli_defaults(&cli, &a);
    if (rc >= 0) return rc;
    a.run.workers = a.run.threads = stk_cpu_count();
    char **pos;
    int n_pos;
    rc = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (rc >= 0) return rc;
    if (!a.run.data || !a.run.model)
        return stk_cli_usage("lr-find", "--data and --model are required");
    if (!(a.end > a.start))
        return stk_cli_usage("lr-find", "--end %g must be above --start %g", a.end, a.start);
    size_t len = strlen(a.out);
    if (!(len > 4 && (!strcmp(a.out + len - 4, ".svg") || !strcmp(a.out + len - 4, ".png"))))
        return stk_cli_usage("lr-find", "--out %s: FILE.svg or FILE.png", a.out);
    if (a.run.nesterov && (a.run.optimizer != STK_OPTIM_SGD || a.run.momentum <= 0))
        return stk_cli_usage("lr-find",
                             "--nesterov needs --optimizer sgd with a --momentum above 0");
    stk_cli_catch_interrupt();
    stk_cpu_set_threads((int)a.run.threads);
    const stk_copy_engine *ce;
    if (stk_device_spec_open(&a.run.device, &ce) != STK_OK) return stk_cli_fail();

    stk_lr_find_options o = {
        .optim = {.kind = (stk_optim_kind)a.run.optimizer,
                  .weight_decay = (float)a.run.wd,
                  .momentum = a.run.optimizer == STK_OPTIM_SGD ? (float)a.run.momentum : 0.f,
                  .nesterov = a.run.nesterov}};
    stk_model *model = NULL;
    stk_loader *l = NULL;
    stk_h2d *h = NULL;
    char *transform = NULL;
    stk_lr_sweep s = {0};
    stk_status st = prepare(&a, ce, &o.trainer, &model, &l, &h, &transform);
    if (st == STK_OK)
        st = stk_lr_sweep_init(&s, a.start, a.end, (int)a.steps, a.smooth, a.stop_factor);
    FILE *lines = a.json ? stderr : stdout;
    if (st == STK_OK)
        fprintf(lines,
                "lr-find %s on %s: up to %d steps from %g to %g, %s, batch %lld, transform %s\n",
                a.run.model, a.run.data, s.steps, a.start, a.end,
                stk_optim_kind_name((stk_optim_kind)a.run.optimizer), (long long)a.run.batch,
                transform);
    progress_ctx p;
    stk_progress_init(&p.bar, "lr-find", (uint64_t)a.steps, a.json || st != STK_OK ? NULL : stderr);
    o.progress = on_step, o.ctx = &p;
    if (st == STK_OK) st = stk_lr_find(model, l, h, &o, &s);
    stk_progress_finish(&p.bar);
    stk_lr_suggestion g;
    if (st == STK_OK) {
        stk_lr_sweep_suggest(&s, &g);
        if (s.n < 3) /* (--steps >= 3: it stopped early) */
            st = stk_error(STK_ERR_INVALID_ARG,
                           "lr-find: the loss passed %g x its minimum or was not finite by step "
                           "%d (lr %.3g): lower --start or raise --stop-factor",
                           a.stop_factor, s.n, s.n ? s.lr[s.n - 1] : a.start);
    }
    if (st == STK_OK) st = plot(&a, &s, &g);
    if (st == STK_OK) {
        if (s.diverged)
            fprintf(lines,
                    "stopped at step %d (lr %.3g): the smoothed loss %.4g passed %g x its "
                    "minimum %.4g (at lr %.3g)\n",
                    s.n, s.lr[s.n - 1], s.smooth[s.n - 1], a.stop_factor, s.best, s.lr[s.best_at]);
        else
            fprintf(lines,
                    "ran all %d steps to lr %.3g without the loss blowing up: --end could go "
                    "higher\n",
                    s.n, s.lr[s.n - 1]);
        fprintf(lines,
                "suggested learning rate: %.3g (steepest descent, step %d) or %.3g (minimum / "
                "10); plot: %s\n",
                g.steepest, g.steepest_at + 1, g.min_over_10, a.out);
        if (a.json) print_json(&a, &s, &g);
    }
    stk_lr_sweep_free(&s);
    stk_h2d_close(h);
    stk_loader_close(l);
    stk_model_destroy(model);
    free(transform);
    if (st == STK_ERR_CANCELLED) {
        fprintf(stderr, "stoke: lr-find: interrupted\n");
        return STK_EXIT_INTERRUPTED;
    }
    return st == STK_OK ? STK_EXIT_OK : stk_cli_fail();
}

const stk_command stk_cmd_lr_find = {
    "lr-find", "the learning-rate range test: which lr to train with", &cli, lr_find_main};
