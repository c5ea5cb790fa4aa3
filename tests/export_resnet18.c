/* Writes what tests/python/check_torchvision.py needs to prove that Stoke's
 * resnet18 checkpoints are usable from PyTorch: a checkpoint of a resnet18
 * (3 channels, 10 classes; SIZE px, default 32: the CIFAR stem, 64 or more:
 * torchvision's) after two SGD steps (so the batch-norm running statistics
 * are not the initial ones), a fixed input batch and the eval-mode logits
 * Stoke computes for it.
 *
 *   export_resnet18 OUT_DIR [SIZE] -> OUT_DIR/resnet18.safetensors, OUT_DIR/io.safetensors */
#include "common/rng.h"
#include "engine/autograd.h"
#include "engine/checkpoint.h"
#include "engine/ops.h"
#include "storage/safetensors.h"

#include <stdio.h>
#include <stdlib.h>

static stk_tensor *input(uint64_t seed, float *host, int size)
{
    stk_rng r;
    stk_rng_init(&r, seed, 0, 0);
    for (int i = 0; i < 2 * 3 * size * size; i++) host[i] = (float)stk_rng_uniform(&r) * 2.f - 1.f;
    int64_t shape[4] = {2, 3, size, size};
    stk_tensor *x = NULL;
    stk_tensor_from_host(STK_F32, 4, shape, host, &x);
    return x;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != STK_OK) {                                                                    \
            fprintf(stderr, "export_resnet18: %s\n", stk_last_error());                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int size = argc == 3 ? atoi(argv[2]) : 32;
    if (argc < 2 || argc > 3 || size < 8 || size > 224) {
        fprintf(stderr, "usage: export_resnet18 OUT_DIR [SIZE: 8..224]\n");
        return 2;
    }
    stk_model_config cfg = {
        .name = "resnet18", .in_channels = 3, .classes = 10, .image_size = size, .seed = 11};
    stk_model *m;
    CHECK(stk_model_create(&cfg, &m));
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    stk_optim *opt;
    CHECK(stk_optim_create(&oc, m, &opt));
    float *host = malloc(sizeof(float) * 2 * 3 * (size_t)size * (size_t)size);
    if (!host) return 1;
    for (int step = 0; step < 2; step++) {
        stk_scope *s;
        CHECK(stk_scope_begin(&s));
        stk_tensor *x = input(100 + (uint64_t)step, host, size), *y, *logits, *loss;
        int32_t lab[2] = {3, 7};
        int64_t ys[1] = {2};
        CHECK(stk_tensor_from_host(STK_I32, 1, ys, lab, &y));
        CHECK(stk_model_forward(m, x, &logits));
        CHECK(stk_cross_entropy(logits, y, 0.f, &loss));
        CHECK(stk_backward(loss, NULL, false));
        CHECK(stk_optim_step(opt));
        stk_scope_end(s);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/resnet18.safetensors", argv[1]);
    CHECK(stk_checkpoint_save(path, m, opt, 0, NULL, NULL));
    stk_model_train(m, false);
    stk_no_grad_begin();
    stk_tensor *x = input(7, host, size), *logits;
    CHECK(stk_model_forward(m, x, &logits));
    float out[20];
    CHECK(stk_tensor_to_host(logits, out, sizeof out));
    int64_t xs[4] = {2, 3, size, size}, ls[2] = {2, 10};
    stk_st_tensor t[2] = {
        {"input", STK_ST_F32, 4, xs, host, sizeof(float) * 2 * 3 * (size_t)size * (size_t)size},
        {"logits", STK_ST_F32, 2, ls, out, sizeof out}};
    snprintf(path, sizeof path, "%s/io.safetensors", argv[1]);
    CHECK(stk_safetensors_write(path, 2, t, 0, NULL, NULL));
    stk_tensor_release(x);
    stk_tensor_release(logits);
    stk_optim_destroy(opt);
    stk_model_destroy(m);
    free(host);
    return 0;
}
