/* The smallest complete training program over Stoke's C library: device ->
 * loader -> model -> trainer -> fit, one line per epoch.
 *
 *     train_minimal TRAIN.stoke VAL.stoke [EPOCHS]
 *
 * Build: part of the CMake build (build/train_minimal); link stoke_train. */
#include "train/batch.h"
#include "train/fit.h"
#include "train/inputs.h"

#include <stdio.h>
#include <stdlib.h>

static stk_status print_epoch(void *ctx, const stk_fit_epoch *e, bool *stop)
{
    (void)ctx, (void)stop;
    printf("epoch %lld: train loss %.4f, val loss %.4f, top-1 %.2f%%%s\n", (long long)e->epoch + 1,
           e->train->loss, e->val->loss, e->val->top1, e->improved ? " (best)" : "");
    return STK_OK;
}

static int fail(void)
{
    fprintf(stderr, "train_minimal: %s\n", stk_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: train_minimal TRAIN.stoke VAL.stoke [EPOCHS]\n");
        return 2;
    }
    const stk_copy_engine *cpu = stk_copy_engine_cpu();
    stk_dataset *ds;
    if (stk_dataset_open(argv[1], &ds) != STK_OK) return fail();
    const stk_meta *m = stk_dataset_meta(ds);
    stk_model_config mc = {.name = "mlp", .in_channels = m->channels, .classes = (int)m->num_classes,
                           .image_size = (int)m->min_width};
    stk_trainer_config tc = stk_trainer_defaults();
    stk_input_norm_from_meta(m, argv[1], tc.mean, tc.std);
    char eval_transform[64]; /* center:28 for 28 px images */
    stk_train_default_eval_transform(m, mc.image_size, eval_transform, sizeof eval_transform);
    stk_dataset_close(ds);

    stk_loader_options lo = stk_loader_defaults();
    lo.batch_size = 32, lo.drop_last = true;
    stk_model *model;
    stk_optim *opt;
    stk_trainer *t;
    stk_loader *train, *val;
    stk_h2d *h2d;
    stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    if (stk_model_create(&mc, &model) != STK_OK || stk_optim_create(&oc, model, &opt) != STK_OK ||
        stk_trainer_create(&tc, model, opt, &t) != STK_OK ||
        stk_loader_open(argv[1], &lo, &train) != STK_OK ||
        stk_h2d_open(train, cpu, &h2d) != STK_OK)
        return fail();
    stk_loader_options vo = stk_trainer_eval_options(t, eval_transform, 128, lo.workers);
    if (stk_loader_open(argv[2], &vo, &val) != STK_OK) return fail();

    stk_fit_options o = stk_fit_defaults();
    o.train = train, o.h2d = h2d, o.val = val;
    o.epochs = argc > 3 ? atoi(argv[3]) : 3;
    o.early = (stk_early_stop){.patience = 2, .monitor = STK_MONITOR_VAL_LOSS, .restore_best = true};
    o.on_epoch = print_epoch;
    stk_fit_result r;
    if (stk_trainer_fit(t, &o, &r) != STK_OK) return fail();
    printf("best epoch %lld (val loss %.4f, top-1 %.2f%%), stopped at %lld: %s\n",
           (long long)r.best_epoch, r.best_value, r.val.top1, (long long)r.stopped_epoch,
           stk_fit_stop_name(r.reason));

    stk_h2d_close(h2d);
    stk_loader_close(train);
    stk_loader_close(val);
    stk_trainer_destroy(t);
    stk_optim_destroy(opt);
    stk_model_destroy(model);
    return 0;
}
