/* A model whose forward is an ONNX graph (onnx_graph.h's stk_model_from_onnx_file). */
#include "engine/autograd.h"
#include "engine/nn_impl.h"
#include "engine/onnx_graph_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A model around the read file (taken). */
/* want (0: any) against what the file declares (0: symbolic or not given). */
static stk_status agree(const char *path, const char *what, int declared, int *want)
{
    if (*want && declared && *want != declared)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: its graph is declared for %s %d, not %d (export it with an input "
                         "and a model of the size it will train at)",
                         path, what, declared, *want);
    if (!*want) *want = declared;
    return STK_OK;
}

/* Shape arithmetic that cannot run at the size the model will train at
 * fails here, at load, not at the first step: one eval-mode forward of two
 * zero images (as many as the file fixes, when it fixes the batch), nothing recorded (batch norm's statistics, dropout and the
 * counters untouched), its output [2, classes]. Skipped when the size is
 * not known yet (symbolic in the file, not asked for). */
static stk_status dry_run(stk_model *m, const char *path, int64_t batch)
{
    const stk_model_config *c = &m->cfg;
    if (batch <= 0 || batch > 64) batch = 2; /* a symbolic batch: any; a fixed one: that one */
    if (c->in_channels <= 0 || c->image_size <= 0 ||
        batch * c->in_channels * c->image_size * c->image_size > (1 << 24))
        return STK_OK;
    int64_t shape[4] = {batch, c->in_channels, c->image_size, c->image_size};
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *x = NULL, *y = NULL;
    bool was = m->training;
    m->training = false;
    stk_no_grad_begin();
    stk_status st = stk_tensor_zeros(STK_F32, 4, shape, &x);
    if (st == STK_OK) st = stk_model_forward(m, x, &y);
    if (st == STK_OK && c->classes > 0 &&
        (stk_tensor_ndim(y) != 2 || stk_tensor_dim(y, 0) != batch ||
         stk_tensor_dim(y, 1) != c->classes))
        st = stk_error(STK_ERR_UNSUPPORTED, "its output is %s, not [%lld, %d] (the logits)",
                       stk_tensor_shape_str(y), (long long)batch, c->classes);
    stk_no_grad_end();
    m->training = was;
    stk_scope_end(s); /* (x and y are the scope's) */
    if (st != STK_OK)
        stk_error_prefix(st, "%s: at load, a forward of a [%lld, %d, %d, %d] input", path,
                         (long long)batch, c->in_channels, c->image_size, c->image_size);
    return st;
}

static stk_status model_of(stk_onnx_model *file, const char *path, const stk_model_config *want,
                           stk_model **out)
{
    int64_t out_dims[STK_ONNX_MAX_DIMS] = {0};
    int out_nd = file->n_outputs == 1 ? file->outputs[0].ndim : -1;
    for (int d = 0; d < out_nd; d++) out_dims[d] = file->outputs[0].dims[d];
    stk_onnx_graph *g;
    STK_TRY(stk_onnx_graph_build(file, path, &g));
    stk_module *root = eng_mod_new(MOD_ONNX_GRAPH, "");
    stk_model *m = calloc(1, sizeof *m);
    if (!root || !m) {
        stk_onnx_graph_destroy(g);
        eng_mod_free(root);
        free(m);
        return stk_error(STK_ERR_NOMEM, "no memory for a model");
    }
    root->graph = g;
    m->root = root;
    int64_t in[STK_ONNX_MAX_DIMS] = {0};
    int nd = stk_onnx_graph_input_shape(g, in);
    snprintf(m->name, sizeof m->name, "onnx");
    stk_model_config c = want ? *want : (stk_model_config){0};
    int side = nd == 4 && in[2] > 0 && in[2] == in[3] && in[2] <= 1 << 20 ? (int)in[2] : 0;
    stk_status st = STK_OK;
    if (nd != 4 && nd >= 0)
        st = stk_error(STK_ERR_UNSUPPORTED, "%s: its input has %d dimensions, not [N, C, H, W]",
                       path, nd);
    if (st == STK_OK)
        st = agree(path, "input channels", in[1] > 0 && in[1] <= 1 << 20 ? (int)in[1] : 0,
                   &c.in_channels);
    if (st == STK_OK) st = agree(path, "image size", side, &c.image_size);
    if (st == STK_OK)
        st = agree(path, "classes",
                   out_nd == 2 && out_dims[1] > 0 && out_dims[1] <= 1 << 20 ? (int)out_dims[1] : 0,
                   &c.classes);
    m->cfg = (stk_model_config){.name = m->name,
                                .in_channels = c.in_channels,
                                .image_size = c.image_size,
                                .classes = c.classes,
                                .seed = c.seed,
                                .bn_momentum = 0.1f,
                                .bn_eps = 1e-5f};
    m->training = true;
    if (st == STK_OK) st = eng_model_collect_params(m);
    if (st == STK_OK) { /* one unit, the graph, unless it has cuts (stk_model_unit_count) */
        m->units[0] = root;
        m->n_units = 1;
    }
    if (st == STK_OK) st = eng_onnx_units_record(g); /* the dry run tells which values are tensors */
    if (st == STK_OK) st = dry_run(m, path, nd == 4 ? in[0] : -1);
    if (st == STK_OK) st = eng_onnx_find_units(g); /* (none when the dry run was skipped) */
    if (st != STK_OK) {
        stk_model_destroy(m);
        return st;
    }
    *out = m;
    return STK_OK;
}

stk_status stk_model_from_onnx_file(const char *path, const stk_model_config *cfg,
                                    stk_model **out)
{
    *out = NULL;
    stk_onnx_model *file;
    STK_TRY(stk_onnx_read_file(path, &file));
    return model_of(file, path, cfg, out);
}

stk_status stk_model_from_onnx(const void *bytes, size_t len, const char *what,
                               const stk_model_config *cfg, stk_model **out)
{
    *out = NULL;
    stk_onnx_model *file;
    STK_TRY(stk_onnx_read(bytes, len, what, &file));
    return model_of(file, what, cfg, out);
}

bool stk_model_onnx_file(const stk_model *m, const void **bytes, size_t *len)
{
    if (m->root->kind != MOD_ONNX_GRAPH) return false;
    stk_onnx_graph_file(m->root->graph, bytes, len);
    return true;
}

