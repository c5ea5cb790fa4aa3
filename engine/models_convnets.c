/* Today's convolutional networks, with torchvision's layout, names and
 * initialisation: EfficientNet-B0, MobileNetV3 (small, large), ConvNeXt-T
 * and RegNetY-400MF. Below 64 px each has a small-image variant (as
 * mobilenet_v2 and resnet18): the stem and the first stride-2 stage at
 * stride 1 (ConvNeXt: its 4x4 stem at stride 2, padding 1), so 28 px does
 * not shrink to nothing. The parameters are the same at any size. */
#include "engine/models_impl.h"

#include <math.h>
#include <stdio.h>

int64_t eng_make_divisible(double v, int64_t divisor)
{
    int64_t n = (int64_t)(v + divisor / 2.0) / divisor * divisor;
    if (n < divisor) n = divisor;
    if ((double)n < 0.9 * v) n += divisor;
    return n;
}

stk_module *eng_cna(const char *name, int64_t in, int64_t out, int k, int stride, int groups,
                    stk_activation act)
{
    stk_module *s = eng_mod_new(MOD_SEQUENTIAL, name);
    if (!s) return NULL;
    ADD(s, eng_mod_conv_grouped("0", in, out, k, stride, (k - 1) / 2, groups, false));
    ADD(s, eng_mod_bn("1", out));
    if (act != STK_ACT_NONE) ADD(s, eng_mod_act("2", act));
    return s;
nomem:
    eng_mod_free(s);
    return NULL;
}

stk_module *eng_mod_dropout(const char *name, float p)
{
    stk_module *m = eng_mod_new(MOD_DROPOUT, name);
    if (m) m->p = p;
    return m;
}

bool eng_add_dropout_head(stk_module *root, int64_t in, int classes)
{
    if (!eng_mod_add(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"))) return false;
    stk_module *cls = eng_mod_new(MOD_SEQUENTIAL, "classifier"); /* root owns it once added */
    return eng_mod_add(root, cls) && eng_mod_add(cls, eng_mod_dropout("0", 0.2f)) &&
           eng_mod_add(cls, eng_mod_linear("1", in, classes, true));
}

static void set_init(stk_module *m, eng_weight_init conv, eng_weight_init linear)
{
    if (m->kind == MOD_CONV2D) m->init = conv;
    if (m->kind == MOD_LINEAR) m->init = linear;
    for (int i = 0; i < m->n_kids; i++) set_init(m->kids[i], conv, linear);
}

static void numbered(char *buf, size_t n, int i) { snprintf(buf, n, "%d", i); }

/* A block: a residual around "block" (then "stochastic_depth" when p > 0
 * is possible) when it keeps its shape, else "block" alone. */
static stk_module *block_shell(const char *name, bool residual, bool drop_path, float p,
                               stk_module **body)
{
    stk_module *b = eng_mod_new(residual ? MOD_RESIDUAL : MOD_SEQUENTIAL, name);
    if (!b) return NULL;
    *body = eng_mod_new(MOD_SEQUENTIAL, "block");
    ADD(b, *body);
    if (residual && drop_path) ADD(b, eng_mod_drop_path("stochastic_depth", p));
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

/* ---- EfficientNet-B0 ---------------------------------------------------------------- */

/* torchvision's MBConv: [1x1 expand + BN + SiLU], kxk depthwise + BN + SiLU,
 * squeeze-excitation (squeeze = in / 4, SiLU, sigmoid), 1x1 project + BN. */
static stk_module *mbconv(const char *name, int64_t in, int64_t out, int k, int stride, int t,
                          float sd)
{
    int64_t hidden = eng_make_divisible((double)in * t, 8);
    stk_module *body, *b = block_shell(name, stride == 1 && in == out, true, sd, &body);
    if (!b) return NULL;
    int i = 0;
    char id[16];
    if (hidden != in) {
        numbered(id, sizeof id, i++);
        ADD(body, eng_cna(id, in, hidden, 1, 1, 1, STK_ACT_SILU));
    }
    numbered(id, sizeof id, i++);
    ADD(body, eng_cna(id, hidden, hidden, k, stride, (int)hidden, STK_ACT_SILU));
    numbered(id, sizeof id, i++);
    ADD(body, eng_mod_se(id, hidden, in / 4 > 1 ? in / 4 : 1, STK_ACT_SILU, STK_ACT_SIGMOID));
    numbered(id, sizeof id, i++);
    ADD(body, eng_cna(id, hidden, out, 1, 1, 1, STK_ACT_NONE));
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

stk_module *eng_build_efficientnet_b0(const stk_model_config *c)
{
    static const int setting[7][5] = {/* t, k, s, out, n */
                                      {1, 3, 1, 16, 1}, {6, 3, 2, 24, 2},  {6, 5, 2, 40, 2},
                                      {6, 3, 2, 80, 3}, {6, 5, 1, 112, 3}, {6, 5, 2, 192, 4},
                                      {6, 3, 1, 320, 1}};
    bool small = c->image_size < 64;
    float sd = c->drop_path < 0 ? 0.f : c->drop_path > 0 ? c->drop_path : 0.2f;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    stk_module *f = eng_mod_new(MOD_SEQUENTIAL, "features");
    ADD(root, f);
    ADD(f, eng_cna("0", c->in_channels, 32, 3, small ? 1 : 2, 1, STK_ACT_SILU));
    int64_t in = 32;
    int id = 0, total = 16;
    for (int s = 0; s < 7; s++) {
        char name[16];
        numbered(name, sizeof name, s + 1);
        stk_module *stage = eng_mod_new(MOD_SEQUENTIAL, name);
        ADD(f, stage);
        stage->open_units = true;
        for (int i = 0; i < setting[s][4]; i++, id++) {
            int stride = i ? 1 : setting[s][2];
            if (small && s == 1) stride = 1;
            numbered(name, sizeof name, i);
            ADD(stage, mbconv(name, in, setting[s][3], setting[s][1], stride, setting[s][0],
                              sd * (float)id / (float)total));
            in = setting[s][3];
        }
    }
    ADD(f, eng_cna("8", in, 1280, 1, 1, 1, STK_ACT_SILU));
    if (!eng_add_dropout_head(root, 1280, c->classes)) goto nomem;
    set_init(root, WINIT_KAIMING_FAN_OUT, WINIT_UNIFORM_FAN_OUT);
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

/* ---- MobileNetV3 ------------------------------------------------------------------- */

typedef struct v3_block {
    int in, k, exp, out;
    bool se, hs;
    int stride;
} v3_block;

static stk_module *v3_inverted_residual(const char *name, const v3_block *b, int stride)
{
    stk_activation act = b->hs ? STK_ACT_HARDSWISH : STK_ACT_RELU;
    /* the residual as built for the table's stride: the small-image variant
     * runs features.1 of the small model at stride 1 without adding one
     * (as torchvision's block, made at stride 2, with its conv changed) */
    stk_module *body, *m = block_shell(name, b->stride == 1 && b->in == b->out, false, 0.f, &body);
    if (!m) return NULL;
    int i = 0;
    char id[16];
    if (b->exp != b->in) {
        numbered(id, sizeof id, i++);
        ADD(body, eng_cna(id, b->in, b->exp, 1, 1, 1, act));
    }
    numbered(id, sizeof id, i++);
    ADD(body, eng_cna(id, b->exp, b->exp, b->k, stride, b->exp, act));
    if (b->se) {
        numbered(id, sizeof id, i++);
        ADD(body, eng_mod_se(id, b->exp, eng_make_divisible(b->exp / 4, 8), STK_ACT_RELU,
                             STK_ACT_HARDSIGMOID));
    }
    numbered(id, sizeof id, i++);
    ADD(body, eng_cna(id, b->exp, b->out, 1, 1, 1, STK_ACT_NONE));
    return m;
nomem:
    eng_mod_free(m);
    return NULL;
}

stk_module *eng_build_mobilenet_v3(const stk_model_config *c, bool large)
{
    static const v3_block large_cfg[] = {
        {16, 3, 16, 16, false, false, 1},  {16, 3, 64, 24, false, false, 2},
        {24, 3, 72, 24, false, false, 1},  {24, 5, 72, 40, true, false, 2},
        {40, 5, 120, 40, true, false, 1},  {40, 5, 120, 40, true, false, 1},
        {40, 3, 240, 80, false, true, 2},  {80, 3, 200, 80, false, true, 1},
        {80, 3, 184, 80, false, true, 1},  {80, 3, 184, 80, false, true, 1},
        {80, 3, 480, 112, true, true, 1},  {112, 3, 672, 112, true, true, 1},
        {112, 5, 672, 160, true, true, 2}, {160, 5, 960, 160, true, true, 1},
        {160, 5, 960, 160, true, true, 1}};
    static const v3_block small_cfg[] = {
        {16, 3, 16, 16, true, false, 2},  {16, 3, 72, 24, false, false, 2},
        {24, 3, 88, 24, false, false, 1}, {24, 5, 96, 40, true, true, 2},
        {40, 5, 240, 40, true, true, 1},  {40, 5, 240, 40, true, true, 1},
        {40, 5, 120, 48, true, true, 1},  {48, 5, 144, 48, true, true, 1},
        {48, 5, 288, 96, true, true, 2},  {96, 5, 576, 96, true, true, 1},
        {96, 5, 576, 96, true, true, 1}};
    const v3_block *cfg = large ? large_cfg : small_cfg;
    int n = large ? 15 : 11, last = large ? 1280 : 1024;
    bool small_img = c->image_size < 64;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    stk_module *f = eng_mod_new(MOD_SEQUENTIAL, "features");
    ADD(root, f);
    ADD(f, eng_cna("0", c->in_channels, 16, 3, small_img ? 1 : 2, 1, STK_ACT_HARDSWISH));
    bool first_stride2 = true;
    for (int i = 0; i < n; i++) {
        char name[16];
        numbered(name, sizeof name, i + 1);
        int stride = cfg[i].stride;
        if (stride == 2 && first_stride2) {
            first_stride2 = false;
            if (small_img) stride = 1;
        }
        ADD(f, v3_inverted_residual(name, &cfg[i], stride));
    }
    char name[16];
    numbered(name, sizeof name, n + 1);
    int64_t lastconv = 6 * cfg[n - 1].out;
    ADD(f, eng_cna(name, cfg[n - 1].out, lastconv, 1, 1, 1, STK_ACT_HARDSWISH));
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    stk_module *cls = eng_mod_new(MOD_SEQUENTIAL, "classifier");
    ADD(root, cls);
    ADD(cls, eng_mod_linear("0", lastconv, last, true));
    ADD(cls, eng_mod_act("1", STK_ACT_HARDSWISH));
    ADD(cls, eng_mod_dropout("2", 0.2f));
    ADD(cls, eng_mod_linear("3", last, c->classes, true));
    set_init(root, WINIT_KAIMING_FAN_OUT, WINIT_NORMAL_001);
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

/* ---- ConvNeXt-T ---------------------------------------------------------------------- */

/* torchvision's CNBlock: block = 7x7 depthwise conv (bias), permute to
 * NHWC, LayerNorm(eps 1e-6), linear 4x, GELU, linear back, permute to NCHW;
 * then x layer_scale (1e-6 at the start), stochastic depth, + input. */
static stk_module *cn_block(const char *name, int64_t dim, float sd)
{
    static const int to_last[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    stk_module *b = eng_mod_new(MOD_RESIDUAL, name), *body = NULL;
    if (!b) return NULL;
    body = eng_mod_new(MOD_SEQUENTIAL, "block");
    ADD(b, body);
    ADD(body, eng_mod_conv_grouped("0", dim, dim, 7, 1, 3, (int)dim, true));
    ADD(body, eng_mod_permute("1", 4, to_last));
    ADD(body, eng_mod_layer_norm("2", dim, 1e-6f, false));
    ADD(body, eng_mod_linear("3", dim, 4 * dim, true));
    ADD(body, eng_mod_act("4", STK_ACT_GELU));
    ADD(body, eng_mod_linear("5", 4 * dim, dim, true));
    ADD(body, eng_mod_permute("6", 4, back));
    /* runs after the body; its state-dict place is first (a module's own
     * parameters before its children's) */
    ADD(b, eng_mod_layer_scale("layer_scale", dim, 3, 1e-6f));
    ADD(b, eng_mod_drop_path("stochastic_depth", sd));
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

stk_module *eng_build_convnext_tiny(const stk_model_config *c)
{
    static const int dims[4] = {96, 192, 384, 768}, depth[4] = {3, 3, 9, 3};
    bool small = c->image_size < 64;
    float sd = c->drop_path < 0 ? 0.f : c->drop_path > 0 ? c->drop_path : 0.1f;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    stk_module *f = eng_mod_new(MOD_SEQUENTIAL, "features");
    ADD(root, f);
    stk_module *stem = eng_mod_new(MOD_SEQUENTIAL, "0");
    ADD(f, stem);
    ADD(stem, eng_mod_conv("0", c->in_channels, dims[0], 4, small ? 2 : 4, small ? 1 : 0, true));
    ADD(stem, eng_mod_layer_norm("1", dims[0], 1e-6f, true));
    int id = 0, total = 18, idx = 1;
    for (int s = 0; s < 4; s++) {
        char name[16];
        numbered(name, sizeof name, idx++);
        stk_module *stage = eng_mod_new(MOD_SEQUENTIAL, name);
        ADD(f, stage);
        stage->open_units = true;
        for (int i = 0; i < depth[s]; i++, id++) {
            numbered(name, sizeof name, i);
            ADD(stage, cn_block(name, dims[s], sd * (float)id / (float)(total - 1)));
        }
        if (s == 3) break;
        numbered(name, sizeof name, idx++);
        stk_module *down = eng_mod_new(MOD_SEQUENTIAL, name);
        ADD(f, down);
        ADD(down, eng_mod_layer_norm("0", dims[s], 1e-6f, true));
        ADD(down, eng_mod_conv("1", dims[s], dims[s + 1], 2, 2, 0, true));
    }
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    stk_module *cls = eng_mod_new(MOD_SEQUENTIAL, "classifier");
    ADD(root, cls);
    /* after Stoke's global pool ([N, C]) a layer norm over the last
     * dimension is torchvision's LayerNorm2d over [N, C, 1, 1] */
    ADD(cls, eng_mod_layer_norm("0", dims[3], 1e-6f, false));
    ADD(cls, eng_mod_new(MOD_FLATTEN, "1"));
    ADD(cls, eng_mod_linear("2", dims[3], c->classes, true));
    set_init(root, WINIT_TRUNC_NORMAL_002, WINIT_TRUNC_NORMAL_002);
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}

/* ---- RegNetY-400MF ------------------------------------------------------------------ */

/* torchvision's ResBottleneckBlock with SE: [proj: 1x1/stride + BN], f =
 * a (1x1 + BN + ReLU), b (3x3 grouped/stride + BN + ReLU), se (squeeze =
 * round(0.25 in), ReLU, sigmoid), c (1x1 + BN); ReLU after the sum. */
static stk_module *regnet_block(const char *name, int64_t in, int64_t out, int stride)
{
    stk_module *b = eng_mod_new(MOD_RESIDUAL, name);
    if (!b) return NULL;
    b->relu_after = true;
    if (in != out || stride != 1) {
        ADD(b, eng_cna("proj", in, out, 1, stride, 1, STK_ACT_NONE));
        b->shortcut = 0;
    }
    stk_module *f = eng_mod_new(MOD_SEQUENTIAL, "f");
    ADD(b, f);
    ADD(f, eng_cna("a", in, out, 1, 1, 1, STK_ACT_RELU));
    ADD(f, eng_cna("b", out, out, 3, stride, (int)(out / 8), STK_ACT_RELU));
    ADD(f,
        eng_mod_se("se", out, (int64_t)lround(0.25 * (double)in), STK_ACT_RELU, STK_ACT_SIGMOID));
    ADD(f, eng_cna("c", out, out, 1, 1, 1, STK_ACT_NONE));
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

stk_module *eng_build_regnet_y_400mf(const stk_model_config *c)
{
    static const int depth[4] = {1, 3, 6, 6}, width[4] = {48, 104, 208, 440};
    bool small = c->image_size < 64;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    ADD(root, eng_cna("stem", c->in_channels, 32, 3, small ? 1 : 2, 1, STK_ACT_RELU));
    stk_module *trunk = eng_mod_new(MOD_SEQUENTIAL, "trunk_output");
    ADD(root, trunk);
    int64_t in = 32;
    for (int s = 0; s < 4; s++) {
        char name[32];
        snprintf(name, sizeof name, "block%d", s + 1);
        stk_module *stage = eng_mod_new(MOD_SEQUENTIAL, name);
        ADD(trunk, stage);
        stage->open_units = true;
        for (int i = 0; i < depth[s]; i++) {
            snprintf(name, sizeof name, "block%d-%d", s + 1, i);
            ADD(stage, regnet_block(name, in, width[s], i || (small && !s) ? 1 : 2));
            in = width[s];
        }
    }
    ADD(root, eng_mod_new(MOD_GLOBAL_AVGPOOL, "avgpool"));
    ADD(root, eng_mod_linear("fc", in, c->classes, true));
    set_init(root, WINIT_TORCH_DEFAULT, WINIT_NORMAL_001); /* convs: the model's fan-out scheme */
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}
