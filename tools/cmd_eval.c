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
#include "tools/train_flags.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

/* The loader's and machine's settings are stoke train's (its table: the
 * same names, ranges, defaults and help); the rest are eval's own. */
typedef struct eval_args {
    stk_run_settings run;
    const char *data, *ckpt, *transform;
    bool json, per_class, ema;
    const char *confusion[3];
    int n_confusion;
} eval_args;

static const char *const borrowed[] = {"batch", "workers", "threads", "device", NULL};

#define T eval_args
static const stk_flag own_flags[] = {
    STK_FLAG_TEXT(T, data, "data", "PATH", "the dataset (same classes as the training set)"),
    STK_FLAG_TEXT(T, ckpt, "checkpoint", "FILE",
                  "a .safetensors checkpoint (last.safetensors, best.safetensors)"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "default: the checkpoint's evaluation transform"),
    STK_FLAG_END};
static const stk_flag report_flags[] = {
    STK_FLAG_BOOL(T, per_class, "per-class",
                  "also each class's images, top-1 (recall), precision and F1, named\n"
                  "as the checkpoint names them (its training set's class names);\n"
                  "with --json also \"confusion\": rows true, columns predicted"),
    STK_FLAG_BOOL(T, ema, "ema",
                  "evaluate the checkpoint's moving average of the weights (a run\n"
                  "trained with --ema-decay) instead of its weights"),
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

static stk_flag flags[16];

/* The table, put together before main (and main.c's --help) runs. */
__attribute__((constructor)) static void build_flags(void)
{
    const int cap = (int)(sizeof flags / sizeof flags[0]);
    int n = 0;
    flags[n++] = (stk_flag)STK_FLAG_SECTION("options");
    n = stk_cli_append(flags, n, cap, own_flags);
    n = stk_cli_borrow(flags, n, cap, train_cli, borrowed, offsetof(eval_args, run));
    n = stk_cli_append(flags, n, cap, report_flags);
    flags[n] = (stk_flag)STK_FLAG_END;
}

static const stk_cli cli = {
    .cmd = "eval",
    .usage = "stoke eval --data VAL.stoke --checkpoint FILE [OPTIONS]\n"
             "       stoke eval --data VAL.stoke FILE [OPTIONS]",
    .about = "Evaluate a checkpoint written by stoke train (eval mode, no augmentation):\n"
             "mean cross-entropy loss, top-1 and top-5 accuracy. Inputs are normalised with\n"
             "the statistics training used (saved in the checkpoint), so on the run's --val\n"
             "set with its --batch the figures equal that epoch's line (--batch, --workers,\n"
             "--threads and --device are stoke train's).\n",
    .flags = flags,
    .max_args = 1, /* the checkpoint, as export and predict take it */
    .args_error = "one checkpoint: --checkpoint FILE or FILE"};

static int eval_main(int argc, char **argv)
{
    eval_args a = {0};
    if (stk_run_settings_init(&a.run) != STK_OK) return stk_cli_fail();
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    stk_run_settings_free(&a.run); /* (its values are numbers: nothing of it owned) */
    if (parsed >= 0) return parsed;
    if (n_pos == 1 && a.ckpt)
        return stk_cli_usage("eval", "--checkpoint %s and the argument '%s': give it once", a.ckpt,
                             pos[0]);
    if (n_pos == 1) a.ckpt = pos[0];
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
    stk_cpu_set_threads((int)a.run.threads);
    stk_eval_request q = stk_eval_defaults();
    q.data = a.data, q.checkpoint = a.ckpt, q.transform = a.transform;
    q.batch = (int)a.run.batch, q.workers = (int)a.run.workers, q.device = a.run.device;
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
