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
    MOD_MAXPOOL2D,
    MOD_AVGPOOL2D,
    MOD_GLOBAL_AVGPOOL,
    MOD_FLATTEN,
    MOD_DROPOUT,
    MOD_BASIC_BLOCK, /* children: conv1, bn1, conv2, bn2, [downsample] */
} eng_module_kind;

typedef enum eng_init_kind {
    INIT_TORCH_DEFAULT, /* kaiming-uniform a = sqrt(5): U(+-1/sqrt(fan_in)) */
    INIT_KAIMING_NORMAL_FAN_OUT,
} eng_init_kind;

struct stk_module {
    eng_module_kind kind;
    char name[32];    /* local name: "conv1", "0", ... */
    const char *path; /* full dotted name, set when the state dict is built */
    stk_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
    stk_conv2d_params conv;
    int kernel, stride, padding; /* pooling */
    float p;                     /* dropout */
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
};

/* Builders (nn.c): each returns NULL on allocation failure (message set). */
stk_module *eng_mod_new(eng_module_kind kind, const char *name);
bool eng_mod_add(stk_module *parent, stk_module *child); /* false: out of memory (child freed) */
stk_module *eng_mod_linear(const char *name, int64_t in, int64_t out, bool bias);
stk_module *eng_mod_conv(const char *name, int64_t in, int64_t out, int k, int stride, int pad,
                         bool bias);
stk_module *eng_mod_bn(const char *name, int64_t c);
void eng_mod_free(stk_module *m);
/* torchvision's BasicBlock (models.c). */
stk_module *eng_mod_basic_block(const char *name, int64_t in, int64_t out, int stride);

/* Fill the weights of the tree (models.c's init scheme) from Philox(seed). */
stk_status eng_mod_init(stk_module *m, eng_init_kind conv_init, uint64_t seed, int *counter);

/* Build the state dict of m->root into m->params. */
stk_status eng_model_collect_params(stk_model *m);
