/* stoke info CHECKPOINT.safetensors: what a checkpoint (or an exported
 * weights file) holds: the model, its classes by name, how it was trained
 * and where training stands. */
#include "tools/info_checkpoint.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/sha256.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "run/checkpoint_read.h"
#include "tools/cli.h"
#include "train/position.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A metadata value as printable text ("-": none). */
static const char *meta(const stk_safetensors *f, const char *key, char *buf, size_t n)
{
    const char *v = stk_safetensors_meta(f, key);
    return v ? stk_printable(v, buf, n) : "-";
}

static void json_meta(const stk_safetensors *f, const char *key, bool comma)
{
    const char *v = stk_safetensors_meta(f, key);
    printf("%s\"%s\": ", comma ? ", " : "", key);
    if (v)
        stk_json_write_string(stdout, v);
    else
        printf("null");
}

static void print_json(const stk_ckpt_desc *d, const stk_safetensors *f, const char *sha,
                       int64_t params, const stk_train_position *pos, bool trained)
{
    printf("{\"path\": ");
    stk_json_write_string(stdout, d->path);
    printf(", \"file_bytes\": %zu, \"sha256\": \"%s\", ", f->len, sha);
    json_meta(f, "format", false);
    printf(", \"model\": ");
    stk_json_write_string(stdout, d->model);
    printf(", \"in_channels\": %d, \"image_size\": %d, \"classes\": %d, \"tensors\": %d, "
           "\"parameters\": %" PRId64 ", \"class_names\": ",
           d->cfg.in_channels, d->cfg.image_size, d->cfg.classes, f->n, params);
    if (d->class_names) {
        printf("[");
        for (int i = 0; i < d->n_class_names; i++) {
            printf("%s", i ? ", " : "");
            stk_json_write_string(stdout, d->class_names[i]);
        }
        printf("]");
    } else {
        printf("null");
    }
    const char *keys[] = {"input_mean", "input_std", "transform", "val_transform", "data",
                          "optimizer",  "lr",        "ranks",     "batch_per_rank"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) json_meta(f, keys[i], true);
    if (trained)
        printf(", \"epoch\": %" PRId64 ", \"step\": %" PRId64 ", \"best_epoch\": %" PRId64 "}\n",
               pos->epoch, pos->step, pos->best_epoch);
    else
        printf(", \"epoch\": null, \"step\": null, \"best_epoch\": null}\n");
}

static void print_text(const stk_ckpt_desc *d, const stk_safetensors *f, const char *sha,
                       int64_t params, const stk_train_position *pos, bool trained)
{
    char b[6][256];
    const char *fmt = stk_safetensors_meta(f, "format");
    printf("%s: %s, %.1f MB, sha256 %.16s...\n", stk_printable(d->path, b[0], sizeof b[0]),
           fmt && !strcmp(fmt, "pt") ? "weights only (stoke export)" : "Stoke checkpoint",
           (double)f->len / 1e6, sha);
    printf("  model    %s: %d channel%s, %d px, %d classes; %" PRId64 " parameters in %d tensors\n",
           d->model, d->cfg.in_channels, d->cfg.in_channels == 1 ? "" : "s", d->cfg.image_size,
           d->cfg.classes, params, f->n - (d->onnx != NULL));
    if (d->onnx)
        printf("  graph    from ONNX, kept in the checkpoint (%.1f MB)\n",
               (double)d->onnx_len / 1e6);
    if (d->class_names) {
        printf("  classes  ");
        int shown = d->n_class_names < 20 ? d->n_class_names : 20;
        for (int i = 0; i < shown; i++)
            printf("%s%s", i ? ", " : "", stk_printable(d->class_names[i], b[0], sizeof b[0]));
        if (shown < d->n_class_names) printf(", ... (%d more)", d->n_class_names - shown);
        printf("\n");
    } else {
        printf("  classes  (no names recorded: numbered 0..%d)\n", d->cfg.classes - 1);
    }
    printf("  input    mean %s, std %s; transform %s, evaluation %s\n",
           meta(f, "input_mean", b[0], sizeof b[0]), meta(f, "input_std", b[1], sizeof b[1]),
           meta(f, "transform", b[2], sizeof b[2]), meta(f, "val_transform", b[3], sizeof b[3]));
    if (trained)
        printf("  trained  %" PRId64 " epoch%s, %" PRId64 " steps (%s, lr %s) on %s, batch %s x %s "
               "rank(s); best epoch %" PRId64 "\n",
               pos->epoch, pos->epoch == 1 ? "" : "s", pos->step,
               meta(f, "optimizer", b[0], sizeof b[0]), meta(f, "lr", b[1], sizeof b[1]),
               meta(f, "data", b[2], sizeof b[2]), meta(f, "batch_per_rank", b[3], sizeof b[3]),
               meta(f, "ranks", b[4], sizeof b[4]), pos->best_epoch);
}

int info_checkpoint(const char *path, bool json)
{
    stk_ckpt_desc d;
    if (stk_ckpt_describe(path, &d) != STK_OK) return stk_cli_fail();
    stk_safetensors *f;
    char sha[65];
    if (stk_safetensors_read(path, &f) != STK_OK || stk_sha256_file(path, sha) != STK_OK) {
        stk_ckpt_desc_free(&d);
        return stk_cli_fail();
    }
    /* trainable: neither optimizer state, batch norm's buffers nor an ONNX model's file */
    int64_t params = 0;
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->entries[i].name, "optim.", 6) && !strstr(f->entries[i].name, ".running_") &&
            strcmp(f->entries[i].name, STK_CHECKPOINT_ONNX_TENSOR) &&
            !strstr(f->entries[i].name, "num_batches_tracked")) {
            int64_t n = 1;
            for (int k = 0; k < f->entries[i].ndim; k++) n *= f->entries[i].shape[k];
            params += n;
        }
    stk_train_position pos;
    bool trained = stk_train_position_from_meta(f, &pos) == STK_OK;
    if (json)
        print_json(&d, f, sha, params, &pos, trained);
    else
        print_text(&d, f, sha, params, &pos, trained);
    stk_safetensors_free(f);
    stk_ckpt_desc_free(&d);
    return STK_EXIT_OK;
}
