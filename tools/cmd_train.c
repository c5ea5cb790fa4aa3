/* stoke train: the loader, the H2D stage and the engine, joined. */
#include "common/text.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "engine/autograd.h"
#include "engine/amp.h"
#include "engine/checkpoint.h"
#include "engine/ops.h"
#include "engine/safetensors.h"
#include "kernels/backend.h"
#include "kernels/device_query.h"
#include "tools/cli.h"
#include "tools/train_common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

static const char help[] =
    "usage: stoke train --data TRAIN.stoke --model MODEL [OPTIONS]\n"
    "\n"
    "Train a model: the loader reads, decodes and augments batches, the\n"
    "host-to-device stage hands them to the engine, each step runs forward,\n"
    "cross-entropy, backward and the optimizer. After each epoch the model is\n"
    "evaluated on --val (eval mode, no augmentation) and checkpointed.\n"
    "\n"
    "model and data:\n"
    "  --data PATH            training set (a .stoke file)\n"
    "  --val PATH             validation set, evaluated after each epoch (top-1,\n"
    "                         top-5, loss); same classes as --data\n"
    "  --model NAME           mlp, cnn, resnet8 or resnet18\n"
    "  --transform SPEC       training transform; default pad:4,crop:SIDE,flip for raw\n"
    "                         images (Fashion-MNIST: pad:4,crop:28,flip), rrc:224,flip\n"
    "                         for JPEG; 'center:28' or 'crop:28' for no augmentation\n"
    "  --val-transform SPEC   evaluation transform; default center:SIDE for raw images,\n"
    "                         resize:256,center:224 for JPEG (scaled to the training size)\n"
    "  --init CHECKPOINT      start from a checkpoint of the same model; tensors whose\n"
    "                         shape differs (another number of classes) are skipped and\n"
    "                         reported (transfer learning)\n"
    "  --freeze PREFIX        do not train parameters whose name starts with PREFIX\n"
    "                         (repeatable; e.g. --freeze conv1 --freeze layer1)\n"
    "\n"
    "optimisation:\n"
    "  --epochs E             default 10\n"
    "  --batch B              default 128\n"
    "  --optimizer NAME       sgd (default), adam or adamw\n"
    "  --lr LR                peak learning rate; default 0.05 (sgd), 0.001 (adam/adamw)\n"
    "  --momentum M           sgd momentum, default 0.9\n"
    "  --nesterov             Nesterov momentum\n"
    "  --wd W                 weight decay, default 5e-4 (sgd, adam: L2; adamw: decoupled)\n"
    "  --schedule NAME        cosine (default, per step to 0), step (x0.1 every\n"
    "                         --step-epochs), onecycle, or constant\n"
    "  --step-epochs N        epochs between step decays, default 30\n"
    "  --warmup-epochs W      linear warm-up at the start (cosine; onecycle: its rise),\n"
    "                         default 0 (onecycle: 30% of the run)\n"
    "  --label-smoothing S    default 0\n"
    "  --seed S               shuffling, augmentation and initialisation, default 0\n"
    "\n"
    "machine:\n"
    "  --workers N            loader threads, default: number of cores\n"
    "  --threads N            compute threads, default: number of cores\n"
    "  --device cpu|cuda[:N]  default cpu; cuda: GPU 0, cuda:N another (stoke devices)\n"
    "  --amp                  mixed precision on the GPU: matmuls and convolutions in f16\n"
    "                         with f32 accumulation, f32 master weights, dynamic loss\n"
    "                         scaling (skips a step whose gradients overflow)\n"
    "\n"
    "output:\n"
    "  --out RUNDIR           default run-MODEL; holds metrics.csv, last.safetensors,\n"
    "                         best.safetensors (best validation top-1)\n"
    "  --stop-after N         end this invocation after N epochs (checkpointed), to split\n"
    "                         a run across time slots; continue it with --resume\n"
    "  --resume               continue RUNDIR's run from last.safetensors (the epoch\n"
    "                         after the last completed one); the result is bit-identical\n"
    "                         to an uninterrupted run with the same flags\n"
    "  --json                 one JSON object on stdout at the end (epochs, val_top1,\n"
    "                         val_top5, val_loss, train_images_per_sec, stall_pct,\n"
    "                         seconds, peak_rss_mb); epoch lines go to stderr\n"
    "  -h, --help             this text\n"
    "\n"
    "Each epoch prints one line (loss, accuracy, validation, images/s, stall %:\n"
    "the share of the epoch the step waited for data). metrics.csv columns: epoch,\n"
    "step, lr, train_loss, train_acc, val_loss, val_top1, val_top5, images_per_sec,\n"
    "stall_pct, seconds. A NaN or infinite loss, or a parameter that is no longer\n"
    "finite after a step, stops the run at that step; the last\n"
    "good checkpoint stays. Ctrl-C stops after the current step, keeping the last\n"
    "completed epoch's checkpoint.\n";

typedef struct train_args {
    const char *data, *val, *model, *transform, *val_transform, *init, *out;
    const char *freeze[32];
    int n_freeze;
    int64_t epochs, batch, workers, threads, step_epochs, seed, stop_after;
    double lr, momentum, wd, warmup_epochs, smoothing;
    bool nesterov, resume, json, lr_set, amp;
    stk_optim_kind optimizer;
    stk_schedule_kind schedule;
    char *out_buf; /* the default --out, run-MODEL (owned) */
    stk_device device;
} train_args;

/* Parse the flags; returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, train_args *a)
{
    enum {
        O_DATA = 256,
        O_VAL,
        O_MODEL,
        O_EPOCHS,
        O_BATCH,
        O_LR,
        O_OPT,
        O_MOM,
        O_NEST,
        O_WD,
        O_SCHED,
        O_STEP,
        O_WARM,
        O_LS,
        O_TF,
        O_VTF,
        O_WORKERS,
        O_THREADS,
        O_DEVICE,
        O_AMP,
        O_SEED,
        O_OUT,
        O_RESUME,
        O_INIT,
        O_FREEZE,
        O_JSON,
        O_HELP,
        O_STOP
    };
    static const struct option longopts[] = {{"data", required_argument, 0, O_DATA},
                                             {"val", required_argument, 0, O_VAL},
                                             {"model", required_argument, 0, O_MODEL},
                                             {"epochs", required_argument, 0, O_EPOCHS},
                                             {"batch", required_argument, 0, O_BATCH},
                                             {"lr", required_argument, 0, O_LR},
                                             {"optimizer", required_argument, 0, O_OPT},
                                             {"momentum", required_argument, 0, O_MOM},
                                             {"nesterov", no_argument, 0, O_NEST},
                                             {"wd", required_argument, 0, O_WD},
                                             {"schedule", required_argument, 0, O_SCHED},
                                             {"step-epochs", required_argument, 0, O_STEP},
                                             {"warmup-epochs", required_argument, 0, O_WARM},
                                             {"label-smoothing", required_argument, 0, O_LS},
                                             {"transform", required_argument, 0, O_TF},
                                             {"val-transform", required_argument, 0, O_VTF},
                                             {"workers", required_argument, 0, O_WORKERS},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"device", required_argument, 0, O_DEVICE},
                                             {"amp", no_argument, 0, O_AMP},
                                             {"seed", required_argument, 0, O_SEED},
                                             {"out", required_argument, 0, O_OUT},
                                             {"resume", no_argument, 0, O_RESUME},
                                             {"init", required_argument, 0, O_INIT},
                                             {"freeze", required_argument, 0, O_FREEZE},
                                             {"json", no_argument, 0, O_JSON},
                                             {"help", no_argument, 0, O_HELP},
                                             {"stop-after", required_argument, 0, O_STOP},
                                             {0, 0, 0, 0}};
    *a = (train_args){.epochs = 10,
                      .batch = 128,
                      .momentum = 0.9,
                      .wd = 5e-4,
                      .step_epochs = 30,
                      .optimizer = STK_OPTIM_SGD,
                      .schedule = STK_SCHEDULE_COSINE};
    a->workers = a->threads = stk_cpu_count();
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DATA: a->data = optarg; break;
        case O_VAL: a->val = optarg; break;
        case O_MODEL: a->model = optarg; break;
        case O_TF: a->transform = optarg; break;
        case O_VTF: a->val_transform = optarg; break;
        case O_INIT: a->init = optarg; break;
        case O_OUT: a->out = optarg; break;
        case O_NEST: a->nesterov = true; break;
        case O_RESUME: a->resume = true; break;
        case O_JSON: a->json = true; break;
        case O_EPOCHS:
            if (!stk_cli_int("train", "--epochs", optarg, 1, 100000, &a->epochs)) return 2;
            break;
        case O_BATCH:
            if (!stk_cli_int("train", "--batch", optarg, 1, 65536, &a->batch)) return 2;
            break;
        case O_WORKERS:
            if (!stk_cli_int("train", "--workers", optarg, 1, 1024, &a->workers)) return 2;
            break;
        case O_THREADS:
            if (!stk_cli_int("train", "--threads", optarg, 1, 1024, &a->threads)) return 2;
            break;
        case O_STEP:
            if (!stk_cli_int("train", "--step-epochs", optarg, 1, 100000, &a->step_epochs))
                return 2;
            break;
        case O_STOP:
            if (!stk_cli_int("train", "--stop-after", optarg, 1, 100000, &a->stop_after)) return 2;
            break;
        case O_SEED:
            if (!stk_cli_int("train", "--seed", optarg, 0, INT64_MAX, &a->seed)) return 2;
            break;
        case O_LR:
            if (!stk_cli_double("train", "--lr", optarg, 0, 100, &a->lr)) return 2;
            a->lr_set = true;
            break;
        case O_MOM:
            if (!stk_cli_double("train", "--momentum", optarg, 0, 0.999999, &a->momentum)) return 2;
            break;
        case O_WD:
            if (!stk_cli_double("train", "--wd", optarg, 0, 10, &a->wd)) return 2;
            break;
        case O_WARM:
            if (!stk_cli_double("train", "--warmup-epochs", optarg, 0, 100000, &a->warmup_epochs))
                return 2;
            break;
        case O_LS:
            if (!stk_cli_double("train", "--label-smoothing", optarg, 0, 0.999, &a->smoothing))
                return 2;
            break;
        case O_OPT:
            if (!strcmp(optarg, "sgd"))
                a->optimizer = STK_OPTIM_SGD;
            else if (!strcmp(optarg, "adam"))
                a->optimizer = STK_OPTIM_ADAM;
            else if (!strcmp(optarg, "adamw"))
                a->optimizer = STK_OPTIM_ADAMW;
            else
                return stk_cli_usage("train", "--optimizer %s: expected sgd, adam or adamw",
                                     optarg);
            break;
        case O_SCHED:
            if (!strcmp(optarg, "cosine"))
                a->schedule = STK_SCHEDULE_COSINE;
            else if (!strcmp(optarg, "step"))
                a->schedule = STK_SCHEDULE_STEP;
            else if (!strcmp(optarg, "onecycle"))
                a->schedule = STK_SCHEDULE_ONECYCLE;
            else if (!strcmp(optarg, "constant"))
                a->schedule = STK_SCHEDULE_CONSTANT;
            else
                return stk_cli_usage(
                    "train", "--schedule %s: expected cosine, step, onecycle or constant", optarg);
            break;
        case O_AMP: a->amp = true; break;
        case O_DEVICE:
            if (train_parse_device(optarg, &a->device) != STK_OK)
                return stk_cli_usage("train", "%s", stk_last_error());
            break;
        case O_FREEZE:
            if (a->n_freeze == 32) return stk_cli_usage("train", "at most 32 --freeze prefixes");
            a->freeze[a->n_freeze++] = optarg;
            break;
        case O_HELP:
        case 'h': fputs(help, stdout); return 0;
        default:
            return stk_cli_usage("train", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return stk_cli_usage("train", "unexpected argument '%s'", argv[optind]);
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
    if (a->amp && a->device != STK_DEVICE_CUDA)
        return stk_cli_usage("train", "--amp: mixed precision runs on the GPU (add --device cuda); "
                                      "the CPU backend computes in f32");
    if (!a->lr_set) a->lr = a->optimizer == STK_OPTIM_SGD ? 0.05 : 0.001;
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
    const stk_copy_engine *ce; /* the device's copy engine (train_device_open) */
    stk_amp_scaler scaler;     /* --amp */
    stk_h2d *h2d;
    stk_model *model;
    stk_optim *opt;
    char *metrics; /* metrics.csv's whole text, rewritten atomically after each epoch */
    float mean[3], std[3];
    char *transform, *val_transform; /* the specs in use (owned): never cut to a buffer */
    int size;
    int64_t step, start_epoch;
    double best_top1;
    char *path_last, *path_best, *path_metrics; /* under --out (owned) */
} run_state;

static stk_status save_checkpoint(run_state *r, const char *path, int64_t epochs_done, double best)
{
    char e[24], s[24], seed[24], b[32], pos[64];
    snprintf(e, sizeof e, "%" PRId64, epochs_done);
    snprintf(s, sizeof s, "%" PRId64, r->step);
    snprintf(seed, sizeof seed, "%" PRId64, r->a.seed);
    snprintf(b, sizeof b, "%.6f", best);
    /* the loader position to continue from: the start of the next epoch */
    snprintf(pos, sizeof pos, "seed=%" PRId64 ",epoch=%" PRId64 ",cursor=0", r->a.seed,
             epochs_done);
    const char *keys[] = {"epoch",           "step",      "seed",          "best_val_top1",
                          "loader_position", "transform", "val_transform", "data"};
    const char *vals[] = {e, s, seed, b, pos, r->transform, r->val_transform, r->a.data};
    return stk_checkpoint_save(path, r->model, r->opt, 8, keys, vals);
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* Read the resume point from RUNDIR/last.safetensors. */
static stk_status resume_from(run_state *r)
{
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(r->path_last, &f);
    if (st != STK_OK)
        return stk_error_prefix(st, "--resume: no checkpoint to continue from in %s", r->a.out);
    /* Values from the file, checked like any input before they steer the run. */
    int64_t epoch = 0, step = 0, seed = 0;
    if ((st = train_meta_int(f, "epoch", 0, INT32_MAX, &epoch)) != STK_OK ||
        (st = train_meta_int(f, "step", 0, INT64_MAX / 2, &step)) != STK_OK ||
        (st = train_meta_int(f, "seed", INT64_MIN, INT64_MAX, &seed)) != STK_OK) {
        stk_safetensors_free(f);
        return st;
    }
    if (seed != r->a.seed) {
        stk_status err = stk_error(STK_ERR_INVALID_ARG,
                                   "--resume: %s was trained with --seed %" PRId64 ", not %" PRId64,
                                   r->path_last, seed, r->a.seed);
        stk_safetensors_free(f);
        return err;
    }
    const char *b = stk_safetensors_meta(f, "best_val_top1");
    char *end = NULL;
    double best = b ? strtod(b, &end) : -1;
    if (b && (end == b || *end || !(best >= -1 && best <= 100))) {
        st = stk_error(STK_ERR_CORRUPT,
                       "%s: damaged checkpoint metadata: \"best_val_top1\" is \"%.40s\"",
                       r->path_last, b);
        stk_safetensors_free(f);
        return st;
    }
    r->start_epoch = epoch;
    r->step = step;
    r->best_top1 = best;
    stk_safetensors_free(f);
    stk_load_report rep;
    return stk_checkpoint_load(r->path_last, r->model, r->opt, true, &rep);
}

static stk_status setup(run_state *r)
{
    train_args *a = &r->a;
    stk_status st;
    /* the device first: with CUDA, batch memory is then pinned by cudaHostAlloc */
    if ((st = train_device_open(a->device, &r->ce)) != STK_OK) return st;
    stk_amp_scaler_init(&r->scaler);
    /* the training set: its meta decides the model's input and the defaults */
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = (int)a->batch;
    o.workers = (int)a->workers;
    o.seed = (uint64_t)a->seed;
    o.drop_last = true; /* every step sees a full batch (batch norm, the schedule) */
    stk_dataset *ds;
    if ((st = stk_dataset_open(a->data, &ds)) != STK_OK) return st;
    const stk_meta *m = stk_dataset_meta(ds);
    char deflt[64];
    stk_loader_default_transform(m, deflt, sizeof deflt);
    if (!(r->transform = strdup(a->transform ? a->transform : deflt))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = train_check_transform(m, "--transform", r->transform, &r->size)) != STK_OK) goto out;
    train_default_eval_transform(m, r->size, deflt, sizeof deflt);
    if (!(r->val_transform = strdup(a->val_transform ? a->val_transform : deflt))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    train_input_stats(m, a->data, r->mean, r->std);
    stk_model_config cfg = {.name = a->model,
                            .in_channels = m->channels,
                            .classes = (int)m->num_classes,
                            .image_size = r->size,
                            .seed = (uint64_t)a->seed};
    if (a->val) { /* the validation set must speak the same classes */
        stk_dataset *vd;
        if ((st = stk_dataset_open(a->val, &vd)) != STK_OK) goto out;
        const stk_meta *vm = stk_dataset_meta(vd);
        int vsize;
        if (vm->num_classes != m->num_classes || vm->channels != m->channels)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "--val %s has %u classes and %d channels, --data %s has %u and %d",
                           a->val, vm->num_classes, vm->channels, a->data, m->num_classes,
                           m->channels);
        else if ((st = train_check_transform(vm, "--val-transform", r->val_transform, &vsize)) ==
                     STK_OK &&
                 vsize != r->size)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "--val-transform %s gives %d px images, training uses %d px",
                           r->val_transform, vsize, r->size);
        stk_dataset_close(vd);
        if (st != STK_OK) goto out;
    }
    if ((st = stk_model_create(&cfg, &r->model)) != STK_OK) goto out;
    if (a->init) {
        stk_load_report rep;
        stk_safetensors *f;
        if ((st = stk_safetensors_read(a->init, &f)) != STK_OK) goto out;
        const char *mm = stk_safetensors_meta(f, "model");
        if (mm && strcmp(mm, a->model))
            st = stk_error(STK_ERR_INVALID_ARG, "--init %s holds a %s model, not %s", a->init, mm,
                           a->model);
        stk_safetensors_free(f);
        if (st != STK_OK) goto out;
        if ((st = stk_checkpoint_load(a->init, r->model, NULL, false, &rep)) != STK_OK) goto out;
        if (rep.loaded == 0) {
            st = stk_error(STK_ERR_INVALID_ARG, "--init %s: no tensor matches a %s model", a->init,
                           a->model);
            goto out;
        }
        stk_log_info("%s", rep.text);
    }
    for (int i = 0; i < a->n_freeze; i++)
        if (stk_model_set_requires_grad(r->model, a->freeze[i], false) == 0) {
            st = stk_error(STK_ERR_INVALID_ARG,
                           "--freeze %s matches no parameter of %s (names "
                           "like conv1, layer1.0, fc)",
                           a->freeze[i], a->model);
            goto out;
        }
    if ((st = stk_model_to(r->model, a->device)) != STK_OK) goto out;
    stk_optim_config oc = {.kind = a->optimizer,
                           .lr = (float)a->lr,
                           .weight_decay = (float)a->wd,
                           .momentum = a->optimizer == STK_OPTIM_SGD ? (float)a->momentum : 0.f,
                           .nesterov = a->nesterov};
    if ((st = stk_optim_create(&oc, r->model, &r->opt)) != STK_OK) goto out;
    o.transform = r->transform;
    if ((st = stk_loader_open(a->data, &o, &r->loader)) != STK_OK) goto out;
    if (stk_loader_batches(r->loader) == 0) {
        st = stk_error(STK_ERR_INVALID_ARG, "%s: fewer images than one batch of %" PRId64, a->data,
                       a->batch);
        goto out;
    }
    if ((st = stk_h2d_open(r->loader, r->ce, &r->h2d)) != STK_OK) goto out;
    if (mkdir(a->out, 0755) != 0 && errno != EEXIST) {
        st = stk_error(STK_ERR_IO, "--out %s: %s", a->out, strerror(errno));
        goto out;
    }
    if (!(r->path_last = stk_text_printf("%s/last.safetensors", a->out)) ||
        !(r->path_best = stk_text_printf("%s/best.safetensors", a->out)) ||
        !(r->path_metrics = stk_text_printf("%s/metrics.csv", a->out))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    r->best_top1 = -1;
    if (a->resume && (st = resume_from(r)) != STK_OK) goto out;
    if (r->start_epoch > 0) { /* continue the resumed run's rows */
        uint8_t *text;
        size_t len;
        if ((st = stk_file_read_all(r->path_metrics, (uint64_t)1 << 30, &text, &len)) != STK_OK) {
            stk_error_prefix(st, "%s", r->path_metrics);
            goto out;
        }
        r->metrics = stk_text_printf("%.*s", (int)len, (const char *)text);
        free(text);
    } else {
        r->metrics = strdup("epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,"
                            "images_per_sec,stall_pct,seconds\n");
    }
    if (!r->metrics) st = stk_error(STK_ERR_NOMEM, "out of memory");
out:
    stk_dataset_close(ds);
    return st;
}

typedef struct epoch_stats {
    double loss, acc, ips, stall, seconds;
    eval_result val;
} epoch_stats;

static stk_status train_epoch(run_state *r, const stk_schedule *sched, int64_t epoch,
                              epoch_stats *es)
{
    train_args *a = &r->a;
    stk_status st;
    if ((st = stk_h2d_drain(r->h2d)) != STK_OK) return st;
    if ((st = stk_loader_start_epoch(r->loader, (uint64_t)epoch)) != STK_OK) return st;
    char label[32];
    snprintf(label, sizeof label, "epoch %" PRId64 "/%" PRId64, epoch + 1, a->epochs);
    stk_progress p;
    stk_progress_init(&p, label, stk_loader_batches(r->loader), stderr);
    double t0 = stk_clock_sec(), waited = 0, loss_sum = 0;
    uint64_t images = 0, correct = 0, done = 0;
    stk_model_train(r->model, true);
    for (;;) {
        double w0 = stk_clock_sec();
        stk_device_batch *b;
        st = stk_h2d_next(r->h2d, &b);
        waited += stk_clock_sec() - w0;
        if (st == STK_END) break;
        if (st != STK_OK) return st;
        stk_scope *s;
        if ((st = stk_scope_begin(&s)) != STK_OK) return st;
        stk_tensor *x, *y, *logits, *loss;
        float lv = 0;
        bool autocast = a->amp; /* forward and backward: f16 matmuls and convolutions */
        if (autocast) stk_amp_begin();
        if ((st = train_batch_tensors(b, r->mean, r->std, &x, &y)) == STK_OK &&
            (st = stk_model_forward(r->model, x, &logits)) == STK_OK &&
            (st = stk_cross_entropy(logits, y, (float)a->smoothing, &loss)) == STK_OK) {
            lv = stk_tensor_item(loss);
            if (!isfinite(lv))
                st = stk_error(STK_ERR_INVALID_ARG,
                               "the loss is %s at step %" PRId64 " (epoch %" PRId64
                               "): training diverged; lower --lr (now %g) or add "
                               "--warmup-epochs; the last good checkpoint is kept in %s",
                               isnan(lv) ? "NaN" : "infinite", r->step + 1, epoch + 1, a->lr,
                               r->a.out);
        }
        int t1, t5;
        if (st == STK_OK &&
            (st = train_count_correct(logits, b->host_labels, b->count, &t1, &t5)) == STK_OK) {
            correct += (uint64_t)t1;
            stk_optim_set_lr(r->opt, stk_schedule_lr(sched, r->step));
            if (!a->amp) {
                if ((st = stk_backward(loss, NULL, false)) == STK_OK) st = stk_optim_step(r->opt);
            } else {
                stk_tensor *scaled;
                bool stepped;
                if ((st = stk_amp_scale_loss(&r->scaler, loss, &scaled)) == STK_OK)
                    st = stk_backward(scaled, NULL, false);
                stk_amp_end(); /* the optimizer step is f32 */
                autocast = false;
                if (st == STK_OK) st = stk_amp_step(&r->scaler, r->model, r->opt, &stepped);
            }
        }
        if (autocast) stk_amp_end();
        const char *bad = NULL;
        if (st == STK_OK && (st = stk_model_check_finite(r->model, &bad)) == STK_OK && bad)
            st = stk_error(STK_ERR_INVALID_ARG,
                           "%s is not finite after step %" PRId64 " (epoch %" PRId64
                           "): training diverged; lower --lr (now %g) or add "
                           "--warmup-epochs; the last good checkpoint is kept in %s",
                           bad, r->step + 1, epoch + 1, a->lr, r->a.out);
        stk_scope_end(s);
        stk_h2d_release(r->h2d, b);
        if (st != STK_OK) return st;
        r->step++;
        loss_sum += (double)lv * b->count;
        images += (uint64_t)b->count;
        done++;
        double el = stk_clock_sec() - t0;
        char extra[96];
        snprintf(extra, sizeof extra, "loss %.4f  %.0f img/s  stall %.1f%%", loss_sum / images,
                 images / el, 100 * waited / el);
        stk_progress_set_extra(&p, extra);
        stk_progress_update(&p, done);
        if (stk_cli_interrupted) return stk_error(STK_ERR_CANCELLED, "interrupted");
    }
    stk_progress_finish(&p);
    es->seconds = stk_clock_sec() - t0;
    es->loss = images ? loss_sum / images : 0;
    es->acc = images ? 100.0 * correct / images : 0;
    es->ips = images / es->seconds;
    es->stall = 100 * waited / es->seconds;
    memset(&es->val, 0, sizeof es->val);
    if (a->val)
        return train_evaluate(r->model, r->ce, a->val, r->val_transform, (int)a->batch,
                              (int)a->workers, r->mean, r->std, "eval", &es->val);
    return STK_OK;
}

/* One row of metrics.csv; the file is rewritten whole (complete or absent,
 * even on a full disk). */
static stk_status append_metrics(run_state *r, int64_t e, double lr, const epoch_stats *es)
{
    char val[96] = ",,,";
    if (r->a.val)
        snprintf(val, sizeof val, "%.5f,%.3f,%.3f,", es->val.loss, es->val.top1, es->val.top5);
    char *text = stk_text_printf("%s%" PRId64 ",%" PRId64 ",%.6g,%.5f,%.3f,%s%.1f,%.2f,%.2f\n",
                                 r->metrics, e + 1, r->step, lr, es->loss, es->acc, val, es->ips,
                                 es->stall, es->seconds);
    if (!text) return stk_error(STK_ERR_NOMEM, "out of memory");
    free(r->metrics);
    r->metrics = text;
    stk_file_part part = {text, strlen(text)};
    return stk_file_write_atomic(r->path_metrics, &part, 1);
}

static void close_run(run_state *r)
{
    stk_h2d_close(r->h2d);
    stk_loader_close(r->loader);
    stk_optim_destroy(r->opt);
    stk_model_destroy(r->model);
    free(r->metrics);
    free(r->transform);
    free(r->val_transform);
    free(r->path_last);
    free(r->path_best);
    free(r->path_metrics);
    free(r->a.out_buf);
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
    if (setup(&r) != STK_OK) {
        close_run(&r);
        return stk_cli_fail();
    }
    FILE *lines = a->json ? stderr : stdout;
    int64_t per_epoch = (int64_t)stk_loader_batches(r.loader);
    stk_schedule sched = {.kind = a->schedule,
                          .base_lr = (float)a->lr,
                          .total_steps = per_epoch * a->epochs,
                          .warmup_steps = (int64_t)llround(a->warmup_epochs * (double)per_epoch),
                          .step_size = a->step_epochs * per_epoch,
                          .gamma = 0.1f};
    if (r.start_epoch >= a->epochs)
        fprintf(lines, "%s: already trained for %" PRId64 " epochs\n", r.path_last, r.start_epoch);
    else
        fprintf(lines,
                "train %s on %s: %" PRId64 " epochs of %" PRId64 " steps, batch %" PRId64
                ", %s lr %g, transform %s%s\n",
                a->model, a->data, a->epochs - r.start_epoch, per_epoch, a->batch,
                stk_optim_kind_name(a->optimizer), a->lr, r.transform,
                r.start_epoch ? " (resumed)" : "");
    double t_all = stk_clock_sec(), ips_sum = 0, stall_sum = 0;
    int epochs_run = 0;
    epoch_stats es = {0};
    stk_status st = STK_OK;
    int64_t end = a->epochs;
    if (a->stop_after && r.start_epoch + a->stop_after < end) end = r.start_epoch + a->stop_after;
    for (int64_t e = r.start_epoch; e < end; e++) {
        if ((st = train_epoch(&r, &sched, e, &es)) != STK_OK) break;
        epochs_run++;
        ips_sum += es.ips;
        stall_sum += es.stall;
        double lr = stk_optim_lr(r.opt);
        if ((st = append_metrics(&r, e, lr, &es)) != STK_OK) break;
        fprintf(lines, "epoch %" PRId64 "/%" PRId64 ": loss %.4f, train acc %.2f%%", e + 1,
                a->epochs, es.loss, es.acc);
        if (a->val)
            fprintf(lines, ", val loss %.4f, top-1 %.2f%%, top-5 %.2f%%", es.val.loss, es.val.top1,
                    es.val.top5);
        fprintf(lines, ", %.0f images/s, stall %.1f%%, %.1f s\n", es.ips, es.stall, es.seconds);
        double score = a->val ? es.val.top1 : es.acc;
        bool best = score > r.best_top1;
        if (best) r.best_top1 = score;
        if ((st = save_checkpoint(&r, r.path_last, e + 1, r.best_top1)) != STK_OK) break;
        if (best && (st = save_checkpoint(&r, r.path_best, e + 1, r.best_top1)) != STK_OK) break;
    }
    double seconds = stk_clock_sec() - t_all;
    if (st != STK_OK) {
        fprintf(stderr, "stoke: %s\n", stk_last_error());
        close_run(&r);
        return STK_EXIT_ERROR;
    }
    if (a->json) {
        printf("{\"epochs\": %" PRId64 ", \"val_top1\": %.4f, \"val_top5\": %.4f, "
               "\"val_loss\": %.6f, \"train_images_per_sec\": %.1f, \"stall_pct\": %.2f, "
               "\"seconds\": %.2f, \"peak_rss_mb\": %.1f}\n",
               r.start_epoch + epochs_run, es.val.top1, es.val.top5, es.val.loss,
               epochs_run ? ips_sum / epochs_run : 0, epochs_run ? stall_sum / epochs_run : 0,
               seconds, peak_rss_mb());
    } else if (epochs_run) {
        fprintf(lines,
                "done: %d epochs in %.1f s, %.0f images/s, stall %.1f%%; checkpoints in %s\n",
                epochs_run, seconds, ips_sum / epochs_run, stall_sum / epochs_run, a->out);
    }
    if (a->amp) /* on stderr: --json keeps stdout one object */
        fprintf(stderr,
                "amp: %" PRId64 " of %" PRId64
                " steps skipped for inf/NaN gradients, loss scale now %g\n",
                r.scaler.skipped, r.step, (double)r.scaler.scale);
    close_run(&r);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_train = {"train", "train a model on a packed dataset", help, run};
