/* Reading an ONNX file (ModelProto, onnx.proto): its opset, the graph's
 * nodes with their attributes, the initializers (a model's weights, under
 * their state_dict names when torch.onnx.export wrote them), and the
 * graph's inputs and outputs with their shapes. What an importer builds a
 * model from; nothing here interprets the ops.
 *
 *     stk_onnx_model *m;
 *     if (stk_onnx_read_file("resnet18.onnx", &m) != STK_OK)
 *         fprintf(stderr, "%s\n", stk_last_error()); // names the file, field and reason
 *     for (int i = 0; i < m->n_nodes; i++) {
 *         const stk_onnx_node *n = &m->nodes[i];
 *         const stk_onnx_attr *a = stk_onnx_node_attr(n, "strides");
 *         ...
 *     }
 *     const stk_onnx_tensor *w = stk_onnx_initializer(m, "conv1.weight");
 *     stk_onnx_model_destroy(m);
 *
 * Every length, count and shape is checked against the bytes before it is
 * used: a damaged or hostile file gives STK_ERR_CORRUPT (not ONNX, cut
 * off, sizes that disagree) or STK_ERR_UNSUPPORTED (external data, tensors
 * of more than STK_ONNX_MAX_DIMS dimensions), never a crash (fuzz/
 * fuzz_onnx.c). Everything a model points to (names, tensor data) lives as
 * long as the model; tensor data may be unaligned (read it with memcpy). */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_ONNX_MAX_DIMS 8

/* TensorProto.DataType values this reader decodes (others are kept as
 * bytes when stored raw). */
enum {
    STK_ONNX_FLOAT = 1,
    STK_ONNX_UINT8 = 2,
    STK_ONNX_INT8 = 3,
    STK_ONNX_INT32 = 6,
    STK_ONNX_INT64 = 7,
    STK_ONNX_BOOL = 9,
    STK_ONNX_FLOAT16 = 10,
    STK_ONNX_DOUBLE = 11,
    STK_ONNX_BFLOAT16 = 16,
};

typedef struct stk_onnx_tensor {
    const char *name;
    int dtype; /* TensorProto.DataType */
    int ndim;
    int64_t dims[STK_ONNX_MAX_DIMS];
    int64_t numel;
    const void *data; /* numel values of dtype, little-endian (possibly unaligned) */
    size_t bytes;
} stk_onnx_tensor;

/* AttributeProto.AttributeType */
enum {
    STK_ONNX_ATTR_FLOAT = 1,
    STK_ONNX_ATTR_INT = 2,
    STK_ONNX_ATTR_STRING = 3,
    STK_ONNX_ATTR_TENSOR = 4,
    STK_ONNX_ATTR_GRAPH = 5, /* kept as a type only: subgraphs are not read */
    STK_ONNX_ATTR_FLOATS = 6,
    STK_ONNX_ATTR_INTS = 7,
    STK_ONNX_ATTR_STRINGS = 8,
};

typedef struct stk_onnx_attr {
    const char *name;
    int type;
    float f;
    int64_t i;
    const char *s; /* STRING: NUL-terminated (s_len bytes before it) */
    size_t s_len;
    int n; /* FLOATS, INTS: how many */
    const float *floats;
    const int64_t *ints;
    const stk_onnx_tensor *t; /* TENSOR */
} stk_onnx_attr;

typedef struct stk_onnx_node {
    const char *name, *op_type, *domain; /* "" when the file has none */
    int n_inputs, n_outputs, n_attrs;
    const char **inputs, **outputs; /* "" for an omitted optional input */
    const stk_onnx_attr *attrs;
    /* the dynamo exporter's module path ("['', 'layer1', 'layer1.0', 'relu']",
     * metadata_props' pkg.torch.onnx.name_scopes), "" when the file has none */
    const char *scopes;
} stk_onnx_node;

typedef struct stk_onnx_value {
    const char *name;
    int elem_type;                            /* 0: not given */
    int ndim;                                 /* -1: no shape given */
    int64_t dims[STK_ONNX_MAX_DIMS];          /* -1: symbolic or unknown */
    const char *dim_param[STK_ONNX_MAX_DIMS]; /* the symbol ("batch_size"), or NULL */
} stk_onnx_value;

typedef struct stk_onnx_model {
    int64_t ir_version;
    int64_t opset; /* of the default domain ("" or "ai.onnx"); 0: none imported */
    const char *producer, *producer_version, *graph_name;
    int n_nodes, n_initializers, n_inputs, n_outputs;
    const stk_onnx_node *nodes; /* in the file's order (ONNX's is topological) */
    const stk_onnx_tensor *initializers;
    const stk_onnx_value *inputs, *outputs;
    /* the dynamo exporter's record of the module's parameters and buffers
     * (the graph's metadata "pkg.torch.export.ExportedProgram.graph_signature",
     * lines "p_conv1_weight: PARAMETER target='conv1.weight'"), or NULL */
    const char *torch_signature;
    const uint8_t *bytes; /* the file as read (a checkpoint keeps it) */
    size_t n_bytes;
    struct stk_onnx_arena *arena; /* owns all of the above */
} stk_onnx_model;

/* Parse len bytes (copied: the caller's may go) of an ONNX file; `what`
 * names it in errors ("model.onnx"). */
stk_status stk_onnx_read(const void *bytes, size_t len, const char *what, stk_onnx_model **out);
/* The same from a file (up to 4 GiB, ONNX's limit without external data). */
stk_status stk_onnx_read_file(const char *path, stk_onnx_model **out);
void stk_onnx_model_destroy(stk_onnx_model *m);

/* The initializer of that name, or NULL. Linear in the initializers. */
const stk_onnx_tensor *stk_onnx_initializer(const stk_onnx_model *m, const char *name);
/* The node's attribute of that name, or NULL. */
const stk_onnx_attr *stk_onnx_node_attr(const stk_onnx_node *n, const char *name);
/* Bytes per element of an ONNX data type, 0 for those this reader does not know. */
size_t stk_onnx_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif
