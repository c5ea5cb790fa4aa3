/* The ModelProto and value infos both ONNX writers share (onnx_write_impl.h). */
#include "engine/onnx_write_impl.h"

#include "common/fs.h"

enum { MODEL_IR = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_GRAPH = 7 };
enum { MODEL_OPSET = 8, MODEL_META = 14 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5 };

void eng_onnx_value_info(stk_pb *b, int field, const char *name, int type, int nd,
                         const int64_t *dims)
{
    size_t vi = stk_pb_begin(b, field);
    stk_pb_string(b, 1, name);
    size_t tp = stk_pb_begin(b, 2), tt = stk_pb_begin(b, 1);
    stk_pb_int(b, 1, type);
    size_t sh = stk_pb_begin(b, 2);
    for (int d = 0; d < nd; d++) {
        size_t dm = stk_pb_begin(b, 1);
        if (dims[d] >= 0)
            stk_pb_int(b, 1, dims[d]);
        else
            stk_pb_string(b, 2, "batch");
        stk_pb_end(b, dm);
    }
    stk_pb_end(b, sh);
    stk_pb_end(b, tt);
    stk_pb_end(b, tp);
    stk_pb_end(b, vi);
}

stk_status eng_onnx_write_model(const char *path, int64_t ir, int64_t opset,
                                const char *graph_name, const stk_pb *nodes, const stk_pb *inits,
                                const stk_pb *io, const stk_onnx_options *o)
{
    stk_pb b;
    stk_pb_init(&b);
    stk_pb_int(&b, MODEL_IR, ir);
    stk_pb_string(&b, MODEL_PRODUCER, "stoke");
    stk_pb_string(&b, MODEL_PRODUCER_VERSION, STOKE_VERSION);
    size_t gr = stk_pb_begin(&b, MODEL_GRAPH);
    stk_pb_append(&b, nodes);
    stk_pb_string(&b, GRAPH_NAME, graph_name);
    stk_pb_append(&b, inits);
    stk_pb_append(&b, io);
    stk_pb_end(&b, gr);
    size_t op = stk_pb_begin(&b, MODEL_OPSET);
    stk_pb_int(&b, 2, opset); /* domain "": the default ai.onnx */
    stk_pb_end(&b, op);
    for (int i = 0; i < o->n_meta; i++) {
        size_t kv = stk_pb_begin(&b, MODEL_META);
        stk_pb_string(&b, 1, o->meta_keys[i]);
        stk_pb_string(&b, 2, o->meta_values[i]);
        stk_pb_end(&b, kv);
    }
    stk_status st = STK_OK;
    if (stk_pb_failed(&b) || stk_pb_failed(nodes) || stk_pb_failed(inits) || stk_pb_failed(io))
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) {
        stk_file_part part = {b.data, b.len};
        st = stk_file_write_atomic(path, &part, 1);
    }
    stk_pb_deinit(&b);
    return st;
}
