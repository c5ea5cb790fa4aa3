/* The model zoo (mlp, cnn, resnet8, resnet18/34/50, mobilenet_v2) and weight
 * initialisation. */
#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/models_impl.h"
#include "engine/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *const model_names[] = {"mlp",
                                          "cnn",
                                          "resnet8",
                                          "resnet18",
                                          "resnet34",
                                          "resnet50",
                                          "mobilenet_v2",
                                          "efficientnet_b0",
                                          "mobilenet_v3_small",
                                          "mobilenet_v3_large",
                                          "convnext_tiny",
                                          "regnet_y_400mf",
                                          "vit_b_16",
                                          "vit_tiny",
                                          NULL};

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

/* One conv or linear layer's weight and bias. */
static void init_layer(stk_module *m, eng_init_kind kind, uint64_t seed, int *counter)
{
    stk_rng r;
    int64_t fi = fan_in(m->weight);
    stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
    if (m->kind == MOD_LINEAR && kind == INIT_MOBILENET) {
        fill_normal(m->weight, &r, 0.01);
    } else if (m->kind == MOD_CONV2D && kind != INIT_TORCH_DEFAULT) {
        /* torch's fan_out of a grouped conv: out channels * kernel area, not / groups */
        int64_t fan_out = stk_tensor_dim(m->weight, 0) * stk_tensor_dim(m->weight, 2) *
                          stk_tensor_dim(m->weight, 3);
        fill_normal(m->weight, &r, sqrt(2.0 / (double)fan_out));
    } else {
        /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in) */
        fill_uniform(m->weight, &r, 1.0 / sqrt((double)fi));
    }
    if (!m->bias) return;
    if (kind == INIT_MOBILENET) {
        stk_tensor_fill(m->bias, 0.0);
        return;
    }
    stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
    fill_uniform(m->bias, &r, 1.0 / sqrt((double)fi));
}

/* A tensor of N(0, std) values redrawn outside [-2, 2] (torch's trunc_normal_'s
 * absolute bounds). */
static void fill_trunc_normal(stk_tensor *t, stk_rng *r, double std)
{
    fill_normal(t, r, std);
    float *v = stk_tensor_data(t);
    for (int64_t i = 0; i < stk_tensor_numel(t); i++)
        while (v[i] < -2.f || v[i] > 2.f) {
            double u1 = 1.0 - stk_rng_uniform(r), u2 = stk_rng_uniform(r);
            v[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
        }
}

/* A module's explicit scheme (m->init, set by its builder). */
static void init_explicit(stk_module *m, uint64_t seed, int *counter)
{
    stk_rng r;
    stk_tensor *w = m->weight;
    int64_t fi = fan_in(w), fo = stk_tensor_dim(w, 0);
    for (int d = 2; d < stk_tensor_ndim(w); d++) fo *= stk_tensor_dim(w, d);
    stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
    bool bias_zero = true;
    switch (m->init) {
    case WINIT_TORCH_DEFAULT: break; /* not reached: init_layer */
    case WINIT_DEFAULT_BIAS_0: fill_uniform(w, &r, 1.0 / sqrt((double)fi)); break;
    case WINIT_KAIMING_FAN_OUT: fill_normal(w, &r, sqrt(2.0 / (double)fo)); break;
    case WINIT_NORMAL_001: fill_normal(w, &r, 0.01); break;
    case WINIT_UNIFORM_FAN_OUT:
        fill_uniform(w, &r, 1.0 / sqrt((double)stk_tensor_dim(w, 0)));
        break;
    case WINIT_TRUNC_NORMAL_002: fill_trunc_normal(w, &r, 0.02); break;
    case WINIT_TRUNC_NORMAL_FAN_IN: fill_trunc_normal(w, &r, sqrt(1.0 / (double)fi)); break;
    case WINIT_XAVIER_BIAS_1E6:
    case WINIT_XAVIER_BIAS_0:
        fill_uniform(w, &r, sqrt(6.0 / (double)(fi + stk_tensor_dim(w, 0))));
        bias_zero = m->init == WINIT_XAVIER_BIAS_0;
        break;
    case WINIT_ZERO: stk_tensor_fill(w, 0.0); break;
    case WINIT_NORMAL_002: fill_normal(w, &r, 0.02); break;
    case WINIT_CONST: stk_tensor_fill(w, m->init_value); break;
    }
    if (!m->bias) return;
    if (bias_zero) {
        stk_tensor_fill(m->bias, 0.0);
        return;
    }
    stk_rng_init(&r, seed, (uint64_t)(*counter += 1), 0);
    fill_normal(m->bias, &r, 1e-6);
}

stk_status eng_mod_init(stk_module *m, eng_init_kind kind, uint64_t seed, int *counter)
{
    if (m->weight && m->init != WINIT_TORCH_DEFAULT)
        init_explicit(m, seed, counter);
    else if (m->kind == MOD_LINEAR || m->kind == MOD_CONV2D)
        init_layer(m, kind, seed, counter);
    for (int i = 0; i < m->n_kids; i++) STK_TRY(eng_mod_init(m->kids[i], kind, seed, counter));
    return STK_OK;
}

/* ---- builders --------------------------------------------------------------- */

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

/* A module ReLU (no parameters: the state dict is torchvision's). */
static stk_module *relu(void) { return eng_mod_new(MOD_RELU, "relu"); }

/* The 1x1 conv + BN shortcut of a residual block whose shape changes. */
static bool add_downsample(stk_module *b, int64_t in, int64_t out, int stride)
{
    stk_module *ds = eng_mod_new(MOD_SEQUENTIAL, "downsample");
    if (!eng_mod_add(b, ds)) return false;
    b->shortcut = b->n_kids - 1;
    return eng_mod_add(ds, eng_mod_conv("0", in, out, 1, stride, 0, false)) &&
           eng_mod_add(ds, eng_mod_bn("1", out));
}

/* torchvision's BasicBlock: conv1, bn1, relu, conv2, bn2, [downsample], + x, relu. */
stk_module *eng_mod_basic_block(const char *name, int64_t in, int64_t out, int stride)
{
    stk_module *b = eng_mod_new(MOD_RESIDUAL, name);
    if (!b) return NULL;
    b->relu_after = true;
    ADD(b, eng_mod_conv("conv1", in, out, 3, stride, 1, false));
    ADD(b, eng_mod_bn("bn1", out));
    ADD(b, relu());
    ADD(b, eng_mod_conv("conv2", out, out, 3, 1, 1, false));
    ADD(b, eng_mod_bn("bn2", out));
    if ((stride != 1 || in != out) && !add_downsample(b, in, out, stride)) goto nomem;
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

/* torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3): 1x1 in ->
 * width, 3x3 width -> width, 1x1 width -> 4 width, each with BN. */
static stk_module *bottleneck(const char *name, int64_t in, int64_t width, int stride)
{
    int64_t out = 4 * width;
    stk_module *b = eng_mod_new(MOD_RESIDUAL, name);
    if (!b) return NULL;
    b->relu_after = true;
    ADD(b, eng_mod_conv("conv1", in, width, 1, 1, 0, false));
    ADD(b, eng_mod_bn("bn1", width));
    ADD(b, relu());
    ADD(b, eng_mod_conv("conv2", width, width, 3, stride, 1, false));
    ADD(b, eng_mod_bn("bn2", width));
    ADD(b, relu());
    ADD(b, eng_mod_conv("conv3", width, out, 1, 1, 0, false));
    ADD(b, eng_mod_bn("bn3", out));
    if ((stride != 1 || in != out) && !add_downsample(b, in, out, stride)) goto nomem;
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

/* A resnet stage of `blocks` blocks, the first with `stride`; *in is the
 * channels coming in, updated to those going out. */
static stk_module *layer(const char *name, int64_t *in, int64_t width, int stride, int blocks,
                         bool bottlenecks)
{
    stk_module *l = eng_mod_new(MOD_SEQUENTIAL, name);
    if (!l) return NULL;
    for (int i = 0; i < blocks; i++) {
        char bn[16];
        snprintf(bn, sizeof bn, "%d", i);
        int s = i ? 1 : stride;
        ADD(l,
            bottlenecks ? bottleneck(bn, *in, width, s) : eng_mod_basic_block(bn, *in, width, s));
        *in = bottlenecks ? 4 * width : width;
    }
    return l;
nomem:
    eng_mod_free(l);
    return NULL;
}

/* torchvision's ResNets (blocks per stage, block kind); resnet8 is Stoke's
 * small one (16-32-64 channels, one block a stage, always the CIFAR stem). */
typedef struct resnet_spec {
    int blocks[4];
    bool bottlenecks;
} resnet_spec;

static const resnet_spec resnet8_spec = {{1, 1, 1, 0}, false},
                         resnet18_spec = {{2, 2, 2, 2}, false},
                         resnet34_spec = {{3, 4, 6, 3}, false},
                         resnet50_spec = {{3, 4, 6, 3}, true};

static stk_module *build_resnet(const stk_model_config *c, const resnet_spec *spec)
{
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    bool small = spec == &resnet8_spec;
    bool imagenet_stem = !small && c->image_size >= 64; /* CIFAR stem below 64 px */
    int64_t w0 = small ? 16 : 64, in = w0;
    if (imagenet_stem)
        ADD(root, eng_mod_conv("conv1", c->in_channels, w0, 7, 2, 3, false));
    else
        ADD(root, eng_mod_conv("conv1", c->in_channels, w0, 3, 1, 1, false));
    ADD(root, eng_mod_bn("bn1", w0));
    ADD(root, relu());
    if (imagenet_stem) ADD(root, simple(MOD_MAXPOOL2D, "maxpool", 3, 2, 1));
    for (int i = 0; i < 4 && spec->blocks[i]; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i + 1);
        ADD(root, layer(name, &in, w0 << i, i ? 2 : 1, spec->blocks[i], spec->bottlenecks));
    }
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    ADD(root, eng_mod_linear("fc", in, c->classes, true));
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

/* torchvision's Conv2dNormActivation: "0" conv (no bias, padding (k-1)/2),
 * "1" batch norm, "2" ReLU6. */
static stk_module *conv_bn_relu6(const char *name, int64_t in, int64_t out, int k, int stride,
                                 int groups)
{
    stk_module *s = eng_mod_new(MOD_SEQUENTIAL, name);
    if (!s) return NULL;
    ADD(s, eng_mod_conv_grouped("0", in, out, k, stride, (k - 1) / 2, groups, false));
    ADD(s, eng_mod_bn("1", out));
    ADD(s, eng_mod_new(MOD_RELU6, "2"));
    return s;
nomem:
    eng_mod_free(s);
    return NULL;
}

/* torchvision's InvertedResidual: "conv" = [1x1 expand + BN + ReLU6 (when
 * t > 1)], 3x3 depthwise + BN + ReLU6, 1x1 project, BN; the input added
 * when the stride is 1 and the channels stay. */
static stk_module *inverted_residual(const char *name, int64_t in, int64_t out, int stride, int t)
{
    int64_t hidden = in * t;
    bool res = stride == 1 && in == out;
    stk_module *b = eng_mod_new(res ? MOD_RESIDUAL : MOD_SEQUENTIAL, name);
    if (!b) return NULL;
    stk_module *conv = eng_mod_new(MOD_SEQUENTIAL, "conv");
    ADD(b, conv);
    int i = 0;
    char id[16];
#define NEXT_ID (snprintf(id, sizeof id, "%d", i++), id)
    if (t != 1) ADD(conv, conv_bn_relu6(NEXT_ID, in, hidden, 1, 1, 1));
    ADD(conv, conv_bn_relu6(NEXT_ID, hidden, hidden, 3, stride, (int)hidden));
    ADD(conv, eng_mod_conv(NEXT_ID, hidden, out, 1, 1, 0, false));
    ADD(conv, eng_mod_bn(NEXT_ID, out));
#undef NEXT_ID
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

/* torchvision's mobilenet_v2 (width 1.0): features.0 conv 3x3/2 32, 17
 * inverted residuals, features.18 1x1 to 1280, average pool, classifier
 * (dropout 0.2, linear). Below 64 px the small-image variant: features.0
 * and the first stride-2 block (features.2) at stride 1, so 32 px ends at
 * 4x4 instead of 1x1. */
static stk_module *build_mobilenet_v2(const stk_model_config *c)
{
    static const int setting[7][4] = {/* t, c, n, s */
                                      {1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    bool small = c->image_size < 64;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    stk_module *f = eng_mod_new(MOD_SEQUENTIAL, "features");
    ADD(root, f);
    ADD(f, conv_bn_relu6("0", c->in_channels, 32, 3, small ? 1 : 2, 1));
    int64_t in = 32;
    int idx = 1;
    for (int s = 0; s < 7; s++)
        for (int i = 0; i < setting[s][2]; i++, idx++) {
            char name[16];
            snprintf(name, sizeof name, "%d", idx);
            int stride = i ? 1 : setting[s][3];
            if (small && idx == 2) stride = 1;
            ADD(f, inverted_residual(name, in, setting[s][1], stride, setting[s][0]));
            in = setting[s][1];
        }
    ADD(f, conv_bn_relu6("18", in, 1280, 1, 1, 1));
    if (!eng_add_dropout_head(root, 1280, c->classes)) goto nomem;
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

void eng_model_io_tensors(const char *name, const char **first, const char **classifier)
{
    static const struct {
        const char *name, *first, *classifier;
    } io[] = {{"mlp", "fc1.weight", "fc3.weight"},
              {"mobilenet_v2", "features.0.0.weight", "classifier.1.weight"},
              {"efficientnet_b0", "features.0.0.weight", "classifier.1.weight"},
              {"mobilenet_v3_small", "features.0.0.weight", "classifier.3.weight"},
              {"mobilenet_v3_large", "features.0.0.weight", "classifier.3.weight"},
              {"convnext_tiny", "features.0.0.weight", "classifier.2.weight"},
              {"regnet_y_400mf", "stem.0.weight", "fc.weight"},
              {"vit_b_16", "conv_proj.weight", "heads.head.weight"},
              {"vit_tiny", "conv_proj.weight", "heads.head.weight"}};
    *first = "conv1.weight";
    *classifier = "fc.weight";
    for (size_t i = 0; name && i < sizeof io / sizeof io[0]; i++)
        if (!strcmp(name, io[i].name)) *first = io[i].first, *classifier = io[i].classifier;
}

/* The sizes a zoo model can take, beyond the common ranges: a message, or NULL. */
static stk_status check_size(const char *name, const stk_model_config *cfg)
{
    if (!strcmp(name, "cnn") && cfg->image_size < 4)
        return stk_error(STK_ERR_INVALID_ARG,
                         "cnn: images of %d px are too small for two 2x2 pools", cfg->image_size);
    if (!strcmp(name, "vit_b_16") && cfg->image_size % 16)
        return stk_error(STK_ERR_INVALID_ARG,
                         "vit_b_16: the image size %d is not a multiple of its 16 px patches",
                         cfg->image_size);
    if (!strcmp(name, "vit_tiny") && !eng_vit_tiny_patch(cfg->image_size))
        return stk_error(STK_ERR_INVALID_ARG,
                         "vit_tiny: no patch of 16, 8, 4 or 2 px divides %d px into 7 or more per "
                         "side (use a size such as 28, 32, 64 or 224)",
                         cfg->image_size);
    if (!(cfg->drop_path < 1.f) || cfg->drop_path != cfg->drop_path)
        return stk_error(STK_ERR_INVALID_ARG, "%s: drop path %g must be below 1", name,
                         (double)cfg->drop_path);
    return STK_OK;
}

stk_status stk_model_create(const stk_model_config *cfg, stk_model **out)
{
    *out = NULL;
    const char *name = cfg->name ? cfg->name : "";
    int which = -1;
    for (int i = 0; model_names[i]; i++)
        if (!strcmp(name, model_names[i])) which = i;
    if (which < 0)
        return stk_error(STK_ERR_INVALID_ARG, "unknown model '%s' (known: " STK_MODEL_LIST ")",
                         name);
    if (cfg->in_channels < 1 || cfg->in_channels > 16 || cfg->classes < 1 ||
        cfg->classes > 1000000 || cfg->image_size < 1 || cfg->image_size > 4096)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s: input channels %d (1..16), classes %d (>= 1) or image size %d "
                         "(1..4096) out of range",
                         name, cfg->in_channels, cfg->classes, cfg->image_size);
    STK_TRY(check_size(name, cfg));
    stk_model *m = calloc(1, sizeof *m);
    if (!m) return stk_error(STK_ERR_NOMEM, "no memory for a model");
    m->cfg = *cfg;
    bool v3 = which == 8 || which == 9; /* torchvision's BatchNorm2d(eps=1e-3, momentum=0.01) */
    if (m->cfg.bn_momentum == 0.f) m->cfg.bn_momentum = v3 ? 0.01f : 0.1f;
    if (m->cfg.bn_eps == 0.f) m->cfg.bn_eps = v3 ? 1e-3f : 1e-5f;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->cfg.name = m->name;
    m->training = true;
    static const resnet_spec *const resnets[] = {NULL,           NULL,           &resnet8_spec,
                                                 &resnet18_spec, &resnet34_spec, &resnet50_spec};
    /* the model-wide scheme for modules without their own (models_convnets.c
     * and models_vit.c set each module's) */
    eng_init_kind init = which >= 3 ? INIT_KAIMING_NORMAL_FAN_OUT : INIT_TORCH_DEFAULT;
    switch (which) {
    case 0: m->root = build_mlp(cfg); break;
    case 1: m->root = build_cnn(cfg); break;
    case 6:
        m->root = build_mobilenet_v2(cfg);
        init = INIT_MOBILENET;
        break;
    case 7: m->root = eng_build_efficientnet_b0(cfg); break;
    case 8:
    case 9: m->root = eng_build_mobilenet_v3(cfg, which == 9); break;
    case 10: m->root = eng_build_convnext_tiny(cfg); break;
    case 11: m->root = eng_build_regnet_y_400mf(cfg); break;
    case 12:
    case 13: m->root = eng_build_vit(cfg, which == 12); break;
    default: m->root = build_resnet(cfg, resnets[which]); break;
    }
    stk_status st;
    if (!m->root) {
        st = STK_ERR_NOMEM;
        goto fail;
    }
    int counter = 0;
    if ((st = eng_mod_init(m->root, init, cfg->seed, &counter)) != STK_OK) goto fail;
    if ((st = eng_model_collect_params(m)) != STK_OK) goto fail;
    *out = m;
    return STK_OK;
fail:
    stk_model_destroy(m);
    return st;
}
