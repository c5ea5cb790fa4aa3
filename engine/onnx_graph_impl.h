/* Private: the compiled form of an ONNX graph (onnx_graph.c builds it,
 * onnx_graph_ops.c runs its nodes). */
#pragma once

#include "engine/onnx_graph.h"
#include "engine/ops.h"

#include <stdbool.h>
#include <stdint.h>

/* The ONNX ops the graph runs (OP_GELU: the exporter's Div, Erf, Add, Mul,
 * Mul of nn.GELU, recognised as one; OP_DROP_PATH: torchvision's
 * stochastic depth, RandomUniformLike, Less, Cast, Div, Mul; OP_SILU:
 * nn.SiLU's Sigmoid and Mul; OP_LAYERNORM also nn.LayerNorm below opset
 * 17: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add). */
typedef enum onnx_op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MATMUL, OP_GEMM, OP_CONV, OP_BATCHNORM, OP_RELU,
    OP_SIGMOID, OP_TANH, OP_HARDSIGMOID, OP_HARDSWISH, OP_CLIP, OP_GELU, OP_SOFTMAX,
    OP_LOGSOFTMAX, OP_LAYERNORM, OP_MAXPOOL, OP_AVGPOOL, OP_GLOBALAVGPOOL, OP_FLATTEN,
    OP_RESHAPE, OP_TRANSPOSE, OP_CONCAT, OP_DROPOUT, OP_IDENTITY, OP_CONSTANT, OP_SHAPE,
    OP_GATHER, OP_UNSQUEEZE, OP_SQUEEZE, OP_SLICE, OP_CAST, OP_CONSTANTOFSHAPE, OP_EXPAND,
    OP_EQUAL, OP_WHERE, OP_LESS, OP_RANDOM_UNIFORM_LIKE, OP_DROP_PATH, OP_SILU, OP_MOD,
    OP_SQRT, OP_CASTLIKE, OP_RANGE, OP_REDUCEMEAN, OP_POW,
    OP_SKIP, /* a node folded into another (GELU's tail) */
} onnx_op;

/* A value of the graph: a float tensor, or host numbers (shape arithmetic
 * and integer constants: exact as doubles up to 2^53). */
typedef struct onnx_value {
    stk_tensor *t;
    double *host; /* numel values, row-major over dims */
    bool is_float; /* host numbers of a float type (Div divides them exactly, not as integers) */
    int ndim;
    int64_t dims[STK_ONNX_MAX_DIMS];
    int64_t numel;
    /* parameters and constants: kept from forward to forward (the
     * intermediates' tensors belong to the caller's scope, as a module's) */
    bool persistent;
    int last_use; /* the last node that reads it: its tensor goes after that one */
} onnx_value;

typedef struct onnx_node {
    const stk_onnx_node *src;
    onnx_op op;
    int n_in, n_out;
    int *in, *out;     /* value indices; -1: an omitted optional input */
    int counter;       /* batch norm: index of its num_batches_tracked parameter, or -1 */
    float p;           /* OP_DROP_PATH: the rate; OP_LAYERNORM folded from its parts: eps */
    bool relu_after;   /* OP_BATCHNORM: the Relu after it, fused (stk_batch_norm_act) */
    bool drop_path_part; /* one of the four nodes before an OP_DROP_PATH (not exported) */
    bool param_copy;     /* an Identity giving a weight of its own (eval-mode dedup) */
} onnx_node;

struct stk_onnx_graph {
    stk_onnx_model *file;
    char *what;
    onnx_value *values;
    const char **names; /* of each value */
    int n_values, cap_values;
    int *table; /* open addressing over names: value index or -1 */
    int table_size;
    onnx_node *nodes;
    int n_nodes;
    stk_param *params;
    int n_params;
    int input, output;
    stk_device device; /* of the constants (the parameters' are the model's) */
    /* The forward as a chain of units (onnx_graph_units.c), found by the
     * load's dry run; none (n_units 0) when it did not run. */
    bool recording;    /* the dry run: seen_tensor[v] set for each tensor value */
    bool *seen_tensor; /* n_values */
    int n_units;
    int *unit_first;   /* unit u: nodes [unit_first[u], unit_first[u + 1]) */
    int *unit_in;      /* the value a unit starts from (the one tensor across its cut) */
    char **unit_names;
    int *param_unit;   /* n_params: the unit whose nodes use it */
    int *carry_start, *carry_vals; /* unit u's host numbers crossing its cut:
                                    * carry_vals[carry_start[u] .. carry_start[u + 1]) */
    /* shapes computed before a cut, for the stages after it: a list behind a
     * head allocated once, so that a run's copy of this struct (eng_onnx_run)
     * never reads what another stage's run writes */
    struct eng_onnx_carry *carry;
};

/* One forward over nodes of the graph: its own copy of the values (so that
 * pipeline stages run disjoint nodes at once), `in` the value fed (never
 * dropped), `out` the one returned. shared: the graph with the copy in it,
 * which the nodes run on. */
typedef struct eng_onnx_run {
    stk_onnx_graph *g;
    onnx_value *values;
    stk_onnx_graph shared;
    int in, out;
} eng_onnx_run;

stk_status eng_onnx_run_begin(stk_onnx_graph *g, int in, int out, eng_onnx_run *r);
/* Nodes [from, to); errors name the node. */
stk_status eng_onnx_run_nodes(eng_onnx_run *r, int from, int to, bool training, uint64_t seed,
                              uint64_t stream);
/* The intermediates cleared (their tensors are the caller's scope's). */
void eng_onnx_run_end(eng_onnx_run *r);

/* Units (onnx_graph_units.c): record which values are tensors during the
 * next forward (the dry run at load), then find the units from it; freed
 * with the graph. */
stk_status eng_onnx_units_record(stk_onnx_graph *g);
stk_status eng_onnx_find_units(stk_onnx_graph *g);
void eng_onnx_units_free(stk_onnx_graph *g);

/* Move the constants to dev (onnx_graph_ops.c), their host numbers kept
 * for shape arithmetic first (read on the host, whatever the device). */
stk_status eng_onnx_graph_move(stk_onnx_graph *g, stk_device dev);

/* Run node i (onnx_graph_ops.c): reads its inputs' values, sets its outputs'. */
stk_status eng_onnx_run_node(stk_onnx_graph *g, int i, bool training, uint64_t seed,
                             uint64_t stream);
