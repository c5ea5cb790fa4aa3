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
    MOD_ACT,         /* an activation other than ReLU/ReLU6 (act) */
    MOD_LAYERNORM,   /* over the last dimension (eps) */
    MOD_LAYERNORM2D, /* over the channels of NCHW (eps) */
    MOD_PERMUTE,     /* dims[0..ndim) */
    /* torchvision's SqueezeExcitation: x * gate(fc2(act(fc1(avgpool(x))))),
     * children fc1 and fc2 (1x1 convs with bias) */
    MOD_SE,
    MOD_DROP_PATH,   /* stochastic depth, rate p */
    MOD_LAYER_SCALE, /* x * weight ([C, 1, 1], or [C] for [..., C]): a parameter of the parent */
    MOD_CONCAT,      /* each child on the input, the results concatenated along dim 1 */
    /* torch.nn.MultiheadAttention (batch_first) as self-attention over
     * [N, S, D]: weight = in_proj_weight [3D, D], bias = in_proj_bias,
     * child out_proj (linear D -> D); heads in `heads` */
    MOD_ATTENTION,
    /* ViT's pieces: [N, D, h, w] -> [N, h w, D] tokens; the class token
     * (weight [1, 1, D], a parameter of the parent) put first; the position
     * embedding (weight [1, S, D], of the parent) added; token 0 taken */
    MOD_TOKENS,
    MOD_CLASS_TOKEN,
    MOD_POS_EMBED,
    MOD_SELECT_TOKEN,
    /* a graph read from ONNX (engine/onnx_graph.h), run node by node on the
     * engine's ops; its parameters are the graph's (the file's names) */
    MOD_ONNX_GRAPH,
} eng_module_kind;

/* How a module's weights start (eng_mod_init); each builder sets its
 * module's, after the model's scheme (torchvision's per family). */
typedef enum eng_weight_init {
    WINIT_TORCH_DEFAULT = 0,   /* kaiming-uniform a = sqrt(5), bias U(+-1/sqrt(fan_in)) */
    WINIT_KAIMING_FAN_OUT,     /* N(0, 2/fan_out), bias 0 */
    WINIT_DEFAULT_BIAS_0,      /* torch's default weight, bias 0 (attention's out_proj) */
    WINIT_NORMAL_001,          /* N(0, 0.01), bias 0 */
    WINIT_UNIFORM_FAN_OUT,     /* U(+-1/sqrt(out features)), bias 0 (EfficientNet's linear) */
    WINIT_TRUNC_NORMAL_002,    /* trunc N(0, 0.02) in [-2, 2], bias 0 (ConvNeXt) */
    WINIT_TRUNC_NORMAL_FAN_IN, /* trunc N(0, 1/fan_in), bias 0 (ViT's conv_proj) */
    WINIT_XAVIER_BIAS_1E6,     /* xavier-uniform, bias N(0, 1e-6) (ViT's MLP) */
    WINIT_XAVIER_BIAS_0,       /* xavier-uniform, bias 0 (attention's in_proj) */
    WINIT_ZERO,                /* weight and bias 0 (ViT's head) */
    WINIT_NORMAL_002,          /* N(0, 0.02) (ViT's position embedding) */
    WINIT_CONST,               /* the weight `init_value` (layer scale, class token) */
} eng_weight_init;

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
    int kernel, stride, padding;  /* pooling */
    float p;                      /* dropout */
    int shortcut;                 /* MOD_RESIDUAL: the shortcut child, -1: the identity */
    bool relu_after;              /* MOD_RESIDUAL: ReLU after the sum */
    stk_activation act, gate;     /* MOD_ACT (act); MOD_SE: fc1's and the gate's */
    float eps;                    /* layer norms */
    int dims[STK_MAX_DIMS], ndim; /* MOD_PERMUTE */
    int heads;                    /* MOD_ATTENTION */
    /* Parameters on the parent (MOD_LAYER_SCALE, MOD_CLASS_TOKEN,
     * MOD_POS_EMBED): the weight's state-dict name is the parent's path and
     * this module's name ("features.1.0.layer_scale") */
    bool param_of_parent;
    const char *weight_name, *bias_name; /* NULL: "weight", "bias" */
    eng_weight_init init;
    float init_value; /* WINIT_CONST */
    bool open_units;  /* a sequential whose children are pipeline units (stk_model_unit_count) */
    struct stk_onnx_graph *graph; /* MOD_ONNX_GRAPH: owned */
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
    bool custom;            /* built by stk_model_from_module: checkpoints carry its graph */
    int n_units;
};

/* MOD_ONNX_GRAPH's graph (onnx_graph.c; nn.c does not include its header,
 * which builds on nn.h). */
void eng_onnx_graph_free(struct stk_onnx_graph *g);
const stk_param *eng_onnx_graph_params(const struct stk_onnx_graph *g, int *n);
/* The graph's constants (not its parameters: stk_model_to moves those) to dev. */
stk_status eng_onnx_graph_to(struct stk_onnx_graph *g, stk_device dev);
stk_status eng_onnx_graph_run(struct stk_onnx_graph *g, stk_tensor *x, bool training,
                              uint64_t seed, uint64_t stream, stk_tensor **out);
/* The graph as a chain of units (onnx_graph_units.c): 0 when it has no
 * cuts (or its size was not known at load); a unit's name; the unit that
 * uses parameter p; units [from, to) on x. */
int eng_onnx_graph_unit_count(const struct stk_onnx_graph *g);
const char *eng_onnx_graph_unit_name(const struct stk_onnx_graph *g, int u);
int eng_onnx_graph_param_unit(const struct stk_onnx_graph *g, int p);
stk_status eng_onnx_graph_run_units(struct stk_onnx_graph *g, int from, int to, stk_tensor *x,
                                    bool training, uint64_t seed, uint64_t stream,
                                    stk_tensor **out);

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
/* An activation module: MOD_RELU, MOD_RELU6 or MOD_ACT. */
stk_module *eng_mod_act(const char *name, stk_activation act);
stk_module *eng_mod_layer_norm(const char *name, int64_t c, float eps, bool channels);
stk_module *eng_mod_permute(const char *name, int ndim, const int *dims);
stk_module *eng_mod_se(const char *name, int64_t c, int64_t squeeze, stk_activation act,
                       stk_activation gate);
stk_module *eng_mod_drop_path(const char *name, float p);
/* shape [c, 1, 1] (ndim 3) or [c] (ndim 1), every value `value` */
stk_module *eng_mod_layer_scale(const char *name, int64_t c, int ndim, float value);
stk_module *eng_mod_attention(const char *name, int64_t dim, int heads);
/* A module owning one parameter of the given shape, named on the parent. */
stk_module *eng_mod_parent_param(eng_module_kind kind, const char *name, int ndim,
                                 const int64_t *shape);
void eng_mod_free(stk_module *m);
/* torchvision's BasicBlock (models.c). */
stk_module *eng_mod_basic_block(const char *name, int64_t in, int64_t out, int stride);

/* Fill the weights of the tree (models.c's init scheme) from Philox(seed). */
stk_status eng_mod_init(stk_module *m, eng_init_kind conv_init, uint64_t seed, int *counter);

/* The zoo model `name`'s first layer weight ([out, in_channels, ...], or
 * mlp's [256, in]) and classifier weight ([classes, ...]) in its state dict:
 * what a checkpoint's metadata is checked against before a model is built. */
void eng_model_io_tensors(const char *name, const char **first, const char **classifier);

/* model_graph.c: the tree as text and back (stk_model_describe). */
stk_status eng_model_graph_write(const stk_model *m, char **out);
stk_status eng_model_graph_read(const char *desc, stk_module **root, float *bn_eps,
                                float *bn_momentum);

/* Build the state dict of m->root into m->params. */
stk_status eng_model_collect_params(stk_model *m);
