/* Reading a checkpoint's description (checkpoint_read.h). */
#include "run/checkpoint_read.h"

#include "common/fs.h"
#include "common/json.h"
#include "engine/checkpoint.h"
#include "engine/onnx_graph.h"
#include "storage/record.h"
#include "storage/safetensors.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void stk_ckpt_desc_free(stk_ckpt_desc *d)
{
    free(d->path);
    free(d->model);
    free(d->val_transform);
    free(d->graph);
    free(d->onnx);
    stk_json_strings_free(d->class_names, d->n_class_names);
    memset(d, 0, sizeof *d);
}

/* The parts of f's metadata that describe the model, checked. */
static stk_status describe(const stk_safetensors *f, stk_ckpt_desc *d)
{
    const char *path = d->path, *name = stk_safetensors_meta(f, "model");
    if (!name)
        return stk_error(STK_ERR_FORMAT, "%s: not a Stoke checkpoint (no model metadata)", path);
    int64_t ch = 0, cl = 0, sz = 0;
    STK_TRY(stk_safetensors_meta_int(f, "in_channels", 1, 3, &ch));
    STK_TRY(stk_safetensors_meta_int(f, "classes", 1, STK_MAX_CLASSES, &cl));
    STK_TRY(stk_safetensors_meta_int(f, "image_size", 1, STK_MAX_SIDE, &sz));
    bool known = false;
    for (const char *const *n = stk_model_names(); *n; n++) known |= !strcmp(*n, name);
    char shown[160];
    const char *graph = stk_safetensors_meta(f, "model_graph");
    if (graph && !(d->graph = strdup(graph))) return stk_error(STK_ERR_NOMEM, "out of memory");
    if (graph) { /* checked whole before anything is said about it */
        stk_status st = stk_model_description_check(graph);
        if (st != STK_OK) return stk_error_prefix(st, "%s", path);
    }
    const stk_st_entry *onnx = stk_safetensors_find(f, STK_CHECKPOINT_ONNX_TENSOR);
    if (onnx) {
        if (onnx->dtype != STK_ST_U8 || onnx->ndim != 1)
            return stk_error(STK_ERR_FORMAT, "%s: its %s is not a U8 vector", path,
                             STK_CHECKPOINT_ONNX_TENSOR);
        d->onnx_len = (size_t)(onnx->end - onnx->begin);
        if (!(d->onnx = malloc(d->onnx_len ? d->onnx_len : 1)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        memcpy(d->onnx, stk_safetensors_data(f, onnx), d->onnx_len);
    }
    if (!known && !graph && !onnx)
        return stk_error(STK_ERR_FORMAT,
                         "%s: its model '%s' is not one this Stoke knows (" STK_MODEL_LIST
                         ") and the checkpoint does not describe it (no model_graph)",
                         path, stk_printable(name, shown, sizeof shown));
    const char *vt = stk_safetensors_meta(f, "val_transform");
    if (vt && strcmp(stk_printable(vt, shown, sizeof shown), vt)) /* never echoed raw */
        return stk_error(STK_ERR_CORRUPT, "%s: its val_transform '%s' is not printable text", path,
                         shown);
    const char *cn = stk_safetensors_meta(f, "class_names");
    if (cn && (!stk_json_parse_string_array(cn, (int)cl, &d->class_names, &d->n_class_names) ||
               d->n_class_names != cl))
        return stk_error(STK_ERR_CORRUPT,
                         "%s: damaged checkpoint metadata: \"class_names\" is not a JSON array "
                         "of its %" PRId64 " classes' names",
                         path, cl);
    d->cfg = (stk_model_config){
        .name = name, .in_channels = (int)ch, .classes = (int)cl, .image_size = (int)sz};
    STK_TRY(stk_checkpoint_check_config(f, &d->cfg));
    d->mean[0] = d->mean[1] = d->mean[2] = NAN;
    d->std[0] = d->std[1] = d->std[2] = 1;
    STK_TRY(stk_trainer_normalisation_from(f, d->mean, d->std));
    if (!(d->model = strdup(name)) || (vt && !(d->val_transform = strdup(vt))))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    d->cfg.name = d->model;
    return STK_OK;
}

stk_status stk_ckpt_describe(const char *path, stk_ckpt_desc *out)
{
    memset(out, 0, sizeof *out);
    if (!(out->path = strdup(path))) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(path, &f);
    if (st == STK_OK) {
        st = describe(f, out);
        stk_safetensors_free(f);
    }
    if (st != STK_OK) stk_ckpt_desc_free(out);
    return st;
}

stk_status stk_ckpt_load_model(const stk_ckpt_desc *d, stk_model **out)
{
    *out = NULL;
    stk_model *m;
    if (d->onnx) {
        STK_TRY(stk_model_from_onnx(d->onnx, d->onnx_len, d->path, &d->cfg, &m));
    } else if (d->graph) {
        stk_status st = stk_model_from_description(d->graph, &d->cfg, &m);
        if (st != STK_OK) return stk_error_prefix(st, "%s", d->path);
    } else {
        STK_TRY(stk_model_create(&d->cfg, &m));
    }
    stk_load_report rep;
    stk_status st = stk_checkpoint_load(d->path, m, NULL, true, &rep);
    if (st == STK_OK && d->use_ema) {
        int n = stk_model_param_count(m);
        stk_tensor **values = calloc((size_t)(n ? n : 1), sizeof *values);
        if (!values) st = stk_error(STK_ERR_NOMEM, "out of memory");
        for (int i = 0; values && i < n; i++) values[i] = stk_model_param(m, i)->value;
        if (st == STK_OK && !stk_checkpoint_has_ema(d->path))
            st = stk_error(STK_ERR_FORMAT,
                           "--ema: %s holds no moving average of the weights (trained "
                           "without --ema-decay)",
                           d->path);
        if (st == STK_OK) st = stk_checkpoint_load_ema(d->path, m, values);
        free(values);
    }
    if (st != STK_OK) {
        stk_model_destroy(m);
        return st;
    }
    *out = m;
    return STK_OK;
}
