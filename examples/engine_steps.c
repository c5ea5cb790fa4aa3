/* The engine without the trainer (engine/): a model, an optimizer and a
 * schedule, and each step written out: a scope that owns its tensors, the
 * loader's u8 NHWC batch as a normalised f32 tensor, forward,
 * cross-entropy, backward, the optimizer; a checkpoint at the end.
 *
 *     engine_steps TRAIN.stoke [STEPS] [OUT.safetensors]
 *
 * Build: part of the CMake build (build/engine_steps); link stoke_train
 * (for the loader and train/batch.h; the engine alone is stoke_engine). */
#include "engine/autograd.h"
#include "engine/checkpoint.h"
#include "engine/ops.h"
#include "train/batch.h"

#include <stdio.h>
#include <stdlib.h>

static stk_status step(stk_model *model, stk_optim *opt, const stk_device_batch *b,
                       const float *mean, const float *std, float lr, float *loss_value);

static stk_status train(const char *path, int64_t steps, const char *out, stk_loader **loader,
                        stk_h2d **h2d, stk_model **model, stk_optim **opt)
{
    stk_loader_options lo = stk_loader_defaults();
    lo.batch_size = 16, lo.drop_last = true;
    STK_TRY(stk_loader_open(path, &lo, loader));
    STK_TRY(stk_h2d_open(*loader, stk_copy_engine_cpu(), h2d));
    const stk_meta *m = stk_dataset_meta(stk_loader_dataset(*loader));
    float mean[3], std[3];
    stk_input_norm_from_meta(m, path, mean, std);
    stk_model_config cfg = {.name = "resnet8",
                            .in_channels = m->channels,
                            .classes = (int)m->num_classes,
                            .image_size = (int)m->min_width,
                            .seed = 1};
    STK_TRY(stk_model_create(&cfg, model));
    stk_optim_config oc = {.kind = STK_OPTIM_SGD,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .nesterov = true,
                           .weight_decay = 5e-4f};
    STK_TRY(stk_optim_create(&oc, *model, opt));
    stk_schedule sched = {.kind = STK_SCHEDULE_COSINE, .base_lr = 0.05f, .total_steps = steps};
    uint64_t epoch = 0;
    STK_TRY(stk_loader_start_epoch(*loader, epoch));
    for (int64_t s = 0; s < steps;) {
        stk_device_batch *b;
        stk_status st = stk_h2d_next(*h2d, &b);
        if (st == STK_END) { /* the next epoch */
            STK_TRY(stk_h2d_drain(*h2d));
            STK_TRY(stk_loader_start_epoch(*loader, ++epoch));
            continue;
        }
        STK_TRY(st);
        float loss;
        st = step(*model, *opt, b, mean, std, stk_schedule_lr(&sched, s), &loss);
        stk_h2d_release(*h2d, b);
        STK_TRY(st);
        if (s % 10 == 0 || s + 1 == steps)
            printf("step %lld: loss %.4f\n", (long long)s, (double)loss);
        s++;
    }
    STK_TRY(stk_checkpoint_save(out, *model, *opt, 0, NULL, NULL));
    printf("checkpoint %s\n", out);
    return STK_OK;
}

/* One step: forward, loss, backward, optimizer, inside its own scope. */
static stk_status step(stk_model *model, stk_optim *opt, const stk_device_batch *b,
                       const float *mean, const float *std, float lr, float *loss_value)
{
    stk_scope *scope;
    STK_TRY(stk_scope_begin(&scope)); /* owns every intermediate of the step */
    stk_tensor *x, *labels, *logits, *loss;
    stk_status st = stk_batch_tensors(b, mean, std, &x, &labels); /* the loader's u8 NHWC batch */
    if (st == STK_OK) st = stk_model_forward(model, x, &logits);
    if (st == STK_OK) st = stk_cross_entropy(logits, labels, 0.1f, &loss);
    if (st == STK_OK) st = stk_backward(loss, NULL, false);
    if (st == STK_OK) *loss_value = stk_tensor_item(loss);
    stk_optim_set_lr(opt, lr);
    if (st == STK_OK) st = stk_optim_step(opt);
    stk_scope_end(scope); /* memory back to where it was */
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: engine_steps TRAIN.stoke [STEPS] [OUT.safetensors]\n");
        return 2;
    }
    stk_loader *loader = NULL;
    stk_h2d *h2d = NULL;
    stk_model *model = NULL;
    stk_optim *opt = NULL;
    stk_status st = train(argv[1], argc > 2 ? atoll(argv[2]) : 20,
                          argc > 3 ? argv[3] : "last.safetensors", &loader, &h2d, &model, &opt);
    if (st != STK_OK) fprintf(stderr, "engine_steps: %s\n", stk_last_error());
    stk_h2d_close(h2d);
    stk_loader_close(loader);
    stk_optim_destroy(opt);
    stk_model_destroy(model);
    return st == STK_OK ? 0 : 1;
}
