/* stoke eval: a checkpoint's loss, top-1 and top-5 on a dataset. */
#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "storage/record.h"
#include "common/thread_pool.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "kernels/backend.h"
#include "tools/ckpt_read.h"
#include "tools/cli.h"
#include "tools/eval_per_class.h"
#include "tools/flags.h"
#include "train/batch.h"
#include "train/device.h"
#include "train/inputs.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    const char *data = a.data, *ckpt = a.ckpt, *transform = a.transform;
    int64_t batch = a.batch, workers = a.workers, threads = a.threads;
    bool json = a.json;
    stk_device_spec device = a.device;
    if (!data || !ckpt) return stk_cli_usage("eval", "--data and --checkpoint are required");
    for (int i = 0; i < a.n_confusion; i++)
        if (!eval_confusion_path_ok(a.confusion[i]))
            return stk_cli_usage("eval",
                                 "--confusion %s: the file name must end in .csv, .json "
                                 "or .png",
                                 a.confusion[i]);
    for (int i = 0; i < a.n_confusion; i++) /* before the evaluation, not after it */
        if (stk_output_path_check(a.confusion[i]) != STK_OK)
            return stk_cli_usage("eval", "--confusion %s", stk_last_error());
    stk_cpu_set_threads((int)threads);
    const stk_copy_engine *ce; /* the device before any loader (pinned batch memory) */
    if (stk_device_spec_open(&device, &ce) != STK_OK) return stk_cli_fail();

    /* the model as the checkpoint describes it */
    ckpt_desc d;
    if (ckpt_describe(ckpt, &d) != STK_OK) return stk_cli_fail();
    d.use_ema = a.ema;
    /* the normalisation training used (its --data's statistics, not this
     * set's): the same figures as the training run's evaluation */
    const stk_model_config cfg = d.cfg;
    /* Messages about the transform name where it came from. */
    char *tf = strdup(transform ? transform : d.val_transform ? d.val_transform : "");
    char *tf_from =
        transform ? strdup("--transform") : stk_text_printf("%s: its val_transform", ckpt);
    if (!tf || !tf_from) {
        free(tf), free(tf_from);
        ckpt_desc_free(&d);
        fprintf(stderr, "stoke: out of memory\n");
        return STK_EXIT_ERROR;
    }

    int rc = STK_EXIT_ERROR;
    uint64_t *confusion = NULL; /* --per-class, --confusion */
    stk_model *model = NULL;
    stk_trainer *trainer = NULL;
    stk_dataset *ds;
    if (stk_dataset_open(data, &ds) != STK_OK) goto out;
    const stk_meta *m = stk_dataset_meta(ds);
    stk_trainer_config tc = stk_trainer_defaults();
    tc.copy_engine = ce;
    stk_input_norm_from_meta(m, data, tc.mean, tc.std); /* a checkpoint from before: this set's */
    if (!isnan(d.mean[0])) {
        memcpy(tc.mean, d.mean, sizeof d.mean);
        memcpy(tc.std, d.std, sizeof d.std);
    }
    int size = 0;
    stk_status st = STK_OK;
    if (!tf[0]) {
        char deflt[64];
        stk_train_default_eval_transform(m, cfg.image_size, deflt, sizeof deflt);
        free(tf);
        tf = strdup(deflt);
    }
    if (!tf)
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    else if ((int)m->num_classes != cfg.classes || m->channels != cfg.in_channels)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s has %u classes and %d channels; the checkpoint's %s expects %d and %d",
                       data, m->num_classes, m->channels, cfg.name, cfg.classes, cfg.in_channels);
    else if ((st = stk_train_check_transform(m, tf_from, tf, false, &size)) == STK_OK &&
             size != cfg.image_size)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s %s gives %d px images; the model was trained on %d px", tf_from, tf,
                       size, cfg.image_size);
    stk_dataset_close(ds);
    if (st != STK_OK) goto fail;

    stk_eval_result r;
    if ((a.per_class || a.n_confusion) &&
        !(confusion = calloc((size_t)cfg.classes * (size_t)cfg.classes, sizeof *confusion))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory for a %dx%d confusion matrix", cfg.classes,
                       cfg.classes);
        goto fail;
    }
    if ((st = ckpt_load_model(&d, &model)) == STK_OK &&
        (st = stk_model_to(model, device.kind)) == STK_OK &&
        (st = stk_trainer_create(&tc, model, NULL, &trainer)) == STK_OK) {
        stk_loader_options o = stk_trainer_eval_options(trainer, tf, (int)batch, (int)workers);
        stk_loader *l;
        if ((st = stk_loader_open(data, &o, &l)) == STK_OK) {
            st = stk_trainer_evaluate_per_class(trainer, l, json ? NULL : "eval", &r, confusion);
            stk_loader_close(l);
        }
    }
    if (st == STK_ERR_DIVERGED)
        st = stk_error(st,
                       "%s: %s: its weights give outputs that are not finite (damaged, or "
                       "saved from a run that diverged)",
                       ckpt, stk_last_error());
    if (st != STK_OK) goto fail;
    char j[4][STK_JSON_NUMBER];
    if (json)
        printf("{\"val_loss\": %s, \"val_top1\": %s, \"val_top5\": %s, \"images\": %" PRIu64
               ", \"seconds\": %s",
               stk_json_number(r.loss, 6, j[0]), stk_json_number(r.top1, 4, j[1]),
               stk_json_number(r.top5, 4, j[2]), r.images, stk_json_number(r.seconds, 2, j[3]));
    else
        printf("%s on %s (%" PRIu64 " images, transform %s): loss %.4f, top-1 %.2f%%, top-5 "
               "%.2f%% (%.1f s)\n",
               ckpt, data, r.images, tf, r.loss, r.top1, r.top5, r.seconds);
    const char *const *names = (const char *const *)d.class_names;
    if (a.per_class) eval_print_per_class(confusion, cfg.classes, names, json);
    if (json) printf("}\n");
    for (int i = 0; i < a.n_confusion; i++)
        if ((st = eval_write_confusion(a.confusion[i], confusion, cfg.classes, names)) != STK_OK)
            goto fail;
    rc = STK_EXIT_OK;
    goto out;
fail:
    rc = stk_cli_fail();
out:
    stk_trainer_destroy(trainer);
    stk_model_destroy(model);
    free(confusion);
    ckpt_desc_free(&d);
    free(tf);
    free(tf_from);
    return rc;
}

const stk_command stk_cmd_eval = {"eval", "evaluate a checkpoint on a dataset", &cli, eval_main};
