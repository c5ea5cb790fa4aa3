/* stoke export: a checkpoint's model for other tools (weights-only safetensors). */
#include "common/json.h"
#include "common/sha256.h"
#include "common/text.h"
#include "engine/checkpoint.h"
#include "engine/onnx.h"
#include "run/checkpoint_read.h"
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
    int format, input;
    int64_t opset;
    const char *out;
    bool no_fold, json, ema;
} export_args;

enum { FORMAT_ONNX, FORMAT_SAFETENSORS };
static const char *const formats[] = {"onnx", "safetensors", NULL};
static const char *const inputs[] = {"f32-nchw", "u8-nhwc", NULL};

#define T export_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_CHOICE(T, format, "format", "FORMAT", formats,
                    "onnx: the model for inference (ONNX IR 8, opset 17); safetensors:\n"
                    "the model's weights alone, as PyTorch's state dict (torchvision's\n"
                    "names and layouts, num_batches_tracked as I64, \"format\": \"pt\"),\n"
                    "no optimizer state; default onnx"),
    STK_FLAG_TEXT(T, out, "out", "FILE",
                  "default: beside the checkpoint, NAME.onnx or NAME.weights.safetensors"),
    STK_FLAG_INT(T, opset, "opset", "N", 13, 17,
                 "onnx: 17 (IR 8, the default) or 13 (IR 7, for older runtimes); a\n"
                 "model imported from ONNX keeps its file's opset"),
    STK_FLAG_BOOL(T, no_fold, "no-fold",
                  "onnx: keep batch norm as BatchNormalization nodes (default: folded\n"
                  "into the convolution before it, as torch.onnx.export in eval mode)"),
    STK_FLAG_CHOICE(T, input, "input", "KIND", inputs,
                    "onnx: f32-nchw (default: normalised floats, torchvision's\n"
                    "convention) or u8-nhwc (decoded pixels; the normalisation is in the\n"
                    "graph: Cast, Sub, Div, Transpose)"),
    STK_FLAG_BOOL(T, ema, "ema",
                  "export the checkpoint's moving average of the weights (a run\n"
                  "trained with --ema) instead of its weights"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout (keys: out, format, tensors, bytes,\n"
                  "source_sha256)"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "export",
    .usage = "stoke export CHECKPOINT [--format onnx|safetensors] [--out FILE]",
    .about = "Take a trained model out of Stoke.\n"
             "--format onnx writes an ONNX model for inference (onnxruntime, TensorRT,\n"
             "OpenVINO, ...): input \"input\" with a symbolic batch dimension, output\n"
             "\"logits\" [batch, classes], initializers under the state dict's names, nodes\n"
             "scoped as PyTorch names them (/layer1/layer1.0/conv1/Conv), and\n"
             "metadata_props: model, classes, image_size, in_channels, input (f32-nchw or\n"
             "u8-nhwc), input_mean, input_std, val_transform, class_names (a JSON array),\n"
             "source_sha256 and stoke_version.\n"
             "--format safetensors writes the model's tensors alone under PyTorch's names,\n"
             "so that\n"
             "  torchvision.models.resnet18(num_classes=N).load_state_dict(\n"
             "      safetensors.torch.load_file(FILE), strict=True)\n"
             "succeeds for a resnet18 trained at 64 px or more (torchvision's stem; below\n"
             "64 px Stoke's resnet18 has the CIFAR stem, as bench/torch_models.py builds\n"
             "it), with the same metadata. The checkpoint is loaded strictly first: a\n"
             "missing, unexpected or mismatched tensor is an error naming it.\n"
             "A run of a model imported from ONNX (train --model FILE.onnx) exports its\n"
             "file's graph in eval mode with the trained weights: batch norm folded (or\n"
             "BatchNormalization in eval form with --no-fold), Dropout and stochastic\n"
             "depth as Identity, the rest as the file has it; its safetensors are the\n"
             "module's state dict, for load_state_dict(strict=True).\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1};

/* NAME.safetensors -> NAME.onnx or NAME.weights.safetensors, beside it */
static char *default_out(const char *ckpt, int format)
{
    size_t n = strlen(ckpt);
    const char *ext = ".safetensors";
    if (n > strlen(ext) && !strcmp(ckpt + n - strlen(ext), ext)) n -= strlen(ext);
    return stk_text_printf("%.*s%s", (int)n, ckpt,
                           format == FORMAT_ONNX ? ".onnx" : ".weights.safetensors");
}

static bool same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* What the exported file says of the model beyond its tensors. */
typedef struct meta {
    const char *k[16], *v[16];
    int n;
    char text[6][96];
    char *names; /* owned */
} meta;

static stk_status fill_meta(const stk_ckpt_desc *d, const export_args *a, const char *sha, meta *m,
                            bool model_keys)
{
    memset(m, 0, sizeof *m);
    if (model_keys) { /* (the weights file's writer adds these itself) */
        snprintf(m->text[2], sizeof m->text[2], "%d", d->cfg.classes);
        snprintf(m->text[3], sizeof m->text[3], "%d", d->cfg.image_size);
        snprintf(m->text[4], sizeof m->text[4], "%d", d->cfg.in_channels);
        m->k[m->n] = "model", m->v[m->n++] = d->model;
        m->k[m->n] = "classes", m->v[m->n++] = m->text[2];
        m->k[m->n] = "image_size", m->v[m->n++] = m->text[3];
        m->k[m->n] = "in_channels", m->v[m->n++] = m->text[4];
        m->k[m->n] = "input", m->v[m->n++] = inputs[a->input];
    }
    if (!isnan(d->mean[0])) {
        snprintf(m->text[0], sizeof m->text[0], "%.9g,%.9g,%.9g", (double)d->mean[0],
                 (double)d->mean[1], (double)d->mean[2]);
        snprintf(m->text[1], sizeof m->text[1], "%.9g,%.9g,%.9g", (double)d->std[0],
                 (double)d->std[1], (double)d->std[2]);
        m->k[m->n] = "input_mean", m->v[m->n++] = m->text[0];
        m->k[m->n] = "input_std", m->v[m->n++] = m->text[1];
    }
    if (d->val_transform) m->k[m->n] = "val_transform", m->v[m->n++] = d->val_transform;
    if (d->class_names) {
        if (!(m->names = stk_json_string_array(d->class_names, d->n_class_names)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        m->k[m->n] = "class_names", m->v[m->n++] = m->names;
    }
    if (d->use_ema) m->k[m->n] = "weights", m->v[m->n++] = "ema";
    m->k[m->n] = "source_sha256", m->v[m->n++] = sha;
    m->k[m->n] = "stoke_version", m->v[m->n++] = STOKE_VERSION;
    return STK_OK;
}

static stk_status export_model(const stk_ckpt_desc *d, const export_args *a, const char *out,
                               const char *sha, int *tensors)
{
    stk_model *model;
    STK_TRY(stk_ckpt_load_model(d, &model));
    meta m;
    stk_status st = fill_meta(d, a, sha, &m, a->format == FORMAT_ONNX);
    *tensors = stk_model_param_count(model);
    if (st == STK_OK && a->format == FORMAT_SAFETENSORS) {
        st = stk_checkpoint_save_weights(out, model, m.n, m.k, m.v);
    } else if (st == STK_OK) {
        stk_onnx_options o = stk_onnx_defaults();
        o.opset = (int)a->opset; /* 0: the default (an imported model's: its file's) */
        o.fold_bn = !a->no_fold;
        o.input = a->input == 1 ? STK_ONNX_INPUT_U8_NHWC : STK_ONNX_INPUT_F32_NCHW;
        if (!isnan(d->mean[0])) {
            memcpy(o.mean, d->mean, sizeof o.mean);
            memcpy(o.std, d->std, sizeof o.std);
        }
        o.n_meta = m.n, o.meta_keys = m.k, o.meta_values = m.v;
        st = stk_onnx_export(model, out, &o);
    }
    free(m.names);
    stk_model_destroy(model);
    return st;
}

static int export_main(int argc, char **argv)
{
    export_args a = {.opset = 0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    const char *ckpt = pos[0];
    char *out = a.out ? strdup(a.out) : default_out(ckpt, a.format);
    if (!out) {
        fprintf(stderr, "stoke: out of memory\n");
        return STK_EXIT_ERROR;
    }
    if (a.opset != 0 && a.opset != 13 && a.opset != 17) {
        free(out);
        return stk_cli_usage("export", "--opset %" PRId64 ": 17 (the default) or 13", a.opset);
    }
    if (same_file(out, ckpt)) {
        free(out);
        return stk_cli_usage("export", "--out %s is the checkpoint itself", a.out ? a.out : "");
    }
    stk_ckpt_desc d;
    char sha[65];
    int tensors = 0, rc = STK_EXIT_OK;
    if (stk_ckpt_describe(ckpt, &d) != STK_OK) {
        free(out);
        return stk_cli_fail();
    }
    d.use_ema = a.ema;
    stk_status st = stk_sha256_file(ckpt, sha);
    if (st == STK_OK) st = export_model(&d, &a, out, sha, &tensors);
    if (st != STK_OK) rc = stk_cli_fail();
    if (st == STK_ERR_INVALID_ARG && a.opset && !strcmp(d.model, "onnx"))
        rc = STK_EXIT_USAGE; /* --opset other than the imported file's */
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
        printf("%s: %s %s (%d classes, %d px), %d tensors, %.1f MB (%s); source sha256 "
               "%.16s...\n",
               out, d.model, formats[a.format], d.cfg.classes, d.cfg.image_size, tensors,
               (double)sb.st_size / 1e6,
               a.format == FORMAT_SAFETENSORS ? "weights only"
               : a.input                      ? "u8 NHWC pixels in"
                                              : "normalised f32 NCHW in",
               sha);
    }
    stk_ckpt_desc_free(&d);
    free(out);
    return rc;
}

const stk_command stk_cmd_export = {
    "export", "export a checkpoint's model (ONNX, weights-only safetensors)", &cli, export_main};
