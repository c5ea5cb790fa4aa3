/* stoke plot: a run's curves (or several runs overlaid) as one SVG or PNG. */
#include "common/json.h"
#include "common/fs.h"
#include "common/text.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/plot.h"
#include "runlog/run_log.h"
#include "runlog/svg_chart.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct plot_args {
    const char *out, *title;
    bool json;
} plot_args;

#define T plot_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("output"),
    STK_FLAG_TEXT(T, out, "out", "FILE",
                  "FILE.svg (default: plot.svg in the first RUNDIR) or FILE.png\n"
                  "(drawn as SVG, rasterised by rsvg-convert: Debian's librsvg2-bin)",
                  .letter = 'o'),
    STK_FLAG_TEXT(T, title, "title", "TEXT", "a heading (default: the run directories)"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout: out, kind (runs or sweep), runs (the\n"
                  "RUNDIRs) or trials (a sweep's count)"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "plot",
    .usage = "stoke plot RUNDIR [RUNDIR...] [--out FILE.svg|FILE.png]\n"
             "stoke plot SWEEPDIR [--out FILE.svg|FILE.png]",
    .about = "Draw what `stoke train` recorded in RUNDIR (metrics.csv, steps.csv): six\n"
             "panels, the runs overlaid in one colour each with a legend. Loss against\n"
             "steps (every step's training loss, averaged over runs of steps when there\n"
             "are more than 1500; validation loss dashed at each epoch's end), accuracy\n"
             "against epochs (training top-1 solid, validation top-1 dashed), the\n"
             "learning rate against steps, images/s, stall % (the share of each epoch\n"
             "the step waited for data), and memory (the training device allocator's\n"
             "peak solid, the process's peak RSS dashed). Readable without TensorBoard;\n"
             "a run still going is drawn up to its last finished epoch.\n"
             "\n"
             "A stoke tune folder (SWEEPDIR, with trials.csv) is drawn as the sweep: every\n"
             "trial's metric (the sweep's --metric) against epochs, and the best so far\n"
             "against trials beside each trial's best.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 10,
    .args_error = "expected one to ten run directories"};

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

enum { WIDTH = 1260, HEIGHT = 800, MAX_LINES = 20 };

typedef struct panel {
    const char *title, *x_label;
} panel;

static const panel panels[6] = {
    {"loss", "step"},      {"accuracy (%)", "epoch"}, {"learning rate", "step"},
    {"images/s", "epoch"}, {"stall (%)", "epoch"},    {"memory (MB)", "epoch"},
};

/* The lines of panel p for one run. */
static int panel_lines(int p, const stk_run_log *log, const char *color, stk_chart_line *out)
{
    int n = 0;
#define LINE(series, dash)                                                                         \
    do {                                                                                           \
        const stk_series *s_ = (series);                                                           \
        if (s_) out[n++] = (stk_chart_line){s_, color, dash};                                      \
    } while (0)
    switch (p) {
    case 0:
        if (stk_run_log_step(log, "loss"))
            LINE(stk_run_log_step(log, "loss"), false);
        else /* a run from before steps.csv */
            LINE(stk_run_log_epoch_at_steps(log, "train_loss"), false);
        LINE(stk_run_log_epoch_at_steps(log, "val_loss"), true);
        break;
    case 1:
        LINE(stk_run_log_epoch(log, "train_acc"), false);
        LINE(stk_run_log_epoch(log, "val_top1"), true);
        break;
    case 2:
        if (stk_run_log_step(log, "lr"))
            LINE(stk_run_log_step(log, "lr"), false);
        else
            LINE(stk_run_log_epoch_at_steps(log, "lr"), false);
        break;
    case 3: LINE(stk_run_log_epoch(log, "images_per_sec"), false); break;
    case 4: LINE(stk_run_log_epoch(log, "stall_pct"), false); break;
    case 5:
        LINE(stk_run_log_epoch(log, "mem_peak_mb"), false);
        LINE(stk_run_log_epoch(log, "peak_rss_mb"), true);
        break;
    }
#undef LINE
    return n;
}

static stk_status draw(char **dirs, int n_runs, stk_run_log **logs, const char *title, char **text,
                       size_t *len)
{
    stk_svg *s;
    STK_TRY(stk_svg_begin(WIDTH, HEIGHT, &s));
    stk_svg_text(s, WIDTH / 2.0, 28, 18, "middle", title);
    /* the legend: one swatch per run, then what the line styles mean */
    double x = 70;
    for (int r = 0; r < n_runs; r++) {
        stk_svg_swatch(s, x, 52, palette[r % 10], false);
        stk_svg_text(s, x + 30, 56, 13, "start", dirs[r]);
        x += 45 + 8.0 * (double)strlen(dirs[r]);
    }
    stk_svg_swatch(s, x + 20, 52, "#444", false);
    stk_svg_text(s, x + 50, 56, 13, "start", "training");
    stk_svg_swatch(s, x + 130, 52, "#444", true);
    stk_svg_text(s, x + 160, 56, 13, "start", "validation (memory: process RSS)");
    for (int p = 0; p < 6; p++) {
        stk_chart_line lines[MAX_LINES];
        int n = 0;
        for (int r = 0; r < n_runs && n + 2 <= MAX_LINES; r++)
            n += panel_lines(p, logs[r], palette[r % 10], lines + n);
        stk_rect area = {80 + (p % 3) * 400.0, 110 + (p / 3) * 340.0, 330, 250};
        stk_svg_panel(s, area, panels[p].title, panels[p].x_label, lines, n);
    }
    return stk_svg_end(s, text, len);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

/* A new empty file $TMPDIR/stoke-plot-XXXXXX.EXT (malloc'd name; NULL with
 * the error set). */
static char *temp_file(const char *ext)
{
    const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *name = stk_text_printf("%s/stoke-plot-XXXXXX.%s", dir, ext);
    if (!name) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int fd = mkstemps(name, (int)strlen(ext) + 1);
    if (fd < 0) {
        stk_error(STK_ERR_IO, "%s: cannot create a temporary file: %s", dir, strerror(errno));
        free(name);
        return NULL;
    }
    close(fd);
    return name;
}

/* PNG: the SVG rasterised by rsvg-convert into a temporary (both in
 * $TMPDIR, never beside the output: that may be /dev/null), then written
 * to `out` as every output is (stk_file_write_atomic: a link followed, a
 * device written through, a torn file never left). */
static stk_status write_png(const char *out, const char *svg, size_t len)
{
    char *svg_tmp = temp_file("svg"), *png_tmp = svg_tmp ? temp_file("png") : NULL;
    if (!png_tmp) {
        if (svg_tmp) unlink(svg_tmp);
        free(svg_tmp);
        return stk_error_prefix(STK_ERR_IO, "--out %s", out);
    }
    stk_file_part part = {svg, len};
    stk_status st = stk_file_write_atomic(svg_tmp, &part, 1);
    if (st == STK_OK) {
        char *argv[] = {
            "rsvg-convert", "--background-color", "white", "-o", png_tmp, svg_tmp, NULL};
        pid_t pid;
        int rc = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ), status = 0;
        if (rc != 0)
            st = stk_error(STK_ERR_UNSUPPORTED,
                           "--out %s: PNG needs rsvg-convert (Debian: librsvg2-bin): %s; or write "
                           "an .svg",
                           out, strerror(rc));
        else if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            st = stk_error(STK_ERR_IO, "--out %s: rsvg-convert failed", out);
    }
    uint8_t *png = NULL;
    size_t png_len = 0;
    if (st == STK_OK && (st = stk_file_read_all(png_tmp, 1u << 30, &png, &png_len)) != STK_OK)
        st = stk_error_prefix(st, "%s", png_tmp);
    if (st == STK_OK) {
        stk_file_part image = {png, png_len};
        st = stk_file_write_atomic(out, &image, 1);
    }
    free(png);
    unlink(svg_tmp);
    unlink(png_tmp);
    free(svg_tmp);
    free(png_tmp);
    return st;
}

stk_status plot_save(const char *out, const char *svg, size_t len)
{
    stk_file_part part = {svg, len};
    return ends_with(out, ".png") ? write_png(out, svg, len) : stk_file_write_atomic(out, &part, 1);
}

/* stoke plot SWEEPDIR */
static int plot_sweep_main(const char *dir, const plot_args *a)
{
    char *title = a->title ? strdup(a->title) : stk_text_printf("stoke tune: %s", dir);
    char *text = NULL;
    size_t len = 0;
    int n = 0;
    stk_status st =
        title ? plot_sweep(dir, title, &text, &len, &n) : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) st = plot_save(a->out, text, len);
    free(title);
    free(text);
    if (st != STK_OK) return stk_cli_fail();
    if (a->json) {
        fputs("{\"out\": ", stdout);
        stk_json_write_string(stdout, a->out);
        fputs(", \"kind\": \"sweep\", \"sweep\": ", stdout);
        stk_json_write_string(stdout, dir);
        printf(", \"trials\": %d}\n", n);
    } else {
        printf("plot: a sweep of %d trials -> %s\n", n, a->out);
    }
    return STK_EXIT_OK;
}

static int plot_run(plot_args *ap, char **pos, int n_pos);

/* --json of runs drawn */
static void print_json(const char *out, char **runs, int n)
{
    fputs("{\"out\": ", stdout);
    stk_json_write_string(stdout, out);
    fputs(", \"kind\": \"runs\", \"runs\": [", stdout);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", stdout);
        stk_json_write_string(stdout, runs[i]);
    }
    fputs("]}\n", stdout);
}

static int plot_main(int argc, char **argv)
{
    plot_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    char *default_out = NULL; /* next to the (first) run, not in the current folder */
    if (!a.out) {
        if (!(default_out = stk_text_printf("%s/plot.svg", n_pos ? pos[0] : ".")))
            return stk_cli_usage("plot", "out of memory");
        a.out = default_out;
    }
    int rc = plot_run(&a, pos, n_pos);
    free(default_out);
    return rc;
}

static int plot_run(plot_args *ap, char **pos, int n_pos)
{
    plot_args a = *ap;
    bool png = ends_with(a.out, ".png");
    if (!png && !ends_with(a.out, ".svg"))
        return stk_cli_usage("plot", "--out %s: write a .svg or a .png", a.out);
    if (n_pos == 1 && plot_is_sweep(pos[0])) return plot_sweep_main(pos[0], &a);
    stk_run_log *logs[10] = {0};
    int rc = STK_EXIT_OK;
    char *title = NULL, *text = NULL;
    size_t len = 0;
    for (int i = 0; i < n_pos; i++)
        if (stk_run_log_read(pos[i], &logs[i]) != STK_OK) {
            rc = stk_cli_fail();
            goto out;
        }
    title = a.title ? strdup(a.title)
                    : stk_text_printf("stoke train: %s%s", pos[0], n_pos > 1 ? " and others" : "");
    if (!title) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        rc = stk_cli_fail();
        goto out;
    }
    stk_status st = draw(pos, n_pos, logs, title, &text, &len);
    if (st == STK_OK) st = plot_save(a.out, text, len);
    if (st != STK_OK)
        rc = stk_cli_fail();
    else if (a.json)
        print_json(a.out, pos, n_pos);
    else
        printf("plot: %d run%s -> %s\n", n_pos, n_pos == 1 ? "" : "s", a.out);
out:
    for (int i = 0; i < n_pos; i++) stk_run_log_free(logs[i]);
    free(title);
    free(text);
    return rc;
}

const stk_command stk_cmd_plot = {"plot", "draw the curves of training runs (SVG or PNG)", &cli,
                                  plot_main};
