/* Writes what tests/python/check_onnx.py compares an exported ONNX model
 * with: a batch of random pixels (u8 NHWC), the same batch as the model's
 * normalised f32 NCHW input (the checkpoint's input_mean and input_std, as
 * stoke eval normalises) and the eval-mode logits Stoke computes for it.
 *
 *   forward_io CHECKPOINT OUT.safetensors [N=3]  -> pixels, input, logits */
#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/checkpoint.h"
#include "engine/onnx_graph.h"
#include "storage/safetensors.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != STK_OK) {                                                                    \
            fprintf(stderr, "forward_io: %s\n", stk_last_error());                                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int n = argc == 4 ? atoi(argv[3]) : 3;
    if (argc < 3 || argc > 4 || n < 1 || n > 64) {
        fprintf(stderr, "usage: forward_io CHECKPOINT OUT.safetensors [N: 1..64]\n");
        return 2;
    }
    stk_safetensors *f;
    CHECK(stk_safetensors_read(argv[1], &f));
    int64_t ch, cl, sz;
    CHECK(stk_safetensors_meta_int(f, "in_channels", 1, 3, &ch));
    CHECK(stk_safetensors_meta_int(f, "classes", 1, 1000, &cl));
    CHECK(stk_safetensors_meta_int(f, "image_size", 1, 512, &sz));
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1}; /* (the exporter's, when none is recorded) */
    CHECK(stk_trainer_normalisation_from(f, mean, std));
    stk_model_config cfg = {.name = stk_safetensors_meta(f, "model"),
                            .in_channels = (int)ch,
                            .classes = (int)cl,
                            .image_size = (int)sz};
    stk_model *m;
    const char *graph = stk_safetensors_meta(f, "model_graph"); /* a model built from modules */
    const stk_st_entry *onnx = stk_safetensors_find(f, STK_CHECKPOINT_ONNX_TENSOR); /* imported */
    if (onnx)
        CHECK(stk_model_from_onnx(stk_safetensors_data(f, onnx), (size_t)(onnx->end - onnx->begin),
                                  argv[1], &cfg, &m));
    else
        CHECK(graph ? stk_model_from_description(graph, &cfg, &m) : stk_model_create(&cfg, &m));
    stk_safetensors_free(f);
    stk_load_report rep;
    CHECK(stk_checkpoint_load(argv[1], m, NULL, true, &rep));
    size_t px = (size_t)n * (size_t)(sz * sz * ch);
    uint8_t *pixels = malloc(px);
    float *x = malloc(px * sizeof *x), *logits = malloc((size_t)(n * cl) * sizeof *logits);
    if (!pixels || !x || !logits) return 1;
    stk_rng r;
    stk_rng_init(&r, 2026, 0, 0);
    for (size_t i = 0; i < px; i++) pixels[i] = (uint8_t)stk_rng_below(&r, 256);
    for (int64_t b = 0; b < n; b++) /* NHWC u8 -> NCHW f32, normalised */
        for (int64_t c = 0; c < ch; c++)
            for (int64_t i = 0; i < sz * sz; i++)
                x[((b * ch + c) * sz * sz) + i] =
                    ((float)pixels[(b * sz * sz + i) * ch + c] / 255.f - mean[c]) / std[c];
    int64_t xs[4] = {n, ch, sz, sz}, ps[4] = {n, sz, sz, ch}, ls[2] = {n, cl};
    stk_tensor *in, *out;
    CHECK(stk_tensor_from_host(STK_F32, 4, xs, x, &in));
    stk_model_train(m, false);
    stk_no_grad_begin();
    CHECK(stk_model_forward(m, in, &out));
    CHECK(stk_tensor_to_host(out, logits, (size_t)(n * cl) * sizeof *logits));
    stk_st_tensor t[3] = {{"pixels", STK_ST_U8, 4, ps, pixels, px},
                          {"input", STK_ST_F32, 4, xs, x, px * sizeof *x},
                          {"logits", STK_ST_F32, 2, ls, logits, (size_t)(n * cl) * sizeof *logits}};
    CHECK(stk_safetensors_write(argv[2], 3, t, 0, NULL, NULL));
    stk_tensor_release(in);
    stk_tensor_release(out);
    stk_model_destroy(m);
    free(pixels), free(x), free(logits);
    return 0;
}
