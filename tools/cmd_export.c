/* stoke export: a checkpoint's model for other tools (weights-only safetensors). */
#include "common/json.h"
#include "common/sha256.h"
#include "common/text.h"
#include "engine/checkpoint.h"
#include "tools/ckpt_read.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct export_args {
    int format;
    const char *out;
    bool json;
} export_args;

static const char *const formats[] = {"safetensors", NULL};

#define T export_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_CHOICE(T, format, "format", "FORMAT", formats,
                    "safetensors: the model's weights alone, as PyTorch's state dict\n"
                    "(torchvision's names and layouts, num_batches_tracked as I64,\n"
                    "\"format\": \"pt\"), no optimizer state; default safetensors"),
    STK_FLAG_TEXT(T, out, "out", "FILE",
                  "default: beside the checkpoint, NAME.weights.safetensors"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout (keys: out, format, tensors, bytes,\n"
                  "source_sha256)"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "export",
    .usage = "stoke export CHECKPOINT [--format safetensors] [--out FILE]",
    .about = "Take a trained model out of Stoke. --format safetensors writes the model's\n"
             "tensors alone under PyTorch's names, so that\n"
             "  torchvision.models.resnet18(num_classes=N).load_state_dict(\n"
             "      safetensors.torch.load_file(FILE), strict=True)\n"
             "succeeds for a resnet18 trained at 64 px or more (torchvision's stem; below\n"
             "64 px Stoke's resnet18 has the CIFAR stem, as bench/torch_models.py builds\n"
             "it). The metadata keeps what a user of the weights needs: model, classes,\n"
             "image_size, in_channels, input_mean and input_std (the normalisation\n"
             "training used), val_transform, class_names (a JSON array), the source\n"
             "checkpoint's SHA-256 and Stoke's version. The checkpoint is loaded strictly\n"
             "first: a missing, unexpected or mismatched tensor is an error naming it.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1};

/* NAME.safetensors -> NAME.weights.safetensors, beside it */
static char *default_out(const char *ckpt)
{
    size_t n = strlen(ckpt);
    const char *ext = ".safetensors";
    if (n > strlen(ext) && !strcmp(ckpt + n - strlen(ext), ext)) n -= strlen(ext);
    return stk_text_printf("%.*s.weights.safetensors", (int)n, ckpt);
}

static bool same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static stk_status export_weights(const ckpt_desc *d, const char *out, const char *sha, int *tensors)
{
    stk_model *m;
    STK_TRY(ckpt_load_model(d, &m));
    char stats[2][96];
    const char *k[8], *v[8];
    int n = 0;
    if (!isnan(d->mean[0])) {
        snprintf(stats[0], sizeof stats[0], "%.9g,%.9g,%.9g", (double)d->mean[0],
                 (double)d->mean[1], (double)d->mean[2]);
        snprintf(stats[1], sizeof stats[1], "%.9g,%.9g,%.9g", (double)d->std[0], (double)d->std[1],
                 (double)d->std[2]);
        k[n] = "input_mean", v[n++] = stats[0];
        k[n] = "input_std", v[n++] = stats[1];
    }
    if (d->val_transform) k[n] = "val_transform", v[n++] = d->val_transform;
    char *names = d->class_names ? stk_json_string_array(d->class_names, d->n_class_names) : NULL;
    if (d->class_names && !names) {
        stk_model_destroy(m);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    if (names) k[n] = "class_names", v[n++] = names;
    k[n] = "source_sha256", v[n++] = sha;
    k[n] = "stoke_version", v[n++] = STOKE_VERSION;
    stk_status st = stk_checkpoint_save_weights(out, m, n, k, v);
    *tensors = stk_model_param_count(m);
    free(names);
    stk_model_destroy(m);
    return st;
}

static int export_main(int argc, char **argv)
{
    export_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    const char *ckpt = pos[0];
    char *out = a.out ? strdup(a.out) : default_out(ckpt);
    if (!out) {
        fprintf(stderr, "stoke: out of memory\n");
        return STK_EXIT_ERROR;
    }
    if (same_file(out, ckpt)) {
        free(out);
        return stk_cli_usage("export", "--out %s is the checkpoint itself", a.out ? a.out : "");
    }
    ckpt_desc d;
    char sha[65];
    int tensors = 0, rc = STK_EXIT_OK;
    if (ckpt_describe(ckpt, &d) != STK_OK) {
        free(out);
        return stk_cli_fail();
    }
    if (stk_sha256_file(ckpt, sha) != STK_OK || export_weights(&d, out, sha, &tensors) != STK_OK)
        rc = stk_cli_fail();
    struct stat sb;
    if (rc == STK_EXIT_OK && stat(out, &sb) != 0) {
        fprintf(stderr, "stoke: %s: %s\n", out, strerror(errno));
        rc = STK_EXIT_ERROR;
    }
    if (rc == STK_EXIT_OK && a.json) {
        printf("{\"out\": ");
        stk_json_write_string(stdout, out);
        printf(
            ", \"format\": \"%s\", \"tensors\": %d, \"bytes\": %lld, \"source_sha256\": \"%s\"}\n",
            formats[a.format], tensors, (long long)sb.st_size, sha);
    } else if (rc == STK_EXIT_OK) {
        printf("%s: %s %s (%d classes, %d px), %d tensors, %.1f MB (weights only); source "
               "sha256 %.16s...\n",
               out, d.model, formats[a.format], d.cfg.classes, d.cfg.image_size, tensors,
               (double)sb.st_size / 1e6, sha);
    }
    ckpt_desc_free(&d);
    free(out);
    return rc;
}

const stk_command stk_cmd_export = {
    "export", "export a checkpoint's model (weights-only safetensors)", &cli, export_main};
