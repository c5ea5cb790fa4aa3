/* A checkpoint's model exported (export.h). */
#include "run/export.h"

#include "common/json.h"
#include "common/sha256.h"
#include "common/text.h"
#include "engine/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const stk_export_formats[] = {"onnx", "safetensors", NULL};
const char *const stk_export_inputs[] = {"f32-nchw", "u8-nhwc", NULL};

stk_export_request stk_export_defaults(void)
{
    return (stk_export_request){.format = STK_EXPORT_ONNX, .fold = true};
}

/* NAME.safetensors -> NAME.onnx or NAME.weights.safetensors, beside it */
static char *default_out(const char *ckpt, stk_export_format format)
{
    size_t n = strlen(ckpt);
    const char *ext = ".safetensors";
    if (n > strlen(ext) && !strcmp(ckpt + n - strlen(ext), ext)) n -= strlen(ext);
    return stk_text_printf("%.*s%s", (int)n, ckpt,
                           format == STK_EXPORT_ONNX ? ".onnx" : ".weights.safetensors");
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

static stk_status fill_meta(const stk_ckpt_desc *d, const stk_export_request *q, const char *sha,
                            meta *m, bool model_keys)
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
        m->k[m->n] = "input", m->v[m->n++] = stk_export_inputs[q->input];
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

static stk_status export_model(const stk_ckpt_desc *d, const stk_export_request *q, const char *out,
                               const char *sha, int *tensors)
{
    stk_model *model;
    STK_TRY(stk_ckpt_load_model(d, &model));
    meta m;
    stk_status st = fill_meta(d, q, sha, &m, q->format == STK_EXPORT_ONNX);
    *tensors = stk_model_param_count(model);
    if (st == STK_OK && q->format == STK_EXPORT_SAFETENSORS) {
        st = stk_checkpoint_save_weights(out, model, m.n, m.k, m.v);
    } else if (st == STK_OK) {
        stk_onnx_options o = stk_onnx_defaults();
        o.opset = q->opset; /* 0: the default (an imported model's: its file's) */
        o.fold_bn = q->fold;
        o.input = q->input;
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

stk_status stk_export(const stk_export_request *q, stk_export_report *r)
{
    memset(r, 0, sizeof *r);
    if (!q->checkpoint) return stk_error(STK_ERR_INVALID_ARG, "a checkpoint is required");
    if (q->opset != 0 && q->opset != 13 && q->opset != 17)
        return stk_error(STK_ERR_INVALID_ARG, "--opset %d: 17 (the default) or 13", q->opset);
    if (!(r->out = q->out ? strdup(q->out) : default_out(q->checkpoint, q->format)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    if (same_file(r->out, q->checkpoint))
        return stk_error(STK_ERR_INVALID_ARG, "--out %s is the checkpoint itself", r->out);
    STK_TRY(stk_ckpt_describe(q->checkpoint, &r->ckpt));
    r->ckpt.use_ema = q->ema;
    STK_TRY(stk_sha256_file(q->checkpoint, r->sha256));
    STK_TRY(export_model(&r->ckpt, q, r->out, r->sha256, &r->tensors));
    struct stat sb;
    if (stat(r->out, &sb) != 0) return stk_error(STK_ERR_IO, "%s: %s", r->out, strerror(errno));
    r->bytes = (int64_t)sb.st_size;
    return STK_OK;
}

void stk_export_report_free(stk_export_report *r)
{
    free(r->out);
    stk_ckpt_desc_free(&r->ckpt);
    memset(r, 0, sizeof *r);
}
