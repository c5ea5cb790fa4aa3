/* ONNX model read (engine/onnx_read.c): protobuf framing, nested messages,
 * tensor shapes and data sizes, attributes. */
#include "engine/onnx_read.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stk_onnx_model *m;
    if (stk_onnx_read(data, size, "fuzz.onnx", &m) != STK_OK) return 0;
    for (int i = 0; i < m->n_initializers; i++) { /* every tensor's bytes are readable */
        const stk_onnx_tensor *t = &m->initializers[i];
        if (t->bytes) {
            volatile uint8_t sink = ((const uint8_t *)t->data)[t->bytes - 1];
            (void)sink;
        }
        if (stk_onnx_initializer(m, t->name) == NULL) __builtin_trap();
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const stk_onnx_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) (void)strlen(n->inputs[k]);
        for (int k = 0; k < n->n_attrs; k++) {
            const stk_onnx_attr *a = &n->attrs[k];
            if (a->type == STK_ONNX_ATTR_INTS && a->n) (void)a->ints[a->n - 1];
            if (a->type == STK_ONNX_ATTR_FLOATS && a->n) (void)a->floats[a->n - 1];
        }
    }
    stk_onnx_model_destroy(m);
    return 0;
}
