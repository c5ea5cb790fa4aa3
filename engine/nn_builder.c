/* The public module builders: custom models from the same modules the zoo uses. */
#include "engine/autograd.h"
#include "engine/nn_impl.h"
#include "engine/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static stk_status check_name(const char *name)
{
    if (!name || strlen(name) >= sizeof(((stk_module *)0)->name) || strchr(name, '.'))
        return stk_error(STK_ERR_INVALID_ARG,
                         "module name '%s' must be under 32 bytes, without '.'",
                         name ? name : "(null)");
    return STK_OK;
}

#define TRY_NAME(name) STK_TRY(check_name(name))

static stk_status done(stk_module *m, stk_module **out)
{
    *out = m;
    return m ? STK_OK : STK_ERR_NOMEM; /* the builders set the message */
}

static stk_status simple_module(eng_module_kind kind, const char *name, int k, int s, int p,
                                stk_module **out)
{
    TRY_NAME(name);
    stk_module *m = eng_mod_new(kind, name);
    if (m) {
        m->kernel = k;
        m->stride = s ? s : k;
        m->padding = p;
    }
    return done(m, out);
}

stk_status stk_module_sequential(const char *name, stk_module **out)
{
    return simple_module(MOD_SEQUENTIAL, name, 0, 0, 0, out);
}

stk_status stk_module_add(stk_module *parent, stk_module *child)
{
    if (!child) return stk_error(STK_ERR_INVALID_ARG, "module %s: no child given", parent->name);
    bool container = parent->kind == MOD_SEQUENTIAL || parent->kind == MOD_RESIDUAL ||
                     parent->kind == MOD_CONCAT;
    if (!container) {
        stk_module_destroy(child);
        return stk_error(STK_ERR_INVALID_ARG,
                         "module %s is not a container (sequential, residual or concat)",
                         parent->name);
    }
    bool group = child->kind == MOD_SEQUENTIAL || child->kind == MOD_RESIDUAL;
    if (!child->name[0] && (!group || child->param_of_parent)) {
        stk_module_destroy(child);
        return stk_error(STK_ERR_INVALID_ARG,
                         "module %s: a child needs a name (only a sequential or residual group "
                         "may go without one)",
                         parent->name);
    }
    for (int i = 0; i < parent->n_kids && child->name[0]; i++)
        if (!strcmp(parent->kids[i]->name, child->name)) {
            stk_status st =
                stk_error(STK_ERR_INVALID_ARG, "module %s already has a child named '%s'",
                          parent->name, child->name);
            stk_module_destroy(child);
            return st;
        }
    return eng_mod_add(parent, child) ? STK_OK : STK_ERR_NOMEM;
}

static stk_status check_sizes(const char *what, int64_t a, int64_t b)
{
    if (a < 1 || b < 1 || a > (1 << 24) || b > (1 << 24))
        return stk_error(STK_ERR_INVALID_ARG, "%s: sizes %lld and %lld must be in 1..2^24", what,
                         (long long)a, (long long)b);
    return STK_OK;
}

stk_status stk_module_linear(const char *name, int64_t in, int64_t out, bool bias, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("linear", in, out));
    return done(eng_mod_linear(name, in, out, bias), m);
}

stk_status stk_module_conv2d(const char *name, int64_t in, int64_t out, int kernel, int stride,
                             int padding, bool bias, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("conv2d", in, out));
    if (kernel < 1 || stride < 1 || padding < 0)
        return stk_error(STK_ERR_INVALID_ARG, "conv2d %s: kernel %d, stride %d, padding %d", name,
                         kernel, stride, padding);
    return done(eng_mod_conv(name, in, out, kernel, stride, padding, bias), m);
}

stk_status stk_module_batchnorm2d(const char *name, int64_t channels, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("batchnorm2d", channels, 1));
    return done(eng_mod_bn(name, channels), m);
}

stk_status stk_module_relu(const char *name, stk_module **m)
{
    return simple_module(MOD_RELU, name, 0, 0, 0, m);
}

stk_status stk_module_dropout(const char *name, float p, stk_module **m)
{
    if (!(p >= 0.f && p < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "dropout %s: p = %g is outside [0, 1)", name,
                         (double)p);
    stk_status st = simple_module(MOD_DROPOUT, name, 0, 0, 0, m);
    if (st == STK_OK) (*m)->p = p;
    return st;
}

stk_status stk_module_maxpool2d(const char *name, int kernel, int stride, int padding,
                                stk_module **m)
{
    return simple_module(MOD_MAXPOOL2D, name, kernel, stride, padding, m);
}

stk_status stk_module_avgpool2d(const char *name, int kernel, int stride, int padding,
                                stk_module **m)
{
    return simple_module(MOD_AVGPOOL2D, name, kernel, stride, padding, m);
}

stk_status stk_module_global_avgpool(const char *name, stk_module **m)
{
    return simple_module(MOD_GLOBAL_AVGPOOL, name, 0, 0, 0, m);
}

stk_status stk_module_flatten(const char *name, stk_module **m)
{
    return simple_module(MOD_FLATTEN, name, 0, 0, 0, m);
}

stk_status stk_module_basic_block(const char *name, int64_t in, int64_t out, int stride,
                                  stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("basic_block", in, out));
    if (stride < 1)
        return stk_error(STK_ERR_INVALID_ARG, "basic_block %s: stride %d", name, stride);
    return done(eng_mod_basic_block(name, in, out, stride), m);
}

stk_status stk_module_conv2d_grouped(const char *name, int64_t in, int64_t out, int kernel,
                                     int stride, int padding, int groups, bool bias, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("conv2d", in, out));
    if (kernel < 1 || kernel > 64 || stride < 1 || stride > 64 || padding < 0 || padding > 64 ||
        groups < 1 || in % groups || out % groups)
        return stk_error(STK_ERR_INVALID_ARG,
                         "conv2d %s: kernel %d, stride %d, padding %d (each up to 64), groups %d "
                         "(dividing %lld in and %lld out channels)",
                         name, kernel, stride, padding, groups, (long long)in, (long long)out);
    return done(eng_mod_conv_grouped(name, in, out, kernel, stride, padding, groups, bias), m);
}

static stk_status check_act(const char *what, const char *name, stk_activation act)
{
    if ((int)act < STK_ACT_NONE || act > STK_ACT_TANH)
        return stk_error(STK_ERR_INVALID_ARG, "%s %s: unknown activation %d", what, name, (int)act);
    return STK_OK;
}

stk_status stk_module_activation(const char *name, stk_activation act, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_act("activation", name, act));
    if (act == STK_ACT_NONE)
        return stk_error(STK_ERR_INVALID_ARG, "activation %s: STK_ACT_NONE is not a layer", name);
    return done(eng_mod_act(name, act), m);
}

static stk_status check_eps(const char *what, const char *name, float eps)
{
    if (!(eps > 0.f && eps < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "%s %s: eps %g must be in (0, 1)", what, name,
                         (double)eps);
    return STK_OK;
}

stk_status stk_module_layer_norm(const char *name, int64_t dim, float eps, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("layer_norm", dim, 1));
    STK_TRY(check_eps("layer_norm", name, eps));
    return done(eng_mod_layer_norm(name, dim, eps, false), m);
}

stk_status stk_module_layer_norm2d(const char *name, int64_t channels, float eps, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("layer_norm2d", channels, 1));
    STK_TRY(check_eps("layer_norm2d", name, eps));
    return done(eng_mod_layer_norm(name, channels, eps, true), m);
}

stk_status stk_module_permute(const char *name, int ndim, const int *dims, stk_module **m)
{
    TRY_NAME(name);
    bool seen[STK_MAX_DIMS] = {false}, ok = ndim >= 1 && ndim <= STK_MAX_DIMS;
    for (int d = 0; ok && d < ndim; d++) {
        ok = dims[d] >= 0 && dims[d] < ndim && !seen[dims[d]];
        if (ok) seen[dims[d]] = true;
    }
    if (!ok)
        return stk_error(STK_ERR_INVALID_ARG,
                         "permute %s: dims must be a permutation of 0..%d (1 to %d of them)", name,
                         ndim - 1, STK_MAX_DIMS);
    return done(eng_mod_permute(name, ndim, dims), m);
}

stk_status stk_module_residual(const char *name, stk_activation after, stk_module **m)
{
    if (name && *name) TRY_NAME(name);
    STK_TRY(check_act("residual", name ? name : "", after));
    stk_module *r = eng_mod_new(MOD_RESIDUAL, name ? name : "");
    if (r) r->act = after;
    return done(r, m);
}

stk_status stk_module_set_shortcut(stk_module *residual, stk_module *shortcut)
{
    if (residual->kind != MOD_RESIDUAL || residual->shortcut >= 0) {
        stk_module_destroy(shortcut);
        return stk_error(STK_ERR_INVALID_ARG, "module %s: %s", residual->name,
                         residual->kind != MOD_RESIDUAL ? "not a residual block"
                                                        : "already has a shortcut");
    }
    STK_TRY(stk_module_add(residual, shortcut));
    residual->shortcut = residual->n_kids - 1;
    return STK_OK;
}

stk_status stk_module_concat(const char *name, stk_module **m)
{
    return simple_module(MOD_CONCAT, name, 0, 0, 0, m);
}

stk_status stk_module_squeeze_excitation(const char *name, int64_t channels, int64_t squeeze,
                                         stk_activation act, stk_activation gate, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("squeeze_excitation", channels, squeeze));
    STK_TRY(check_act("squeeze_excitation", name, act));
    STK_TRY(check_act("squeeze_excitation", name, gate));
    return done(eng_mod_se(name, channels, squeeze, act, gate), m);
}

stk_status stk_module_attention(const char *name, int64_t dim, int heads, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("attention", dim, heads));
    if (dim % heads)
        return stk_error(STK_ERR_INVALID_ARG, "attention %s: %d heads do not divide width %lld",
                         name, heads, (long long)dim);
    return done(eng_mod_attention(name, dim, heads), m);
}

stk_status stk_module_drop_path(const char *name, float p, stk_module **m)
{
    TRY_NAME(name);
    if (!(p >= 0.f && p < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "drop_path %s: p = %g is outside [0, 1)", name,
                         (double)p);
    return done(eng_mod_drop_path(name, p), m);
}

stk_status stk_module_layer_scale(const char *name, int64_t channels, float value,
                                  bool channels_first, stk_module **m)
{
    TRY_NAME(name);
    STK_TRY(check_sizes("layer_scale", channels, 1));
    if (!isfinite(value))
        return stk_error(STK_ERR_INVALID_ARG, "layer_scale %s: value %g", name, (double)value);
    return done(eng_mod_layer_scale(name, channels, channels_first ? 3 : 1, value), m);
}

void stk_module_destroy(stk_module *m) { eng_mod_free(m); }

stk_status stk_model_from_module(stk_module *root, const stk_model_config *cfg, stk_model **out)
{
    *out = NULL;
    stk_model *m = calloc(1, sizeof *m);
    if (!m) {
        eng_mod_free(root);
        return stk_error(STK_ERR_NOMEM, "no memory for a model");
    }
    m->root = root;
    m->cfg = *cfg;
    snprintf(m->name, sizeof m->name, "%s", cfg->name ? cfg->name : "custom");
    m->cfg.name = m->name;
    if (m->cfg.bn_momentum == 0.f) m->cfg.bn_momentum = 0.1f;
    if (m->cfg.bn_eps == 0.f) m->cfg.bn_eps = 1e-5f;
    m->training = true;
    m->custom = true;
    int counter = 0;
    stk_status st = eng_mod_init(root, INIT_TORCH_DEFAULT, cfg->seed, &counter);
    if (st == STK_OK) st = eng_model_collect_params(m);
    if (st != STK_OK) {
        stk_model_destroy(m);
        return st;
    }
    *out = m;
    return STK_OK;
}

bool stk_model_is_custom(const stk_model *m) { return m->custom; }
