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
 * A model is a tree of modules (the builders below: layers, containers,
 * blocks). Its state
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
 *   efficientnet_b0, mobilenet_v3_small, mobilenet_v3_large, convnext_tiny,
 *   regnet_y_400mf, vit_b_16, vit_tiny
 *             torchvision's layouts, names, initialisation and stochastic
 *             depth (vit_tiny: its VisionTransformer at timm's tiny sizes,
 *             the patch fitted to the image); below 64 px the stem and the
 *             first stride-2 stage at stride 1 (models_convnets.c)
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
    float bn_momentum; /* 0: PyTorch's 0.1 (mobilenet_v3: torchvision's 0.01) */
    float bn_eps;      /* 0: PyTorch's 1e-5 (mobilenet_v3: torchvision's 1e-3) */
    /* Stochastic depth's rate at the last block (torchvision's schedule:
     * linear in the block's depth). 0: the model's default (efficientnet_b0
     * 0.2, convnext_tiny 0.1, others none); negative: none. */
    float drop_path;
} stk_model_config;

/* Build a model. Errors: STK_ERR_INVALID_ARG (unknown name, listing the
 * known ones; channels/classes/size out of range), STK_ERR_NOMEM. */
stk_status stk_model_create(const stk_model_config *cfg, stk_model **out);
void stk_model_destroy(stk_model *m);

/* The zoo's names as a list for messages; stk_model_names() the same, NULL-terminated. */
#define STK_MODEL_LIST                                                                             \
    "mlp, cnn, resnet8, resnet18, resnet34, resnet50, mobilenet_v2, efficientnet_b0, "             \
    "mobilenet_v3_small, mobilenet_v3_large, convnext_tiny, regnet_y_400mf, vit_b_16, vit_tiny"
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
 * "classifier.1"); a unit's name is its module path. A model imported
 * from ONNX is cut where one tensor alone flows on (onnx_graph_units.c),
 * its units named after their modules the same way. Running units [0, n)
 * is stk_model_forward. forward_id numbers the forward for dropout masks
 * (stk_model_forward counts its own calls); several threads may run
 * disjoint units of one model at once (their parameters are disjoint).
 * Errors: INVALID_ARG (a range outside 0..count), as stk_model_forward. */
int stk_model_unit_count(const stk_model *m);
const char *stk_model_unit_name(const stk_model *m, int i);
stk_status stk_model_forward_units(stk_model *m, int from, int to, uint64_t forward_id,
                                   stk_tensor *x, stk_tensor **out);
/* The unit whose modules hold parameter p (the state dict's index), or -1
 * (outside every unit, or p out of range). */
int stk_model_param_unit(const stk_model *m, int p);

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

/* ---- building a model from modules -----------------------------------------
 *
 * Every built-in model is a tree of these modules; a model of your own is
 * built the same way. A VGG-style stack with a squeeze-excitation block and
 * a residual branch:
 *
 *     stk_module *net, *m, *res;
 *     STK_TRY(stk_module_sequential("", &net));
 *     STK_TRY(stk_module_conv2d("conv1", 1, 32, 3, 1, 1, false, &m));  STK_TRY(stk_module_add(net,
 * m)); STK_TRY(stk_module_batchnorm2d("bn1", 32, &m));                 STK_TRY(stk_module_add(net,
 * m)); STK_TRY(stk_module_activation("act1", STK_ACT_SILU, &m));       STK_TRY(stk_module_add(net,
 * m)); STK_TRY(stk_module_residual("block", STK_ACT_RELU, &res));      // x + body(x), then ReLU
 *     STK_TRY(stk_module_conv2d_grouped("dw", 32, 32, 3, 1, 1, 32, false, &m));
 *     STK_TRY(stk_module_add(res, m));
 *     STK_TRY(stk_module_squeeze_excitation("se", 32, 8, STK_ACT_RELU, STK_ACT_SIGMOID, &m));
 *     STK_TRY(stk_module_add(res, m));
 *     STK_TRY(stk_module_add(net, res));
 *     STK_TRY(stk_module_global_avgpool("pool", &m));                 STK_TRY(stk_module_add(net,
 * m)); STK_TRY(stk_module_linear("fc", 32, 10, true, &m));             STK_TRY(stk_module_add(net,
 * m)); stk_model_config cfg = {.name = "tiny", .in_channels = 1, .classes = 10, .image_size = 28,
 * .seed = 1}; STK_TRY(stk_model_from_module(net, &cfg, &model));  // takes net; torch.nn's init
 *
 * Names become the state dict's dotted names, as PyTorch's: "block.se.fc1.weight".
 * Containers: a sequential runs its children in turn; a residual adds its
 * input (or its shortcut's output) to its body's (the other children in
 * turn), then an activation; a concat runs each child on the input and
 * concatenates along channels. A sequential or residual child may have the
 * name "" and then adds nothing to its children's names (torchvision's ViT
 * encoder layer is two residual sums under one name). A module belongs to
 * its parent once added (stk_module_add takes it even on failure) and to the
 * model once built; stk_module_destroy is only for modules never handed on.
 * Builders check their sizes: STK_ERR_INVALID_ARG names the module. */
typedef struct stk_module stk_module;

stk_status stk_module_sequential(const char *name, stk_module **out);
/* Append child to a container (sequential, residual, concat). Errors:
 * STK_ERR_INVALID_ARG (parent is not a container, a sibling has the same
 * name, a nameless child that is not a group), STK_ERR_NOMEM. */
stk_status stk_module_add(stk_module *parent, stk_module *child);
/* x + body(x), then `after` (STK_ACT_NONE: nothing); the body is the
 * children added (stk_module_add). */
stk_status stk_module_residual(const char *name, stk_activation after, stk_module **out);
/* The residual's other path (torchvision's "downsample" or "proj"): added
 * as a child, run on the input instead of the identity. */
stk_status stk_module_set_shortcut(stk_module *residual, stk_module *shortcut);
stk_status stk_module_concat(const char *name, stk_module **out);

/* torch.nn.Linear on [..., in]. */
stk_status stk_module_linear(const char *name, int64_t in, int64_t out, bool bias, stk_module **m);
/* torch.nn.Conv2d (square kernel, stride and padding; dilation 1). */
stk_status stk_module_conv2d(const char *name, int64_t in, int64_t out, int kernel, int stride,
                             int padding, bool bias, stk_module **m);
/* The same with `groups` dividing in and out (groups = in: depthwise). */
stk_status stk_module_conv2d_grouped(const char *name, int64_t in, int64_t out, int kernel,
                                     int stride, int padding, int groups, bool bias,
                                     stk_module **m);
stk_status stk_module_batchnorm2d(const char *name, int64_t channels, stk_module **m);
/* torch.nn.LayerNorm(dim, eps) over the last dimension; the 2d form over
 * the channels of [N, C, H, W] (torchvision's LayerNorm2d). */
stk_status stk_module_layer_norm(const char *name, int64_t dim, float eps, stk_module **m);
stk_status stk_module_layer_norm2d(const char *name, int64_t channels, float eps, stk_module **m);
stk_status stk_module_relu(const char *name, stk_module **m);
/* Any of stk_activation but NONE (ReLU and ReLU6 after a batch norm run fused). */
stk_status stk_module_activation(const char *name, stk_activation act, stk_module **m);
stk_status stk_module_dropout(const char *name, float p, stk_module **m);
/* Stochastic depth (torchvision's StochasticDepth, "row"): in a residual
 * body, drops the whole branch of a sample with probability p in training. */
stk_status stk_module_drop_path(const char *name, float p, stk_module **m);
/* ConvNeXt's layer scale: x * gamma, gamma a parameter of `channels` values
 * starting at `value`, shaped [C, 1, 1] (channels_first, for NCHW) or [C]
 * (for [..., C]). The parameter belongs to the parent: its state-dict name
 * is the parent's path and this module's name ("features.1.0.layer_scale"). */
stk_status stk_module_layer_scale(const char *name, int64_t channels, float value,
                                  bool channels_first, stk_module **m);
/* torchvision's SqueezeExcitation: x * gate(fc2(act(fc1(avgpool(x))))),
 * fc1 and fc2 1x1 convolutions with bias (channels -> squeeze -> channels). */
stk_status stk_module_squeeze_excitation(const char *name, int64_t channels, int64_t squeeze,
                                         stk_activation act, stk_activation gate, stk_module **m);
/* Self-attention over [N, S, dim] as torch.nn.MultiheadAttention(dim, heads,
 * batch_first=True)(x, x, x): parameters in_proj_weight, in_proj_bias,
 * out_proj.weight, out_proj.bias. */
stk_status stk_module_attention(const char *name, int64_t dim, int heads, stk_module **m);
/* torch.permute of the input by dims (ndim of them). */
stk_status stk_module_permute(const char *name, int ndim, const int *dims, stk_module **m);
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

/* A model's module tree as text (what a checkpoint of a model built with
 * stk_model_from_module holds as "model_graph"), malloc'd; and a model
 * rebuilt from such text (sizes checked as the builders check them; errors:
 * STK_ERR_FORMAT naming the line). stk_model_is_custom: built from modules
 * (its checkpoints describe it), not one of the zoo's. */
stk_status stk_model_describe(const stk_model *m, char **text);
stk_status stk_model_from_description(const char *text, const stk_model_config *cfg,
                                      stk_model **out);
bool stk_model_is_custom(const stk_model *m);
/* Whether text is a description stk_model_from_description takes (no model built). */
stk_status stk_model_description_check(const char *text);
/* A model around `root` (taken, also on failure), initialised from
 * cfg->seed as torch.nn does. cfg->name is free text here; in_channels is
 * checked at forward, classes is informational. */
stk_status stk_model_from_module(stk_module *root, const stk_model_config *cfg, stk_model **out);

#ifdef __cplusplus
}
#endif
