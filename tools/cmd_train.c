/* stoke train: the loader, the H2D stage and the engine, joined. */
#include "common/text.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "common/trace.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "kernels/backend.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/memory_report.h"
#include "tools/run_record.h"
#include "train/batch.h"
#include "train/device.h"
#include "train/inputs.h"
#include "train/trainer.h"
#include "dist/comm.h"
#include "dist/ddp.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct train_args {
    const char *data, *val, *model, *transform, *val_transform, *init, *out;
    const char *trace, *trace_steps;
    bool trace_ops;
    stk_trace_options trace_opts;
    const char *freeze[32];
    int n_freeze;
    int64_t epochs, batch, workers, threads, step_epochs, seed, stop_after, dist_timeout;
    double lr, momentum, wd, warmup_epochs, smoothing; /* lr < 0: the optimizer's default */
    bool nesterov, resume, json, amp, sync_bn, tensorboard, no_tensorboard, memory_report;
    int optimizer; /* index in optimizers[] (= stk_optim_kind) */
    int schedule;  /* index in schedules[] */
    char *out_buf; /* the default --out, run-MODEL (owned) */
    stk_device_spec device;
} train_args;

static const char *const optimizers[] = {"sgd", "adam", "adamw", NULL};
static const char *const schedules[] = {"cosine", "step", "onecycle", "constant", NULL};
static const stk_schedule_kind schedule_kinds[] = {STK_SCHEDULE_COSINE, STK_SCHEDULE_STEP,
                                                   STK_SCHEDULE_ONECYCLE, STK_SCHEDULE_CONSTANT};

#define T train_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("model and data"),
    STK_FLAG_TEXT(T, data, "data", "PATH", "training set (a .stoke file)"),
    STK_FLAG_TEXT(T, val, "val", "PATH",
                  "validation set, evaluated after each epoch (top-1,\n"
                  "top-5, loss); same classes as --data"),
    STK_FLAG_TEXT(T, model, "model", "NAME", "mlp, cnn, resnet8 or resnet18"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "training transform; default pad:4,crop:SIDE,flip for raw\n"
                  "images (Fashion-MNIST: pad:4,crop:28,flip), rrc:224,flip\n"
                  "for JPEG; 'center:28' or 'crop:28' for no augmentation"),
    STK_FLAG_TEXT(T, val_transform, "val-transform", "SPEC",
                  "evaluation transform; default center:SIDE for raw images,\n"
                  "resize:256,center:224 for JPEG (scaled to the training size)"),
    STK_FLAG_TEXT(T, init, "init", "CHECKPOINT",
                  "start from a checkpoint of the same model; tensors whose\n"
                  "shape differs (another number of classes) are skipped and\n"
                  "reported (transfer learning)"),
    STK_FLAG_LIST(T, freeze, n_freeze, "freeze", "PREFIX",
                  "do not train parameters whose name starts with PREFIX\n"
                  "(repeatable; e.g. --freeze conv1 --freeze layer1)"),
    STK_FLAG_SECTION("optimisation"),
    STK_FLAG_INT(T, epochs, "epochs", "E", 1, 100000, "default 10"),
    STK_FLAG_INT(T, batch, "batch", "B", 1, 65536, "default 128"),
    STK_FLAG_CHOICE(T, optimizer, "optimizer", "NAME", optimizers, "sgd (default), adam or adamw"),
    STK_FLAG_NUMBER(T, lr, "lr", "LR", 0, 100,
                    "peak learning rate; default 0.05 (sgd), 0.001 (adam/adamw)"),
    STK_FLAG_NUMBER(T, momentum, "momentum", "M", 0, 0.999999, "sgd momentum, default 0.9"),
    STK_FLAG_BOOL(T, nesterov, "nesterov", "Nesterov momentum"),
    STK_FLAG_NUMBER(T, wd, "wd", "W", 0, 10,
                    "weight decay, default 5e-4 (sgd, adam: L2; adamw: decoupled)"),
    STK_FLAG_CHOICE(T, schedule, "schedule", "NAME", schedules,
                    "cosine (default, per step to 0), step (x0.1 every\n"
                    "--step-epochs), onecycle, or constant"),
    STK_FLAG_INT(T, step_epochs, "step-epochs", "N", 1, 100000,
                 "epochs between step decays, default 30"),
    STK_FLAG_NUMBER(T, warmup_epochs, "warmup-epochs", "W", 0, 100000,
                    "linear warm-up at the start (cosine; onecycle: its rise),\n"
                    "default 0 (onecycle: 30% of the run)"),
    STK_FLAG_NUMBER(T, smoothing, "label-smoothing", "S", 0, 0.999, "default 0"),
    STK_FLAG_SEED(T, seed, "shuffling, augmentation and initialisation, default 0"),
    STK_FLAG_SECTION("machine"),
    STK_FLAG_WORKERS(T, workers, "loader threads, default: number of cores"),
    STK_FLAG_THREADS(T, threads),
    STK_FLAG_DEVICE(T, device),
    STK_FLAG_BOOL(T, amp, "amp",
                  "mixed precision on the GPU: matmuls and convolutions in f16\n"
                  "with f32 accumulation, f32 master weights, dynamic loss\n"
                  "scaling (skips a step whose gradients overflow)"),
    STK_FLAG_BOOL(T, sync_bn, "sync-bn",
                  "data-parallel: batch norm statistics over every rank's batch\n"
                  "(as PyTorch's SyncBatchNorm); default: each rank's own"),
    STK_FLAG_INT(T, dist_timeout, "dist-timeout", "S", 1, 86400,
                 "data-parallel watchdog: starting MPI, the check of the\n"
                 "ranks' flags, a step whose gradient all-reduce has not\n"
                 "finished S seconds after backward, or leaving MPI (another\n"
                 "rank hung, stopped or died) stops the job with a message;\n"
                 "the ranks wait for rank 0's evaluation S seconds plus twice\n"
                 "their training time for as many images; default 300"),
    STK_FLAG_SECTION("output"),
    STK_FLAG_TEXT(T, out, "out", "RUNDIR",
                  "default run-MODEL; holds metrics.csv (per epoch), steps.csv\n"
                  "(per step), last.safetensors, best.safetensors (best\n"
                  "validation top-1) and TensorBoard's events.out.tfevents.*"),
    STK_FLAG_BOOL(T, tensorboard, "tensorboard",
                  "write a TensorBoard event file into RUNDIR (the default):\n"
                  "per step train/loss and train/lr; per epoch epoch/* (loss,\n"
                  "accuracy, validation, images/s, stall %) and memory/*; the\n"
                  "first batch as an image; the flags as text\n"
                  "(tensorboard --logdir RUNDIR)"),
    STK_FLAG_BOOL(T, no_tensorboard, "no-tensorboard", "no event file"),
    STK_FLAG_TEXT(T, trace, "trace", "FILE.json",
                  "a timeline in Chrome's trace format (open it in\n"
                  "https://ui.perfetto.dev or chrome://tracing): loader workers'\n"
                  "reads (async), decode and augment per sample, the wait for\n"
                  "each batch, the host-to-device copy, each step's forward,\n"
                  "backward and optimizer, data-parallel all-reduces; counters\n"
                  "(batches ready, reads in flight, images/s); arrows from a\n"
                  "batch's reads to its step. Under a launcher rank R > 0\n"
                  "writes FILE.rankR.json"),
    STK_FLAG_TEXT(T, trace_steps, "trace-steps", "WAIT,ACTIVE",
                  "record steps WAIT .. WAIT+ACTIVE-1 only (as PyTorch's\n"
                  "profiler schedule); default 0,20 (ACTIVE 0: every step)"),
    STK_FLAG_BOOL(T, trace_ops, "trace-ops",
                  "also a span per layer forward (kind, name, input shape) and\n"
                  "per autograd node backward"),
    STK_FLAG_BOOL(T, memory_report, "memory-report",
                  "at the end, the training device's caching allocator as a\n"
                  "table of size classes on stderr (blocks in use and cached,\n"
                  "allocations, fresh memory from the system)"),
    STK_FLAG_INT(T, stop_after, "stop-after", "N", 1, 100000,
                 "end this invocation after N epochs (checkpointed), to split\n"
                 "a run across time slots; continue it with --resume"),
    STK_FLAG_BOOL(T, resume, "resume",
                  "continue RUNDIR's run from last.safetensors (the epoch\n"
                  "after the last completed one); the result is bit-identical\n"
                  "to an uninterrupted run with the same flags and ranks;\n"
                  "another number of ranks continues from the same epoch"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout at the end (epochs, val_top1,\n"
                  "val_top5, val_loss, train_images_per_sec, stall_pct,\n"
                  "seconds, peak_rss_mb); epoch lines go to stderr"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "train",
    .usage = "stoke train --data TRAIN.stoke --model MODEL [OPTIONS]",
    .about = "Train a model: the loader reads, decodes and augments batches, the\n"
             "host-to-device stage hands them to the engine, each step runs forward,\n"
             "cross-entropy, backward and the optimizer (train/trainer.h). After each\n"
             "epoch the model is evaluated on --val (eval mode, no augmentation) and\n"
             "checkpointed.\n",
    .flags = flags,
    .notes = "Each epoch prints one line (loss, accuracy, validation, images/s, stall %:\n"
             "the share of the epoch the step waited for data; memory). metrics.csv columns:\n"
             "epoch, step, lr, train_loss, train_acc, val_loss, val_top1, val_top5,\n"
             "images_per_sec, stall_pct, seconds, mem_allocated_mb, mem_reserved_mb,\n"
             "mem_peak_mb (the training device's caching allocator: bytes in tensors, held\n"
             "by the cache, the epoch's peak), peak_rss_mb (the process). steps.csv: step,\n"
             "epoch, loss, lr (rank 0's loss under a launcher). `stoke plot RUNDIR` draws\n"
             "them. A NaN or infinite loss, or a parameter that is no longer\n"
             "finite after a step, stops the run at that step; the last\n"
             "good checkpoint stays. Ctrl-C stops after the current step, keeping the last\n"
             "completed epoch's checkpoint.\n"
             "\n"
             "Data-parallel: under a launcher (mpirun -np N stoke train ..., srun) every\n"
             "rank trains on its shard of each epoch and the gradients are averaged\n"
             "(MPI) before each step; --batch is per rank, the global batch is N times it;\n"
             "rank 0 prints, evaluates and writes RUNDIR; images/s are the job's. Every\n"
             "rank must be given the same flags and data: before the first step the ranks\n"
             "compare the model, its trainable parameters, every flag that changes what\n"
             "is computed or when ranks synchronise, and a fingerprint of --data's\n"
             "content; each rank names the first difference and the job ends. With\n"
             "--device cuda each rank takes its local GPU and gradients are averaged by\n"
             "NCCL on the GPUs (when the build found it). A rank that fails stops the job.\n"
             "--resume works on another number of ranks: the next epoch starts from its\n"
             "beginning (exact for the same global batch, up to rounding).\n",
    .max_args = 0};

/* Parse the flags; returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, train_args *a)
{
    *a = (train_args){.epochs = 10,
                      .batch = 128,
                      .lr = -1,
                      .momentum = 0.9,
                      .wd = 5e-4,
                      .step_epochs = 30,
                      .dist_timeout = 300,
                      .optimizer = STK_OPTIM_SGD,
                      .schedule = 0};
    a->workers = a->threads = stk_cpu_count();
    char **pos;
    int n_pos;
    int rc = stk_cli_parse(&cli, a, argc, argv, &pos, &n_pos);
    if (rc >= 0) return rc;
    if (!a->data) return stk_cli_usage("train", "--data TRAIN.stoke is required");
    if (!a->model)
        return stk_cli_usage("train", "--model is required (mlp, cnn, resnet8, resnet18)");
    bool known = false;
    for (const char *const *n = stk_model_names(); *n; n++) known |= !strcmp(*n, a->model);
    if (!known)
        return stk_cli_usage("train", "--model %s: unknown (known: mlp, cnn, resnet8, resnet18)",
                             a->model);
    if (a->nesterov && (a->optimizer != STK_OPTIM_SGD || a->momentum <= 0))
        return stk_cli_usage("train", "--nesterov needs --optimizer sgd with a --momentum above 0");
    if (a->amp && a->device.kind != STK_DEVICE_CUDA)
        return stk_cli_usage("train", "--amp: mixed precision runs on the GPU (add --device cuda); "
                                      "the CPU backend computes in f32");
    a->trace_opts = (stk_trace_options){.wait_steps = 0, .active_steps = 20, .ops = a->trace_ops};
    if ((a->trace_steps || a->trace_ops) && !a->trace)
        return stk_cli_usage("train", "--trace-steps and --trace-ops need --trace FILE.json");
    if (a->trace_steps && stk_trace_parse_schedule(a->trace_steps, &a->trace_opts) != STK_OK)
        return stk_cli_usage("train", "%s", stk_last_error());
    if (a->tensorboard && a->no_tensorboard)
        return stk_cli_usage("train", "--tensorboard and --no-tensorboard: choose one");
    if (a->lr < 0) a->lr = a->optimizer == STK_OPTIM_SGD ? 0.05 : 0.001;
    if (!a->out) {
        if (!(a->out_buf = stk_text_printf("run-%s", a->model))) {
            fprintf(stderr, "stoke: out of memory\n");
            return STK_EXIT_ERROR;
        }
        a->out = a->out_buf;
    }
    return -1;
}

typedef struct run_state {
    train_args a;
    stk_loader *loader;
    const stk_copy_engine *ce; /* the device's copy engine */
    stk_h2d *h2d;
    stk_model *model;
    stk_optim *opt;
    stk_trainer *trainer;
    stk_trainer_config tc;
    run_record *record;              /* metrics.csv, steps.csv, TensorBoard (rank 0) */
    char *transform, *val_transform; /* the specs in use (owned): never cut to a buffer */
    int size;
    char *path_last, *path_best; /* under --out (owned) */
    stk_progress bar;            /* the epoch's */
    stk_comm *comm;              /* the data-parallel job (a world of one alone) */
    stk_ddp *ddp;                /* with more than one rank */
    int rank, world;
    uint64_t val_count;         /* images in --val */
    bool ranks_agree_on_error;  /* every rank failed alike: no need to stop the others */
    int out_lock;               /* RUNDIR's lock: its descriptor + 1 (0: none) */
} run_state;

/* The run's own metadata beside the trainer's position. */
static stk_status save_checkpoint(run_state *r, const char *path)
{
    char ranks[24], batch[24];
    snprintf(ranks, sizeof ranks, "%d", r->world);
    snprintf(batch, sizeof batch, "%" PRId64, r->a.batch);
    const char *keys[] = {"transform", "val_transform", "data", "ranks", "batch_per_rank"};
    const char *vals[] = {r->transform, r->val_transform, r->a.data, ranks, batch};
    return stk_trainer_save(r->trainer, path, 5, keys, vals);
}

static double peak_rss_mb(void)
{
    run_memory m;
    run_memory_read(STK_DEVICE_CPU, &m);
    return m.peak_rss_mb;
}

/* fprintf, except on ranks other than 0 (f NULL) */
static void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A run saved by another number of ranks or another batch continues here.
 * Checkpoints are written at the end of an epoch, so the next epoch starts
 * from its beginning whatever the world size: its permutation depends on
 * the seed and the epoch alone, and each rank takes every world-th sample of
 * it, so a global batch of the same size holds the same samples. Only the
 * scheduler's clock (steps) is counted in the old steps: it becomes the
 * completed epochs times this run's steps per epoch. (Checkpoints from
 * before the "ranks" key: one rank, this batch.) */
static stk_status continue_on_this_world(run_state *r)
{
    stk_safetensors *f;
    TRY(stk_safetensors_read(r->path_last, &f));
    int64_t ranks = 1, batch = r->a.batch;
    stk_status st = STK_OK;
    if (stk_safetensors_meta(f, "ranks"))
        st = stk_safetensors_meta_int(f, "ranks", 1, 1 << 20, &ranks);
    if (st == STK_OK && stk_safetensors_meta(f, "batch_per_rank"))
        st = stk_safetensors_meta_int(f, "batch_per_rank", 1, 1 << 20, &batch);
    stk_safetensors_free(f);
    TRY(st);
    stk_train_position *pos = stk_trainer_position(r->trainer);
    if (ranks == r->world && batch == r->a.batch) {
        /* checkpoints are written at the end of an epoch: the scheduler's
         * clock is a whole number of this run's epochs */
        int64_t per_epoch = (int64_t)stk_loader_batches(r->loader);
        if (pos->step != pos->epoch * per_epoch)
            return stk_error(STK_ERR_CORRUPT,
                             "%s: damaged checkpoint metadata: \"step\" is %" PRId64 ", but %" PRId64
                             " epochs of %" PRId64 " steps make %" PRId64
                             " (or the checkpoint is of another --data)",
                             r->path_last, pos->step, pos->epoch, per_epoch,
                             pos->epoch * per_epoch);
        return STK_OK;
    }
    pos->step = pos->epoch * (int64_t)stk_loader_batches(r->loader);
    FILE *out = r->rank ? NULL : r->a.json ? stderr : stdout;
    say(out,
        "resume: the run was saved by %" PRId64 " rank%s x batch %" PRId64 "; epoch %" PRId64
        " starts from its beginning on %d x %" PRId64 " (scheduler at step %" PRId64 ")\n",
        ranks, ranks == 1 ? "" : "s", batch, pos->epoch + 1, r->world, r->a.batch, pos->step);
    if (ranks * batch != r->world * r->a.batch)
        say(out,
            "resume: the global batch changes from %" PRId64 " to %" PRId64
            ": the run goes on with other steps than the saved one would have taken\n",
            ranks * batch, r->world * r->a.batch);
    return STK_OK;
}

/* Continue RUNDIR's run from last.safetensors. */
static stk_status resume_from(run_state *r)
{
    stk_train_position p;
    stk_status st = stk_train_position_read(r->path_last, &p);
    if (st == STK_ERR_IO)
        return stk_error_prefix(st, "--resume: no checkpoint to continue from in %s", r->a.out);
    if (st != STK_OK) return st;
    if (p.seed != r->a.seed)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--resume: %s was trained with --seed %" PRId64 ", not %" PRId64,
                         r->path_last, p.seed, r->a.seed);
    TRY(stk_trainer_resume(r->trainer, r->path_last));
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

/* The model as the flags describe it: created, --init, --freeze, on the device. */
static stk_status make_model(run_state *r, const stk_meta *m)
{
    train_args *a = &r->a;
    stk_model_config cfg = {.name = a->model,
                            .in_channels = m->channels,
                            .classes = (int)m->num_classes,
                            .image_size = r->size,
                            .seed = (uint64_t)a->seed};
    TRY(stk_model_create(&cfg, &r->model));
    if (a->init) {
        stk_load_report rep;
        stk_safetensors *f;
        TRY(stk_safetensors_read(a->init, &f));
        const char *mm = stk_safetensors_meta(f, "model");
        stk_status st = STK_OK;
        if (mm && strcmp(mm, a->model))
            st = stk_error(STK_ERR_INVALID_ARG, "--init %s holds a %s model, not %s", a->init, mm,
                           a->model);
        stk_safetensors_free(f);
        TRY(st);
        TRY(stk_checkpoint_load(a->init, r->model, NULL, false, &rep));
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
                         "--freeze: every parameter of %s is frozen; nothing would train", a->model);
    TRY(stk_model_to(r->model, a->device.kind));
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
    TRY(stk_dataset_open(a->val, &vd));
    const stk_meta *vm = stk_dataset_meta(vd);
    r->val_count = vm->count;
    int vsize;
    stk_status st;
    if (vm->num_classes != m->num_classes || vm->channels != m->channels)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--val %s has %u classes and %d channels, --data %s has %u and %d", a->val,
                       vm->num_classes, vm->channels, a->data, m->num_classes, m->channels);
    else if ((st = stk_train_check_transform(vm, "--val-transform", r->val_transform, &vsize)) ==
                 STK_OK &&
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
        schedules[a->schedule], a->momentum, a->wd, a->seed, stk_device_name(a->device.kind),
        a->amp ? "yes" : "no", a->workers, a->threads);
}

/* metrics.csv, steps.csv and the event file (rank 0), continued on --resume. */
static stk_status open_record(run_state *r)
{
    int64_t done = stk_trainer_position(r->trainer)->epoch;
    TRY(run_record_open(r->a.out, !r->a.no_tensorboard, done, &r->record));
    run_record_set_normalisation(r->record, r->tc.mean, r->tc.std);
    TRY(stk_trainer_add_hook(r->trainer, STK_STEP_BEFORE_FORWARD, run_record_step_hook, r->record));
    TRY(stk_trainer_add_hook(r->trainer, STK_STEP_AFTER_OPTIMIZER, run_record_step_hook,
                             r->record));
    char *md = config_markdown(r);
    if (!md) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = run_record_config(r->record, md);
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
    if (n) stk_log_info("removed %d temporary file%s left in %s by an earlier run that was killed",
                        n, n == 1 ? "" : "s", r->a.out);
    return STK_OK;
}

/* x as the shortest text that reads back as x (0.1, not 0.10000000000000001) */
static void exact(char buf[48], double x)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, 48, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

/* Data-parallel: every rank must compute the same thing, so before the
 * first step the ranks compare everything that changes what is computed or
 * when they synchronise (ddp.h names the first difference on every rank). */
static stk_status attach_ranks(run_state *r, stk_dataset *ds, int64_t per_epoch)
{
    const train_args *a = &r->a;
    uint64_t fp;
    TRY(stk_dataset_fingerprint(ds, &fp));
    char freeze[512] = "", v[13][48];
    for (int i = 0; i < a->n_freeze; i++)
        snprintf(freeze + strlen(freeze), sizeof freeze - strlen(freeze), "%s%s", i ? "," : "",
                 a->freeze[i]);
    snprintf(v[0], sizeof v[0], "%" PRId64, a->batch);
    snprintf(v[1], sizeof v[1], "%" PRId64, a->epochs);
    snprintf(v[2], sizeof v[2], "%" PRId64, a->seed);
    exact(v[3], a->lr);
    exact(v[4], a->momentum);
    exact(v[5], a->wd);
    snprintf(v[6], sizeof v[6], "%" PRId64, a->step_epochs);
    exact(v[7], a->warmup_epochs);
    exact(v[8], a->smoothing);
    snprintf(v[9], sizeof v[9], "%" PRId64, a->stop_after);
    snprintf(v[10], sizeof v[10], "%016" PRIx64, fp);
    snprintf(v[11], sizeof v[11], "%d", r->size);
    snprintf(v[12], sizeof v[12], "%" PRId64, per_epoch);
    const char *no_yes[] = {"no", "yes"};
    stk_ddp_check_item items[] = {
        {"--model", a->model},
        {"--data (content fingerprint)", v[10]},
        {"--batch", v[0]},
        {"--epochs", v[1]},
        {"--stop-after", a->stop_after ? v[9] : "(none)"},
        {"--resume", no_yes[a->resume]},
        {"--seed", v[2]},
        {"--optimizer", optimizers[a->optimizer]},
        {"--lr", v[3]},
        {"--momentum", v[4]},
        {"--nesterov", no_yes[a->nesterov]},
        {"--wd", v[5]},
        {"--schedule", schedules[a->schedule]},
        {"--step-epochs", v[6]},
        {"--warmup-epochs", v[7]},
        {"--label-smoothing", v[8]},
        {"--transform", r->transform},
        {"--val", a->val ? "given" : "none"},
        {"--val-transform", r->val_transform},
        {"--freeze", a->n_freeze ? freeze : "(none)"},
        {"--sync-bn", no_yes[a->sync_bn]},
        {"--amp", no_yes[a->amp]},
        {"--device", stk_device_name(a->device.kind)},
        {"image size", v[11]},
        {"steps per epoch", v[12]},
    };
    stk_status st = stk_ddp_attach(r->trainer, r->model, r->comm,
                                   (int)(sizeof items / sizeof *items), items, &r->ddp);
    /* a difference is found by every rank alike: each says so and leaves */
    r->ranks_agree_on_error = st == STK_ERR_INVALID_ARG;
    TRY(st);
    stk_ddp_set_timeout(r->ddp, (double)a->dist_timeout);
    if (a->sync_bn) stk_ddp_sync_batch_norm(r->ddp);
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
    TRY(stk_train_check_transform(m, "--transform", r->transform, &r->size));
    stk_train_default_eval_transform(m, r->size, deflt, sizeof deflt);
    if (!(r->val_transform = strdup(a->val_transform ? a->val_transform : deflt)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    r->tc = stk_trainer_defaults();
    r->tc.device = r->ce;
    r->tc.amp = a->amp;
    r->tc.label_smoothing = (float)a->smoothing;
    r->tc.seed = a->seed;
    stk_batch_norm_stats(m, a->data, r->tc.mean, r->tc.std);
    if (a->val) TRY(check_val(r, m));
    TRY(make_model(r, m));
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = (int)a->batch;
    o.workers = (int)a->workers;
    o.seed = (uint64_t)a->seed;
    o.drop_last = true; /* every step sees a full batch (batch norm, the schedule) */
    o.transform = r->transform;
    o.host_memory = r->ce->host_memory;
    o.rank = r->rank; /* each rank its shard of every epoch, all the same length */
    o.world = r->world;
    TRY(stk_loader_open(a->data, &o, &r->loader));
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
                       .gamma = 0.1f};
    TRY(stk_trainer_create(&r->tc, r->model, r->opt, &r->trainer));
    if (r->world > 1) TRY(attach_ranks(r, ds, per_epoch));
    TRY(stk_h2d_open(r->loader, r->ce, &r->h2d));
    if (mkdir(a->out, 0755) != 0 && errno != EEXIST)
        return stk_error(STK_ERR_IO, "--out %s: %s", a->out, strerror(errno));
    if (r->rank == 0) TRY(lock_run_folder(r));
    if (!(r->path_last = stk_text_printf("%s/last.safetensors", a->out)) ||
        !(r->path_best = stk_text_printf("%s/best.safetensors", a->out)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    if (a->resume) TRY(resume_from(r));
    if (r->rank == 0) return open_record(r);
    return STK_OK;
}

static stk_status setup(run_state *r)
{
    train_args *a = &r->a;
    /* one GPU per rank: "cuda" is the rank's local GPU under a launcher */
    if (r->world > 1 && a->device.kind == STK_DEVICE_CUDA && !a->device.indexed)
        a->device.index = stk_comm_local_rank(r->comm);
    /* the device first: its copy engine says what the loader's batch memory is */
    stk_status st = stk_device_spec_open(&a->device, &r->ce);
    if (st != STK_OK) return st;
    /* the training set: its meta decides the model's input and the defaults */
    stk_dataset *ds;
    TRY(stk_dataset_open(a->data, &ds));
    st = setup_run(r, ds);
    stk_dataset_close(ds);
    return st;
}

static stk_status show_progress(void *ctx, const stk_epoch_stats *es)
{
    run_state *r = ctx;
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.4f  %.0f img/s  stall %.1f%%", es->loss,
             es->images_per_sec, es->stall_pct);
    stk_progress_set_extra(&r->bar, extra);
    stk_progress_update(&r->bar, es->steps);
    return stk_cli_interrupted ? stk_error(STK_ERR_CANCELLED, "interrupted") : STK_OK;
}

static stk_status evaluate(run_state *r, stk_eval_result *val)
{
    memset(val, 0, sizeof *val);
    if (!r->a.val || r->rank != 0) return STK_OK; /* rank 0 evaluates for the job */
    stk_loader_options o =
        stk_trainer_eval_options(r->trainer, r->val_transform, (int)r->a.batch, (int)r->a.workers);
    stk_loader *l;
    TRY(stk_loader_open(r->a.val, &o, &l));
    stk_status st = stk_trainer_evaluate(r->trainer, l, "eval", val);
    stk_loader_close(l);
    return st;
}

static stk_status train_epoch(run_state *r, int64_t epoch, stk_epoch_stats *es,
                              stk_eval_result *val)
{
    train_args *a = &r->a;
    char label[32];
    snprintf(label, sizeof label, "epoch %" PRId64 "/%" PRId64, epoch + 1, a->epochs);
    /* rank 0 speaks for the job */
    stk_progress_init(&r->bar, label, stk_loader_batches(r->loader), r->rank ? NULL : stderr);
    stk_status st =
        stk_trainer_train_epoch(r->trainer, r->loader, r->h2d, epoch, show_progress, r, es);
    if (st == STK_ERR_DIVERGED)
        return stk_error(st,
                         "%s; lower --lr (now %g) or add --warmup-epochs; the last good "
                         "checkpoint is kept in %s",
                         stk_last_error(), a->lr, a->out);
    if (st != STK_OK) return st;
    stk_progress_finish(&r->bar);
    es->images_per_sec *= r->world; /* equal batches on every rank: the job's rate */
    if (r->world > 1) { /* loss, accuracy and stall over the job: equal shards, plain means */
        float m[3] = {(float)es->loss, (float)es->accuracy, (float)es->stall_pct};
        TRY(stk_ddp_allreduce(r->ddp, m, 3));
        es->loss = m[0] / r->world;
        es->accuracy = m[1] / r->world;
        es->stall_pct = m[2] / r->world;
    }
    TRY(evaluate(r, val));
    if (!r->a.val || r->world == 1) return STK_OK;
    /* The other ranks wait for rank 0's evaluation, which may take longer
     * than --dist-timeout: the wait is bounded by --dist-timeout plus twice
     * the time this rank took to train on as many images as --val holds
     * (evaluation is forward only, training forward and backward). */
    double per_rank = es->images_per_sec / r->world;
    double allowance = per_rank > 0 ? 2.0 * (double)r->val_count / per_rank : 0;
    return stk_comm_barrier(r->comm, (double)r->a.dist_timeout + allowance);
}

static void close_run(run_state *r)
{
    stk_h2d_close(r->h2d);
    stk_loader_close(r->loader);
    stk_trainer_destroy(r->trainer); /* before the ddp its hooks point to */
    stk_ddp_destroy(r->ddp);
    stk_optim_destroy(r->opt);
    stk_model_destroy(r->model);
    run_record_close(r->record);
    if (r->out_lock) close(r->out_lock - 1); /* after the last write into RUNDIR */
    free(r->transform);
    free(r->val_transform);
    free(r->path_last);
    free(r->path_best);
    free(r->a.out_buf);
}

static void say(FILE *f, const char *fmt, ...)
{
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

/* Write --trace's file (once every traced thread is joined: after close_run). */
static void finish_trace(run_state *r)
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
static int fail_run(run_state *r)
{
    if (r->world > 1) {
        fprintf(stderr, "stoke: rank %d of %d: %s\n", r->rank, r->world, stk_last_error());
        fflush(stderr);
        if (!r->ranks_agree_on_error) stk_comm_abort(r->comm, STK_EXIT_ERROR);
    } else {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
    }
    close_run(r);
    finish_trace(r); /* what led to the error is worth seeing */
    stk_comm_close(r->comm);
    return STK_EXIT_ERROR;
}

static int run(int argc, char **argv)
{
    run_state r;
    memset(&r, 0, sizeof r);
    int rc = parse(argc, argv, &r.a);
    if (rc >= 0) return rc;
    train_args *a = &r.a;
    stk_cli_catch_interrupt();
    stk_cpu_set_threads((int)a->threads);
    if (stk_comm_open((double)a->dist_timeout, &r.comm) != STK_OK) {
        close_run(&r);
        return stk_cli_fail();
    }
    r.rank = stk_comm_rank(r.comm);
    r.world = stk_comm_world(r.comm);
    if (a->trace) { /* before the loader's threads start: they name themselves */
        stk_trace_start(&a->trace_opts);
        stk_trace_thread_name("main (steps)");
    }
    if (setup(&r) != STK_OK) return fail_run(&r);
    FILE *lines = r.rank ? NULL : a->json ? stderr : stdout;
    stk_train_position *pos = stk_trainer_position(r.trainer);
    int64_t start_epoch = pos->epoch;
    if (start_epoch >= a->epochs)
        say(lines, "%s: already trained for %" PRId64 " epochs\n", r.path_last, start_epoch);
    else
        say(lines,
            "train %s on %s: %" PRId64 " epochs of %" PRId64 " steps, batch %" PRId64
            ", %s lr %g, transform %s%s\n",
            a->model, a->data, a->epochs - start_epoch, (int64_t)stk_loader_batches(r.loader),
            a->batch, stk_optim_kind_name((stk_optim_kind)a->optimizer), a->lr, r.transform,
            start_epoch ? " (resumed)" : "");
    if (r.world > 1)
        say(lines,
            "data-parallel: %d ranks (%s), batch %" PRId64 " per rank, global batch %" PRId64
            "%s; images/s below are the job's\n",
            r.world, stk_comm_library(r.comm), a->batch, a->batch * r.world,
            a->sync_bn ? ", batch norm synchronised" : "");
    double t_all = stk_clock_sec(), ips_sum = 0, stall_sum = 0;
    uint64_t run_peak = 0; /* the highest epoch peak */
    int epochs_run = 0;
    stk_epoch_stats es = {0};
    stk_eval_result val = {0};
    stk_status st = STK_OK;
    int64_t end = a->epochs;
    if (a->stop_after && start_epoch + a->stop_after < end) end = start_epoch + a->stop_after;
    for (int64_t e = start_epoch; e < end; e++) {
        stk_device_reset_peak(a->device.kind); /* each epoch's own peak */
        if ((st = train_epoch(&r, e, &es, &val)) != STK_OK) break;
        epochs_run++;
        ips_sum += es.images_per_sec;
        stall_sum += es.stall_pct;
        if (r.rank != 0) continue; /* rank 0 writes metrics and checkpoints */
        run_memory mem;
        run_memory_read(a->device.kind, &mem);
        if (mem.heap.peak_allocated > run_peak) run_peak = mem.heap.peak_allocated;
        if ((st = run_record_epoch(r.record, e, pos->step, stk_optim_lr(r.opt), &es,
                                   a->val ? &val : NULL, &mem)) != STK_OK)
            break;
        say(lines, "epoch %" PRId64 "/%" PRId64 ": loss %.4f, train acc %.2f%%", e + 1, a->epochs,
            es.loss, es.accuracy);
        if (a->val)
            say(lines, ", val loss %.4f, top-1 %.2f%%, top-5 %.2f%%", val.loss, val.top1, val.top5);
        say(lines,
            ", %.0f images/s, stall %.1f%%, %.1f s, %s memory %.0f MB (peak %.0f), rss %.0f MB\n",
            es.images_per_sec, es.stall_pct, es.seconds, stk_device_name(a->device.kind),
            mem.heap.allocated / 1e6, mem.heap.peak_allocated / 1e6, mem.peak_rss_mb);
        double score = a->val ? val.top1 : es.accuracy;
        bool best = score > pos->best_metric;
        if (best) pos->best_metric = score;
        if ((st = save_checkpoint(&r, r.path_last)) != STK_OK) break;
        if (best && (st = save_checkpoint(&r, r.path_best)) != STK_OK) break;
    }
    double seconds = stk_clock_sec() - t_all;
    if (st != STK_OK) return fail_run(&r);
    if (a->json && r.rank == 0) {
        char j[7][STK_JSON_NUMBER];
        printf("{\"epochs\": %" PRId64 ", \"val_top1\": %s, \"val_top5\": %s, "
               "\"val_loss\": %s, \"train_images_per_sec\": %s, \"stall_pct\": %s, "
               "\"seconds\": %s, \"peak_rss_mb\": %s, \"ranks\": %d}\n",
               start_epoch + epochs_run, stk_json_number(val.top1, 4, j[0]),
               stk_json_number(val.top5, 4, j[1]), stk_json_number(val.loss, 6, j[2]),
               stk_json_number(epochs_run ? ips_sum / epochs_run : 0, 1, j[3]),
               stk_json_number(epochs_run ? stall_sum / epochs_run : 0, 2, j[4]),
               stk_json_number(seconds, 2, j[5]), stk_json_number(peak_rss_mb(), 1, j[6]), r.world);
    } else if (epochs_run) {
        say(lines, "done: %d epochs in %.1f s, %.0f images/s, stall %.1f%%; checkpoints in %s\n",
            epochs_run, seconds, ips_sum / epochs_run, stall_sum / epochs_run, a->out);
    }
    if (r.ddp && r.rank == 0) { /* on stderr: --json keeps stdout one object */
        stk_ddp_stats ds;
        stk_ddp_get_stats(r.ddp, &ds);
        fprintf(stderr,
                "data-parallel: %.1f MB of gradients all-reduced per step in %d buckets by %s; "
                "all-reduce %.2f s over %" PRIu64 " steps, %.2f s of it not hidden by backward\n",
                ds.bytes_per_step / 1e6, ds.buckets, ds.library, ds.comm_s, ds.steps, ds.exposed_s);
    }
    if (a->memory_report && r.rank == 0) memory_report_print(stderr, a->device.kind, run_peak);
    if (a->amp && r.rank == 0)
        fprintf(stderr,
                "amp: %" PRId64 " of %" PRId64
                " steps skipped for inf/NaN gradients, loss scale now %g\n",
                stk_trainer_skipped_steps(r.trainer), pos->step,
                (double)stk_trainer_loss_scale(r.trainer));
    close_run(&r);
    finish_trace(&r);
    stk_comm_close(r.comm);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_train = {"train", "train a model on a packed dataset", &cli, run};
