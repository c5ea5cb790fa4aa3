/* A run's state (run.h's calls make and use it): its settings, the
 * hooks its caller hears it through, what it opened, and its figures. */
#pragma once

#include "distributed/comm.h"
#include "distributed/ddp.h"
#include "distributed/pipe_ranks.h"
#include "device/device.h"
#include "run/run_settings.h"
#include "train/device.h"
#include "train/fit.h"
#include "train/memory_estimate.h"
#include "train/run_record.h"
#include "train/trainer.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One epoch as the run recorded it (metrics.csv's row). */
typedef struct stk_run_epoch {
    const stk_fit_epoch *fit; /* the figures (the job's, under a launcher) */
    int64_t step;             /* the optimizer's steps so far */
    double lr;                /* the optimizer's learning rate now */
    stk_run_memory memory;    /* the device's heap and the process (rank 0; zero elsewhere) */
} stk_run_epoch;

/* What the caller hears of a run (every field optional). Called on every
 * rank, on the thread that fits. An error a hook returns ends the run with it. */
typedef struct stk_run_hooks {
    stk_status (*epoch_begin)(void *ctx, int64_t epoch);              /* 0-based */
    stk_status (*progress)(void *ctx, const stk_epoch_stats *so_far); /* after each step */
    void (*epoch_end)(void *ctx); /* trained and evaluated, before the ranks' figures are in */
    /* After the epoch's row is written, before its checkpoint; *stop = true
     * ends the run (stop_reason "callback"). */
    stk_status (*on_epoch)(void *ctx, const stk_run_epoch *e, bool *stop);
    /* A line the user should read (a resume on another number of ranks). */
    void (*notice)(void *ctx, const char *line);
    const char *eval_label; /* a progress bar on stderr while evaluating; NULL: none */
    void *ctx;
    /* The caller's flag (a signal handler may set it): nonzero stops the run
     * after the current step, with STK_ERR_CANCELLED; the last completed
     * epoch's checkpoint stays. NULL: none. */
    const volatile sig_atomic_t *cancel;
} stk_run_hooks;

/* A whole run's figures: `stoke train --json`'s object and Python's result. */
typedef struct stk_run_result {
    stk_fit_result fit;    /* last val, best epoch and value, stop reason, epochs run */
    int64_t start_epoch;   /* epochs done before this invocation (--resume) */
    int64_t epochs;        /* done in all: start_epoch + fit.epochs_run */
    double images_per_sec; /* mean of the epochs' (the job's) */
    double stall_pct;      /* mean of the epochs' */
    double seconds;        /* of fitting */
    double peak_rss_mb;    /* the process's */
    uint64_t peak_heap;    /* the device heap's highest epoch peak, bytes (rank 0) */
    int64_t params, params_trainable;
    int ranks;
} stk_run_result;

typedef struct stk_run {
    stk_run_settings a;
    stk_run_hooks hooks;
    /* Set before stk_run_setup to borrow another run's (stoke tune: trials on
     * one stream): they are used as they are, and stk_run_close leaves them. */
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
    bool owns_comm; /* opened by stk_run_start (closed by stk_run_close) */
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
    double ips_sum, stall_sum;  /* over the epochs fitted (stk_run_result's means) */
    uint64_t run_peak;          /* the highest epoch peak of the device heap */
    struct {                    /* --trace's file, written by stk_run_close */
        bool started;           /* by stk_run_start */
        bool written;           /* false: no --trace, or it failed (error says why) */
        char path[512];
        char error[256];
        stk_trace_summary summary;
    } trace;
} stk_run;

#ifdef __cplusplus
}
#endif
