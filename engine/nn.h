/* Neural-network modules and the models built from them.
 *
 *     stk_model *m;
 *     stk_model_config cfg = {.name = "resnet8", .in_channels = 1, .classes = 10,
 *                             .image_size = 28, .seed = 1};
 *     STK_TRY(stk_model_create(&cfg, &m));
 *     stk_model_train(m, true);                      // train mode: batch statistics, dropout
 *     stk_tensor *logits;
 *     STK_TRY(stk_model_forward(m, x, &logits));         // x: f32 [N, C, H, W]
 *     ...
 *     for (int i = 0; i < stk_model_param_count(m); i++) {
 *         const stk_param *p = stk_model_param(m, i); // "layer1.0.conv1.weight", ...
 *     }
 *     stk_model_destroy(m);
 *
 * A model is a tree of modules (Linear, Conv2d, BatchNorm2d, Dropout,
 * pooling, ReLU, Flatten, Sequential, the residual BasicBlock). Its state
 * dict lists every parameter and buffer with PyTorch's dotted names
 * (torchvision's for resnet18), in registration order, so checkpoints load
 * into the equivalent PyTorch model. Parameters are made outside any step
 * scope and are owned by the model.
 *
 * Models (all take the input channels and the number of classes):
 *   mlp       flatten, 784-256-128-classes with ReLU (in_channels*image_size^2 inputs)
 *   cnn       conv3x3 32 + BN + ReLU, conv3x3 64 + BN + ReLU, maxpool 2,
 *             conv3x3 128 + BN + ReLU, maxpool 2, global average pool, linear
 *   resnet8   stem conv3x3 16 + BN + ReLU, basic blocks 16->16, 16->32 /2,
 *             32->64 /2, global average pool, linear
 *   resnet18, resnet34, resnet50
 *             torchvision's layout and names (resnet50: bottleneck blocks,
 *             the stride on the 3x3); CIFAR stem (conv3x3 stride 1, no
 *             max-pool) below 64 px, ImageNet stem from 64 px
 *   mobilenet_v2
 *             torchvision's (inverted residuals, depthwise convs, ReLU6,
 *             classifier dropout 0.2); below 64 px features.0 and features.2
 *             run at stride 1 (the small-image variant)
 * Initialisation: torch.nn's defaults (kaiming-uniform, a = sqrt(5), for
 * conv and linear weights, uniform(+-1/sqrt(fan_in)) biases, BN weight 1 and
 * bias 0) for mlp, cnn and resnet8; torchvision's for the others (conv
 * weights kaiming-normal, fan_out, ReLU gain; mobilenet_v2's linear N(0,
 * 0.01) with zero bias). Values come from Philox(seed), so the
 * same seed gives the same model.
 *
 * Threading: one thread at a time per model.
 */
#pragma once

#include "engine/ops.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_model stk_model;

typedef struct stk_param {
    const char *name;  /* dotted state-dict name */
    stk_tensor *value; /* owned by the model */
    bool is_buffer;    /* running statistics etc.: saved, never optimised */
} stk_param;

typedef struct stk_model_config {
    const char *name; /* STK_MODEL_LIST */
    int in_channels;
    int classes;
    int image_size;    /* input height = width (mlp's input size; resnet18's stem) */
    uint64_t seed;     /* initialisation and dropout */
    float bn_momentum; /* 0: PyTorch's 0.1 */
    float bn_eps;      /* 0: PyTorch's 1e-5 */
} stk_model_config;

/* Build a model. Errors: STK_ERR_INVALID_ARG (unknown name, listing the
 * known ones; channels/classes/size out of range), STK_ERR_NOMEM. */
stk_status stk_model_create(const stk_model_config *cfg, stk_model **out);
void stk_model_destroy(stk_model *m);

/* The zoo's names as a list for messages; stk_model_names() the same, NULL-terminated. */
#define STK_MODEL_LIST "mlp, cnn, resnet8, resnet18, resnet34, resnet50, mobilenet_v2"
/* Names of the models, NULL-terminated. */
const char *const *stk_model_names(void);

/* Train mode (batch statistics, dropout) or eval mode. */
void stk_model_train(stk_model *m, bool training);
/* Move every parameter and buffer to `dev` (before creating the optimizer);
 * num_batches_tracked counters stay on the host. Checkpoints save and load
 * device tensors through host copies. */
stk_status stk_model_to(stk_model *m, stk_device dev);
bool stk_model_is_training(const stk_model *m);
/* Batch norm layers in train mode use the statistics of every rank's batch
 * (stk_batch_norm_sync through `ar`, which is copied); NULL: this rank's
 * batch alone (the default). Data-parallel training sets it (distributed/ddp.h). */
void stk_model_set_sync_batch_norm(stk_model *m, const stk_allreduce *ar);

/* logits [N, classes] from x [N, C, H, W] f32. Errors name the layer. */
stk_status stk_model_forward(stk_model *m, stk_tensor *x, stk_tensor **out);

/* The forward as a chain of units, for splitting a model into pipeline
 * stages (train/pipeline.h): the top-level modules, each sequential one
 * among them opened one level ("layer1.0", "layer1.1", "features.3",
 * "classifier.1"); a unit's name is its module path. Running units [0, n)
 * is stk_model_forward. forward_id numbers the forward for dropout masks
 * (stk_model_forward counts its own calls); several threads may run
 * disjoint units of one model at once (their parameters are disjoint).
 * Errors: INVALID_ARG (a range outside 0..count), as stk_model_forward. */
int stk_model_unit_count(const stk_model *m);
const char *stk_model_unit_name(const stk_model *m, int i);
stk_status stk_model_forward_units(stk_model *m, int from, int to, uint64_t forward_id,
                                   stk_tensor *x, stk_tensor **out);

/* The state dict: parameters and buffers in registration order. */
int stk_model_param_count(const stk_model *m);
const stk_param *stk_model_param(const stk_model *m, int i);
/* Find by name (NULL when absent). */
const stk_param *stk_model_find(const stk_model *m, const char *name);

/* Whether every f32 parameter and buffer is finite: *bad gets NULL, or the
 * name of the first one holding a NaN or an infinity (training diverged
 * even where the loss stayed finite, e.g. NaNs swallowed by ReLU). One pass
 * over the weights; waits for the device. */
stk_status stk_model_check_finite(const stk_model *m, const char **bad);
/* Total number of trainable scalars. */
int64_t stk_model_trainable_numel(const stk_model *m);
/* Freeze (requires_grad off) or unfreeze every parameter whose name starts
 * with `prefix` ("" = all; "layer1" matches "layer1.0.conv1.weight", not
 * "layer10..."); returns how many matched. */
int stk_model_set_requires_grad(stk_model *m, const char *prefix, bool on);
/* The scalars of the parameters (buffers apart) under `prefix`, matched as
 * above: those that train and those frozen. */
void stk_model_count(const stk_model *m, const char *prefix, int64_t *trainable, int64_t *frozen);
const char *stk_model_name(const stk_model *m);
const stk_model_config *stk_model_get_config(const stk_model *m);

/* ---- custom models from modules ------------------------------------------
 *
 *     stk_module *net, *m;
 *     STK_TRY(stk_module_sequential("", &net));
 *     STK_TRY(stk_module_conv2d("conv1", 3, 16, 3, 1, 1, false, &m)); STK_TRY(stk_module_add(net, m));
 *     STK_TRY(stk_module_batchnorm2d("bn1", 16, &m));                  STK_TRY(stk_module_add(net, m));
 *     STK_TRY(stk_module_relu("relu", &m));                            STK_TRY(stk_module_add(net, m));
 *     STK_TRY(stk_module_global_avgpool("pool", &m));                  STK_TRY(stk_module_add(net, m));
 *     STK_TRY(stk_module_linear("fc", 16, 10, true, &m));              STK_TRY(stk_module_add(net, m));
 *     stk_model_config cfg = {.name = "tiny", .in_channels = 3, .classes = 10, .seed = 1};
 *     STK_TRY(stk_model_from_module(net, &cfg, &model));  // takes net; torch.nn's init
 *
 * Names become the state-dict prefixes ("conv1.weight"). A module belongs to
 * its parent once added (stk_module_add takes it even on failure) and to the
 * model once built; stk_module_destroy is only for modules never handed on. */
typedef struct stk_module stk_module;

stk_status stk_module_sequential(const char *name, stk_module **out);
/* Append child to a sequential module. Errors: STK_ERR_INVALID_ARG (parent
 * is not sequential, a sibling has the same name), STK_ERR_NOMEM. */
stk_status stk_module_add(stk_module *parent, stk_module *child);
stk_status stk_module_linear(const char *name, int64_t in, int64_t out, bool bias, stk_module **m);
stk_status stk_module_conv2d(const char *name, int64_t in, int64_t out, int kernel, int stride,
                             int padding, bool bias, stk_module **m);
stk_status stk_module_batchnorm2d(const char *name, int64_t channels, stk_module **m);
stk_status stk_module_relu(const char *name, stk_module **m);
stk_status stk_module_dropout(const char *name, float p, stk_module **m);
stk_status stk_module_maxpool2d(const char *name, int kernel, int stride, int padding,
                                stk_module **m);
stk_status stk_module_avgpool2d(const char *name, int kernel, int stride, int padding,
                                stk_module **m);
stk_status stk_module_global_avgpool(const char *name, stk_module **m); /* [N, C, H, W] -> [N, C] */
stk_status stk_module_flatten(const char *name, stk_module **m);
/* torchvision's BasicBlock (1x1 conv + BN shortcut when the shape changes). */
stk_status stk_module_basic_block(const char *name, int64_t in, int64_t out, int stride,
                                  stk_module **m);
void stk_module_destroy(stk_module *m);
/* A model around `root` (taken, also on failure), initialised from
 * cfg->seed as torch.nn does. cfg->name is free text here; in_channels is
 * checked at forward, classes is informational. */
stk_status stk_model_from_module(stk_module *root, const stk_model_config *cfg, stk_model **out);

#ifdef __cplusplus
}
#endif
