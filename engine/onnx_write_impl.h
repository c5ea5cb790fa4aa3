/* Private to engine/: what both ONNX writers put around their graph
 * (onnx_export.c for the built-in models, onnx_graph_export.c for an
 * imported graph): the graph's inputs and outputs and the ModelProto
 * (onnx/onnx.proto's field numbers), over common/pb_wire.h. */
#pragma once

#include "common/pb_wire.h"
#include "engine/onnx.h"

#include <stdint.h>

enum { ENG_ONNX_GRAPH_INPUT = 11, ENG_ONNX_GRAPH_OUTPUT = 12 }; /* GraphProto */

/* A graph input or output (ValueInfoProto) into b at field: name, element
 * type, dims; a dim of -1 is symbolic ("batch"). */
void eng_onnx_value_info(stk_pb *b, int field, const char *name, int type, int nd,
                         const int64_t *dims);

/* The ModelProto around a graph (its nodes, initializers and value infos
 * gathered apart: GraphProto's fields 1, 5, 11 and 12), with the IR
 * version, the default domain's opset and o's metadata_props, written to
 * path atomically. Errors: NOMEM (a buffer failed), IO. */
stk_status eng_onnx_write_model(const char *path, int64_t ir, int64_t opset,
                                const char *graph_name, const stk_pb *nodes, const stk_pb *inits,
                                const stk_pb *io, const stk_onnx_options *o);
