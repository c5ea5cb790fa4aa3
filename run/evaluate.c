/* A checkpoint evaluated on a dataset (evaluate.h). */
#include "run/evaluate.h"

#include "common/text.h"
#include "common/thread_pool.h"
#include "storage/dataset.h"
#include "train/batch.h"
#include "train/inputs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

stk_eval_request stk_eval_defaults(void)
{
    return (stk_eval_request){.batch = 128, .device = {.kind = STK_DEVICE_CPU}};
}

/* The transform in use (r->transform) and training's normalisation into tc,
 * checked against the dataset and the model. */
static stk_status check_data(const stk_eval_request *q, stk_eval_report *r, stk_trainer_config *tc)
{
    const stk_model_config *cfg = &r->ckpt.cfg;
    /* messages about the transform name where it came from */
    char from[600];
    if (q->transform)
        snprintf(from, sizeof from, "--transform");
    else
        snprintf(from, sizeof from, "%s: its val_transform", q->checkpoint);
    stk_dataset *ds;
    STK_TRY(stk_dataset_open(q->data, &ds));
    const stk_meta *m = stk_dataset_meta(ds);
    stk_input_norm_from_meta(m, q->data, tc->mean,
                             tc->std); /* a checkpoint from before: this set's */
    if (!isnan(r->ckpt.mean[0])) {     /* training's (its --data's), not this set's */
        memcpy(tc->mean, r->ckpt.mean, sizeof r->ckpt.mean);
        memcpy(tc->std, r->ckpt.std, sizeof r->ckpt.std);
    }
    char deflt[64];
    const char *tf = q->transform ? q->transform : r->ckpt.val_transform;
    if (!tf) {
        stk_train_default_eval_transform(m, cfg->image_size, deflt, sizeof deflt);
        tf = deflt;
    }
    int size = 0;
    stk_status st = STK_OK;
    if (!(r->transform = strdup(tf)))
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    else if ((int)m->num_classes != cfg->classes || m->channels != cfg->in_channels)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s has %u classes and %d channels; the checkpoint's %s expects %d and %d",
                       q->data, m->num_classes, m->channels, cfg->name, cfg->classes,
                       cfg->in_channels);
    else if ((st = stk_train_check_transform(m, from, r->transform, false, &size)) == STK_OK &&
             size != cfg->image_size)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s %s gives %d px images; the model was trained on %d px", from,
                       r->transform, size, cfg->image_size);
    stk_dataset_close(ds);
    return st;
}

static stk_status evaluate(const stk_eval_request *q, stk_eval_report *r)
{
    if (!q->data || !q->checkpoint)
        return stk_error(STK_ERR_INVALID_ARG, "--data and --checkpoint are required");
    if (q->batch < 1 || q->batch > 65536 || q->workers < 0 || q->workers > 1024)
        return stk_error(STK_ERR_INVALID_ARG, "batch %d, workers %d: expected 1..65536 and 0..1024",
                         q->batch, q->workers);
    stk_device_spec device = q->device;
    const stk_copy_engine *ce; /* the device before any loader (pinned batch memory) */
    STK_TRY(stk_device_spec_open(&device, &ce));
    STK_TRY(stk_ckpt_describe(q->checkpoint, &r->ckpt));
    r->ckpt.use_ema = q->ema;
    stk_trainer_config tc = stk_trainer_defaults();
    tc.copy_engine = ce;
    STK_TRY(check_data(q, r, &tc));
    int classes = r->ckpt.cfg.classes;
    if (q->confusion &&
        !(r->confusion = calloc((size_t)classes * (size_t)classes, sizeof *r->confusion)))
        return stk_error(STK_ERR_NOMEM, "out of memory for a %dx%d confusion matrix", classes,
                         classes);
    stk_model *model = NULL;
    stk_trainer *trainer = NULL;
    stk_status st;
    if ((st = stk_ckpt_load_model(&r->ckpt, &model)) == STK_OK &&
        (st = stk_model_to(model, device.kind)) == STK_OK &&
        (st = stk_trainer_create(&tc, model, NULL, &trainer)) == STK_OK) {
        int workers = q->workers ? q->workers : stk_cpu_count();
        stk_loader_options o = stk_trainer_eval_options(trainer, r->transform, q->batch, workers);
        stk_loader *l;
        if ((st = stk_loader_open(q->data, &o, &l)) == STK_OK) {
            st = stk_trainer_evaluate_per_class(trainer, l, q->label, &r->result, r->confusion);
            stk_loader_close(l);
        }
    }
    stk_trainer_destroy(trainer);
    stk_model_destroy(model);
    if (st == STK_ERR_DIVERGED)
        st = stk_error(st,
                       "%s: %s: its weights give outputs that are not finite (damaged, or "
                       "saved from a run that diverged)",
                       q->checkpoint, stk_last_error());
    return st;
}

stk_status stk_evaluate(const stk_eval_request *q, stk_eval_report *out)
{
    memset(out, 0, sizeof *out);
    stk_status st = evaluate(q, out);
    if (st != STK_OK) stk_eval_report_free(out);
    return st;
}

void stk_eval_report_free(stk_eval_report *r)
{
    free(r->transform);
    free(r->confusion);
    stk_ckpt_desc_free(&r->ckpt);
    memset(r, 0, sizeof *r);
}
