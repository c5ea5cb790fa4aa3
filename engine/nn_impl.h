/* Private: the module tree behind stk_model (nn.c runs it, models.c builds it). */
#pragma once

#include "engine/nn.h"
#include "engine/ops.h"

typedef enum eng_module_kind {
    MOD_SEQUENTIAL,
    MOD_LINEAR,
    MOD_CONV2D,
    MOD_BATCHNORM2D,
    MOD_RELU,
    MOD_RELU6, /* min(max(x, 0), 6): mobilenet_v2 */
    MOD_MAXPOOL2D,
    MOD_AVGPOOL2D,
    MOD_GLOBAL_AVGPOOL,
    MOD_FLATTEN,
    MOD_DROPOUT,
    /* x + body(x) (or + shortcut(x)), then a ReLU when relu_after: the
     * children in order are the body, except the one at index `shortcut`
     * (-1: none, the identity). torchvision's BasicBlock and Bottleneck
     * (conv1, bn1, relu, conv2, ..., downsample) and mobilenet_v2's
     * InvertedResidual (conv) where it adds its input. */
    MOD_RESIDUAL,
} eng_module_kind;

typedef enum eng_init_kind {
    INIT_TORCH_DEFAULT,          /* kaiming-uniform a = sqrt(5): U(+-1/sqrt(fan_in)) */
    INIT_KAIMING_NORMAL_FAN_OUT, /* torchvision's resnets: convs N(0, 2/fan_out), linear default */
    INIT_MOBILENET, /* torchvision's mobilenet_v2: convs as above, linear N(0, 0.01), biases 0 */
} eng_init_kind;

struct stk_module {
    eng_module_kind kind;
    char name[32];    /* local name: "conv1", "0", ... */
    const char *path; /* full dotted name, set when the state dict is built */
    stk_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    stk_conv2d_params conv;
    int kernel, stride, padding; /* pooling */
    float p;                     /* dropout */
    int shortcut;                /* MOD_RESIDUAL: the shortcut child, -1: the identity */
    bool relu_after;             /* MOD_RESIDUAL: ReLU after the sum */
    stk_module **kids;
    int n_kids;
};

struct stk_model {
    stk_model_config cfg;
    char name[32];
    stk_module *root;
    stk_param *params;
    int n_params;
    bool training;
    uint64_t forward_count; /* dropout streams */
    stk_allreduce sync_bn;  /* sum NULL: per-rank batch statistics */
    stk_module **units;     /* the forward as a chain (stk_model_unit_count) */
    int n_units;
};

/* Builders (nn.c): each returns NULL on allocation failure (message set). */
stk_module *eng_mod_new(eng_module_kind kind, const char *name);
bool eng_mod_add(stk_module *parent, stk_module *child); /* false: out of memory (child freed) */
stk_module *eng_mod_linear(const char *name, int64_t in, int64_t out, bool bias);
stk_module *eng_mod_conv(const char *name, int64_t in, int64_t out, int k, int stride, int pad,
                         bool bias);
/* The same with `groups` (in and out divisible by it; groups = in: depthwise). */
stk_module *eng_mod_conv_grouped(const char *name, int64_t in, int64_t out, int k, int stride,
                                 int pad, int groups, bool bias);
stk_module *eng_mod_bn(const char *name, int64_t c);
void eng_mod_free(stk_module *m);
/* torchvision's BasicBlock (models.c). */
stk_module *eng_mod_basic_block(const char *name, int64_t in, int64_t out, int stride);

/* Fill the weights of the tree (models.c's init scheme) from Philox(seed). */
stk_status eng_mod_init(stk_module *m, eng_init_kind conv_init, uint64_t seed, int *counter);

/* The zoo model `name`'s first layer weight ([out, in_channels, ...], or
 * mlp's [256, in]) and classifier weight ([classes, ...]) in its state dict:
 * what a checkpoint's metadata is checked against before a model is built. */
void eng_model_io_tensors(const char *name, const char **first, const char **classifier);

/* Build the state dict of m->root into m->params. */
stk_status eng_model_collect_params(stk_model *m);
