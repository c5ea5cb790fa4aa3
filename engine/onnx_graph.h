/* An ONNX graph run on the engine's own ops (define-by-run): each node of
 * the file becomes the engine op that computes it, so the ordinary autograd
 * trains the graph (tinygrad's way; no per-op gradient registry).
 *
 *     stk_onnx_model *file;
 *     STK_TRY(stk_onnx_read_file("net.onnx", &file));
 *     stk_onnx_graph *g;
 *     STK_TRY(stk_onnx_graph_build(file, "net.onnx", &g)); // takes file
 *     for (int i = 0; i < stk_onnx_graph_param_count(g); i++)
 *         printf("%s\n", stk_onnx_graph_params(g)[i].name); // the state_dict's names
 *     stk_tensor *y;
 *     STK_TRY(stk_onnx_graph_forward(g, x, true, seed, stream, &y));
 *
 * What it reads: torch.onnx.export's graphs (opsets 13-18; the legacy
 * exporter in training or eval mode, the dynamo exporter with
 * optimize=False, whose eval-mode dedup of equal weights and Identity
 * nodes gives each weight its own copy again). Float
 * initializers that are the module's weights become parameters under their
 * own names (the state_dict's); batch norm's running statistics become
 * buffers, and every BatchNormalization trains in training mode (batch
 * statistics, running statistics updated with PyTorch's momentum) and uses
 * the running statistics otherwise, whatever mode the file was exported in.
 * Integer initializers and shape arithmetic (Shape, Gather, Concat,
 * Unsqueeze, ... on int64) are computed on the host while the forward runs,
 * from the input's actual shape. Dropout is active in training only.
 *
 * What it refuses at build, before any forward: ops it does not have, all
 * at once, by type with their counts and the first node of each; a batch
 * norm folded into the convolutions (with the export call that keeps it);
 * a graph without exactly one float input and one output; and (the model
 * calls, once the input's size is known) shapes that cannot run at that
 * size, by one eval forward of two zero images. Never a crash: a node that
 * cannot run on the shapes it meets fails the forward naming the node. */
#pragma once

#include "engine/nn.h"
#include "engine/onnx.h"
#include "engine/onnx_read.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_onnx_graph stk_onnx_graph;

/* Build from a read file, which the graph then owns (also on failure);
 * `what` names it in messages. Parameters live on the CPU. Errors:
 * UNSUPPORTED (ops it does not have; a folded batch norm), CORRUPT (a node
 * reading a value nothing makes, attributes of the wrong type), NOMEM. */
stk_status stk_onnx_graph_build(stk_onnx_model *file, const char *what, stk_onnx_graph **out);
void stk_onnx_graph_destroy(stk_onnx_graph *g);

/* The parameters and buffers in the file's initializer order (names as the
 * state_dict's; batch norm's counters, int64 in ONNX, as I32 scalars). */
int stk_onnx_graph_param_count(const stk_onnx_graph *g);
const stk_param *stk_onnx_graph_params(const stk_onnx_graph *g);
/* The input's declared shape (-1 where symbolic), and its rank. */
int stk_onnx_graph_input_shape(const stk_onnx_graph *g, int64_t *dims);

/* y = graph(x) with the engine's ops (recorded for autograd when grad mode
 * is on). training: batch norm's batch statistics and dropout on; seed and
 * stream: dropout's masks (Philox, per node). */
stk_status stk_onnx_graph_forward(stk_onnx_graph *g, stk_tensor *x, bool training, uint64_t seed,
                                  uint64_t stream, stk_tensor **out);

/* A model (stk_model: fit, the optimizers, checkpoints, export of its
 * weights) whose forward is the ONNX file's graph, its parameters the
 * graph's. cfg (NULL: all from the file) gives in_channels, classes and
 * image_size (0: the file's) and the seed of dropout's masks; the input's
 * declared [N, C, H, W] and the output's [N, classes] must agree with them
 * where the file gives sizes. Errors: as stk_onnx_read_file's and
 * stk_onnx_graph_build's; INVALID_ARG naming the file, the size the file
 * declares and the one asked for. */
stk_status stk_model_from_onnx_file(const char *path, const stk_model_config *cfg,
                                    stk_model **out);
/* The same from the file's bytes (copied); `what` names them in messages. */
stk_status stk_model_from_onnx(const void *bytes, size_t len, const char *what,
                               const stk_model_config *cfg, stk_model **out);
/* Whether m was made from an ONNX file, and that file's bytes (what its
 * checkpoints keep, so that they need nothing else). */
bool stk_model_onnx_file(const stk_model *m, const void **bytes, size_t *len);
/* Write the graph for inference with its current weights (ONNX, the
 * file's opset and IR version): batch norm in eval form (folded into the
 * Conv before it when o->fold_bn), Dropout and stochastic depth as
 * Identity, input "input" (o->input: f32 NCHW as the file's, or u8 NHWC
 * pixels normalised inside by o->mean and o->std), output "logits", the
 * batch dimension "batch" (the file's number when it fixed one); o's
 * metadata. cfg: the model's channels, image
 * size and classes. Errors: INVALID_ARG (o->opset neither 0 nor the
 * file's), UNSUPPORTED (an input that is not [N, C, H, W]), IO, NOMEM. */
stk_status stk_onnx_graph_export(const stk_onnx_graph *g, const stk_model_config *cfg,
                                 const char *path, const stk_onnx_options *o);
/* The graph's bytes as the file had them (the weights at export). */
void stk_onnx_graph_file(const stk_onnx_graph *g, const void **bytes, size_t *len);

#ifdef __cplusplus
}
#endif
