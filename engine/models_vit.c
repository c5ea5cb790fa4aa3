/* The Vision Transformer with torchvision's layout and names
 * (VisionTransformer: conv_proj, class_token, encoder.pos_embedding,
 * encoder.layers.encoder_layer_N.{ln_1, self_attention, ln_2, mlp.0,
 * mlp.3}, encoder.ln, heads.head) and initialisation. */
#include "engine/models_impl.h"

#include <stdio.h>

int eng_vit_tiny_patch(int image_size)
{
    static const int patches[4] = {16, 8, 4, 2};
    for (int i = 0; i < 4; i++)
        if (image_size % patches[i] == 0 && image_size / patches[i] >= 7) return patches[i];
    return 0;
}

/* EncoderBlock: x + attention(ln_1(x)), then y + mlp(ln_2(y)) (the dropouts
 * of torchvision's defaults are 0: left out). Two residual groups without a
 * name of their own, so the names are the block's. */
static stk_module *encoder_layer(const char *name, int64_t d, int heads, int64_t mlp, float sd)
{
    stk_module *b = eng_mod_new(MOD_SEQUENTIAL, name), *r1 = NULL, *r2 = NULL, *m = NULL;
    if (!b) return NULL;
    r1 = eng_mod_new(MOD_RESIDUAL, "");
    ADD(b, r1);
    ADD(r1, eng_mod_layer_norm("ln_1", d, 1e-6f, false));
    ADD(r1, eng_mod_attention("self_attention", d, heads));
    if (sd > 0.f) ADD(r1, eng_mod_drop_path("drop_path_1", sd));
    r2 = eng_mod_new(MOD_RESIDUAL, "");
    ADD(b, r2);
    ADD(r2, eng_mod_layer_norm("ln_2", d, 1e-6f, false));
    m = eng_mod_new(MOD_SEQUENTIAL, "mlp");
    ADD(r2, m);
    stk_module *l0 = eng_mod_linear("0", d, mlp, true), *l3 = eng_mod_linear("3", mlp, d, true);
    if (l0) l0->init = WINIT_XAVIER_BIAS_1E6;
    if (l3) l3->init = WINIT_XAVIER_BIAS_1E6;
    ADD(m, l0);
    ADD(m, eng_mod_act("1", STK_ACT_GELU));
    ADD(m, l3);
    if (sd > 0.f) ADD(r2, eng_mod_drop_path("drop_path_2", sd));
    return b;
nomem:
    eng_mod_free(b);
    return NULL;
}

stk_module *eng_build_vit(const stk_model_config *c, bool base)
{
    int64_t d = base ? 768 : 192, mlp = base ? 3072 : 768;
    int heads = base ? 12 : 3, layers = 12;
    int patch = base ? 16 : eng_vit_tiny_patch(c->image_size);
    int64_t side = c->image_size / patch, seq = side * side + 1;
    /* stochastic depth: none by default (torchvision's ViT has none);
     * --drop-path p rises linearly to p over the blocks, as timm's */
    float sd = c->drop_path > 0 ? c->drop_path : 0.f;
    stk_module *root = eng_mod_new(MOD_SEQUENTIAL, "");
    if (!root) return NULL;
    stk_module *proj = eng_mod_conv("conv_proj", c->in_channels, d, patch, patch, 0, true);
    if (proj) proj->init = WINIT_TRUNC_NORMAL_FAN_IN;
    ADD(root, proj);
    ADD(root, eng_mod_new(MOD_TOKENS, "tokens"));
    int64_t ct_shape[3] = {1, 1, d}, pos_shape[3] = {1, seq, d};
    stk_module *ct = eng_mod_parent_param(MOD_CLASS_TOKEN, "class_token", 3, ct_shape);
    if (ct) ct->init = WINIT_CONST; /* zeros */
    ADD(root, ct);
    stk_module *enc = eng_mod_new(MOD_SEQUENTIAL, "encoder");
    ADD(root, enc);
    stk_module *pos = eng_mod_parent_param(MOD_POS_EMBED, "pos_embedding", 3, pos_shape);
    if (pos) pos->init = WINIT_NORMAL_002;
    ADD(enc, pos);
    stk_module *ls = eng_mod_new(MOD_SEQUENTIAL, "layers");
    ADD(enc, ls);
    ls->open_units = true;
    for (int i = 0; i < layers; i++) {
        char name[32];
        snprintf(name, sizeof name, "encoder_layer_%d", i);
        ADD(ls,
            encoder_layer(name, d, heads, mlp, layers > 1 ? sd * (float)i / (layers - 1) : 0.f));
    }
    ADD(enc, eng_mod_layer_norm("ln", d, 1e-6f, false));
    ADD(root, eng_mod_new(MOD_SELECT_TOKEN, "select"));
    stk_module *hs = eng_mod_new(MOD_SEQUENTIAL, "heads");
    ADD(root, hs);
    stk_module *head = eng_mod_linear("head", d, c->classes, true);
    if (head) head->init = WINIT_ZERO;
    ADD(hs, head);
    return root;
nomem:
    eng_mod_free(root);
    return NULL;
}
