/* stoke predict: a checkpoint's classes for image files, folders and .stoke
 * records (run/predict.h), printed as lines or JSON. */
#include "common/fs.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "kernels/backend.h"
#include "run/predict.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct predict_args {
    const char *transform;
    int64_t top_k, batch, workers, threads;
    bool json;
} predict_args;

#define T predict_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_INT(T, top_k, "top-k", "K", 1, 1000, "the K likeliest classes per image, default 5"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "default: the checkpoint's evaluation transform (val_transform)"),
    STK_FLAG_INT(T, batch, "batch", "B", 1, 4096, "images per forward pass, default 128 (as train's)",
                 .letter = 'b', .alias = {"batch-size"}),
    STK_FLAG_WORKERS(T, workers, "decoding threads, default: number of cores"),
    STK_FLAG_THREADS(T, threads),
    STK_FLAG_JSON(T, json,
                  "one JSON object per image on stdout (keys: path, top: a list of\n"
                  "{class, index, probability}), none for images that could not be read"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "predict",
    .usage = "stoke predict CHECKPOINT INPUT... [--top-k K] [--json]",
    .about = "Classify images with a checkpoint written by stoke train. An INPUT is a JPEG,\n"
             "PNG, WebP, BMP or PPM/PGM file (told by its bytes), a folder (its .jpg/.jpeg/\n"
             ".jpe/.jfif/.png/.webp/.bmp/.ppm/.pgm files, recursively, in name order), a\n"
             ".stoke dataset (each record, shown as FILE.stoke#INDEX) or one record of it\n"
             "(FILE.stoke#INDEX). Every image goes through the checkpoint's evaluation\n"
             "transform and its normalisation, in batches decoded on --workers threads;\n"
             "the classes are named as the training set named them (stoke pack). An image\n"
             "that cannot be read (damaged, not an image, too small for the transform) is\n"
             "skipped and named on stderr with the reason; the others are still\n"
             "predicted. Exit status 1 only when no image could be read.\n",
    .flags = flags,
    .min_args = 2,
    .max_args = 1 << 20,
    .first_arg_names = (const char *const[]){"checkpoint", NULL}};

/* The hooks' printer: the progress bar on stderr, a line or JSON object
 * per image on stdout, the skipped named on stderr. */
typedef struct printer {
    stk_progress bar;
    bool json;
} printer;

static stk_status print_image(void *ctx, const stk_prediction *p)
{
    const printer *pr = ctx;
    char num[STK_JSON_NUMBER], shown[512];
    if (pr->json) {
        printf("{\"path\": ");
        stk_json_write_string(stdout, p->path);
        printf(", \"top\": [");
        for (int t = 0; t < p->k; t++) {
            printf("%s{\"class\": ", t ? ", " : "");
            stk_json_write_string(stdout, p->name[t]);
            printf(", \"index\": %d, \"probability\": %s}", p->index[t],
                   stk_json_number(p->probability[t], 6, num));
        }
        printf("]}\n");
        return STK_OK;
    }
    printf("%s:", stk_printable(p->path, shown, sizeof shown));
    for (int t = 0; t < p->k; t++)
        printf("%s %s %.1f%%", t ? "," : "", stk_printable(p->name[t], shown, sizeof shown),
               100.0 * p->probability[t]);
    printf("\n");
    return STK_OK;
}

static void print_skip(void *ctx, const char *path, const char *why)
{
    printer *pr = ctx;
    char shown[512];
    stk_progress_clear(&pr->bar);
    fprintf(stderr, "stoke: skipped %s: %s\n", stk_printable(path, shown, sizeof shown), why);
}

static void print_progress(void *ctx, uint64_t done, uint64_t total)
{
    printer *pr = ctx;
    if (done == 0) {
        stk_progress_init(&pr->bar, "predict", total, stderr);
        return;
    }
    fflush(stdout);
    stk_progress_update(&pr->bar, done);
}

static void print_notice(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "stoke: warning: %s\n", line);
}

static int predict_main(int argc, char **argv)
{
    predict_args a = {
        .top_k = 5, .batch = 128, .workers = stk_cpu_count(), .threads = stk_cpu_count()};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    stk_cpu_set_threads((int)a.threads);
    stk_cli_catch_interrupt();
    printer pr = {.json = a.json};
    stk_predict_request q = stk_predict_defaults();
    q.checkpoint = pos[0], q.inputs = (const char *const *)pos + 1, q.n_inputs = n_pos - 1;
    q.transform = a.transform;
    q.top_k = (int)a.top_k, q.batch = (int)a.batch, q.workers = (int)a.workers;
    q.hooks = (stk_predict_hooks){.on_image = print_image,
                                  .on_skip = print_skip,
                                  .progress = print_progress,
                                  .notice = print_notice,
                                  .ctx = &pr,
                                  .cancel = &stk_cli_interrupted};
    stk_predict_summary s;
    stk_status st = stk_predict(&q, &s);
    if (st != STK_OK)
        return s.bad_transform ? stk_cli_usage("predict", "%s", stk_last_error()) : stk_cli_fail();
    stk_progress_finish(&pr.bar);
    fprintf(stderr, "predict: %" PRIu64 " images in %.2f s (%.0f images/s), %" PRIu64 " skipped",
            s.done, s.seconds, s.seconds > 0 ? (double)s.done / s.seconds : 0.0, s.skipped);
    if (s.not_images)
        fprintf(stderr, ", %" PRIu64 " file%s in folders without an image name not read",
                s.not_images, s.not_images == 1 ? "" : "s");
    fprintf(stderr, "\n");
    if (s.cancelled || stk_cli_interrupted) return STK_EXIT_INTERRUPTED;
    if (!s.done) {
        fprintf(stderr, "stoke: predict: no image could be read\n");
        return STK_EXIT_ERROR;
    }
    return STK_EXIT_OK;
}

const stk_command stk_cmd_predict = {"predict", "classify image files with a checkpoint", &cli,
                                     predict_main};
