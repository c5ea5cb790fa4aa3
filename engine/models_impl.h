/* Private: the zoo's builders (models.c dispatches; models_convnets.c and
 * models_vit.c build today's architectures with torchvision's layout). */
#pragma once

#include "engine/nn_impl.h"

/* Append child to parent or jump to the builder's `nomem` label (the
 * message is set; the child is freed). */
#define ADD(parent, child)                                                                         \
    do {                                                                                           \
        if (!eng_mod_add((parent), (child))) goto nomem;                                           \
    } while (0)

/* torchvision's Conv2dNormActivation: "0" conv (padding (k-1)/2, bias only
 * without a norm), "1" batch norm, "2" the activation (none for
 * STK_ACT_NONE). */
stk_module *eng_cna(const char *name, int64_t in, int64_t out, int k, int stride, int groups,
                    stk_activation act);

/* torchvision's MobileNetV2 / EfficientNet head on root: "avgpool", then
 * "classifier" = "0" dropout 0.2, "1" linear in -> classes. false: out of
 * memory (the message set). */
bool eng_add_dropout_head(stk_module *root, int64_t in, int classes);
/* A dropout module of probability p (NULL: out of memory, the message set). */
stk_module *eng_mod_dropout(const char *name, float p);

/* torchvision's _make_divisible(v, 8): the nearest multiple of 8, not below 90% of v. */
int64_t eng_make_divisible(double v, int64_t divisor);

stk_module *eng_build_efficientnet_b0(const stk_model_config *c);
stk_module *eng_build_mobilenet_v3(const stk_model_config *c, bool large);
stk_module *eng_build_convnext_tiny(const stk_model_config *c);
stk_module *eng_build_regnet_y_400mf(const stk_model_config *c);
/* torchvision's VisionTransformer: vit_b_16 (patch 16, 12 layers, 12 heads,
 * 768 wide, MLP 3072) and vit_tiny (timm's vit_tiny_patch16_224 sizes: 12
 * layers, 3 heads, 192 wide, MLP 768; the patch fits the image: the largest
 * of 16, 8, 4, 2 that divides it into at least 7 per side). */
stk_module *eng_build_vit(const stk_model_config *c, bool base);
/* vit_tiny's patch for an image size (0: none fits). */
int eng_vit_tiny_patch(int image_size);
