/* The model zoo (mlp, cnn, resnet8, resnet18) and weight initialisation. */
#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/nn_impl.h"
#include "engine/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *const model_names[] = {"mlp", "cnn", "resnet8", "resnet18", NULL};

const char *const *stk_model_names(void) { return model_names; }

/* ---- initialisation ------------------------------------------------------- */

static int64_t fan_in(const stk_tensor *w)
{
    int64_t f = 1;
    for (int d = 1; d < stk_tensor_ndim(w); d++) f *= stk_tensor_dim(w, d);
    return f;
}

static void fill_uniform(stk_tensor *t, stk_rng *r, double bound)
{
    float *v = stk_tensor_data(t);
    for (int64_t i = 0; i < stk_tensor_numel(t); i++)
        v[i] = (float)((2.0 * stk_rng_uniform(r) - 1.0) * bound);
}

static void fill_normal(stk_tensor *t, stk_rng *r, double std)
{
    float *v = stk_tensor_data(t);
    int64_t n = stk_tensor_numel(t);
    for (int64_t i = 0; i < n; i += 2) { /* Box-Muller, two values per pair of draws */
        double u1 = 1.0 - stk_rng_uniform(r), u2 = stk_rng_uniform(r);
        double rad = sqrt(-2.0 * log(u1));
        v[i] = (float)(std * rad * cos(2 * M_PI * u2));
        if (i + 1 < n) v[i + 1] = (float)(std * rad * sin(2 * M_PI * u2));
    }
}

stk_status eng_mod_init(stk_module *m, eng_init_kind conv_init, uint64_t seed, int *counter)
{
    stk_rng r;
    if (m->kind == MOD_LINEAR || m->kind == MOD_CONV2D) {
        int64_t fi = fan_in(m->weight);
        stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
        if (m->kind == MOD_CONV2D && conv_init == INIT_KAIMING_NORMAL_FAN_OUT) {
            int64_t fan_out = stk_tensor_dim(m->weight, 0) * stk_tensor_dim(m->weight, 2) *
                              stk_tensor_dim(m->weight, 3);
            fill_normal(m->weight, &r, sqrt(2.0 / (double)fan_out));
        } else {
            /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in) */
            fill_uniform(m->weight, &r, 1.0 / sqrt((double)fi));
        }
        if (m->bias) {
            stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
            fill_uniform(m->bias, &r, 1.0 / sqrt((double)fi));
        }
    }
    for (int i = 0; i < m->n_kids; i++) STK_TRY(eng_mod_init(m->kids[i], conv_init, seed, counter));
    return STK_OK;
}

/* ---- builders --------------------------------------------------------------- */

#define ADD(parent, child)                                                                         \
    do {                                                                                           \
        if (!eng_mod_add((parent), (child))) goto nomem;                                           \
    } while (0)

static stk_module *simple(eng_module_kind kind, const char *name, int k, int s, int p)
{
    stk_module *m = eng_mod_new(kind, name);
    if (m) {
        m->kernel = k;
        m->stride = s;
        m->padding = p;
    }
    return m;
}

static stk_module *build_mlp(const stk_model_config *c)
{
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    int64_t in = (int64_t)c->in_channels * c->image_size * c->image_size;
    ADD(root, eng_mod_new(MOD_FLATTEN, "flatten"));
    ADD(root, eng_mod_linear("fc1", in, 256, true));
    ADD(root, eng_mod_new(MOD_RELU, "relu1"));
    ADD(root, eng_mod_linear("fc2", 256, 128, true));
    ADD(root, eng_mod_new(MOD_RELU, "relu2"));
    ADD(root, eng_mod_linear("fc3", 128, c->classes, true));
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

static stk_module *build_cnn(const stk_model_config *c)
{
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    ADD(root, eng_mod_conv("conv1", c->in_channels, 32, 3, 1, 1, false));
    ADD(root, eng_mod_bn("bn1", 32));
    ADD(root, eng_mod_new(MOD_RELU, "relu1"));
    ADD(root, eng_mod_conv("conv2", 32, 64, 3, 1, 1, false));
    ADD(root, eng_mod_bn("bn2", 64));
    ADD(root, eng_mod_new(MOD_RELU, "relu2"));
    ADD(root, simple(MOD_MAXPOOL2D, "pool1", 2, 2, 0));
    ADD(root, eng_mod_conv("conv3", 64, 128, 3, 1, 1, false));
    ADD(root, eng_mod_bn("bn3", 128));
    ADD(root, eng_mod_new(MOD_RELU, "relu3"));
    ADD(root, simple(MOD_MAXPOOL2D, "pool2", 2, 2, 0));
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    ADD(root, eng_mod_linear("fc", 128, c->classes, true));
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

/* torchvision's BasicBlock: conv1, bn1, conv2, bn2, downsample (0: conv1x1, 1: bn). */
stk_module *eng_mod_basic_block(const char *name, int64_t in, int64_t out, int stride)
{
    stk_module *b = eng_mod_new(MOD_BASIC_BLOCK, name);
    if (!b) return NULL;
    ADD(b, eng_mod_conv("conv1", in, out, 3, stride, 1, false));
    ADD(b, eng_mod_bn("bn1", out));
    ADD(b, eng_mod_conv("conv2", out, out, 3, 1, 1, false));
    ADD(b, eng_mod_bn("bn2", out));
    if (stride != 1 || in != out) {
        stk_module *ds = eng_mod_new(MOD_SEQUENTIAL, "downsample");
        ADD(b, ds);
        ADD(ds, eng_mod_conv("0", in, out, 1, stride, 0, false));
        ADD(ds, eng_mod_bn("1", out));
    }
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

static stk_module *layer(const char *name, int64_t in, int64_t out, int stride, int blocks)
{
    stk_module *l = eng_mod_new(MOD_SEQUENTIAL, name);
    if (!l) return NULL;
    for (int i = 0; i < blocks; i++) {
        char bn[16];
        snprintf(bn, sizeof bn, "%d", i);
        ADD(l, eng_mod_basic_block(bn, i ? out : in, out, i ? 1 : stride));
    }
    return l;
nomem:
    eng_mod_free(l);
    return NULL;
}

static stk_module *build_resnet(const stk_model_config *c, bool resnet18)
{
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    bool imagenet_stem = resnet18 && c->image_size >= 64; /* CIFAR stem below 64 px */
    int64_t w0 = resnet18 ? 64 : 16;
    if (imagenet_stem)
        ADD(root, eng_mod_conv("conv1", c->in_channels, w0, 7, 2, 3, false));
    else
        ADD(root, eng_mod_conv("conv1", c->in_channels, w0, 3, 1, 1, false));
    ADD(root, eng_mod_bn("bn1", w0));
    ADD(root, eng_mod_new(MOD_RELU, "relu"));
    if (imagenet_stem) ADD(root, simple(MOD_MAXPOOL2D, "maxpool", 3, 2, 1));
    if (resnet18) {
        ADD(root, layer("layer1", 64, 64, 1, 2));
        ADD(root, layer("layer2", 64, 128, 2, 2));
        ADD(root, layer("layer3", 128, 256, 2, 2));
        ADD(root, layer("layer4", 256, 512, 2, 2));
    } else {
        ADD(root, layer("layer1", 16, 16, 1, 1));
        ADD(root, layer("layer2", 16, 32, 2, 1));
        ADD(root, layer("layer3", 32, 64, 2, 1));
    }
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    ADD(root, eng_mod_linear("fc", resnet18 ? 512 : 64, c->classes, true));
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

stk_status stk_model_create(const stk_model_config *cfg, stk_model **out)
{
    *out = NULL;
    const char *name = cfg->name ? cfg->name : "";
    int which = -1;
    for (int i = 0; model_names[i]; i++)
        if (!strcmp(name, model_names[i])) which = i;
    if (which < 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "unknown model '%s' (known: mlp, cnn, resnet8, resnet18)", name);
    if (cfg->in_channels < 1 || cfg->in_channels > 16 || cfg->classes < 1 ||
        cfg->classes > 1000000 || cfg->image_size < 1 || cfg->image_size > 4096)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: input channels %d (1..16), classes %d (>= 1) or image size %d "
                         "(1..4096) out of range",
                         name, cfg->in_channels, cfg->classes, cfg->image_size);
    if (which == 1 && cfg->image_size < 4)
        return stk_error(STK_ERR_INVALID_ARG,
                         "cnn: images of %d px are too small for two 2x2 pools", cfg->image_size);
    stk_model *m = calloc(1, sizeof *m);
    if (!m) return stk_error(STK_ERR_NOMEM, "no memory for a model");
    m->cfg = *cfg;
    if (m->cfg.bn_momentum == 0.f) m->cfg.bn_momentum = 0.1f;
    if (m->cfg.bn_eps == 0.f) m->cfg.bn_eps = 1e-5f;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->cfg.name = m->name;
    m->training = true;
    switch (which) {
    case 0: m->root = build_mlp(cfg); break;
    case 1: m->root = build_cnn(cfg); break;
    default: m->root = build_resnet(cfg, which == 3); break;
    }
    stk_status st;
    if (!m->root) {
        st = STK_ERR_NOMEM;
        goto fail;
    }
    int counter = 0;
    if ((st = eng_mod_init(m->root, which == 3 ? INIT_KAIMING_NORMAL_FAN_OUT : INIT_TORCH_DEFAULT,
                           cfg->seed, &counter)) != STK_OK)
        goto fail;
    if ((st = eng_model_collect_params(m)) != STK_OK) goto fail;
    *out = m;
    return STK_OK;
fail:
    stk_model_destroy(m);
    return st;
}
