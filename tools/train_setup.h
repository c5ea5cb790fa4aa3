/* `stoke train`'s wiring (train_setup.c): from the parsed flags to a
 * trainer ready for stk_trainer_fit (train/fit.h): the device, the data and
 * its transforms, the model (--init, --freeze), the loaders, the
 * data-parallel check of every rank's configuration, the run folder (its
 * lock and the rule that a used one is never silently overwritten),
 * --resume, and the run's record. cmd_train.c keeps the flags, the fit
 * call and the printing.
 */
#pragma once

#include "common/trace.h"
#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/pipe_ranks.h"
#include "kernels/device.h"
#include "train/device.h"
#include "train/fit.h"
#include "train/run_record.h"
#include "train/memory_estimate.h"
#include "train/trainer.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct train_args {
    const char *data, *val, *model, *transform, *val_transform, *init, *out, *monitor, *norm;
    const char *trace, *trace_steps;
    bool trace_ops;
    stk_trace_options trace_opts;
    const char *freeze[32];
    int n_freeze;
    int64_t epochs, batch, workers, threads, step_epochs, seed, stop_after, dist_timeout;
    int64_t early_stop, start_from_epoch; /* early_stop -1: off */
    int64_t cache_mb, block_mib, block_window;
    int64_t micro_batches, pipeline; /* 0: off */
    int pipeline_schedule;           /* stk_pipe_schedule */
    const char *split_after;
    double lr, min_lr, momentum, wd, warmup_epochs, smoothing, min_delta, mix_prob;
    double clip_grad_norm, clip_grad_value; /* 0: off */
    double ema;                             /* --ema DECAY (0: off) */
    double drop_path;                       /* --drop-path RATE (-1: the model's default) */
    bool ema_warmup;
    bool nesterov, resume, overwrite, restore_best, json, amp, sync_bn, tensorboard, no_tensorboard,
        memory_report, per_class;
    int optimizer;      /* index in train_optimizers (= stk_optim_kind) */
    int schedule;       /* index in train_schedules */
    int mode;           /* stk_mode */
    int order;          /* stk_read_order */
    char *out_buf;      /* a default --out (owned) */
    const char *config; /* --config FILE (read into config_argv) */
    bool print_config;  /* --print-config */
    char **config_argv; /* the flags with --config's first (owned; NULL: no --config) */
    int config_argc;
    stk_device_spec device;
} train_args;

extern const char *const train_optimizers[];
extern const char *const train_schedules[];
extern const char *const train_pipeline_schedules[];

typedef struct run_state {
    train_args a;
    /* Set before train_setup to borrow another run's (stoke tune: trials on
     * one stream): they are used as they are, and train_close leaves them. */
    bool borrowed_data;
    stk_loader *loader, *val_loader;
    const stk_copy_engine *ce; /* the device's copy engine */
    stk_h2d *h2d;
    stk_model *model;
    stk_optim *opt;
    stk_trainer *trainer;
    stk_trainer_config tc;
    stk_run_record *record;          /* metrics.csv, steps.csv, TensorBoard (rank 0) */
    char *transform, *val_transform; /* the specs in use (owned): never cut to a buffer */
    int size;
    char *path_last; /* under --out (owned) */
    char meta_text[4][24];
    char *class_names;          /* --data's, a JSON array (owned; NULL: none) */
    char **class_list;          /* the same, one string each, NULL-terminated (owned; NULL: none) */
    uint64_t *confusion;        /* --per-class: classes x classes (owned; NULL: not asked) */
    stk_memory_estimate memory; /* the run's training memory, measured before it starts */
    uint64_t ring_bytes;        /* the loader's ring of batches (host memory) */
    char meta_setting[4][64];   /* STK_SET_RESUME settings' values */
    const char *meta_keys[16], *meta_values[16]; /* the run's checkpoint metadata */
    int n_meta;
    stk_comm *comm; /* the data-parallel job (a world of one alone) */
    stk_ddp *ddp;   /* with more than one rank */
    int rank, world;
    /* --pipeline K on K x D ranks: rank = replica * K + stage; the data is
     * sharded by replica (data_rank of data_world = D); else rank, world */
    int data_rank, data_world;
    stk_pipe_ranks *pipe_ranks; /* the link between the stages on ranks, NULL: none */
    uint64_t val_count;         /* images in --val */
    uint64_t data_fingerprint;  /* stk_dataset_fingerprint of --data (ranks, checkpoints) */
    bool ranks_agree_on_error;  /* every rank failed alike: no need to stop the others */
    int out_lock;               /* RUNDIR's lock: its descriptor + 1 (0: none) */
} run_state;

/* Parse `stoke train`'s flags (argv[0] is the command's name) into *a with
 * its defaults and cross-flag checks; returns -1 to go on, or the exit code
 * of a usage error (printed). (train_settings.c) */
int train_parse_flags(int argc, char **argv, train_args *a);
/* Its settings' table (train_settings.c: what stoke tune passes on, which
 * keys a space may set, what ranks compare and --resume checks). */
struct stk_cli;
extern const struct stk_cli train_settings_cli;
extern const struct stk_cli *const train_cli;

/* fit's options for run r, its callbacks reporting to p (cmd_train.c). */
struct train_printer;
stk_fit_options train_fit_options(run_state *r, struct train_printer *p);

/* mkdir -p: path and its parents (0755). 0, or -1 with errno. */
int train_make_dirs(const char *path);

/* No --out: runs/MODEL-N, a fresh N (or the latest one with --resume).
 * (This and the next, with the choices' names above: train_settings.c.) */
stk_status train_default_out(train_args *a);
/* --model names an ONNX file (it ends in .onnx) rather than a built-in. */
bool train_model_is_onnx(const char *model);

/* Everything up to the first epoch. Errors name the flag or file. */
stk_status train_setup(run_state *r);
/* Free what setup made (any part of it). */
void train_close(run_state *r);
/* Write --trace's file (once every traced thread is joined: after train_close). */
void train_finish_trace(run_state *r);
/* The error that ends the run: printed; under a launcher every other rank is
 * stopped now rather than left waiting in a collective. Returns the exit code. */
int train_fail(run_state *r);
