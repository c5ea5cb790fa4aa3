/* The trainer one step at a time (train/trainer.h): the device, the loader
 * and its host-to-device stage, a trainer with label smoothing and a cosine
 * schedule, a hook that hears each gradient as backward makes it; the
 * first epoch's steps driven by hand, the others by stk_trainer_train_epoch,
 * a checkpoint after each.
 *
 *     train_steps TRAIN.stoke [DEVICE] [EPOCHS] [RUNDIR]    e.g. cpu 2 run
 *
 * Build: part of the CMake build (build/train_steps); link stoke_train. */
#include "train/batch.h"
#include "train/device.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>

static stk_status on_grad(void *ctx, const stk_step_info *info)
{
    (void)info;
    (*(int64_t *)ctx)++; /* one gradient made final */
    return STK_OK;
}

static stk_status train(const char *path, const char *device, int64_t epochs, const char *run,
                        stk_loader **loader_, stk_h2d **h2d_, stk_model **model_, stk_optim **opt_,
                        stk_trainer **t_)
{
    stk_loader *loader;
    stk_h2d *h2d;
    stk_device_spec dev;
    STK_TRY(stk_device_spec_parse(device, &dev)); /* or "cuda", "cuda:1" */
    const stk_copy_engine *ce;
    STK_TRY(stk_device_spec_open(&dev, &ce)); /* before the loader */
    stk_loader_options o = stk_loader_defaults();
    o.host_memory = ce->host_memory; /* pinned for this device */
    o.batch_size = 16, o.drop_last = true;
    STK_TRY(stk_loader_open(path, &o, &loader));
    *loader_ = loader;
    STK_TRY(stk_h2d_open(loader, ce, &h2d));
    *h2d_ = h2d;
    const stk_meta *m = stk_dataset_meta(stk_loader_dataset(loader));
    stk_model_config mc = {.name = "cnn",
                           .in_channels = m->channels,
                           .classes = (int)m->num_classes,
                           .image_size = (int)m->min_width};
    STK_TRY(stk_model_create(&mc, model_));
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    STK_TRY(stk_optim_create(&oc, *model_, opt_));
    int64_t steps_total = epochs * (int64_t)(m->count / (uint64_t)o.batch_size);
    stk_trainer_config c = stk_trainer_defaults();
    c.copy_engine = ce;
    c.label_smoothing = 0.1f;
    c.schedule = (stk_schedule){STK_SCHEDULE_COSINE, 0.05f, steps_total};
    stk_input_norm_from_meta(m, path, c.mean, c.std);
    stk_trainer *t;
    STK_TRY(stk_trainer_create(&c, *model_, *opt_, &t)); /* borrows model and opt */
    *t_ = t;
    int64_t grads = 0;
    STK_TRY(stk_trainer_add_hook(t, STK_STEP_GRAD_READY, on_grad, &grads)); /* during backward */
    char ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s/last.safetensors", run);
    for (int64_t e = 0; e < epochs; e++) {
        stk_epoch_stats es;
        if (e == 0) { /* by hand: what stk_trainer_train_epoch does, less its statistics */
            STK_TRY(stk_h2d_drain(h2d));
            STK_TRY(stk_loader_start_epoch(loader, 0));
            stk_device_batch *b;
            stk_step_result r;
            stk_status st;
            double loss = 0;
            int64_t steps = 0;
            /* each batch decoded, augmented and on the device */
            while ((st = stk_h2d_next(h2d, &b)) == STK_OK) {
                st = stk_trainer_step(t, b, &r); /* forward, loss, backward, optimizer */
                stk_h2d_release(h2d, b);         /* its ring slot goes back to the loader */
                if (st != STK_OK) return st;
                loss += r.loss, steps++;
            }
            if (st != STK_END) return st;
            int trained = 0; /* parameters, not buffers (running statistics) */
            for (int i = 0; i < stk_model_param_count(*model_); i++)
                trained += !stk_model_param(*model_, i)->is_buffer;
            printf("epoch 1: %lld steps by hand, loss %.4f, %lld gradients heard (%d parameters)\n",
                   (long long)steps, steps ? loss / (double)steps : 0.0, (long long)grads, trained);
        } else {
            STK_TRY(stk_trainer_train_epoch(t, loader, h2d, e, NULL, NULL, &es));
            printf("epoch %lld: %llu steps, loss %.4f, train top-1 %.2f%%\n", (long long)e + 1,
                   (unsigned long long)es.steps, es.loss, es.accuracy);
        }
        STK_TRY(stk_trainer_save(t, ckpt, 0, NULL, NULL));
    }
    printf("checkpoint %s\n", ckpt);
    return STK_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: train_steps TRAIN.stoke [DEVICE] [EPOCHS] [RUNDIR]\n");
        return 2;
    }
    stk_loader *loader = NULL;
    stk_h2d *h2d = NULL;
    stk_model *model = NULL;
    stk_optim *opt = NULL;
    stk_trainer *t = NULL;
    stk_status st = train(argv[1], argc > 2 ? argv[2] : "cpu", argc > 3 ? atoll(argv[3]) : 2,
                          argc > 4 ? argv[4] : ".", &loader, &h2d, &model, &opt, &t);
    if (st != STK_OK) fprintf(stderr, "train_steps: %s\n", stk_last_error());
    stk_trainer_destroy(t);
    stk_h2d_close(h2d);
    stk_loader_close(loader);
    stk_optim_destroy(opt);
    stk_model_destroy(model);
    return st == STK_OK ? 0 : 1;
}
