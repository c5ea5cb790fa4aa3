/* stoke eval: a checkpoint's loss, top-1 and top-5 on a dataset. */
#include "common/text.h"
#include "storage/record.h"
#include "common/thread_pool.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "kernels/backend.h"
#include "tools/cli.h"
#include "train/batch.h"
#include "train/device.h"
#include "train/inputs.h"
#include "train/trainer.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: stoke eval --data VAL.stoke --checkpoint FILE [OPTIONS]\n"
    "\n"
    "Evaluate a checkpoint written by stoke train (eval mode, no augmentation):\n"
    "mean cross-entropy loss, top-1 and top-5 accuracy.\n"
    "\n"
    "options:\n"
    "  --data PATH          the dataset (same classes as the training set)\n"
    "  --checkpoint FILE    a .safetensors checkpoint (last.safetensors, best.safetensors)\n"
    "  --transform SPEC     default: the checkpoint's evaluation transform\n"
    "  --batch B            default 128 (as stoke train: the same batches give the same numbers)\n"
    "  --workers N          loader threads, default: number of cores\n"
    "  --threads N          compute threads, default: number of cores\n"
    "  --device cpu|cuda[:N] default cpu; cuda: GPU 0, cuda:N another (stoke devices)\n"
    "  --json               one JSON object on stdout (keys: val_loss, val_top1, val_top5,\n"
    "                       images, seconds)\n"
    "  -h, --help           this text\n";

static int run(int argc, char **argv)
{
    enum { O_DATA = 256, O_CKPT, O_TF, O_BATCH, O_WORKERS, O_THREADS, O_JSON, O_DEVICE, O_HELP };
    static const struct option longopts[] = {{"data", required_argument, 0, O_DATA},
                                             {"checkpoint", required_argument, 0, O_CKPT},
                                             {"transform", required_argument, 0, O_TF},
                                             {"batch", required_argument, 0, O_BATCH},
                                             {"workers", required_argument, 0, O_WORKERS},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"json", no_argument, 0, O_JSON},
                                             {"device", required_argument, 0, O_DEVICE},
                                             {"help", no_argument, 0, O_HELP},
                                             {0, 0, 0, 0}};
    const char *data = NULL, *ckpt = NULL, *transform = NULL;
    int64_t batch = 128, workers = stk_cpu_count(), threads = stk_cpu_count();
    bool json = false;
    stk_device_spec device = {STK_DEVICE_CPU, 0};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DATA: data = optarg; break;
        case O_CKPT: ckpt = optarg; break;
        case O_TF: transform = optarg; break;
        case O_JSON: json = true; break;
        case O_DEVICE:
            if (stk_device_spec_parse(optarg, &device) != STK_OK)
                return stk_cli_usage("eval", "--device %s", stk_last_error());
            break;
        case O_BATCH:
            if (!stk_cli_int("eval", "--batch", optarg, 1, 65536, &batch)) return STK_EXIT_USAGE;
            break;
        case O_WORKERS:
            if (!stk_cli_int("eval", "--workers", optarg, 1, 1024, &workers)) return STK_EXIT_USAGE;
            break;
        case O_THREADS:
            if (!stk_cli_int("eval", "--threads", optarg, 1, 1024, &threads)) return STK_EXIT_USAGE;
            break;
        case O_HELP:
        case 'h': fputs(help, stdout); return STK_EXIT_OK;
        default:
            return stk_cli_usage("eval", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return stk_cli_usage("eval", "unexpected argument '%s'", argv[optind]);
    if (!data || !ckpt) return stk_cli_usage("eval", "--data and --checkpoint are required");
    stk_cpu_set_threads((int)threads);
    const stk_copy_engine *ce; /* the device before any loader (pinned batch memory) */
    if (stk_device_spec_open(&device, &ce) != STK_OK) return stk_cli_fail();

    /* the model as the checkpoint describes it */
    stk_safetensors *f;
    if (stk_safetensors_read(ckpt, &f) != STK_OK) return stk_cli_fail();
    /* The checkpoint's own description, checked like any input. */
    const char *name = stk_safetensors_meta(f, "model"),
               *vt = stk_safetensors_meta(f, "val_transform");
    int64_t ch = 0, cl = 0, sz = 0;
    if (!name) {
        fprintf(stderr, "stoke: %s: not a Stoke checkpoint (no model metadata)\n", ckpt);
        stk_safetensors_free(f);
        return STK_EXIT_ERROR;
    }
    if (stk_safetensors_meta_int(f, "in_channels", 1, 3, &ch) != STK_OK ||
        stk_safetensors_meta_int(f, "classes", 1, STK_MAX_CLASSES, &cl) != STK_OK ||
        stk_safetensors_meta_int(f, "image_size", 1, STK_MAX_SIDE, &sz) != STK_OK) {
        stk_safetensors_free(f);
        return stk_cli_fail();
    }
    char *model_name = strdup(name);
    /* Messages about the transform name where it came from. */
    char *tf = strdup(transform ? transform : vt ? vt : "");
    char *tf_from =
        transform ? strdup("--transform") : stk_text_printf("%s: its val_transform", ckpt);
    stk_safetensors_free(f);
    if (!model_name || !tf || !tf_from) {
        free(model_name), free(tf), free(tf_from);
        fprintf(stderr, "stoke: out of memory\n");
        return STK_EXIT_ERROR;
    }
    stk_model_config cfg = {
        .name = model_name, .in_channels = (int)ch, .classes = (int)cl, .image_size = (int)sz};

    int rc = STK_EXIT_ERROR;
    stk_model *model = NULL;
    stk_trainer *trainer = NULL;
    stk_dataset *ds;
    if (stk_dataset_open(data, &ds) != STK_OK) goto out;
    const stk_meta *m = stk_dataset_meta(ds);
    stk_trainer_config tc = stk_trainer_defaults();
    tc.device = ce;
    stk_batch_norm_stats(m, data, tc.mean, tc.std);
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
    else if ((st = stk_train_check_transform(m, tf_from, tf, &size)) == STK_OK &&
             size != cfg.image_size)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s %s gives %d px images; the model was trained on %d px", tf_from, tf,
                       size, cfg.image_size);
    stk_dataset_close(ds);
    if (st != STK_OK) goto fail;

    stk_load_report rep;
    stk_eval_result r;
    if ((st = stk_model_create(&cfg, &model)) != STK_OK) goto fail;
    if ((st = stk_checkpoint_load(ckpt, model, NULL, true, &rep)) == STK_OK &&
        (st = stk_model_to(model, device.kind)) == STK_OK &&
        (st = stk_trainer_create(&tc, model, NULL, &trainer)) == STK_OK) {
        stk_loader_options o = stk_trainer_eval_options(trainer, tf, (int)batch, (int)workers);
        stk_loader *l;
        if ((st = stk_loader_open(data, &o, &l)) == STK_OK) {
            st = stk_trainer_evaluate(trainer, l, json ? NULL : "eval", &r);
            stk_loader_close(l);
        }
    }
    if (st != STK_OK) goto fail;
    if (json)
        printf("{\"val_loss\": %.6f, \"val_top1\": %.4f, \"val_top5\": %.4f, \"images\": %" PRIu64
               ", \"seconds\": %.2f}\n",
               r.loss, r.top1, r.top5, r.images, r.seconds);
    else
        printf("%s on %s (%" PRIu64 " images, transform %s): loss %.4f, top-1 %.2f%%, top-5 "
               "%.2f%% (%.1f s)\n",
               ckpt, data, r.images, tf, r.loss, r.top1, r.top5, r.seconds);
    rc = STK_EXIT_OK;
    goto out;
fail:
    rc = stk_cli_fail();
out:
    stk_trainer_destroy(trainer);
    stk_model_destroy(model);
    free(model_name);
    free(tf);
    free(tf_from);
    return rc;
}

const stk_command stk_cmd_eval = {"eval", "evaluate a checkpoint on a dataset", help, run};
