/* A model of your own on the module API, trained by the library: a VGG-style
 * stack with squeeze-excitation, on a .stoke set (make demo's Fashion-MNIST).
 *     custom_model TRAIN.stoke VAL.stoke RUN_DIR [EPOCHS]
 * RUN_DIR/best.safetensors describes the model: stoke info, eval, predict and
 * export read it without this program. */
#include "train/batch.h"
#include "train/fit.h"
#include "train/inputs.h"

#include <stdio.h>
#include <stdlib.h>

#define ADD(to, make) (void)((st = st ? st : (make)) || (st = stk_module_add(to, m)))

static stk_status vgg_se(int in, int classes, stk_module **net)
{
    stk_module *m, *b;
    stk_status st = stk_module_sequential("", net);
    for (int i = 0, w = 32; i < 2; in = w, w *= 2, i++) { /* 2 x (conv-BN-act), SE, pool */
        char name[16];
        snprintf(name, sizeof name, "block%d", i + 1);
        ADD(*net, stk_module_sequential(name, &m)), b = m;
        ADD(b, stk_module_conv2d("conv1", in, w, 3, 1, 1, false, &m));
        ADD(b, stk_module_batchnorm2d("bn1", w, &m)), ADD(b, stk_module_relu("relu1", &m));
        ADD(b, stk_module_conv2d("conv2", w, w, 3, 1, 1, false, &m));
        ADD(b, stk_module_batchnorm2d("bn2", w, &m));
        ADD(b, stk_module_activation("act2", STK_ACT_SILU, &m));
        ADD(b, stk_module_squeeze_excitation("se", w, w / 4, STK_ACT_RELU, STK_ACT_SIGMOID, &m));
        ADD(b, stk_module_maxpool2d("pool", 2, 2, 0, &m));
    }
    ADD(*net, stk_module_global_avgpool("avgpool", &m));
    ADD(*net, stk_module_dropout("dropout", 0.2f, &m));
    return ADD(*net, stk_module_linear("fc", in, classes, true, &m)), st;
}

int main(int argc, char **argv)
{
    stk_dataset *ds;
    stk_module *net;
    stk_model *model;
    stk_optim *opt;
    stk_trainer *t;
    stk_fit_result r;
    stk_fit_options o = stk_fit_defaults();
    stk_trainer_config tc = stk_trainer_defaults();
    stk_loader_options lo = stk_loader_defaults(), vo;
    stk_optim_config oc = {.kind = STK_OPTIM_ADAMW, .lr = 2e-3f, .weight_decay = 0.05f};
    if (argc < 4) return fprintf(stderr, "usage: custom_model TRAIN VAL RUN_DIR [EPOCHS]\n"), 2;
    if (stk_dataset_open(argv[1], &ds)) return fprintf(stderr, "%s\n", stk_last_error()), 1;
    const stk_meta *mt = stk_dataset_meta(ds);
    stk_model_config mc = {.name = "vgg_se",
                           .in_channels = mt->channels,
                           .classes = (int)mt->num_classes,
                           .image_size = (int)mt->min_width};
    char eval_transform[64];
    stk_train_default_eval_transform(mt, mc.image_size, eval_transform, sizeof eval_transform);
    stk_input_norm_from_meta(mt, argv[1], tc.mean, tc.std);
    const char *mk[] = {"val_transform"}, *mv[] = {eval_transform}; /* for stoke predict */
    o.n_meta = 1, o.meta_keys = mk, o.meta_values = mv;
    lo.batch_size = 64, lo.drop_last = true, o.run_dir = argv[3];
    o.epochs = argc > 4 ? atoi(argv[4]) : 2;
    if (vgg_se(mc.in_channels, mc.classes, &net) || stk_model_from_module(net, &mc, &model) ||
        stk_optim_create(&oc, model, &opt) || stk_trainer_create(&tc, model, opt, &t) ||
        stk_loader_open(argv[1], &lo, &o.train) ||
        stk_h2d_open(o.train, stk_copy_engine_cpu(), &o.h2d) ||
        (vo = stk_trainer_eval_options(t, eval_transform, 128, lo.workers),
         stk_loader_open(argv[2], &vo, &o.val)) ||
        stk_trainer_fit(t, &o, &r))
        return fprintf(stderr, "custom_model: %s\n", stk_last_error()), 1;
    printf("vgg_se: val top-1 %.2f%% after %lld epochs; checkpoints in %s\n", r.val.top1,
           (long long)r.stopped_epoch, o.run_dir);
    stk_h2d_close(o.h2d), stk_loader_close(o.train), stk_loader_close(o.val);
    stk_trainer_destroy(t), stk_optim_destroy(opt), stk_model_destroy(model);
    return stk_dataset_close(ds), 0;
}
