/* A run opened, set up and closed (run.h); its folder, resume and ranks
 * are run_folder.c, run_resume.c and run_ranks.c, its fit run_fit.c. */
#include "run/run.h"

#include "common/log.h"
#include "common/text.h"
#include "common/thread_pool.h"
#include "engine/checkpoint.h"
#include "engine/onnx_graph.h"
#include "kernels/backend.h"
#include "run/run_folder_impl.h"
#include "run/run_ranks_impl.h"
#include "run/run_resume_impl.h"
#include "storage/dataset.h"
#include "storage/safetensors.h"
#include "train/batch.h"
#include "train/inputs.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const stk_schedule_kind schedule_kinds[] = {STK_SCHEDULE_COSINE, STK_SCHEDULE_STEP,
                                                   STK_SCHEDULE_ONECYCLE, STK_SCHEDULE_CONSTANT};

static int trainable_count(const stk_model *m)
{
    int n = 0;
    for (int i = 0; i < stk_model_param_count(m); i++) {
        const stk_param *p = stk_model_param(m, i);
        n += !p->is_buffer && stk_tensor_requires_grad(p->value);
    }
    return n;
}

/* An ONNX model: from its file, or, continuing a run whose file has gone
 * (--resume), from the file the run's last checkpoint keeps. */
static stk_status onnx_model(const stk_run_settings *a, const stk_model_config *cfg,
                             stk_model **out)
{
    if (!a->resume || !a->out || access(a->model, F_OK) == 0)
        return stk_model_from_onnx_file(a->model, cfg, out);
    char *last = stk_text_printf("%s/last.safetensors", a->out);
    if (!last) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(last, &f);
    if (st == STK_OK) {
        const stk_st_entry *e = stk_safetensors_find(f, STK_CHECKPOINT_ONNX_TENSOR);
        st = e ? stk_model_from_onnx(stk_safetensors_data(f, e), (size_t)(e->end - e->begin), last,
                                     cfg, out)
               : stk_error(STK_ERR_INVALID_ARG,
                           "--model %s: no such file, and %s does not keep an ONNX graph", a->model,
                           last);
        stk_safetensors_free(f);
    }
    free(last);
    return st;
}

/* The model as the flags describe it: created, --init, --freeze, on the device. */
static stk_status make_model(stk_run *r, const stk_meta *m)
{
    stk_run_settings *a = &r->a;
    stk_model_config cfg = {.name = a->model,
                            .in_channels = m->channels,
                            .classes = (int)m->num_classes,
                            .image_size = r->size,
                            .seed = (uint64_t)a->seed,
                            /* -1 (unset): the model's default (0); 0: off (-1) */
                            .drop_path = a->drop_path < 0    ? 0.f
                                         : a->drop_path == 0 ? -1.f
                                                             : (float)a->drop_path};
    static const char *const with_drop_path[] = {"efficientnet_b0", "convnext_tiny", "vit_b_16",
                                                 "vit_tiny"};
    bool has = false;
    for (size_t i = 0; i < sizeof with_drop_path / sizeof *with_drop_path; i++)
        has |= !strcmp(a->model, with_drop_path[i]);
    bool onnx = stk_run_model_is_onnx(a->model);
    if (a->drop_path > 0 && onnx)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--drop-path: %s is an ONNX graph: its stochastic depth is the module's "
                         "own, as exported",
                         a->model);
    if (a->drop_path > 0 && !has)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--drop-path: %s has no stochastic depth (efficientnet_b0, "
                         "convnext_tiny, vit_b_16 and vit_tiny have)",
                         a->model);
    if (onnx)
        STK_TRY(onnx_model(a, &cfg, &r->model));
    else
        STK_TRY(stk_model_create(&cfg, &r->model));
    if (a->init) {
        stk_load_report rep;
        stk_safetensors *f;
        STK_TRY(stk_safetensors_read(a->init, &f));
        const char *mm = stk_safetensors_meta(f, "model");
        stk_status st = STK_OK;
        if (mm && strcmp(mm, stk_model_name(r->model)))
            st = stk_error(STK_ERR_INVALID_ARG, "--init %s holds a %s model, not %s", a->init, mm,
                           a->model);
        stk_safetensors_free(f);
        STK_TRY(st);
        STK_TRY(stk_checkpoint_load(a->init, r->model, NULL, false, &rep));
        if (rep.loaded == 0)
            return stk_error(STK_ERR_INVALID_ARG, "--init %s: no tensor matches a %s model",
                             a->init, a->model);
        stk_log_info("%s", rep.text);
    }
    for (int i = 0; i < a->n_freeze; i++)
        if (!a->freeze[i][0])
            return stk_error(STK_ERR_INVALID_ARG,
                             "--freeze '': an empty prefix would freeze every parameter");
        else if (stk_model_set_requires_grad(r->model, a->freeze[i], false) == 0)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--freeze %s matches no parameter of %s (names "
                             "like conv1, layer1.0, fc)",
                             a->freeze[i], a->model);
    if (a->n_freeze && trainable_count(r->model) == 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--freeze: every parameter of %s is frozen; nothing would train",
                         a->model);
    STK_TRY(stk_model_to(r->model, a->device.kind));
    stk_optim_config oc = {.kind = (stk_optim_kind)a->optimizer,
                           .lr = (float)a->lr,
                           .weight_decay = (float)a->wd,
                           .momentum = a->optimizer == STK_OPTIM_SGD ? (float)a->momentum : 0.f,
                           .nesterov = a->nesterov};
    return stk_optim_create(&oc, r->model, &r->opt);
}

/* --val must speak --data's classes, at the training image size. */
static stk_status check_val(stk_run *r, const stk_meta *m)
{
    stk_run_settings *a = &r->a;
    stk_dataset *vd;
    STK_TRY(stk_dataset_open(a->val, &vd));
    const stk_meta *vm = stk_dataset_meta(vd);
    r->val_count = vm->count;
    int vsize;
    stk_status st;
    if (vm->num_classes != m->num_classes || vm->channels != m->channels)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--val %s has %u classes and %d channels, --data %s has %u and %d", a->val,
                       vm->num_classes, vm->channels, a->data, m->num_classes, m->channels);
    else if ((st = stk_train_check_transform(vm, "--val-transform", r->val_transform, false,
                                             &vsize)) == STK_OK &&
             vsize != r->size)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--val-transform %s gives %d px images, training uses %d px",
                       r->val_transform, vsize, r->size);
    stk_dataset_close(vd);
    return st;
}

/* The flags in use, as a Markdown table for TensorBoard's text tab. */
static char *config_markdown(const stk_run *r)
{
    const stk_run_settings *a = &r->a;
    return stk_text_printf(
        "| setting | value |\n| --- | --- |\n| model | %s |\n| data | %s |\n| val | %s |\n"
        "| transform | %s |\n| val transform | %s |\n| epochs | %" PRId64 " |\n"
        "| batch per rank | %" PRId64 " |\n| ranks | %d |\n| optimizer | %s |\n| lr | %g |\n"
        "| schedule | %s |\n| momentum | %g |\n| weight decay | %g |\n| seed | %" PRId64 " |\n"
        "| device | %s |\n| amp | %s |\n| workers | %" PRId64 " |\n| threads | %" PRId64 " |\n",
        a->model, a->data, a->val ? a->val : "-", r->transform, r->val_transform, a->epochs,
        a->batch, r->world, stk_optim_kind_name((stk_optim_kind)a->optimizer), a->lr,
        stk_run_schedules[a->schedule], a->momentum, a->wd, a->seed,
        stk_device_name(a->device.kind), a->amp ? "yes" : "no", a->workers, a->threads);
}

/* metrics.csv, steps.csv and the event file (rank 0), continued on --resume. */
static stk_status open_record(stk_run *r)
{
    int64_t done = stk_trainer_position(r->trainer)->epoch;
    STK_TRY(stk_run_record_open(r->a.out, !r->a.no_tensorboard, done, &r->record));
    stk_run_record_set_normalisation(r->record, r->tc.mean, r->tc.std);
    STK_TRY(stk_trainer_add_hook(r->trainer, STK_STEP_BEFORE_FORWARD, stk_run_record_step_hook,
                                 r->record));
    STK_TRY(stk_trainer_add_hook(r->trainer, STK_STEP_AFTER_OPTIMIZER, stk_run_record_step_hook,
                                 r->record));
    char *md = config_markdown(r);
    if (!md) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_run_record_config(r->record, md);
    free(md);
    return st;
}

static stk_status setup_run(stk_run *r, stk_dataset *ds)
{
    stk_run_settings *a = &r->a;
    const stk_meta *m = stk_dataset_meta(ds);
    char deflt[64];
    stk_loader_default_transform(m, deflt, sizeof deflt);
    unsigned side = m->min_width < m->min_height ? m->min_width : m->min_height;
    if (a->image_size > side && m->encoding != STK_ENCODING_JPEG)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--image-size %" PRId64 ": %s holds raw images of side %u, which train "
                         "at that size or smaller",
                         a->image_size, a->data, side);
    if (a->image_size && (m->encoding == STK_ENCODING_JPEG || a->image_size != side))
        snprintf(deflt, sizeof deflt, "rrc:%" PRId64 ",flip", a->image_size);
    if (!(r->transform = strdup(a->transform ? a->transform : deflt)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    STK_TRY(stk_train_check_transform(m, "--transform", r->transform, true, &r->size));
    stk_train_default_eval_transform(m, r->size, deflt, sizeof deflt);
    if (!(r->val_transform = strdup(a->val_transform ? a->val_transform : deflt)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    r->tc = stk_trainer_defaults();
    r->tc.copy_engine = r->ce;
    r->tc.amp = a->amp;
    r->tc.label_smoothing = (float)a->smoothing;
    r->tc.clip_grad_norm = (float)a->clip_grad_norm;
    r->tc.clip_grad_value = (float)a->clip_grad_value;
    r->tc.ema_decay = (float)a->ema;
    r->tc.ema_warmup = a->ema_warmup;
    r->tc.seed = a->seed;
    r->tc.micro_batches = (int)a->micro_batches;
    r->tc.pipeline = (stk_pipeline_config){.stages = (int)a->pipeline,
                                           .schedule = (stk_pipe_schedule)a->pipeline_schedule,
                                           .split_after = a->split_after,
                                           .threads = (int)a->threads};
    STK_TRY(stk_train_batch_mix(r->transform, a->mix_prob, r->rank, &r->tc.mix));
    STK_TRY(stk_train_normalisation(m, a->data, a->norm, r->transform, r->tc.mean, r->tc.std));
    if (a->val) STK_TRY(check_val(r, m));
    STK_TRY(make_model(r, m));
    stk_optim_config oc = {.kind = (stk_optim_kind)a->optimizer, .momentum = (float)a->momentum};
    STK_TRY(stk_estimate_training_memory(r->model, &oc, m->channels, r->size, &r->memory));
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = (int)a->batch;
    o.workers = (int)a->workers;
    o.seed = (uint64_t)a->seed;
    o.order = (stk_read_order)a->order;
    o.block_mib = (int)a->block_mib;
    o.block_window = (int)a->block_window;
    o.cache_mib = (int)a->cache_mb;
    o.drop_last = true; /* every step sees a full batch (batch norm, the schedule) */
    o.transform = r->transform;
    o.host_memory = r->ce->host_memory;
    /* the ring's batches of u8 pixels, and the one each side holds */
    r->ring_bytes = (uint64_t)(o.prefetch + 2) * (uint64_t)a->batch * (uint64_t)m->channels *
                    (uint64_t)r->size * (uint64_t)r->size;
    o.rank = r->data_rank; /* each replica its shard of every epoch, all the same length */
    o.world = r->data_world;
    if (!r->borrowed_data) STK_TRY(stk_loader_open(a->data, &o, &r->loader));
    int64_t per_epoch = (int64_t)stk_loader_batches(r->loader);
    if (per_epoch == 0)
        return stk_error(STK_ERR_INVALID_ARG, "%s: fewer images than one batch of %" PRId64,
                         a->data, a->batch);
    r->tc.schedule =
        (stk_schedule){.kind = schedule_kinds[a->schedule],
                       .base_lr = (float)a->lr,
                       .total_steps = per_epoch * a->epochs,
                       .warmup_steps = (int64_t)llround(a->warmup_epochs * (double)per_epoch),
                       .step_size = a->step_epochs * per_epoch,
                       .gamma = 0.1f,
                       .min_lr = (float)a->min_lr};
    if (r->pipe_ranks) r->tc.pipeline.link = stk_pipe_ranks_link(r->pipe_ranks);
    STK_TRY(stk_trainer_create(&r->tc, r->model, r->opt, &r->trainer));
    if (a->val && r->rank == 0 && !r->borrowed_data) { /* rank 0 evaluates for the job */
        stk_loader_options vo =
            stk_trainer_eval_options(r->trainer, r->val_transform, (int)a->batch, (int)a->workers);
        STK_TRY(stk_loader_open(a->val, &vo, &r->val_loader));
    }
    /* once: the ranks compare it, and every checkpoint records it */
    STK_TRY(stk_dataset_fingerprint(ds, &r->data_fingerprint));
    if (r->world > 1) STK_TRY(run_attach_ranks(r, per_epoch));
    if (!r->borrowed_data) STK_TRY(stk_h2d_open(r->loader, r->ce, &r->h2d));
    if (r->rank == 0) STK_TRY(run_prepare_folder(r));
    if (!(r->path_last = stk_text_printf("%s/last.safetensors", a->out)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    STK_TRY(run_checkpoint_metadata(r, m));
    size_t classes = m->num_classes;
    if (a->per_class && r->val_loader &&
        !(r->confusion = calloc(classes * classes, sizeof *r->confusion)))
        return stk_error(STK_ERR_NOMEM, "out of memory for a %zux%zu confusion matrix", classes,
                         classes);
    if (a->resume) STK_TRY(run_resume_from(r));
    if (r->rank == 0) return open_record(r);
    return STK_OK;
}

stk_status stk_run_setup(stk_run *r)
{
    stk_run_settings *a = &r->a;
    r->data_rank = r->rank, r->data_world = r->world;
    if (r->world > 1 && a->pipeline > 1) { /* stages on ranks */
        STK_TRY(stk_pipe_ranks_open(r->comm, (int)a->pipeline, &r->pipe_ranks));
        if (!a->split_after)
            return stk_error(STK_ERR_INVALID_ARG, "--pipeline on ranks needs --split-after (the "
                                                  "ranks cannot measure each other's stages)");
        if (a->device.kind != STK_DEVICE_CPU)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--pipeline on ranks runs on the CPU (NCCL point to point is not "
                             "built yet)");
        r->data_rank = stk_pipe_ranks_replica(r->pipe_ranks);
        r->data_world = stk_pipe_ranks_replicas(r->pipe_ranks);
    }
    /* one GPU per rank: "cuda" is the rank's local GPU under a launcher */
    if (r->world > 1 && a->device.kind == STK_DEVICE_CUDA && !a->device.indexed)
        a->device.index = stk_comm_local_rank(r->comm);
    /* the device first: its copy engine says what the loader's batch memory is */
    stk_status st = stk_device_spec_open(&a->device, &r->ce);
    if (st != STK_OK) return st;
    /* the training set: its meta decides the model's input and the defaults */
    stk_dataset *ds;
    STK_TRY(stk_dataset_open(a->data, &ds));
    st = setup_run(r, ds);
    stk_dataset_close(ds);
    return st;
}

void stk_run_init(stk_run *r, const stk_run_settings *s, const stk_run_hooks *h)
{
    memset(r, 0, sizeof *r);
    r->a = *s;
    if (h) r->hooks = *h;
    r->world = 1;
}

stk_status stk_run_start(stk_run *r)
{
    stk_run_settings *a = &r->a;
    stk_cpu_set_threads((int)a->threads);
    STK_TRY(stk_comm_open((double)a->dist_timeout, &r->comm));
    r->owns_comm = true;
    r->rank = stk_comm_rank(r->comm);
    r->world = stk_comm_world(r->comm);
    if (a->trace) { /* before the loader's threads start: they name themselves */
        stk_trace_start(&a->trace_opts);
        stk_trace_thread_name("main (steps)");
        r->trace.started = true;
    }
    return stk_run_setup(r);
}

void stk_run_stop_ranks(stk_run *r)
{
    if (r->world > 1 && !r->ranks_agree_on_error) stk_comm_abort(r->comm, 1);
}

/* --trace's file: RANK's own under a launcher (FILE.rankR.json). */
static void finish_trace(stk_run *r)
{
    if (!r->trace.started) return;
    int n = r->rank ? snprintf(r->trace.path, sizeof r->trace.path, "%s.rank%d.json", r->a.trace,
                               r->rank)
                    : snprintf(r->trace.path, sizeof r->trace.path, "%s", r->a.trace);
    if (n >= (int)sizeof r->trace.path) {
        stk_trace_discard();
        snprintf(r->trace.error, sizeof r->trace.error, "--trace %s: the name is too long",
                 r->a.trace);
    } else if (stk_trace_finish(r->trace.path, &r->trace.summary) != STK_OK) {
        snprintf(r->trace.error, sizeof r->trace.error, "%s", stk_last_error());
    } else {
        r->trace.written = true;
    }
}

void stk_run_close(stk_run *r)
{
    if (!r->borrowed_data) {
        stk_h2d_close(r->h2d);
        stk_loader_close(r->loader);
        stk_loader_close(r->val_loader);
    }
    stk_trainer_destroy(r->trainer); /* before the ddp and the ranks its hooks point to */
    stk_ddp_destroy(r->ddp);
    stk_pipe_ranks_close(r->pipe_ranks);
    stk_optim_destroy(r->opt);
    stk_model_destroy(r->model);
    stk_run_record_close(r->record);
    if (r->out_lock) close(r->out_lock - 1); /* after the last write into RUNDIR */
    free(r->transform);
    free(r->val_transform);
    free(r->path_last);
    free(r->class_names);
    for (char **name = r->class_list; name && *name; name++) free(*name);
    free(r->class_list);
    free(r->confusion);
    finish_trace(r); /* every traced thread is joined now */
    stk_run_settings_free(&r->a);
    if (r->owns_comm) stk_comm_close(r->comm);
    r->comm = NULL, r->owns_comm = false;
}
