/* stoke export: a checkpoint's model for other tools (ONNX, weights-only
 * safetensors; run/export.h), and what was written. */
#include "common/json.h"
#include "run/export.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct export_args {
    int format, input;
    int64_t opset;
    const char *out;
    bool no_fold, json, ema;
} export_args;

#define T export_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_CHOICE(T, format, "format", "FORMAT", stk_export_formats,
                    "onnx: the model for inference (ONNX IR 8, opset 17); safetensors:\n"
                    "the model's weights alone, as PyTorch's state dict (torchvision's\n"
                    "names and layouts, num_batches_tracked as I64, \"format\": \"pt\"),\n"
                    "no optimizer state; default onnx"),
    STK_FLAG_TEXT(T, out, "out", "FILE",
                  "default: beside the checkpoint, NAME.onnx or NAME.weights.safetensors",
                  .letter = 'o'),
    STK_FLAG_INT(T, opset, "opset", "N", 13, 17,
                 "onnx: 17 (IR 8, the default) or 13 (IR 7, for older runtimes); a\n"
                 "model imported from ONNX keeps its file's opset"),
    STK_FLAG_BOOL(T, no_fold, "no-fold",
                  "onnx: keep batch norm as BatchNormalization nodes (default: folded\n"
                  "into the convolution before it, as torch.onnx.export in eval mode)"),
    STK_FLAG_CHOICE(T, input, "input", "KIND", stk_export_inputs,
                    "onnx: f32-nchw (default: normalised floats, torchvision's\n"
                    "convention) or u8-nhwc (decoded pixels; the normalisation is in the\n"
                    "graph: Cast, Sub, Div, Transpose)"),
    STK_FLAG_BOOL(T, ema, "ema",
                  "export the checkpoint's moving average of the weights (a run\n"
                  "trained with --ema-decay) instead of its weights"),
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
    .max_args = 1,
    .first_arg_names = (const char *const[]){"checkpoint", NULL}};

static int export_main(int argc, char **argv)
{
    export_args a = {.opset = 0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    stk_export_request q = stk_export_defaults();
    q.checkpoint = pos[0], q.out = a.out, q.format = (stk_export_format)a.format;
    q.opset = (int)a.opset, q.fold = !a.no_fold, q.input = (stk_onnx_input)a.input, q.ema = a.ema;
    if (a.opset != 0 && a.opset != 13 && a.opset != 17)
        return stk_cli_usage("export", "--opset %" PRId64 ": 17 (the default) or 13", a.opset);
    stk_export_report r;
    stk_status st = stk_export(&q, &r);
    int rc = STK_EXIT_OK;
    if (st == STK_ERR_INVALID_ARG && r.out && !r.ckpt.path) /* --out the checkpoint itself */
        rc = stk_cli_usage("export", "%s", stk_last_error());
    else if (st != STK_OK)
        rc = stk_cli_fail();
    if (st == STK_ERR_INVALID_ARG && a.opset && r.ckpt.model && !strcmp(r.ckpt.model, "onnx"))
        rc = STK_EXIT_USAGE; /* --opset other than the imported file's */
    const stk_ckpt_desc *d = &r.ckpt;
    if (rc == STK_EXIT_OK && a.json) {
        printf("{\"out\": ");
        stk_json_write_string(stdout, r.out);
        printf(", \"format\": \"%s\", \"tensors\": %d, \"bytes\": %lld, \"source_sha256\": "
               "\"%s\"}\n",
               stk_export_formats[a.format], r.tensors, (long long)r.bytes, r.sha256);
    } else if (rc == STK_EXIT_OK) {
        printf("%s: %s %s (%d classes, %d px), %d tensors, %.1f MB (%s); source sha256 "
               "%.16s...\n",
               r.out, d->model, stk_export_formats[a.format], d->cfg.classes, d->cfg.image_size,
               r.tensors, (double)r.bytes / 1e6,
               a.format == STK_EXPORT_SAFETENSORS ? "weights only"
               : a.input                          ? "u8 NHWC pixels in"
                                                  : "normalised f32 NCHW in",
               r.sha256);
    }
    stk_export_report_free(&r);
    return rc;
}

const stk_command stk_cmd_export = {
    "export", "export a checkpoint's model (ONNX, weights-only safetensors)", &cli, export_main};
