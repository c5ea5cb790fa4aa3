/* The eval-mode logits of an ONNX file run by Stoke's importer, beside the
 * ones PyTorch computed for the same input (bench/onnx_parity.sh writes
 * both): prints the largest difference and fails above 1e-4 of the
 * largest logit.
 *
 *   onnx_forward FILE.onnx IO.safetensors   (IO: "input" f32 NCHW, "logits") */
#include "engine/autograd.h"
#include "engine/nn.h"
#include "engine/onnx_graph.h"
#include "storage/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != STK_OK) {                                                                    \
            fprintf(stderr, "onnx_forward: %s\n", stk_last_error());                               \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: onnx_forward FILE.onnx IO.safetensors\n");
        return 2;
    }
    stk_safetensors *io;
    CHECK(stk_safetensors_read(argv[2], &io));
    const stk_st_entry *in = stk_safetensors_find(io, "input"), *want = stk_safetensors_find(io, "logits");
    if (!in || !want || in->dtype != STK_ST_F32 || want->dtype != STK_ST_F32 || in->ndim != 4) {
        fprintf(stderr, "onnx_forward: %s needs f32 \"input\" [N, C, H, W] and \"logits\"\n", argv[2]);
        return 2;
    }
    stk_model *m;
    CHECK(stk_model_from_onnx_file(argv[1], NULL, &m));
    stk_tensor *x, *y;
    CHECK(stk_tensor_from_host(STK_F32, 4, in->shape, stk_safetensors_data(io, in), &x));
    stk_model_train(m, false);
    stk_no_grad_begin();
    CHECK(stk_model_forward(m, x, &y));
    int64_t n = stk_tensor_numel(y);
    if (n * 4 != (int64_t)(want->end - want->begin)) {
        fprintf(stderr, "onnx_forward: %lld logits, PyTorch's %lld\n", (long long)n,
                (long long)((want->end - want->begin) / 4));
        return 1;
    }
    float *got = malloc((size_t)n * sizeof *got), *ref = malloc((size_t)n * sizeof *ref);
    if (!got || !ref) return 2;
    CHECK(stk_tensor_to_host(y, got, (size_t)n * sizeof *got));
    memcpy(ref, stk_safetensors_data(io, want), (size_t)n * sizeof *ref);
    double diff = 0, big = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)got[i] - ref[i]) > diff) diff = fabs((double)got[i] - ref[i]);
        if (fabs(ref[i]) > big) big = fabs(ref[i]);
    }
    printf("%s: max |logit - PyTorch's| %.2e (logits up to %.2f), %d tensors\n", argv[1], diff,
           big, stk_model_param_count(m));
    free(got), free(ref);
    stk_tensor_release(x);
    stk_model_destroy(m);
    stk_safetensors_free(io);
    return diff <= 1e-4 * (big > 1 ? big : 1) ? 0 : 1;
}
