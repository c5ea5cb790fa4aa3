/* `stoke train`'s wiring, from flags to a trainer ready to fit (train_setup.h). */
#include "tools/train_setup.h"

#include "tools/config_file.h"
#include "tools/flags.h"

#include "tools/cli.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/log.h"
#include "common/text.h"
#include "engine/checkpoint.h"
#include "engine/onnx_graph.h"
#include "storage/dataset.h"
#include "storage/safetensors.h"
#include "train/batch.h"
#include "train/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const stk_schedule_kind schedule_kinds[] = {STK_SCHEDULE_COSINE, STK_SCHEDULE_STEP,
                                                   STK_SCHEDULE_ONECYCLE, STK_SCHEDULE_CONSTANT};

/* Block order's "MIBxWINDOW" in use (the loader may have fitted them to
 * the memory). */
static void block_params_text(const run_state *r, char *buf, size_t size)
{
    int mib, window;
    stk_loader_block_params(r->loader, &mib, &window);
    snprintf(buf, size, "%dx%d", mib, window);
}

/* The run's own metadata in every checkpoint, beside the trainer's position:
 * among it the class names of --data (what eval, export and predict name
 * the model's outputs with). */
static stk_status checkpoint_metadata(run_state *r, const stk_meta *m)
{
    snprintf(r->meta_text[0], sizeof r->meta_text[0], "%d", r->data_world);
    snprintf(r->meta_text[1], sizeof r->meta_text[1], "%" PRId64, r->a.batch);
    const char *keys[] = {"transform", "val_transform", "data", "ranks", "batch_per_rank"};
    const char *vals[] = {r->transform, r->val_transform, r->a.data, r->meta_text[0],
                          r->meta_text[1]};
    memcpy(r->meta_keys, keys, sizeof keys);
    memcpy(r->meta_values, vals, sizeof vals);
    r->n_meta = 5;
    /* the settings --resume must match (STK_SET_RESUME in train's table),
     * under their flags' names; the trainer's position records "seed" */
    int k = 0;
    for (const stk_flag *f = train_cli->flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && (f->set & STK_SET_RESUME) &&
            strcmp(f->name, "seed") &&
            k < (int)(sizeof r->meta_setting / sizeof r->meta_setting[0]) &&
            stk_cli_value_text(f, &r->a, r->meta_setting[k], sizeof r->meta_setting[k])) {
            r->meta_keys[r->n_meta] = f->name;
            r->meta_values[r->n_meta++] = r->meta_setting[k++];
        }
    /* what --data holds, so that --resume knows it reads the same records in
     * the same order (not the path: a copy elsewhere is the same data) */
    snprintf(r->meta_text[3], sizeof r->meta_text[3], "%016" PRIx64, r->data_fingerprint);
    r->meta_keys[r->n_meta] = "data_fingerprint";
    r->meta_values[r->n_meta++] = r->meta_text[3];
    if (r->a.order == STK_ORDER_BLOCK) { /* the blocks in use: the order follows them */
        block_params_text(r, r->meta_text[2], sizeof r->meta_text[2]);
        r->meta_keys[r->n_meta] = "block";
        r->meta_values[r->n_meta++] = r->meta_text[2];
    }
    if (m->num_classes && m->class_names) {
        if (!(r->class_names = stk_json_string_array(m->class_names, (int)m->num_classes)) ||
            !(r->class_list = calloc(m->num_classes + 1, sizeof *r->class_list)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        for (uint32_t c = 0; c < m->num_classes; c++)
            if (!(r->class_list[c] = strdup(m->class_names[c])))
                return stk_error(STK_ERR_NOMEM, "out of memory");
        r->meta_keys[r->n_meta] = "class_names";
        r->meta_values[r->n_meta++] = r->class_names;
    }
    return STK_OK;
}

/* A run saved by another number of ranks or another batch continues here
 * (train/position.h). (Checkpoints from before the "ranks" key: one rank,
 * this batch.) */
static stk_status continue_on_this_world(run_state *r)
{
    stk_safetensors *f;
    STK_TRY(stk_safetensors_read(r->path_last, &f));
    int64_t ranks = 1, batch = r->a.batch;
    stk_status st = STK_OK;
    if (stk_safetensors_meta(f, "ranks"))
        st = stk_safetensors_meta_int(f, "ranks", 1, 1 << 20, &ranks);
    if (st == STK_OK && stk_safetensors_meta(f, "batch_per_rank"))
        st = stk_safetensors_meta_int(f, "batch_per_rank", 1, 1 << 20, &batch);
    stk_safetensors_free(f);
    STK_TRY(st);
    stk_train_position *pos = stk_trainer_position(r->trainer);
    bool rescaled;
    STK_TRY(stk_train_position_rescale(pos, r->path_last, ranks, batch, r->data_world, r->a.batch,
                                       (int64_t)stk_loader_batches(r->loader), &rescaled));
    FILE *out = r->rank ? NULL : r->a.json ? stderr : stdout;
    if (!rescaled || !out) return STK_OK;
    fprintf(out,
            "resume: the run was saved by %" PRId64 " rank%s x batch %" PRId64 "; epoch %" PRId64
            " starts from its beginning on %d x %" PRId64 " (scheduler at step %" PRId64 ")\n",
            ranks, ranks == 1 ? "" : "s", batch, pos->epoch + 1, r->data_world, r->a.batch,
            pos->step);
    if (ranks * batch != r->data_world * r->a.batch)
        fprintf(out,
                "resume: the global batch changes from %" PRId64 " to %" PRId64
                ": the run goes on with other steps than the saved one would have taken\n",
                ranks * batch, r->data_world * r->a.batch);
    return STK_OK;
}

/* A run goes on with the settings it was saved with (STK_SET_RESUME in
 * train's table: the seed, the read order; a checkpoint from before a key
 * is not checked on it: from before "order" it was random), on the same
 * records (from before the data's fingerprint: not checked). */
static stk_status same_settings(const run_state *r)
{
    stk_safetensors *f;
    STK_TRY(stk_safetensors_read(r->path_last, &f));
    char shown[64], now[512];
    stk_status st = STK_OK;
    for (const stk_flag *fl = train_cli->flags; fl->kind != STK_FLAG_KIND_END && st == STK_OK;
         fl++) {
        if (fl->kind == STK_FLAG_KIND_SECTION || !(fl->set & STK_SET_RESUME)) continue;
        const char *saved = stk_safetensors_meta(f, fl->name);
        if (!stk_cli_value_text(fl, &r->a, now, sizeof now)) now[0] = '\0';
        if (saved && strcmp(saved, now))
            st = stk_error(STK_ERR_INVALID_ARG, "--resume: %s was trained with --%s %s, not %s",
                           r->path_last, fl->name, stk_printable(saved, shown, sizeof shown), now);
    }
    const char *fp = stk_safetensors_meta(f, "data_fingerprint"),
               *data = stk_safetensors_meta(f, "data");
    char shown_data[256];
    if (st == STK_OK && fp && strcmp(fp, r->meta_text[3]))
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--resume: %s was trained on other records than --data %s holds (it was "
                       "--data %s): other files, shards in another order, or a file changed "
                       "since; give the run's data",
                       r->path_last, r->a.data,
                       data ? stk_printable(data, shown_data, sizeof shown_data) : "?");
    const char *blocks = stk_safetensors_meta(f, "block");
    block_params_text(r, now, sizeof now);
    int mib, window;
    if (st == STK_OK && r->a.order == STK_ORDER_BLOCK && blocks && strcmp(blocks, now)) {
        if (sscanf(blocks, "%dx%d", &mib, &window) == 2)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "--resume: %s was trained in blocks of %d MiB, %d in a window; this "
                           "run reads blocks of %s (MiB x window): pass --block-mib %d "
                           "--block-window %d (and the memory they need)",
                           r->path_last, mib, window, now, mib, window);
        else
            st = stk_error(STK_ERR_INVALID_ARG, "--resume: %s: block \"%s\" is not MIBxWINDOW",
                           r->path_last, stk_printable(blocks, shown, sizeof shown));
    }
    stk_safetensors_free(f);
    return st;
}

static stk_status resume_from(run_state *r)
{
    stk_train_position p;
    stk_status st = stk_train_position_read(r->path_last, &p);
    if (st == STK_ERR_IO)
        return stk_error_prefix(st, "--resume: no checkpoint to continue from in %s", r->a.out);
    if (st != STK_OK) return st;
    STK_TRY(same_settings(r));
    STK_TRY(stk_trainer_resume(r->trainer, r->path_last));
    return continue_on_this_world(r);
}

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
static stk_status onnx_model(const train_args *a, const stk_model_config *cfg, stk_model **out)
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
static stk_status make_model(run_state *r, const stk_meta *m)
{
    train_args *a = &r->a;
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
    bool onnx = train_model_is_onnx(a->model);
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
static stk_status check_val(run_state *r, const stk_meta *m)
{
    train_args *a = &r->a;
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
static char *config_markdown(const run_state *r)
{
    const train_args *a = &r->a;
    return stk_text_printf(
        "| setting | value |\n| --- | --- |\n| model | %s |\n| data | %s |\n| val | %s |\n"
        "| transform | %s |\n| val transform | %s |\n| epochs | %" PRId64 " |\n"
        "| batch per rank | %" PRId64 " |\n| ranks | %d |\n| optimizer | %s |\n| lr | %g |\n"
        "| schedule | %s |\n| momentum | %g |\n| weight decay | %g |\n| seed | %" PRId64 " |\n"
        "| device | %s |\n| amp | %s |\n| workers | %" PRId64 " |\n| threads | %" PRId64 " |\n",
        a->model, a->data, a->val ? a->val : "-", r->transform, r->val_transform, a->epochs,
        a->batch, r->world, stk_optim_kind_name((stk_optim_kind)a->optimizer), a->lr,
        train_schedules[a->schedule], a->momentum, a->wd, a->seed, stk_device_name(a->device.kind),
        a->amp ? "yes" : "no", a->workers, a->threads);
}

/* metrics.csv, steps.csv and the event file (rank 0), continued on --resume. */
static stk_status open_record(run_state *r)
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

/* RUNDIR is written by one run at a time (rank 0 writes it): a second
 * writer is refused, naming the holder, before it reads or writes anything
 * there; the lock goes with the process, however it ends. Temporaries left
 * by a writer that was killed are removed once the lock is held. */
static stk_status lock_run_folder(run_state *r)
{
    int fd;
    stk_status st = stk_dir_lock(r->a.out, &fd);
    if (st == STK_ERR_BUSY)
        return stk_error(st, "--out %s; wait for that run to end, or choose another --out",
                         stk_last_error());
    if (st != STK_OK) return stk_error_prefix(st, "--out");
    r->out_lock = fd + 1;
    static const char *const written[] = {"last.safetensors", "best.safetensors", "metrics.csv",
                                          "steps.csv"};
    int n = stk_remove_stale_temporaries(r->a.out, written, 4);
    if (n)
        stk_log_info("removed %d temporary file%s left in %s by an earlier run that was killed", n,
                     n == 1 ? "" : "s", r->a.out);
    return STK_OK;
}

/* x as the shortest text that reads back as x (0.1, not 0.10000000000000001) */
/* The files a run writes into RUNDIR: what --overwrite removes. */
static bool run_file(const char *name)
{
    static const char *const names[] = {"last.safetensors", "best.safetensors", "metrics.csv",
                                        "steps.csv",        "curves.svg",       NULL};
    for (int i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        /* the file, or its temporary (NAME.tmp.XXXXXX) */
        if (!strncmp(name, names[i], n) && (!name[n] || !strncmp(name + n, ".tmp.", 5)))
            return true;
    }
    return !strncmp(name, "events.out.tfevents.", 20);
}

/* RUNDIR holds something: refused unless --resume or --overwrite (which
 * clears the old run's files first). Under the lock. */
static stk_status claim_run_folder(run_state *r)
{
    const train_args *a = &r->a;
    DIR *d = opendir(a->out);
    if (!d) return stk_error(STK_ERR_IO, "--out %s: %s", a->out, strerror(errno));
    int entries = 0, removed = 0;
    char first[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (a->overwrite && run_file(e->d_name) && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            removed++;
            continue;
        }
        if (!entries++) snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (removed)
        stk_log_info("--overwrite: removed %d file%s of the run in %s", removed,
                     removed == 1 ? "" : "s", a->out);
    if (entries && !a->resume && !a->overwrite) {
        char shown[96];
        return stk_error(STK_ERR_INVALID_ARG,
                         "--out %s already holds a run (%s%s): continue it with --resume, or "
                         "replace it with --overwrite",
                         a->out, stk_printable(first, shown, sizeof shown),
                         entries > 1 ? ", ..." : "");
    }
    return STK_OK;
}

int train_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Make RUNDIR (and its parents), lock it and claim it (rank 0, which alone
 * writes it). */
static stk_status prepare_run_folder(run_state *r)
{
    if (train_make_dirs(r->a.out) != 0)
        return stk_error(STK_ERR_IO, "--out %s: %s", r->a.out, strerror(errno));
    STK_TRY(lock_run_folder(r));
    return claim_run_folder(r);
}

/* A setting's value as the ranks compare it: the table's text (train's
 * flags, STK_SET_RANKS), but for what is compared resolved: the transforms
 * in use (a default is the data's), whether there is a --val (rank 0 alone
 * reads it), --data's content (a copy elsewhere is the same data) and the
 * device's kind (each rank takes its local GPU). */
static const char *rank_value(const run_state *r, const stk_flag *f, const char **label, char *buf,
                              size_t size)
{
    if (!strcmp(f->name, "data")) {
        *label = "--data (content fingerprint)";
        snprintf(buf, size, "%016" PRIx64, r->data_fingerprint);
        return buf;
    }
    if (!strcmp(f->name, "transform")) return r->transform;
    if (!strcmp(f->name, "val-transform")) return r->val_transform;
    if (!strcmp(f->name, "val")) return r->a.val ? "given" : "none";
    if (!strcmp(f->name, "device")) return stk_device_name(r->a.device.kind);
    return stk_cli_value_text(f, &r->a, buf, size) ? buf : "(none)";
}

/* Data-parallel: every rank must compute the same thing, so before the
 * first step the ranks compare every setting that changes what is computed
 * or when they synchronise (STK_SET_RANKS in train's table), the image
 * size and the steps of an epoch (ddp.h names the first difference on
 * every rank). */
static stk_status attach_ranks(run_state *r, int64_t per_epoch)
{
    enum { MAX_ITEMS = 64 };
    const train_args *a = &r->a;
    stk_ddp_check_item items[MAX_ITEMS];
    char(*text)[512] = calloc(MAX_ITEMS, sizeof *text);
    char(*labels)[72] = calloc(MAX_ITEMS, sizeof *labels);
    if (!text || !labels) {
        free(text);
        free(labels);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    for (const stk_flag *f = train_cli->flags; f->kind != STK_FLAG_KIND_END && n < MAX_ITEMS - 2;
         f++) {
        if (f->kind == STK_FLAG_KIND_SECTION || !(f->set & STK_SET_RANKS)) continue;
        snprintf(labels[n], sizeof labels[n], "--%s", f->name);
        const char *label = labels[n];
        items[n].value = rank_value(r, f, &label, text[n], sizeof text[n]);
        items[n++].name = label;
    }
    snprintf(text[n], sizeof text[n], "%d", r->size);
    items[n] = (stk_ddp_check_item){"image size", text[n]};
    n++;
    snprintf(text[n], sizeof text[n], "%" PRId64, per_epoch);
    items[n] = (stk_ddp_check_item){"steps per epoch", text[n]};
    n++;
    stk_status st = stk_ddp_attach(r->trainer, r->model, r->comm, n, items, &r->ddp);
    free(text);
    free(labels);
    /* a difference is found by every rank alike: each says so and leaves */
    r->ranks_agree_on_error = st == STK_ERR_INVALID_ARG;
    STK_TRY(st);
    stk_ddp_set_timeout(r->ddp, (double)a->dist_timeout);
    if (a->sync_bn) stk_ddp_sync_batch_norm(r->ddp);
    if (r->pipe_ranks) {
        stk_ddp_set_ranks_per_replica(r->ddp, (int)a->pipeline);
        STK_TRY(stk_pipe_ranks_average_buffers(r->pipe_ranks, r->trainer, r->model, r->ddp));
    }
    return STK_OK;
}

static stk_status setup_run(run_state *r, stk_dataset *ds)
{
    train_args *a = &r->a;
    const stk_meta *m = stk_dataset_meta(ds);
    char deflt[64];
    stk_loader_default_transform(m, deflt, sizeof deflt);
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
    if (r->world > 1) STK_TRY(attach_ranks(r, per_epoch));
    if (!r->borrowed_data) STK_TRY(stk_h2d_open(r->loader, r->ce, &r->h2d));
    if (r->rank == 0) STK_TRY(prepare_run_folder(r));
    if (!(r->path_last = stk_text_printf("%s/last.safetensors", a->out)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    STK_TRY(checkpoint_metadata(r, m));
    size_t classes = m->num_classes;
    if (a->per_class && r->val_loader &&
        !(r->confusion = calloc(classes * classes, sizeof *r->confusion)))
        return stk_error(STK_ERR_NOMEM, "out of memory for a %zux%zu confusion matrix", classes,
                         classes);
    if (a->resume) STK_TRY(resume_from(r));
    if (r->rank == 0) return open_record(r);
    return STK_OK;
}

stk_status train_setup(run_state *r)
{
    train_args *a = &r->a;
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

void train_close(run_state *r)
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
    free(r->a.out_buf);
    stk_config_free(r->a.config_argv, r->a.config_argc);
}

void train_finish_trace(run_state *r)
{
    if (!r->a.trace) return;
    char *path =
        r->rank ? stk_text_printf("%s.rank%d.json", r->a.trace, r->rank) : strdup(r->a.trace);
    stk_trace_summary s;
    if (!path) {
        stk_trace_discard();
        fprintf(stderr, "stoke: out of memory for the trace's name\n");
    } else if (stk_trace_finish(path, &s) != STK_OK) {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
    } else {
        fprintf(stderr,
                "trace: %llu events from %llu threads over %.2f s in %s%s (open in "
                "https://ui.perfetto.dev)\n",
                (unsigned long long)s.events, (unsigned long long)s.threads, s.seconds, path,
                s.dropped ? " (some dropped: a thread's buffer was full)" : "");
    }
    free(path);
}

/* The error that ends the run: printed, and under a launcher every other
 * rank is stopped now rather than left waiting in a collective. */
int train_fail(run_state *r)
{
    if (r->world > 1) {
        fprintf(stderr, "stoke: rank %d of %d: %s\n", r->rank, r->world, stk_last_error());
        fflush(stderr);
        if (!r->ranks_agree_on_error) stk_comm_abort(r->comm, STK_EXIT_ERROR);
    } else {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
    }
    train_close(r);
    train_finish_trace(r); /* what led to the error is worth seeing */
    stk_comm_close(r->comm);
    return stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_ERROR;
}
