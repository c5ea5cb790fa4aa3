/* stoke eval: a checkpoint's loss, top-1 and top-5 on a dataset
 * (run/evaluate.h), printed, per class, and its confusion matrix written. */
#include "common/fs.h"
#include "common/json.h"
#include "common/thread_pool.h"
#include "kernels/backend.h"
#include "run/evaluate.h"
#include "tools/cli.h"
#include "tools/eval_per_class.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct eval_args {
    const char *data, *ckpt, *transform;
    int64_t batch, workers, threads;
    bool json, per_class, ema;
    const char *confusion[3];
    int n_confusion;
    stk_device_spec device;
} eval_args;

#define T eval_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_TEXT(T, data, "data", "PATH", "the dataset (same classes as the training set)"),
    STK_FLAG_TEXT(T, ckpt, "checkpoint", "FILE",
                  "a .safetensors checkpoint (last.safetensors, best.safetensors)"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "default: the checkpoint's evaluation transform"),
    STK_FLAG_INT(T, batch, "batch", "B", 1, 65536,
                 "default 128 (as stoke train: the same batches give the same numbers)"),
    STK_FLAG_WORKERS(T, workers, "loader threads, default: number of cores"),
    STK_FLAG_THREADS(T, threads),
    STK_FLAG_DEVICE(T, device),
    STK_FLAG_BOOL(T, per_class, "per-class",
                  "also each class's images, top-1 (recall), precision and F1, named\n"
                  "as the checkpoint names them (its training set's class names);\n"
                  "with --json also \"confusion\": rows true, columns predicted"),
    STK_FLAG_BOOL(T, ema, "ema",
                  "evaluate the checkpoint's moving average of the weights (a run\n"
                  "trained with --ema) instead of its weights"),
    STK_FLAG_LIST(T, confusion, n_confusion, "confusion", "FILE",
                  "write the confusion matrix to FILE: .csv (rows true, columns\n"
                  "predicted, class names), .json (with the per-class figures) or\n"
                  ".png (a heatmap of each row's shares, counts, class names);\n"
                  "repeatable"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout (keys: val_loss, val_top1, val_top5,\n"
                  "images, seconds)"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "eval",
    .usage = "stoke eval --data VAL.stoke --checkpoint FILE [OPTIONS]",
    .about = "Evaluate a checkpoint written by stoke train (eval mode, no augmentation):\n"
             "mean cross-entropy loss, top-1 and top-5 accuracy. Inputs are normalised with\n"
             "the statistics training used (saved in the checkpoint), so on the run's --val\n"
             "set with its --batch the figures equal that epoch's line.\n",
    .flags = flags,
    .max_args = 0};

static int eval_main(int argc, char **argv)
{
    eval_args a = {.batch = 128, .workers = stk_cpu_count(), .threads = stk_cpu_count()};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    if (!a.data || !a.ckpt) return stk_cli_usage("eval", "--data and --checkpoint are required");
    for (int i = 0; i < a.n_confusion; i++)
        if (!eval_confusion_path_ok(a.confusion[i]))
            return stk_cli_usage("eval",
                                 "--confusion %s: the file name must end in .csv, .json "
                                 "or .png",
                                 a.confusion[i]);
    for (int i = 0; i < a.n_confusion; i++) /* before the evaluation, not after it */
        if (stk_output_path_check(a.confusion[i]) != STK_OK)
            return stk_cli_usage("eval", "--confusion %s", stk_last_error());
    stk_cpu_set_threads((int)a.threads);
    stk_eval_request q = stk_eval_defaults();
    q.data = a.data, q.checkpoint = a.ckpt, q.transform = a.transform;
    q.batch = (int)a.batch, q.workers = (int)a.workers, q.device = a.device;
    q.ema = a.ema, q.confusion = a.per_class || a.n_confusion;
    q.label = a.json ? NULL : "eval";
    stk_eval_report r;
    if (stk_evaluate(&q, &r) != STK_OK) return stk_cli_fail();
    const stk_eval_result *e = &r.result;
    char j[4][STK_JSON_NUMBER];
    if (a.json)
        printf("{\"val_loss\": %s, \"val_top1\": %s, \"val_top5\": %s, \"images\": %" PRIu64
               ", \"seconds\": %s",
               stk_json_number(e->loss, 6, j[0]), stk_json_number(e->top1, 4, j[1]),
               stk_json_number(e->top5, 4, j[2]), e->images, stk_json_number(e->seconds, 2, j[3]));
    else
        printf("%s on %s (%" PRIu64 " images, transform %s): loss %.4f, top-1 %.2f%%, top-5 "
               "%.2f%% (%.1f s)\n",
               a.ckpt, a.data, e->images, r.transform, e->loss, e->top1, e->top5, e->seconds);
    int classes = r.ckpt.cfg.classes;
    const char *const *names = (const char *const *)r.ckpt.class_names;
    if (a.per_class) eval_print_per_class(r.confusion, classes, names, a.json);
    if (a.json) printf("}\n");
    int rc = STK_EXIT_OK;
    for (int i = 0; i < a.n_confusion && rc == STK_EXIT_OK; i++)
        if (eval_write_confusion(a.confusion[i], r.confusion, classes, names) != STK_OK)
            rc = stk_cli_fail();
    stk_eval_report_free(&r);
    return rc;
}

const stk_command stk_cmd_eval = {"eval", "evaluate a checkpoint on a dataset", &cli, eval_main};
