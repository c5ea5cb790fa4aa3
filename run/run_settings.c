/* A run's settings: the table, the defaults, setting one by name, and the
 * checks across settings (run_settings.h). */
#include "run/run_settings.h"

#include "common/text.h"
#include "common/thread_pool.h"
#include "engine/nn.h"
#include "engine/optim.h"
#include "kernels/backend.h"
#include "loader/loader.h"
#include "train/fit.h"

#include <dirent.h>
#include <errno.h>
#include <strings.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const stk_run_optimizers[] = {"sgd", "adam", "adamw", NULL};
const char *const stk_run_schedules[] = {"cosine", "step", "onecycle", "constant", NULL};
const char *const stk_run_pipeline_schedules[] = {"gpipe", "1f1b", NULL}; /* stk_pipe_schedule */
static const char *const modes[] = {"auto", "min", "max", NULL};

#define T stk_run_settings
const stk_flag stk_run_flags[] = {
    STK_FLAG_SECTION("model and data"),
    STK_FLAG_TEXT(T, data, "data", "PATH",
                  "training set: a .stoke file, or shards read as one (a.stoke,b.stoke\n"
                  "or a list file, as pack --shard-size writes)",
                  .set = STK_SET_RANKS),
    STK_FLAG_TEXT(T, val, "val", "PATH",
                  "validation set, evaluated after each epoch (top-1,\n"
                  "top-5, loss); same classes as --data",
                  .set = STK_SET_RANKS),
    STK_FLAG_TEXT(T, model, "model", "NAME|FILE.onnx",
                  "mlp, cnn, resnet8, resnet18, resnet34, resnet50, mobilenet_v2,\n"
                  "efficientnet_b0, mobilenet_v3_small, mobilenet_v3_large,\n"
                  "convnext_tiny, regnet_y_400mf, vit_b_16, vit_tiny (torchvision's\n"
                  "layouts and names; below 64 px the small-image variants; vit_tiny's\n"
                  "patch is 16 px from 112 px, 8 from 56, 4 from 28); or a module of\n"
                  "your own exported from PyTorch: torch.onnx.export(model, x, FILE,\n"
                  "dynamo=False, training=torch.onnx.TrainingMode.TRAINING,\n"
                  "do_constant_folding=False), x of the training size (its weights\n"
                  "start training, under the state_dict's names)",
                  .set = STK_SET_RANKS | STK_SET_TUNE, .values = stk_model_names),
    STK_FLAG_NUMBER(T, drop_path, "drop-path", "RATE", 0, 0.99,
                    "stochastic depth: each residual branch dropped per sample with a\n"
                    "rate rising linearly to RATE at the last block (torchvision's);\n"
                    "default the model's: efficientnet_b0 0.2, convnext_tiny 0.1, none\n"
                    "for the others; 0 turns it off",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "training transform; default pad:4,crop:SIDE,flip for raw\n"
                  "images (Fashion-MNIST: pad:4,crop:28,flip), rrc:224,flip\n"
                  "for JPEG; 'center:28' or 'crop:28' for no augmentation; pixel\n"
                  "ops after the crop, e.g. rrc:224,flip,colorjitter:0.4:0.4:0.4:0.1\n"
                  "or rrc:224,flip,trivialaugment (stoke help transforms lists them);\n"
                  "batch transforms on the normalised batch: erase[:P] (RandomErasing,\n"
                  "p 0.5), mixup:ALPHA, cutmix:ALPHA (timm's; see --mix-prob)",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_INT(T, image_size, "image-size", "N", 1, 65535,
                 "the size of the default transforms: training rrc:N,flip (raw images\n"
                 "of side N: pad:4,crop:N,flip), evaluation resize:N/0.875,center:N;\n"
                 "instead of --transform",
                 .set = STK_SET_RANKS, .alias = {"img-size"}),
    STK_FLAG_TEXT(T, norm, "norm", "NORM",
                  "the input normalisation, for training and evaluation (checkpoints\n"
                  "record it; eval and export use it): dataset (default: the training\n"
                  "set's mean/std), imagenet (0.485,0.456,0.406 / 0.229,0.224,0.225:\n"
                  "fine-tuning ImageNet weights), or MEAN,STD (one value, or one per\n"
                  "channel separated by ':'); a norm token in --transform says the same",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_TEXT(T, val_transform, "val-transform", "SPEC",
                  "evaluation transform; default center:SIDE for raw images,\n"
                  "resize:256,center:224 for JPEG (scaled to the training size)",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_TEXT(T, init, "init", "CHECKPOINT",
                  "start from a checkpoint of the same model; tensors whose\n"
                  "shape differs (another number of classes) are skipped and\n"
                  "reported (transfer learning)",
                  .alias = {"initial-checkpoint"}),
    STK_FLAG_LIST(T, freeze, n_freeze, "freeze", "PREFIX",
                  "do not train parameters whose name starts with PREFIX\n"
                  "(repeatable; e.g. --freeze conv1 --freeze layer1)",
                  .set = STK_SET_RANKS),
    STK_FLAG_SECTION("optimisation"),
    STK_FLAG_INT(T, epochs, "epochs", "E", 1, 100000, "default 10", .def = "10",
                 .set = STK_SET_RANKS),
    STK_FLAG_INT(T, batch, "batch", "B", 1, 65536, "default 128", .def = "128",
                 .set = STK_SET_RANKS | STK_SET_TUNE, .letter = 'b', .alias = {"batch-size"}),
    STK_FLAG_CHOICE(T, optimizer, "optimizer", "NAME", stk_run_optimizers,
                    "sgd (default), adam or adamw", .def = "sgd",
                    .set = STK_SET_RANKS | STK_SET_TUNE, .alias = {"opt"}),
    STK_FLAG_NUMBER(T, lr, "lr", "LR", 0, 100,
                    "peak learning rate; default 0.05 (sgd), 0.001 (adam/adamw)",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, momentum, "momentum", "M", 0, 0.999999, "sgd momentum, default 0.9",
                    .def = "0.9", .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_BOOL(T, nesterov, "nesterov", "Nesterov momentum",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, wd, "wd", "W", 0, 10,
                    "weight decay, default 5e-4 (sgd, adam: L2; adamw: decoupled)", .def = "5e-4",
                    .set = STK_SET_RANKS | STK_SET_TUNE, .alias = {"weight-decay"}),
    STK_FLAG_CHOICE(T, schedule, "schedule", "NAME", stk_run_schedules,
                    "cosine (default, per step to 0), step (x0.1 every\n"
                    "--step-epochs), onecycle, or constant",
                    .def = "cosine", .set = STK_SET_RANKS | STK_SET_TUNE, .alias = {"sched"}),
    STK_FLAG_NUMBER(T, min_lr, "min-lr", "LR", 0, 100,
                    "the floor of the cosine and step schedules (timm's --min-lr):\n"
                    "cosine ends at LR, step decays no lower; default 0",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_INT(T, step_epochs, "step-epochs", "N", 1, 100000,
                 "epochs between step decays, default 30", .def = "30",
                 .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, warmup_epochs, "warmup-epochs", "W", 0, 100000,
                    "linear warm-up at the start (cosine; onecycle: its rise),\n"
                    "default 0 (onecycle: 30% of the run)",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, smoothing, "label-smoothing", "S", 0, 0.999,
                    "default 0; composes with mixup/cutmix (the mixed targets are\n"
                    "smoothed, as timm's)",
                    .set = STK_SET_RANKS | STK_SET_TUNE, .alias = {"smoothing"}),
    STK_FLAG_NUMBER(T, mix_prob, "mix-prob", "P", 0, 1,
                    "the probability that a batch is mixed when the transform has\n"
                    "mixup:ALPHA and/or cutmix:ALPHA (timm's Mixup prob; one of the\n"
                    "two per batch, cutmix half the time when both are given), default 1",
                    .def = "1", .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, clip_grad_norm, "clip-grad-norm", "MAX", 0, 1e9,
                    "scale the gradients down to a global L2 norm of at most MAX\n"
                    "before each optimizer step (torch.nn.utils.clip_grad_norm_;\n"
                    "data-parallel: after the all-reduce; --amp: after unscaling);\n"
                    "the norm before clipping goes to steps.csv and TensorBoard",
                    .set = STK_SET_RANKS | STK_SET_TUNE, .alias = {"clip-grad"}),
    STK_FLAG_NUMBER(T, clip_grad_value, "clip-grad-value", "V", 0, 1e9,
                    "clamp each gradient element to [-V, V] before each optimizer\n"
                    "step (torch.nn.utils.clip_grad_value_); not with --clip-grad-norm",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, ema, "ema-decay", "DECAY", 0, 0.999999999,
                    "keep an exponential moving average of the weights (timm's\n"
                    "ModelEmaV2: after each optimizer step ema = DECAY ema + (1 - DECAY)\n"
                    "weights, buffers copied), evaluated beside them each epoch\n"
                    "(ema_val_* in metrics.csv), saved in the checkpoints (eval,\n"
                    "export --ema); e.g. 0.999",
                    .set = STK_SET_RANKS | STK_SET_NO_TRIAL, .alias = {"model-ema-decay"},
                    .old = "ema"),
    STK_FLAG_BOOL(T, ema_warmup, "ema-warmup",
                  "the average's decay grows as 1 - k^(-2/3) up to DECAY (timm's\n"
                  "ModelEmaV3 warm-up): early updates follow the weights closely",
                  .set = STK_SET_RANKS | STK_SET_NO_TRIAL),
    STK_FLAG_SECTION("micro-batches and pipeline stages"),
    STK_FLAG_INT(T, micro_batches, "micro-batches", "M", 1, STK_PIPE_MAX_MICRO,
                 "split each batch into M micro-batches whose gradients add up\n"
                 "before the one optimizer step (gradient accumulation: the memory\n"
                 "of a batch of B/M; batch norm sees each micro-batch alone)",
                 .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_INT(T, pipeline, "pipeline", "K", 1, STK_PIPE_MAX_STAGES,
                 "cut the model into K stages of contiguous units (the top-level\n"
                 "layers, resnets' blocks, mobilenet_v2's features.N; an ONNX graph's\n"
                 "modules, cut where one tensor alone flows on), each on a thread\n"
                 "group of its own (--threads / K), the micro-batches flowing through\n"
                 "them (needs --micro-batches); the run prints the stages. Under\n"
                 "mpirun -np K*D: D pipelines, a stage per rank (rank = pipeline x K +\n"
                 "stage), each pipeline its shard of the data (needs --split-after)",
                 .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_CHOICE(T, pipeline_schedule, "pipeline-schedule", "NAME", stk_run_pipeline_schedules,
                    "1f1b (default: at most K micro-batches' activations a stage) or\n"
                    "gpipe (all forwards, then all backwards)",
                    .def = "1f1b", .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_TEXT(T, split_after, "split-after", "UNITS",
                  "where the stages end: K-1 unit names, comma-separated (a layer\n"
                  "name means its last block: --split-after layer2); default:\n"
                  "balanced by each unit's forward time measured at the first step",
                  .set = STK_SET_TUNE),
    STK_FLAG_SEED(T, seed, "shuffling, augmentation and initialisation, default 0", .def = "0",
                  .set = STK_SET_RANKS | STK_SET_RESUME | STK_SET_POSITION),
    STK_FLAG_CHOICE(T, order, "order", "ORDER", stk_read_order_names,
                    "the training set's read order: random (default), block (FFCV's\n"
                    "quasi-random order, for files larger than memory: pack them with\n"
                    "--shuffle) or sequential",
                    .def = "random", .set = STK_SET_RANKS | STK_SET_TUNE | STK_SET_RESUME),
    STK_FLAG_INT(T, block_mib, "block-mib", "N", 1, 1024,
                 "block order: MiB of the file per block (default 8; smaller when\n"
                 "two windows of blocks would not fit the memory budget, with a notice)",
                 .def = "8", .set = STK_SET_TUNE),
    STK_FLAG_INT(T, block_window, "block-window", "N", 1, 1024,
                 "block order: blocks shuffled together (default 8)", .def = "8",
                 .set = STK_SET_TUNE),
    STK_FLAG_INT(T, cache_mb, "cache-mib", "C", 0, STK_LOADER_MAX_CACHE_MIB,
                 "keep the training file's first C MiB in memory for the whole run,\n"
                 "never evicted (for files larger than memory; default 0). Reads go\n"
                 "around the page cache (O_DIRECT) when the file and the cache do not\n"
                 "fit the memory budget (the machine's or the memory cgroup's)",
                 .set = STK_SET_TUNE, .old = "cache-mb"),
    STK_FLAG_SECTION("early stopping (Keras's EarlyStopping)"),
    STK_FLAG_INT(T, early_stop, "early-stop", "PATIENCE", 0, 100000,
                 "stop once PATIENCE epochs in a row have not improved\n"
                 "--monitor (default: never stop early)",
                 .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_TEXT(T, monitor, "monitor", "NAME",
                  "val_loss, val_top1, val_top5, train_loss or train_top1\n"
                  "(with --ema-decay also ema_val_loss, ema_val_top1, ema_val_top5);\n"
                  "default val_loss with --val, else train_loss; also what\n"
                  "best.safetensors is best by",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_NUMBER(T, min_delta, "min-delta", "D", 0, 1e9,
                    "an improvement must be larger than D (default 0)",
                    .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_CHOICE(T, mode, "mode", "M", modes, "auto (default: min for losses), min or max",
                    .def = "auto", .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_INT(T, start_from_epoch, "start-from-epoch", "N", 0, 100000,
                 "judge no improvement in the first N epochs (default 0)",
                 .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_BOOL(T, restore_best, "restore-best",
                  "end with the best epoch's weights: the summary's val_* are\n"
                  "that epoch's, best.safetensors holds them, last.safetensors\n"
                  "stays the resumable last epoch",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_SECTION("machine"),
    STK_FLAG_WORKERS(T, workers, "loader threads, default: number of cores"),
    STK_FLAG_THREADS(T, threads),
    STK_FLAG_DEVICE(T, device, .set = STK_SET_RANKS),
    STK_FLAG_BOOL(T, amp, "amp",
                  "mixed precision: matmuls and convolutions in low precision\n"
                  "with f32 accumulation and f32 master weights; batch norm,\n"
                  "softmax, losses and the optimizer in f32. GPU: f16 with\n"
                  "dynamic loss scaling (skips a step whose gradients overflow).\n"
                  "CPU: bf16 (needs AVX512_BF16 or AMX: `stoke devices`), no\n"
                  "loss scaling (bf16 has f32's range)",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_BOOL(T, sync_bn, "sync-bn",
                  "data-parallel: batch norm statistics over every rank's batch\n"
                  "(as PyTorch's SyncBatchNorm); default: each rank's own",
                  .set = STK_SET_RANKS | STK_SET_TUNE),
    STK_FLAG_INT(T, dist_timeout, "dist-timeout", "S", 1, 86400,
                 "data-parallel watchdog: starting MPI, the check of the\n"
                 "ranks' flags, a step whose gradient all-reduce has not\n"
                 "finished S seconds after backward, or leaving MPI (another\n"
                 "rank hung, stopped or died) stops the job with a message;\n"
                 "the ranks wait for rank 0's evaluation S seconds plus twice\n"
                 "their training time for as many images; default 300",
                 .def = "300"),
    STK_FLAG_SECTION("output"),
    STK_FLAG_TEXT(T, out, "out", "RUNDIR",
                  "default a fresh runs/MODEL-N; holds metrics.csv (per epoch),\n"
                  "steps.csv (per step), last.safetensors, best.safetensors\n"
                  "(best by --monitor), events.out.tfevents.*; locked while a\n"
                  "run writes it; a used one needs --resume or --overwrite",
                  .letter = 'o'),
    STK_FLAG_BOOL(T, overwrite, "overwrite", "clear RUNDIR's old run (event files included) first",
                  .set = STK_SET_NO_TRIAL),
    STK_FLAG_BOOL(T, tensorboard, "tensorboard",
                  "write a TensorBoard event file into RUNDIR (the default):\n"
                  "per step train/loss, train/lr (and train/grad_norm); per epoch epoch/* (loss,\n"
                  "accuracy, validation, images/s, stall %) and memory/*; the\n"
                  "first batch as an image; the flags as text\n"
                  "(tensorboard --logdir RUNDIR)"),
    STK_FLAG_BOOL(T, no_tensorboard, "no-tensorboard", "no event file"),
    STK_FLAG_BOOL(T, per_class, "per-class",
                  "after each epoch's evaluation, each class's images, top-1\n"
                  "(recall), precision and F1 (TensorBoard text eval/per_class) and\n"
                  "the confusion matrix (image eval/confusion); needs --val",
                  .set = STK_SET_NO_TRIAL),
    STK_FLAG_TEXT(T, trace, "trace", "FILE.json",
                  "a timeline in Chrome's trace format (open it in\n"
                  "https://ui.perfetto.dev or chrome://tracing): loader workers'\n"
                  "reads (async), decode and augment per sample, the wait for\n"
                  "each batch, the host-to-device copy, each step's forward,\n"
                  "backward and optimizer, data-parallel all-reduces; counters\n"
                  "(batches ready, reads in flight, images/s); arrows from a\n"
                  "batch's reads to its step. Under a launcher rank R > 0\n"
                  "writes FILE.rankR.json",
                  .set = STK_SET_NO_TRIAL),
    STK_FLAG_TEXT(T, trace_steps, "trace-steps", "WAIT,ACTIVE",
                  "record steps WAIT .. WAIT+ACTIVE-1 only (as PyTorch's\n"
                  "profiler schedule); default 0,20 (ACTIVE 0: every step)",
                  .set = STK_SET_NO_TRIAL),
    STK_FLAG_BOOL(T, trace_ops, "trace-ops",
                  "also a span per layer forward (kind, name, input shape; a\n"
                  "batch norm with its ReLU fused is one span, bn1+relu1) and\n"
                  "per autograd node backward",
                  .set = STK_SET_NO_TRIAL),
    STK_FLAG_BOOL(T, memory_report, "memory-report",
                  "at the end, the training device's caching allocator as a\n"
                  "table of size classes on stderr (blocks in use and cached,\n"
                  "allocations, fresh memory from the system)",
                  .set = STK_SET_FRONT),
    STK_FLAG_INT(T, stop_after, "stop-after", "N", 1, 100000,
                 "end this invocation after N epochs (checkpointed), to split\n"
                 "a run across time slots; continue it with --resume",
                 .set = STK_SET_RANKS | STK_SET_NO_TRIAL),
    STK_FLAG_BOOL(T, resume, "resume",
                  "continue RUNDIR's run from last.safetensors (the epoch\n"
                  "after the last completed one); the result is bit-identical\n"
                  "to an uninterrupted run with the same flags and ranks;\n"
                  "another number of ranks continues from the same epoch;\n"
                  "--resume RUNDIR or RUNDIR/last.safetensors (timm's --resume\n"
                  "PATH) names the run: the same as --resume --out RUNDIR",
                  .arg = "[RUNDIR]", .set = STK_SET_RANKS | STK_SET_NO_TRIAL,
                  STK_FLAG_OPTIONAL_VALUE(T, resume_from)),
    STK_FLAG_TEXT(T, config, "config", "FILE",
                  "read settings from FILE first: a JSON object or TOML, the flags\n"
                  "without their \"--\" as keys (`batch = 64`, `amp = true`, `freeze =\n"
                  "[\"conv1\"]`); a flag also on the command line is the command line's",
                  .set = STK_SET_NO_TRIAL | STK_SET_FRONT),
    STK_FLAG_BOOL(T, print_config, "print-config",
                  "print every setting of the run, defaults resolved, as TOML that\n"
                  "--config reads back, and exit without training",
                  .set = STK_SET_NO_TRIAL | STK_SET_FRONT),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout at the end (epochs, val_top1,\n"
                  "val_top5, val_loss, train_images_per_sec, stall_pct,\n"
                  "seconds, peak_rss_mb, ranks, stopped_epoch, best_epoch,\n"
                  "monitor, best_value, stop_reason); epoch lines go to stderr",
                  .set = STK_SET_FRONT),
    STK_FLAG_END};
#undef T

stk_status stk_run_settings_init(stk_run_settings *s)
{
    *s =
        (stk_run_settings){.lr = -1, .drop_path = -1, .early_stop = -1}; /* -1: set later, or off */
    s->workers = s->threads = stk_cpu_count();
    return stk_flag_defaults(stk_run_flags, s); /* fails only on a table's bad default */
}

const stk_flag *stk_run_setting_find(const char *name)
{
    char flag[64];
    size_t n = strlen(name);
    if (n >= sizeof flag) return NULL;
    for (size_t i = 0; i <= n; i++) flag[i] = name[i] == '_' ? '-' : name[i];
    return stk_flag_find(stk_run_flags, flag, n);
}

/* A copy of text the settings own (TEXT and LIST settings point at it). */
static stk_status keep(stk_run_settings *s, const char *text, const char **kept)
{
    char **grown = realloc(s->owned, (size_t)(s->n_owned + 1) * sizeof *grown);
    if (!grown) return stk_error(STK_ERR_NOMEM, "out of memory");
    s->owned = grown;
    if (!(s->owned[s->n_owned] = strdup(text))) return stk_error(STK_ERR_NOMEM, "out of memory");
    *kept = s->owned[s->n_owned++];
    return STK_OK;
}

stk_status stk_run_setting_set(stk_run_settings *s, const char *name, const char *value)
{
    const stk_flag *f = stk_run_setting_find(name);
    if (!f) {
        char flag[64];
        snprintf(flag, sizeof flag, "%s", name);
        for (char *c = flag; *c; c++)
            if (*c == '_') *c = '-';
        const char *hint = stk_flag_closest(stk_run_flags, flag, strlen(flag));
        return hint ? stk_error(STK_ERR_INVALID_ARG, "'%s': no such setting (did you mean %s?)",
                                name, hint)
                    : stk_error(STK_ERR_INVALID_ARG, "'%s': no such setting", name);
    }
    if (f->kind == STK_FLAG_KIND_BOOL) {
        bool on = !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1");
        bool off = !strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "0");
        if (!on && !off && f->optional_value) { /* resume="runs/x" */
            const char *kept = NULL;
            STK_TRY(keep(s, value, &kept));
            *(const char **)((char *)s + f->value_offset) = kept;
            on = true;
        } else if (!on && !off) {
            return stk_error(STK_ERR_INVALID_ARG, "--%s %s: expected yes or no", f->name, value);
        }
        *(bool *)((char *)s + f->offset) = on;
        return STK_OK;
    }
    if (f->kind == STK_FLAG_KIND_TEXT || f->kind == STK_FLAG_KIND_LIST) {
        const char *kept = NULL;
        STK_TRY(keep(s, value, &kept));
        value = kept;
    }
    return stk_flag_set(f, s, value);
}

/* --resume PATH (timm's): RUNDIR, or RUNDIR/last.safetensors; the run is
 * --out RUNDIR's. */
static stk_status resume_folder(stk_run_settings *a)
{
    const char *p = a->resume_from, *slash = strrchr(p, '/');
    size_t n = strlen(p);
    char dir[4096];
    if (n > 12 && !strcmp(p + n - 12, ".safetensors")) {
        if (strcmp(slash ? slash + 1 : p, "last.safetensors"))
            return stk_error(STK_ERR_INVALID_ARG,
                             "--resume %s: a run continues from its last.safetensors (give "
                             "RUNDIR or RUNDIR/last.safetensors); to start from this "
                             "checkpoint's weights: --init %s",
                             p, p);
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - p) : 1, slash ? p : ".");
    } else {
        snprintf(dir, sizeof dir, "%s", p);
    }
    for (size_t k = strlen(dir); k > 1 && dir[k - 1] == '/'; k--) dir[k - 1] = '\0';
    if (a->out && strcmp(a->out, dir))
        return stk_error(STK_ERR_INVALID_ARG,
                         "--resume %s is the run in %s, not --out %s: give one", p, dir, a->out);
    return keep(a, dir, &a->out);
}

stk_status stk_run_settings_check(stk_run_settings *a)
{
    if (!a->data) return stk_error(STK_ERR_INVALID_ARG, "--data TRAIN.stoke is required");
    if (!a->model)
        return stk_error(STK_ERR_INVALID_ARG, "--model is required (" STK_MODEL_LIST ")");
    bool known = stk_run_model_is_onnx(a->model); /* read (and checked) when the run starts */
    for (const char *const *n = stk_model_names(); *n; n++) known |= !strcmp(*n, a->model);
    if (!known) {
        const char *const *names = stk_model_names();
        int n = 0;
        while (names[n]) n++;
        const char *hint = stk_text_closest(a->model, strlen(a->model), names, n);
        if (hint)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--model %s: unknown (did you mean %s? known: " STK_MODEL_LIST ")",
                             a->model, hint);
        return stk_error(STK_ERR_INVALID_ARG, "--model %s: unknown (known: " STK_MODEL_LIST ")",
                         a->model);
    }
    if (a->image_size && a->transform)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--image-size %" PRId64 " sizes the default transform; --transform %s "
                         "gives its own: choose one",
                         a->image_size, a->transform);
    if (a->clip_grad_norm > 0 && a->clip_grad_value > 0)
        return stk_error(STK_ERR_INVALID_ARG, "--clip-grad-norm and --clip-grad-value: choose one");
    if (a->pipeline > 1 && a->micro_batches < 2)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--pipeline %lld needs --micro-batches (2 or more: the "
                         "stages work on different micro-batches at once)",
                         (long long)a->pipeline);
    if (a->sync_bn && a->pipeline > 1)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--sync-bn with --pipeline: not supported (the ranks run "
                         "different layers; statistics are per micro-batch)");
    if (a->split_after && a->pipeline < 2)
        return stk_error(STK_ERR_INVALID_ARG, "--split-after needs --pipeline 2 or more");
    if (a->micro_batches > a->batch)
        return stk_error(STK_ERR_INVALID_ARG, "--micro-batches %lld: more than the batch (%lld)",
                         (long long)a->micro_batches, (long long)a->batch);
    if (a->nesterov && (a->optimizer != STK_OPTIM_SGD || a->momentum <= 0))
        return stk_error(STK_ERR_INVALID_ARG,
                         "--nesterov needs --optimizer sgd with a --momentum above 0");
    if (a->amp && a->device.kind != STK_DEVICE_CUDA && stk_cpu_bf16_missing())
        return stk_error(STK_ERR_INVALID_ARG,
                         "--amp on the CPU %s (`stoke devices` says what oneDNN uses); train "
                         "in f32 without --amp, or on a GPU",
                         stk_cpu_bf16_missing());
    a->trace_opts = (stk_trace_options){.wait_steps = 0, .active_steps = 20, .ops = a->trace_ops};
    if ((a->trace_steps || a->trace_ops) && !a->trace)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--trace-steps and --trace-ops need --trace FILE.json");
    if (a->trace_steps) STK_TRY(stk_trace_parse_schedule(a->trace_steps, &a->trace_opts));
    if (a->tensorboard && a->no_tensorboard)
        return stk_error(STK_ERR_INVALID_ARG, "--tensorboard and --no-tensorboard: choose one");
    if (a->resume_from) STK_TRY(resume_folder(a));
    if (a->resume && a->overwrite)
        return stk_error(STK_ERR_INVALID_ARG, "--resume and --overwrite: choose one");
    if (a->per_class && (!a->val || a->no_tensorboard))
        return stk_error(STK_ERR_INVALID_ARG,
                         "--per-class evaluates --val per class into TensorBoard: "
                         "it needs --val, and not --no-tensorboard");
    if (!a->monitor) a->monitor = a->val ? "val_loss" : "train_loss";
    int m = stk_monitor_parse(a->monitor);
    if (m < 0 || (stk_monitor_needs_val((stk_monitor)m) && !a->val))
        return stk_error(STK_ERR_INVALID_ARG, "--monitor %s: %s", a->monitor,
                         m < 0 ? "val_loss, val_top1, val_top5, train_loss, train_top1, "
                                 "ema_val_loss, ema_val_top1 or ema_val_top5"
                               : "needs --val (without it: train_loss or train_top1)");
    if (stk_monitor_is_ema((stk_monitor)m) && !(a->ema > 0))
        return stk_error(STK_ERR_INVALID_ARG,
                         "--monitor %s: the moving average's figures need --ema-decay DECAY",
                         a->monitor);
    if (a->ema_warmup && !(a->ema > 0))
        return stk_error(STK_ERR_INVALID_ARG, "--ema-warmup needs --ema-decay DECAY");
    if (a->lr < 0) a->lr = a->optimizer == STK_OPTIM_SGD ? 0.05 : 0.001;
    if (a->min_lr > a->lr)
        return stk_error(STK_ERR_INVALID_ARG, "--min-lr %g: above the peak --lr %g", a->min_lr,
                         a->lr);
    if (!a->out && !a->print_config) return stk_run_default_out(a);
    return STK_OK;
}

stk_status stk_run_settings_from_args(stk_run_settings *s, int argc, char **argv)
{
    stk_status st = stk_run_settings_init(s);
    if (st == STK_OK) st = stk_flag_parse_args(stk_run_flags, s, argc, argv);
    if (st == STK_OK) st = stk_run_settings_check(s);
    if (st != STK_OK) stk_run_settings_free(s);
    return st;
}

void stk_run_settings_free(stk_run_settings *s)
{
    free(s->out_buf);
    for (int i = 0; i < s->n_owned; i++) free(s->owned[i]);
    free(s->owned);
    s->out_buf = NULL, s->owned = NULL, s->n_owned = 0;
}

bool stk_run_model_is_onnx(const char *model)
{
    size_t n = strlen(model);
    return n > 5 && !strcasecmp(model + n - 5, ".onnx");
}

/* runs/MODEL-N: a fresh N for a new run (one more than the highest there),
 * the highest for --resume. */
stk_status stk_run_default_out(stk_run_settings *a)
{
    int highest = 0;
    /* an ONNX file's runs are named after it: runs/net-1 for nets/net.onnx */
    const char *model = a->model, *slash = strrchr(model, '/');
    char stem[128];
    if (stk_run_model_is_onnx(model)) {
        if (slash) model = slash + 1;
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(model) - 5), model);
        model = stem;
    }
    size_t len = strlen(model);
    DIR *d = opendir("runs");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, model, len) || e->d_name[len] != '-') continue;
        long n = strtol(e->d_name + len + 1, &end, 10);
        if (end != e->d_name + len + 1 && !*end && n > highest && n < 1000000) highest = (int)n;
    }
    if (d) closedir(d);
    if (a->resume && highest == 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--resume: no runs/%s-N to continue; name the run folder with --out",
                         model);
    if (!a->resume && mkdir("runs", 0755) != 0 && errno != EEXIST)
        return stk_error(STK_ERR_IO, "runs: %s", strerror(errno));
    if (!(a->out_buf = stk_text_printf("runs/%s-%d", model, highest + !a->resume)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    a->out = a->out_buf;
    return STK_OK;
}
